# Session 67, call 3: the loss kernel with L2 eviction hints (v1: pass 1 evict_last, pass 2 and the gradient's
# stores evict_first; v2: pass 1 unhinted) against main, each copied over train_gpt.py for perf/head_kernels_bench.py
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
cp train_gpt.py /tmp/original.py
for version in main ce_v1 ce_v2 main; do
    cp perf/base/$version.py train_gpt.py
    timeout 120 python perf/head_kernels_bench.py > $OUT/head_kernels_$version.txt 2>&1; echo "== $version rc $?"
    grep softcap $OUT/head_kernels_$version.txt | cut -c1-75
done
cp /tmp/original.py train_gpt.py
