set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
r=$OUT/r; mkdir -p $r
nvidia-smi --query-gpu=name,serial,power.limit,clocks.max.sm --format=csv | tee $r/gpu.txt
export TORCHINDUCTOR_CACHE_DIR=/tmp/ns_inductor TRITON_CACHE_DIR=/tmp/ns_triton
for d in . perf/base/main; do timeout 100 python perf/base/s34_ns.py $d 2>&1 | grep -v -i warn; done | tee $r/ns.txt
unset TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR
AB_GPUS=1 timeout $((585 - SECONDS)) bash perf/power.sh $r t1ab bash perf/ab.sh short $r/t1 "perf/base/main/train_gpt.py --seed=0" "--seed=0" "--seed=1" "perf/base/main/train_gpt.py --seed=1" 2>&1 | tail -8
for f in $r/t1/logs/variant*.txt; do echo "$f $(grep -m1 -o 'startup: first timed step.*' $f)"; done
echo "elapsed $SECONDS s"
tar czf $OUT/job.tgz -C $OUT/r . && rm -rf $OUT/r
