# Session 76, call 1: full batch A B B A, main against RELU_SQUARE_LAUNCH (64, 256, 8) (expected -0.5 to -0.8 ms),
# then perf/head_kernels_bench.py (transpose at the MLP's shape over launches): perf/NOTES.md, session 76.
set -u
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 420 bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/main75.py perf/base/relu64.py > "$OUT/ab.txt" 2>&1
echo "ab rc $?"; tail -12 "$OUT/ab.txt" | cut -c1-250; rm -rf "$OUT/ab/logs"
timeout 150 python perf/head_kernels_bench.py > $OUT/head_kernels.txt 2>&1; echo "bench rc $?"
tail -30 $OUT/head_kernels.txt | cut -c1-200
