set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 385 bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/head.py perf/base/headlaunch.py > "$OUT/ab.txt" 2>&1
tail -9 "$OUT/ab.txt"
