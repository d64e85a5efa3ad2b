# Session 61, call A: the branch's FP8 QKV weight-gradient checks on the GPU, then the full batch A B B A (main, branch)
set -u
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 120 python -c "
import sys; sys.path[:0] = ['perf', '.']
import gpu_checks
print('fp8_qkv_checks all ok:', all(gpu_checks.fp8_qkv_checks()))" > $OUT/checks.txt 2>&1
cat $OUT/checks.txt
timeout 460 bash perf/fullbatch_ab.sh short $OUT/ab perf/base/main_s61.py perf/base/qkv_wgrad.py > $OUT/ab.txt 2>&1
tail -12 $OUT/ab.txt
