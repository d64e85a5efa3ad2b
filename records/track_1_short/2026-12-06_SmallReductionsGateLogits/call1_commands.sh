# Session 70, call 1: the branches' GPU checks (perf/gate-logits holds perf/small-reductions: fp8_qkv_checks with
# largest_product, small_reductions_checks and gate_logits_checks, with their times against the ATen ops they
# replace), then the full batch A B C C B A: main (A), perf/small-reductions (B), perf/gate-logits (C).
# Rebuild first: git show main:train_gpt.py > perf/base/main70.py; git show perf/small-reductions:train_gpt.py >
# perf/base/red.py; git show perf/gate-logits:train_gpt.py > perf/base/gate.py; git show
# perf/gate-logits:perf/gpu_checks.py > perf/base/gpu_checks_gate.py
# Expected (perf/NOTES.md, session 70): B -1.2 to -1.9 ms a full step (H100), C a further -1.3 to -2.2 ms
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cp train_gpt.py /tmp/original.py; cp perf/gpu_checks.py /tmp/gpu_checks.py
cp perf/base/gate.py train_gpt.py; cp perf/base/gpu_checks_gate.py perf/gpu_checks.py
timeout 100 python -c "import sys; sys.path.insert(0, 'perf'); import gpu_checks as g; r = g.fp8_qkv_checks() + g.small_reductions_checks() + g.gate_logits_checks(); print('checks', sum(r), 'of', len(r), 'ok')" > $OUT/checks.txt 2>&1
grep -v "^ok " $OUT/checks.txt | cut -c1-250 | tail -14
cp /tmp/original.py train_gpt.py; cp /tmp/gpu_checks.py perf/gpu_checks.py
timeout 480 bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/main70.py perf/base/red.py perf/base/gate.py > "$OUT/ab.txt" 2>&1
tail -12 "$OUT/ab.txt" | cut -c1-300; rm -rf "$OUT/ab/logs"
