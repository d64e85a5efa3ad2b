# Session 37, call 1: track 1's full batch (8 x 48K, 30 steps) with the schedule's growing window, then held at
# the shortest window (1 block) and at the longest (14 blocks): does the window alone explain 563.68 ms vs 500?
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
r=$OUT/r; mkdir -p $r
nvidia-smi --query-gpu=name,serial,power.limit,clocks.max.sm --format=csv | tee $r/gpu.txt
timeout 570 bash perf/power.sh $r t1 bash perf/base/s37_runs.sh $r/t1 > $r/console.txt 2>&1
tail -6 $r/console.txt
for name in schedule window1 window14 schedule2; do
    python perf/base/fullbatch_by_window.py $r/t1/logs/$name.txt | tail -1
done
echo "elapsed $SECONDS s"
tar czf $OUT/job.tgz -C $OUT/r . && rm -rf $OUT/r
