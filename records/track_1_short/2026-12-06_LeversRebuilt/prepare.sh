# Rebuilds the ignored perf/base/ files that calls A-C read, from main (HEAD) and s64-stack.patch, and copies the calls
# there as perf/base/s64_callA.sh ... (records/ is moved aside during a call): run at the repository root, then carry
# perf/base (and perf/carry). perf/base/stack_tree and main_tree hold the scripts and the checks each version
# imports; perf/base/e4m3a the relu-square kernel's six variants for relu_square_variants_bench.py.
set -euo pipefail
record=$(cd "$(dirname "$0")" && pwd)
base=perf/base; rm -rf "$base/stack_tree" "$base/main_tree" "$base/e4m3a" /tmp/s64-stack
git worktree prune
git worktree add -q --detach /tmp/s64-stack dcbed7b && git -C /tmp/s64-stack am -q "$record/s64-stack.patch"
for version in main stack; do
    mkdir -p "$base/${version}_tree/perf"
    for file in train_gpt.py train_gpt_medium.py perf/gpu_checks.py perf/bench_common.py; do
        source=$file; [ "$version" = main ] || source=/tmp/s64-stack/$file
        cp "$source" "$base/${version}_tree/$file"
    done
    cp "$base/${version}_tree/train_gpt.py" "$base/$version.py"
done
mkdir -p "$base/e4m3a" && cp "$record/relu_square_variants_bench.py" "$base/e4m3a/bench.py"
for call in A B C; do cp "$record/call${call}_commands.sh" "$base/s64_call$call.sh"; done
cp "$record/stack_checks.sh" "$record/relu_variants.sh" "$base/"
python - "$base" <<'PY'
import sys
from pathlib import Path
base = Path(sys.argv[1])
stack = (base / "stack.py").read_text()
root = "    relu = tl.sqrt_rn(a * tl.load(a_scale_ptr))\n"
store = "    tl.store(a_t_ptr + at_t, tl.trans(a).to(a_t_ptr.dtype.element_ty), mask=tl.trans(mask))\n"
assert stack.count(root) == 1 and stack.count(store) == 1
variants = {"main": (base / "main.py").read_text(), "last": stack,
            "first": stack.replace(store, "").replace(root, root + store),
            "approx": stack.replace(root, root.replace("sqrt_rn", "sqrt")),
            "nosqrt": stack.replace(root, "    relu = a * tl.load(a_scale_ptr)\n"),
            # relu's zeros kept off sqrt.rn's slow path (zero and subnormal inputs): the same bytes, 96 registers
            "guard": stack.replace(root, "    relu = tl.where(a > 0.0, tl.sqrt_rn(tl.maximum(a * tl.load(a_scale_ptr), "
                                         "1.1754944e-38)), 0.0)\n")}
for name, source in variants.items():
    (base / "e4m3a" / name).mkdir(parents=True, exist_ok=True)
    (base / "e4m3a" / name / "train_gpt.py").write_text(source)
PY
git worktree remove --force /tmp/s64-stack
echo "perf/base ready: $(ls "$base" | tr '\n' ' ')"
