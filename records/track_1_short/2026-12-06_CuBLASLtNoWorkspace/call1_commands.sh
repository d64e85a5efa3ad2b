# Session 71, call 1: perf/eager-scales' GPU checks (eager_scaled_mm bit for bit, the head's and the QKV weight
# gradient's checks, which call the ops it changed), then the full batch A B C C B A: main (A), perf/eager-scales (B),
# main with cuBLASLt's workspace 0 and not unified (C). Rebuild: git show main:train_gpt.py > perf/base/main71.py;
# git show perf/eager-scales:train_gpt.py > perf/base/eager.py; git show perf/eager-scales:perf/gpu_checks.py >
# perf/base/gpu_checks_eager.py; perf/base/ws0.py = three lines setting the variables + main71.py
# Expected (perf/NOTES.md, session 71): B -0.3 to -0.8 ms, C -0.5 to +2 ms a full step (H100)
set -u
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cp train_gpt.py /tmp/original.py; cp perf/gpu_checks.py /tmp/gpu_checks.py
cp perf/base/eager.py train_gpt.py; cp perf/base/gpu_checks_eager.py perf/gpu_checks.py
timeout 100 python -c "import sys; sys.path.insert(0, 'perf'); import gpu_checks as g; r = g.eager_scaled_mm_checks() + g.fused_head_ce_checks() + g.fp8_qkv_checks(); print('checks', sum(r), 'of', len(r), 'ok')" > $OUT/checks.txt 2>&1
grep -v "^ok " $OUT/checks.txt | cut -c1-250 | tail -14
cp /tmp/original.py train_gpt.py; cp /tmp/gpu_checks.py perf/gpu_checks.py
timeout 470 bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/main71.py perf/base/eager.py perf/base/ws0.py > "$OUT/ab.txt" 2>&1
tail -12 "$OUT/ab.txt" | cut -c1-300; rm -rf "$OUT/ab/logs"
