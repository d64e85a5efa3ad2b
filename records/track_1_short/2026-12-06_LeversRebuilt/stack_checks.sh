# perf/s64-stack's GPU checks (the QKV weight gradient from x's e4m3 copy, the loss kernel's FMA quarter, the MLP
# backward from a's e4m3 copy), built as training builds (configure_triton_builds), into $OUT/checks_stack.txt; prints
# the lines that are not "ok". Run at the repository root after prepare.sh.
(cd perf/base/stack_tree && timeout 120 python -c '
import sys; sys.path[:0] = ["perf", "."]
import gpu_checks, train_gpt as tg
tg.configure_triton_builds(); print("ptxas:", tg.ptxas_in_use())
results = gpu_checks.fp8_mlp_checks() + gpu_checks.fp8_qkv_checks() + gpu_checks.fused_head_ce_checks()
print("stack checks all ok:", all(results), len(results))') > "$OUT/checks_stack.txt" 2>&1
grep -v '^ok ' "$OUT/checks_stack.txt" | tail -16
