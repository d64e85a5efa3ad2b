# Session 45, call 3 (a fresh nvidia-h200): the GPU checks with the corrected grad_w reference (5aa072a), then the
# full batch A B B A (call3_fullbatch_ab.sh, kept in the ignored perf/base/ for the call), power logged.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/r
timeout 95 python perf/gpu_checks.py > $OUT/r/gpu_checks.txt 2>&1
timeout 420 bash perf/power.sh $OUT/r fb bash perf/base/fullbatch_ab.sh $OUT/r > $OUT/r/fb_console.txt 2>&1
