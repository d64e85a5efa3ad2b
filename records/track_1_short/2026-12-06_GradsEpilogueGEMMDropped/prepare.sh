# Rebuilds the ignored perf/base/ files that calls A-C read, from main (HEAD), grads-epilogue.patch and launches.patch,
# and copies the calls there as perf/base/s66_callA.sh ... (records/ is moved aside during a call): run at the
# repository root, then carry perf/base (and perf/carry). perf/base/grads_tree holds the grads branch's script, checks
# and benches; perf/base/main.py, grads.py and launches.py (grads.py with launches.patch) the scripts the A B B A runs
# compare.
set -euo pipefail
record=$(cd "$(dirname "$0")" && pwd)
base=perf/base; rm -rf "$base/grads_tree" /tmp/grads-epilogue; mkdir -p "$base/grads_tree/perf"
git worktree prune
git worktree add -q --detach /tmp/grads-epilogue HEAD && git -C /tmp/grads-epilogue am -q "$record/grads-epilogue.patch"
for file in train_gpt.py train_gpt_medium.py perf/gpu_checks.py perf/bench_common.py perf/mlp_up_bench.py \
    perf/mlp_grads_gemm_bench.py; do
    cp "/tmp/grads-epilogue/$file" "$base/grads_tree/$file"
done
cp train_gpt.py "$base/main.py" && cp "$base/grads_tree/train_gpt.py" "$base/grads.py"
git -C /tmp/grads-epilogue am -q "$record/launches.patch"  # on the grads branch, whose kernel_report it extends
cp /tmp/grads-epilogue/train_gpt.py "$base/launches.py"
for call in A B C; do cp "$record/call${call}_commands.sh" "$base/s66_call$call.sh"; done
git worktree remove --force /tmp/grads-epilogue
echo "perf/base ready: $(ls "$base" | tr '\n' ' ')"
