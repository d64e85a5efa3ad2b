# Session 68, call 4: (1) the full batch A B B A of perf/mlp-static-x-scale (A) against it merged with
# perf/embedding-grads-fp32 (B): do the embedding sums' -1.7 ms (call 2) stack? (2) proxy-400 A B B A at seed 0 of
# main against perf/embedding-grads-fp32 (call 3's single run: +0.3 ms a proxy step)
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
start=$SECONDS
timeout 300 bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/mlp.py perf/base/mlpemb.py > "$OUT/ab.txt" 2>&1
tail -3 "$OUT/ab.txt" | cut -c1-300; grep -h 'peak memory' $OUT/ab/*.out | cut -c1-80
rm -rf "$OUT/ab/logs"
left=$((580 - SECONDS + start))
timeout $left bash perf/ab.sh short "$OUT/proxy" "perf/base/m68.py --seed=0" "perf/base/emb.py --seed=0" \
    "perf/base/emb.py --seed=0" "perf/base/m68.py --seed=0" > "$OUT/proxy.txt" 2>&1
echo "ab rc $?"
source perf/proxy_common.sh
proxy_summary "$OUT/proxy" variant0 variant1 variant2 variant3 | cut -c1-420
rm -rf "$OUT/proxy/logs"
