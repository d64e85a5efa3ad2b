# Session 32, call 3 (call 2's machine, right after it): track 1's standing (cold, warm, full batch), power logged.
export NCCL_NVLS_ENABLE=0; r=$OUT/r; mkdir -p $r; timeout 480 bash perf/power.sh $r t1 bash perf/proxy.sh short $r | tail -6; tar czf $OUT/job.tgz -C $OUT/r . && rm -rf $OUT/r
