# Session 70, call 4: proxy-400 A B B A at seeds 0, 0, 1, 1: main against perf/gate-logits (final launches)
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 585 bash perf/ab.sh short "$OUT/proxy" "perf/base/main70.py --seed=0" "perf/base/gate2.py --seed=0" \
    "perf/base/gate2.py --seed=1" "perf/base/main70.py --seed=1" > "$OUT/proxy.txt" 2>&1
echo "ab rc $?"
source perf/proxy_common.sh
proxy_summary "$OUT/proxy" variant0 variant1 variant2 variant3 | cut -c1-420
rm -rf "$OUT/proxy/logs"
