# Call C: full batch A B B A of the grads branch against it with launches.patch (the up projection's GEMM at 4 stages
# with its epilogue whole, row_scaled_transposed at 128-blocks: ~-1.1 ms a full step expected on an H100,
# perf/NOTES.md session 65). Run at the repository root after prepare.sh; ~450 s.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 585 bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/grads.py perf/base/launches.py > "$OUT/ab.txt" 2>&1
tail -9 "$OUT/ab.txt"
