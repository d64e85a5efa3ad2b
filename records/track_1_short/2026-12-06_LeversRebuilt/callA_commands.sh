# Session 64, call A: the stack's GPU checks (stack_checks.sh), the relu-square kernel's variants alone
# (relu_variants.sh; left out with the argument "short", for a budget under ~600 s), then the full batch A B B A of
# main against the stack (~-10 ms expected on an H200) in whatever of the 600 s is left.
set -u
start=$SECONDS
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
bash perf/base/stack_checks.sh
[ "${1:-}" = short ] || bash perf/base/relu_variants.sh
left=$((585 - (SECONDS - start)))
echo "checks took $((SECONDS - start)) s; full batch given $left s"
timeout $left bash perf/fullbatch_ab.sh short $OUT/ab perf/base/main.py perf/base/stack.py > $OUT/ab.txt 2>&1
tail -9 $OUT/ab.txt
