# Session 67, call 5: the hinted loss kernel at more launches
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
cp train_gpt.py /tmp/original.py; cp perf/base/ce.py train_gpt.py
timeout 200 python perf/base/ce_sweep.py 2>&1 | tail -12
cp /tmp/original.py train_gpt.py
