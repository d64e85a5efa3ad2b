# Session 64, call B: proxy-400 A B B A of main against perf/s64-stack at seeds 0 and 1, for the loss curve (two of the
# stack's levers round x and relu(h) through e4m3 once more) and the proxy step.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
AB_GPUS=1 timeout 585 bash perf/ab.sh short $OUT/r "perf/base/main.py --seed=0" "perf/base/stack.py --seed=0" \
    "perf/base/stack.py --seed=1" "perf/base/main.py --seed=1" > $OUT/ab.txt 2>&1
tail -14 $OUT/ab.txt
