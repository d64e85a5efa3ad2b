# Session 73, call 2: proxy-400 A B B A at seeds 0, 0, 1, 1 of main (perf/base/main73.py) against perf/grad-a-e5m2
# (perf/base/grada.py; its values change: grad_a in e5m2), then the pieces timed alone on the branch's script
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 500 bash perf/ab.sh short "$OUT/proxy" "perf/base/main73.py --seed=0" "perf/base/grada.py --seed=0" \
    "perf/base/grada.py --seed=1" "perf/base/main73.py --seed=1" > "$OUT/proxy.txt" 2>&1
echo "ab rc $?"
source perf/proxy_common.sh
proxy_summary "$OUT/proxy" variant0 variant1 variant2 variant3 | cut -c1-420
rm -rf "$OUT/proxy/logs"
cp train_gpt.py /tmp/original.py; cp perf/base/grada.py train_gpt.py
timeout 60 python perf/base/s73_grada_bench.py > $OUT/bench.txt 2>&1; echo "bench rc $?"; cut -c1-200 $OUT/bench.txt | tail -4
cp /tmp/original.py train_gpt.py
