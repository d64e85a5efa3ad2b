# Session 47, call 4: branch perf/embedding-touched-rows with the touched rows marked by a Triton kernel (no host
# synchronisation): perf/base/sync_check.py, perf/embedding_bench.py, the op's perf/gpu_checks.py checks, then the full
# batch A B B A against main 1c7db8d (perf/base/main.py; train_gpt.py as e3ebf87), power logged.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/r
source perf/proxy_common.sh && unpack_proxy_data
timeout 90 python perf/base/sync_check.py > $OUT/r/sync_check.txt 2>&1; echo "sync rc $?"
timeout 90 python perf/embedding_bench.py --launches=8:8:4 > $OUT/r/embedding_bench.txt 2>&1; echo "bench rc $?"
timeout 60 python -c "import sys; sys.path.insert(0, 'perf'); import gpu_checks; sys.exit(not all(gpu_checks.table_lookups_checks()))" \
    > $OUT/r/gpu_checks.txt 2>&1; echo "checks rc $?"
timeout 330 bash perf/power.sh $OUT/r fb bash perf/base/fullbatch_ab.sh $OUT/r > $OUT/r/fb.txt 2>&1; echo "fb rc $?"
tar czf $OUT/job.tgz -C $OUT r
grep -E "^[a-z].*: (no host|SYNC)" $OUT/r/sync_check.txt; tail -5 $OUT/r/embedding_bench.txt; cat $OUT/r/gpu_checks.txt | tail -10
tail -6 $OUT/r/fb.txt
