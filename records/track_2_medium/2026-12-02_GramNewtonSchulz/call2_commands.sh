set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
r=$OUT/r; mkdir -p $r
nvidia-smi --query-gpu=name,serial,power.limit,clocks.max.sm --format=csv | tee $r/gpu.txt
AB_GPUS=1 timeout 585 bash perf/power.sh $r t2ab bash perf/ab.sh medium $r/t2 "perf/base/main/train_gpt_medium.py --seed=0" "--seed=0" "--seed=1" "perf/base/main/train_gpt_medium.py --seed=1" 2>&1 | tail -8
for f in $r/t2/logs/variant*.txt; do echo "$f $(grep -m1 -o 'startup: first timed step.*' $f)"; done
echo "elapsed $SECONDS s"
tar czf $OUT/job.tgz -C $OUT/r . && rm -rf $OUT/r
