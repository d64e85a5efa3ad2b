# Session 71, call 6: the full batch A B B A, main with cuBLASLt at workspace 0 (ws0) as A, main as B: call 1 again
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 420 bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/ws0.py perf/base/main71.py > "$OUT/ab.txt" 2>&1
tail -9 "$OUT/ab.txt" | cut -c1-300; rm -rf "$OUT/ab/logs"
