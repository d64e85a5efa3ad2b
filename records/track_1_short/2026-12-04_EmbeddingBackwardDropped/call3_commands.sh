# Session 47, call 3: does branch perf/embedding-touched-rows' op synchronise the host? perf/base/sync_check.py is
# call3_sync_check.py here, perf/base/branch_tg.py the branch's train_gpt.py at c74e878. Then main's standing on this
# fresh machine (perf/proxy.sh short: cold, warm, full batch).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/r
timeout 120 python perf/base/sync_check.py > $OUT/r/sync_check.txt 2>&1; echo "sync rc $?"
timeout 420 bash perf/power.sh $OUT/r standing bash perf/proxy.sh short $OUT/r > $OUT/r/standing.txt 2>&1
echo "standing rc $?"
tar czf $OUT/job.tgz -C $OUT r
cat $OUT/r/sync_check.txt | grep -v Warning | tail -20; tail -8 $OUT/r/standing.txt
