# Session 71, call 5: the full batch A B B A, the eager scales with cuBLASLt at workspace 0 (perf/base/both.py) as A, main as B. Expected: -2.2 to -2.8 ms for A (call 1: -0.5 and -2.2)
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 420 bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/both.py perf/base/main71.py > "$OUT/ab.txt" 2>&1
tail -9 "$OUT/ab.txt" | cut -c1-300; rm -rf "$OUT/ab/logs"
