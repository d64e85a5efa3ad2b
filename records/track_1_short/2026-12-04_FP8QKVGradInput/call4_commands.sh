# Session 45, call 4 (a fresh nvidia-h200): merged main (the script as in a69b5b6, its source in each log) through the
# proxy benchmark (cold, warm, full batch), then the GPU checks; carry perf/carry.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/r
timeout 380 bash perf/proxy.sh short $OUT/r > $OUT/r/proxy.txt 2>&1
timeout 90 python perf/gpu_checks.py > $OUT/r/gpu_checks.txt 2>&1
