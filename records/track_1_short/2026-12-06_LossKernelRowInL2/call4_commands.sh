# Session 67, call 4: full batch A B B A, main against the loss kernel with L2 eviction hints at BLOCK 8192 / 16 warps
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 590 bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/main.py perf/base/ce.py > "$OUT/ab.txt" 2>&1
tail -9 "$OUT/ab.txt"
