# Session 63, call F: the four queued levers stacked (perf/s63-stack: the weight casts once a step, the QKV weight
# gradient from x's e4m3 copy, the MLP backward from a's e4m3 copy, the loss kernel's FMA quarter; ~-16 ms a full step
# expected on an H100): their GPU checks in one process, then the full batch A B B A against main. For a session with
# little device time: this call and `bash perf/base/s63_callD.sh stack` (the loss) in place of calls A-E.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cp train_gpt.py /tmp/tg.py && cp perf/gpu_checks.py /tmp/gc.py
cp perf/base/stack.py train_gpt.py && cp perf/base/gpu_checks_stack.py perf/gpu_checks.py
timeout 120 python -c "
import sys; sys.path[:0] = ['perf', '.']
import gpu_checks
results = gpu_checks.fp8_mlp_checks() + gpu_checks.fp8_qkv_checks() + gpu_checks.fused_head_ce_checks()
print('stack checks all ok:', all(results), len(results))" > $OUT/checks_stack.txt 2>&1
cp /tmp/tg.py train_gpt.py && cp /tmp/gc.py perf/gpu_checks.py
timeout 440 bash perf/fullbatch_ab.sh short $OUT/ab perf/base/main_s62.py perf/base/stack.py > $OUT/ab.txt 2>&1
grep -v '^ok ' $OUT/checks_stack.txt | tail -8; tail -8 $OUT/ab.txt
