# Session 64, call C (what the device time left would hold, after the failed starts): (1) perf/s64-stack's GPU checks
# (the QKV weight gradient from x's e4m3 copy, the loss kernel's FMA quarter, the MLP backward from a's e4m3 copy),
# built as training builds (configure_triton_builds); (2) the relu-square kernel's six variants timed alone at a
# micro-step's 49,152 x 3,072 (main's from h; from a with a's store last or first, with sqrt.approx, with no root, with
# relu's zeros kept off sqrt.rn's slow path); (3) main's start-up check built by Triton's bundled ptxas and by torch's
# (fresh Triton caches): was call F's one-pass failure its harness's ptxas?
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
(cd perf/base/stack_tree && timeout 120 python -c '
import sys; sys.path[:0] = ["perf", "."]
import gpu_checks, train_gpt as tg
tg.configure_triton_builds(); print("ptxas:", tg.ptxas_in_use())
results = gpu_checks.fp8_mlp_checks() + gpu_checks.fp8_qkv_checks() + gpu_checks.fused_head_ce_checks()
print("stack checks all ok:", all(results), len(results))') > $OUT/checks_stack.txt 2>&1
grep -v '^ok ' $OUT/checks_stack.txt | tail -16
(cd perf/base/e4m3a && for v in main last first approx nosqrt guard; do
    timeout 40 python bench.py $v 2>&1 | tail -1; done) \
    | tee $OUT/relu_variants.txt
probe='import sys, torch; sys.path[:0] = ["."]; import train_gpt as tg
if sys.argv[1] == "torch": tg.configure_triton_builds()
print(sys.argv[1], tg.ptxas_in_use(), "one pass exact:", tg.one_pass_relu_square_is_exact(torch.device("cuda")))'
for which in bundled torch; do
    (cd perf/base/main_tree && TRITON_CACHE_DIR=/tmp/tc_$which timeout 45 python -c "$probe" $which 2>&1 | tail -1)
done | tee $OUT/ptxas_probe.txt
