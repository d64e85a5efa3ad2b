# Session 45, call 2 (a fresh nvidia-h200): the GPU checks of branch perf/fp8-qkv-grad-x (5aac427), then proxy-400
# A B B A on one GPU against main's train_gpt.py (2f4731e, as perf/base/main.py), power logged; carry perf/carry and
# perf/base. ab.sh shares one inductor cache per GPU, so main's first run found the branch's unchanged kernels.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/r
timeout 95 python perf/gpu_checks.py > $OUT/r/gpu_checks.txt 2>&1
AB_GPUS=1 timeout 480 bash perf/power.sh $OUT/r ab bash perf/ab.sh short $OUT/r "--seed=0" \
    "perf/base/main.py --seed=0" "perf/base/main.py --seed=1" "--seed=1" > $OUT/r/ab_console.txt 2>&1
