export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/r
timeout 100 python perf/gpu_checks.py > $OUT/r/gpu_checks.txt 2>&1; echo "gpu_checks rc $?"
timeout 60 python perf/base/ce_time.py > $OUT/r/ce_time.txt 2>&1; echo "ce rc $?"
AB_GPUS=1 timeout 460 bash perf/power.sh $OUT/r ab bash perf/ab.sh short $OUT/r "--seed=0" \
    "perf/base/main.py --seed=0" "perf/base/main.py --seed=1" "--seed=1" > $OUT/r/ab.txt 2>&1; echo "ab rc $?"
tar czf $OUT/job.tgz -C $OUT r
grep -E "^BAD|FP8Output|softcap|passed|failed" $OUT/r/gpu_checks.txt | tail -12; cat $OUT/r/ce_time.txt; tail -14 $OUT/r/ab.txt
