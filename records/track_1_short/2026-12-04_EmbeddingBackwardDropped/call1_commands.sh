# Session 47, call 1 (one fresh nvidia-h200): perf/embedding_bench.py on main's script; perf/gpu_checks.py and the full
# batch (8 x 48K micro-steps, 30 steps) A B B A of branch perf/embedding-aten-backward (97381ad, train_gpt.py) against
# main e3ebf87 (perf/base/main.py). perf/base/fullbatch_ab.sh is ../2026-12-04_FP8QKVGradInput/call3_fullbatch_ab.sh.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/r
source perf/proxy_common.sh && unpack_proxy_data
timeout 90 python perf/embedding_bench.py > $OUT/r/embedding_bench.txt 2>&1; echo "bench rc $?"
timeout 100 python perf/gpu_checks.py > $OUT/r/gpu_checks.txt 2>&1; echo "gpu_checks rc $?"
timeout 330 bash perf/power.sh $OUT/r fb bash perf/base/fullbatch_ab.sh $OUT/r > $OUT/r/fb.txt 2>&1; echo "fb rc $?"
tar czf $OUT/job.tgz -C $OUT r
cat $OUT/r/embedding_bench.txt; grep -E "^BAD|table_lookup|passed|failed" $OUT/r/gpu_checks.txt | tail -6; tail -12 $OUT/r/fb.txt
