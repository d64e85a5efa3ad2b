# Session 32 (prepared in 31): branch perf/fp8-attention against main, proxy-400 A B B A on one GPU, power logged.
# Refresh the copy first if the branch moved: git show perf/fp8-attention:train_gpt.py > perf/base/fp8att/train_gpt.py
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
r=$OUT/r; mkdir -p $r
AB_GPUS=1 timeout 570 bash perf/power.sh $r ab bash perf/ab.sh short $r "--seed=0" \
    "perf/base/fp8att/train_gpt.py --seed=0" "perf/base/fp8att/train_gpt.py --seed=1" "--seed=1" | tee $r/ab.txt
tar czf $OUT/job.tgz -C $OUT/r . && rm -rf $OUT/r
