# Session 61, call B: proxy-400 A B B A (main seed 0, branch seed 0, branch seed 1, main seed 1), val every 100
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
AB_GPUS=1 timeout 570 bash perf/ab.sh short $OUT/r "perf/base/main_s61.py --seed=0" "perf/base/qkv_wgrad.py --seed=0" \
    "perf/base/qkv_wgrad.py --seed=1" "perf/base/main_s61.py --seed=1" > $OUT/ab.txt 2>&1
tail -8 $OUT/ab.txt
