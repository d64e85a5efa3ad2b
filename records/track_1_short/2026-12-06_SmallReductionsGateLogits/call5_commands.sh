# Session 70, call 5: perf/gpu_checks.py of perf/gate-logits at its final launches (every check, both tracks)
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
cp train_gpt.py /tmp/original.py; cp perf/gpu_checks.py /tmp/gpu_checks.py
cp perf/base/gate2.py train_gpt.py; cp perf/base/gpu_checks_gate.py perf/gpu_checks.py
timeout 300 python perf/gpu_checks.py > $OUT/gpu_checks_gate.txt 2>&1; echo "gpu_checks rc $?"
grep -v "^ok " $OUT/gpu_checks_gate.txt | grep -v "^time" | cut -c1-200 | tail -8; grep -c "^ok " $OUT/gpu_checks_gate.txt
grep "lambdas' sums\|total scale\|gate logits" $OUT/gpu_checks_gate.txt | cut -c1-250
cp /tmp/original.py train_gpt.py; cp /tmp/gpu_checks.py perf/gpu_checks.py
