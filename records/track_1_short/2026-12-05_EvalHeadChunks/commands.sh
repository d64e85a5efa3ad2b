#!/usr/bin/env bash
# Session 57's call: track 1's peak memory, main (A) against validation's head in 32K-token chunks (B), 20 proxy
# steps and the full validation each; then the out-of-memory line of a run 8x the proxy's tokens.
set -uo pipefail
out=${1:?out}
source perf/proxy_common.sh
unpack_proxy_data
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
common=("${PROXY_DATA[@]}" --num_iterations=20 --val_loss_every=0 --grad_accum_steps=1 --logs_dir="$out/mem/logs")
python perf/base/main_s57.py "${common[@]}" --run_id=A > "$out/mem_A.out" 2>&1; echo "A exit $?"
python train_gpt.py "${common[@]}" --run_id=B > "$out/mem_B.out" 2>&1; echo "B exit $?"
for r in A B; do
    echo "== $r: $(grep -h 'step:20/20 val_loss' "$out/mem/logs/$r.txt" | cut -c1-60) | $(grep -h '^peak memory' "$out/mem/logs/$r.txt") | $(grep -h '^time:' "$out/mem/logs/$r.txt")"
done
grep -h "ptxas" "$out/mem/logs/B.txt" | head -2
mkdir -p "$out/oom"
timeout 240 python train_gpt.py --train_files='data/proxy/proxy_train_*.bin' --val_files='data/proxy/proxy_val_*.bin' \
    --train_seq_len=393216 --grad_accum_steps=1 --num_iterations=2 --warmup_steps=1 --val_tokens=262144 \
    --val_loss_every=0 --logs_dir="$out/oom/logs" --run_id=oom > "$out/oom/out.txt" 2> "$out/oom/err.txt"
echo "oom exit $?; stderr lines $(wc -l < "$out/oom/err.txt"), tracebacks $(grep -c Traceback "$out/oom/err.txt")"
tail -c 700 "$out/oom/err.txt"; echo
echo "log's last line: $(tail -1 "$out/oom/logs/oom.txt")"
for r in A B; do tail -30 "$out/mem/logs/$r.txt" > "$out/mem_${r}_tail.txt"; done
rm -rf "$out/mem/logs"

# Call 2, the same warm machine right after call 1, B then A:
#   source perf/proxy_common.sh
#   common=("${PROXY_DATA[@]}" --num_iterations=20 --val_loss_every=0 --grad_accum_steps=1 --logs_dir=$OUT/rep/logs)
#   python train_gpt.py "${common[@]}" --run_id=B2; python perf/base/main_s57.py "${common[@]}" --run_id=A2
# perf/base/main_s57.py was `git show main:train_gpt.py` at 0eb7833; train_gpt.py was 5ea8b53's.
