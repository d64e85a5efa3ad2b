# Session 62, call A: on an H200 session 60's plan (both probes, the relu-square branch's full batch A B B A against
# main dbb97a6); on any other card all of perf/gpu_checks.py on main (only fp8_qkv_checks has run since the merge)
set -u
g=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$g"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
case "$g" in
    *H200*) bash perf/base/h200_plan.sh;;
    *) timeout 420 python perf/gpu_checks.py > $OUT/gpu_checks.txt 2>&1; echo "exit $?"
       grep -v '^ok ' $OUT/gpu_checks.txt | tail -40; echo "ok lines: $(grep -c '^ok ' $OUT/gpu_checks.txt)";;
esac
