# Session 71, call 4: proxy-400 A B B A at seeds 0, 0, 1, 1: main (A) against perf/eager-scales with cuBLASLt at workspace 0 (B: perf/base/both.py). Expected: -0.3 to -0.5 ms a proxy step, val@400 inside main's range
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 585 bash perf/ab.sh short "$OUT/proxy" "perf/base/main71.py --seed=0" "perf/base/both.py --seed=0" \
    "perf/base/both.py --seed=1" "perf/base/main71.py --seed=1" > "$OUT/proxy.txt" 2>&1
echo "ab rc $?"
source perf/proxy_common.sh
proxy_summary "$OUT/proxy" variant0 variant1 variant2 variant3 | cut -c1-420
rm -rf "$OUT/proxy/logs"
