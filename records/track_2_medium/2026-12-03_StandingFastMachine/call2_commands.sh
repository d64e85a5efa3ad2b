# Session 36, call 2 (call 1 machine if still warm): track 1's standing (cold, warm, full batch), power logged.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
r=$OUT/r; mkdir -p $r
nvidia-smi --query-gpu=name,serial,power.limit,clocks.max.sm --format=csv | tee $r/gpu.txt
timeout 570 bash perf/power.sh $r t1 bash perf/proxy.sh short $r/t1 | tail -8 | tee $r/t1.txt
echo "elapsed $SECONDS s"
tar czf $OUT/job.tgz -C $OUT/r . && rm -rf $OUT/r
