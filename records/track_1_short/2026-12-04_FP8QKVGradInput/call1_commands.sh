# Session 45, call 1: main (2f4731e) on a fresh nvidia-h200: the proxy benchmark (cold, warm, full batch), then the
# GPU checks; carry perf/carry (bash perf/pack.sh ../shared/proxy).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/r
timeout 420 bash perf/proxy.sh short $OUT/r > $OUT/r/proxy.txt 2>&1
timeout 150 python perf/gpu_checks.py > $OUT/r/gpu_checks.txt 2>&1
