# Session 64, call A: (1) perf/s64-stack's GPU checks (the QKV weight gradient from x's e4m3 copy, the loss kernel's
# FMA quarter, the MLP backward from a's e4m3 copy), built as training builds (configure_triton_builds); (2) the
# relu-square kernel's six variants timed alone at a micro-step's 49,152 x 3,072 (main's from h; from a with a's store
# last or first, with sqrt.approx, with no root, with relu's zeros kept off sqrt.rn's slow path); (3) the full batch
# A B B A of main against the stack (~-10 ms expected on an H200), in whatever of the 600 s is left.
set -u
start=$SECONDS
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
(cd perf/base/stack_tree && timeout 120 python -c '
import sys; sys.path[:0] = ["perf", "."]
import gpu_checks, train_gpt as tg
tg.configure_triton_builds(); print("ptxas:", tg.ptxas_in_use())
results = gpu_checks.fp8_mlp_checks() + gpu_checks.fp8_qkv_checks() + gpu_checks.fused_head_ce_checks()
print("stack checks all ok:", all(results), len(results))') > $OUT/checks_stack.txt 2>&1
(cd perf/base/e4m3a && for v in main last first approx nosqrt guard; do
    timeout 40 python bench.py $v 2>&1 | tail -1; done) \
    > $OUT/relu_variants.txt
left=$((585 - (SECONDS - start)))
echo "checks took $((SECONDS - start)) s; full batch given $left s"
timeout $left bash perf/fullbatch_ab.sh short $OUT/ab perf/base/main.py perf/base/stack.py > $OUT/ab.txt 2>&1
cat $OUT/relu_variants.txt; grep -v '^ok ' $OUT/checks_stack.txt | tail -16; tail -9 $OUT/ab.txt
