# Session 67, call 2: the head kernels' launches (the loss kernel; the transposes, now also at the QKV gradient's shape)
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 400 python perf/head_kernels_bench.py > $OUT/head_kernels.txt 2>&1; echo "bench rc $?"
cat $OUT/head_kernels.txt
