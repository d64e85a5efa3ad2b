# Session 64, call C (what ~300 s of device time would hold): the stack's GPU checks, the relu-square kernel's
# variants, and main's start-up check built by Triton's bundled ptxas and by torch's (fresh Triton caches): was call
# F's one-pass failure its harness's ptxas?
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
bash perf/base/stack_checks.sh
bash perf/base/relu_variants.sh
probe='import sys, torch; sys.path[:0] = ["."]; import train_gpt as tg
if sys.argv[1] == "torch": tg.configure_triton_builds()
print(sys.argv[1], tg.ptxas_in_use(), "one pass exact:", tg.one_pass_relu_square_is_exact(torch.device("cuda")))'
for which in bundled torch; do
    (cd perf/base/main_tree && TRITON_CACHE_DIR=/tmp/tc_$which timeout 45 python -c "$probe" $which 2>&1 | tail -1)
done | tee $OUT/ptxas_probe.txt
