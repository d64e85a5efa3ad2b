# Session 74, call 1: the relu-square pass's launch sweep with the e5m2 gradient (perf/mlp_bench.py on main), then
# the full batch A B B A of main against main with the best one-pass launch if it is >= 3% faster (else main twice:
# the standing). Expected (perf/NOTES.md, session 73/74): 0 to -3 ms a full step.
set -u
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
test -f perf/base/main74.py || { echo "error: perf/base/main74.py missing"; exit 2; }
timeout 200 python perf/mlp_bench.py > $OUT/mlp_bench.txt 2>&1; echo "bench rc $?"; tail -3 $OUT/mlp_bench.txt | cut -c1-300
python perf/base/s74_pick.py $OUT/mlp_bench.txt perf/base/relu_best.py | tee $OUT/pick.txt
if grep -q picked $OUT/pick.txt; then B=perf/base/relu_best.py; cp $B $OUT/relu_best.py; else B=perf/base/main74.py; fi
timeout 430 bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/main74.py $B > "$OUT/ab.txt" 2>&1
echo "ab rc $?"; tail -9 "$OUT/ab.txt" | cut -c1-300; rm -rf "$OUT/ab/logs"
