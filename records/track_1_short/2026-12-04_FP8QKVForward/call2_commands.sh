# Session 44, call 2 (main b437435): the attention-projection GEMMs and casts of one block, twice.
mkdir -p $OUT/r
for i in 1 2; do timeout 280 python perf/attention_fp8_bench.py > $OUT/r/bench$i.txt 2>&1; echo "rc=$?"; done
