# Session 46, call 6 (the same machine as call 5, still warm): the merged script's standing, carry perf/carry and
# perf/base. Its "cold" run found call 5's compile caches on the machine, so its start is not a cold start.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1; mkdir -p $OUT/r
timeout 285 bash perf/proxy.sh short $OUT/r > $OUT/r/proxy_console.txt 2>&1; echo "rc $?"
tar czf $OUT/job.tgz -C $OUT r; tail -8 $OUT/r/proxy_console.txt
