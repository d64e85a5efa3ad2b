# Session 67, call 6: proxy-400 A B B A at seeds 0, 1, 1, 0: main against the loss kernel with L2 hints at 8192 / 16
# warps (the branch's final train_gpt.py): the loss curve, as its row sums' order changed (loss within 1e-5)
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 590 bash perf/ab.sh short "$OUT/proxy" "perf/base/main.py --seed=0" "perf/base/ce_final.py --seed=0" \
    "perf/base/ce_final.py --seed=1" "perf/base/main.py --seed=1" > "$OUT/proxy.txt" 2>&1
echo "ab rc $?"; tail -8 "$OUT/proxy.txt" | cut -c1-400
