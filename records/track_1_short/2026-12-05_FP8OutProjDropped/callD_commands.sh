# Session 62, call D: --fp8_out with its own gate-and-cast kernel (perf/fp8-out-proj's second commit): the kernel's
# GPU check and time, then the full batch A B B A against main
set -u
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cp train_gpt.py /tmp/tg.py && cp perf/gpu_checks.py /tmp/gc.py
cp perf/base/oproj2.py train_gpt.py && cp perf/base/gpu_checks_oproj.py perf/gpu_checks.py
timeout 90 python -c "
import sys; sys.path[:0] = ['perf', '.']
import gpu_checks
print('fp8_out_checks all ok:', all(gpu_checks.fp8_out_checks()))" > $OUT/checks.txt 2>&1
cp /tmp/tg.py train_gpt.py; cp /tmp/gc.py perf/gpu_checks.py; tail -6 $OUT/checks.txt
timeout 480 bash perf/fullbatch_ab.sh short $OUT/ab perf/base/main_s62.py perf/base/oproj2.py > $OUT/ab.txt 2>&1
tail -8 $OUT/ab.txt
