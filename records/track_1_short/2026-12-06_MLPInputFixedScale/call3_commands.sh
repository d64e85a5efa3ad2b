# Session 68, call 3: proxy-400 A B B A at seeds 0, 0, 1, 1 of main (09095a0) against perf/mlp-static-x-scale (its
# values change: x's e4m3 scale), then perf/embedding-grads-fp32 at seed 0 (one micro-step: values as main's)
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 585 bash perf/ab.sh short "$OUT/proxy" "perf/base/m68.py --seed=0" "perf/base/mlp.py --seed=0" \
    "perf/base/mlp.py --seed=1" "perf/base/m68.py --seed=1" "perf/base/emb.py --seed=0" > "$OUT/proxy.txt" 2>&1
echo "ab rc $?"
source perf/proxy_common.sh
proxy_summary "$OUT/proxy" variant0 variant1 variant2 variant3 variant4 | cut -c1-420
rm -rf "$OUT/proxy/logs"
