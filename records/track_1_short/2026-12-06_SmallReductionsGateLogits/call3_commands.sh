# Session 70, call 3: the full batch A B B A with the order turned round: perf/gate-logits at its final launches (the
# reductions at 16,384 entries over 16 warps) as A, main as B. Expected: -2 to -3 ms for A (call 1: -1.9 ms)
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 420 bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/gate2.py perf/base/main70.py > "$OUT/ab.txt" 2>&1
tail -9 "$OUT/ab.txt" | cut -c1-300; rm -rf "$OUT/ab/logs"
