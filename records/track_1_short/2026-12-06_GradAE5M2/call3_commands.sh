# Session 73, call 3: the branch's FP8MLP GPU checks again, the e5m2 GEMM's check now against its own fp32 output
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
cp train_gpt.py /tmp/original.py; cp perf/gpu_checks.py /tmp/gpu_checks.py
cp perf/base/grada.py train_gpt.py; cp perf/base/gpu_checks_grada.py perf/gpu_checks.py
timeout 150 python -c "import sys; sys.path.insert(0, 'perf'); import gpu_checks as g; r = g.fp8_mlp_checks(); print('checks', sum(r), 'of', len(r), 'ok')" > $OUT/checks.txt 2>&1
grep -v "^ok " $OUT/checks.txt | cut -c1-250 | tail -8
cp /tmp/original.py train_gpt.py; cp /tmp/gpu_checks.py perf/gpu_checks.py
