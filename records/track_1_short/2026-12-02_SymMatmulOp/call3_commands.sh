set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
r=$OUT/r; mkdir -p $r
nvidia-smi --query-gpu=name,serial,power.limit,clocks.max.sm --format=csv | tee $r/gpu.txt
ab() { local caches=$1 name=$2; shift 2
    AB_GPUS=1 AB_CACHES=$caches timeout 280 bash perf/power.sh $r $name bash perf/ab.sh short $r/$name "$@" 2>&1 | tail -4; }
ab /tmp/cA A1 "perf/base/main/train_gpt.py --seed=0"
ab /tmp/cB B12 "--seed=0" "--seed=1"
[ $SECONDS -lt 500 ] && ab /tmp/cA A2 "perf/base/main/train_gpt.py --seed=1"
for f in $r/*/logs/variant*.txt; do echo "$f $(grep -m1 -o 'startup: [0-9]* kernel launches built.*' $f)"; done
echo "elapsed $SECONDS s"
tar czf $OUT/job.tgz -C $OUT/r . && rm -rf $OUT/r
