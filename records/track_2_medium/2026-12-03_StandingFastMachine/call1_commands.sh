# Session 36, call 1: track 2 standing of main ebd7814 on a fresh machine (cold, warm, full batch), power
# logged.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
r=$OUT/r; mkdir -p $r
nvidia-smi --query-gpu=name,serial,power.limit,clocks.max.sm --format=csv | tee $r/gpu.txt
timeout 570 bash perf/power.sh $r t2 bash perf/proxy.sh medium $r/t2 | tail -8 | tee $r/t2.txt
echo "elapsed $SECONDS s"
tar czf $OUT/job.tgz -C $OUT/r . && rm -rf $OUT/r
