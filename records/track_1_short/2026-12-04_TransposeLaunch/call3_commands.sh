# Session 46, call 3: the head kernels' launch configurations (perf/head_kernels_bench.py) on main's script.
mkdir -p $OUT/r
timeout 240 python perf/head_kernels_bench.py > $OUT/r/head_kernels_bench.txt 2>&1; echo "rc $?"
cat $OUT/r/head_kernels_bench.txt | tail -30
