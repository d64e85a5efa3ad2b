# Call B: proxy-400 A B B A of main against the branch at seeds 0 and 1 (h's gradient now from the fp32 grad_a: the
# loss against main's same-seed spread, 0.0017), and the proxy step. ~400 s on a warm machine.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
AB_GPUS=1 timeout 585 bash perf/ab.sh short "$OUT/r" "perf/base/main.py --seed=0" "perf/base/grads.py --seed=0" \
    "perf/base/grads.py --seed=1" "perf/base/main.py --seed=1" > "$OUT/ab.txt" 2>&1
tail -14 "$OUT/ab.txt"
