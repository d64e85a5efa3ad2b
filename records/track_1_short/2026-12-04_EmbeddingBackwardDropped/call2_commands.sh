# Session 47, call 2: perf/embedding_bench.py (three ways; the branch's embedding_grads at five launches), the branch's
# perf/gpu_checks.py, then the full batch A B B A: branch perf/embedding-touched-rows (train_gpt.py) against main
# e3ebf87 (perf/base/main.py), power logged.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/r
source perf/proxy_common.sh && unpack_proxy_data
timeout 120 python perf/embedding_bench.py --launches=4:32:4,16:16:8,8:8:4,8:32:8,8:64:8 \
    > $OUT/r/embedding_bench.txt 2>&1; echo "bench rc $?"
timeout 120 python perf/gpu_checks.py > $OUT/r/gpu_checks.txt 2>&1; echo "gpu_checks rc $?"
timeout 330 bash perf/power.sh $OUT/r fb bash perf/base/fullbatch_ab.sh $OUT/r > $OUT/r/fb.txt 2>&1; echo "fb rc $?"
tar czf $OUT/job.tgz -C $OUT r
cat $OUT/r/embedding_bench.txt | tail -9; grep -E "^BAD|table_lookups|passed|failed" $OUT/r/gpu_checks.txt | tail -10
tail -6 $OUT/r/fb.txt
