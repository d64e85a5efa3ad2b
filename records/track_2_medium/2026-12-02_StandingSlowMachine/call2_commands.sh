# Session 32, call 2: track 2's standing on a fresh machine (cold, warm, full batch), power logged.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
r=$OUT/r; mkdir -p $r
timeout 570 bash perf/power.sh $r t2 bash perf/proxy.sh medium $r | tail -8 | tee $r/t2.txt
tar czf $OUT/job.tgz -C $OUT/r . && rm -rf $OUT/r
