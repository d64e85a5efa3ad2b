# Session 75's call as run (perf/base/s75_call1c.sh). perf/base/main75.py is main 444b3eb's train_gpt.py;
# perf/base/qkv75.py is branch perf/qkv-grad-transposed's: ../2026-12-06_ReluSquareLaunchE5M2/qkv_grad_transposed.patch
# applied on 64fb5e6 (the same train_gpt.py as 444b3eb's but for the patch).
set -u
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 330 bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/main75.py perf/base/qkv75.py \
    > "$OUT/ab.txt" 2>&1
echo "ab rc $?"; tail -12 "$OUT/ab.txt" | cut -c1-250; rm -rf "$OUT/ab/logs"
