# Session 63, call D: proxy-400 A B B A of main against BRANCH (the best of calls A-C: casts_once, xf8 or ce_fma),
# seeds 0 and 1, for the loss curve. Usage: bash perf/base/s63_callD.sh BRANCH
set -u
b=${1:?branch script name in perf/base, without .py}
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
AB_GPUS=1 timeout 580 bash perf/ab.sh short $OUT/r "perf/base/main_s62.py --seed=0" "perf/base/$b.py --seed=0" \
    "perf/base/$b.py --seed=1" "perf/base/main_s62.py --seed=1" > $OUT/ab.txt 2>&1
tail -12 $OUT/ab.txt
