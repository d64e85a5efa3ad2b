# Session 76, call 2: the second full batch A B B A, main against RELU_SQUARE_LAUNCH (64, 256, 8).
set -u
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 420 bash perf/fullbatch_ab.sh short "$OUT/ab2" perf/base/main75.py perf/base/relu64.py > "$OUT/ab2.txt" 2>&1
echo "ab2 rc $?"; tail -12 "$OUT/ab2.txt" | cut -c1-250; rm -rf "$OUT/ab2/logs"
