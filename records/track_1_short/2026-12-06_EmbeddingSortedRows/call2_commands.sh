# Session 69, call 2 (prepared in session 68; run only if call 1's embedding bench shows sorted_add_rows_kernel's gain):
# perf/embedding-sorted-rows' add_rows_checks, then the full batch A B B A, main (A) against the branch (B).
# Rebuild first: git show main:train_gpt.py > perf/base/main69.py; git show perf/embedding-sorted-rows:train_gpt.py >
# perf/base/sorted.py; git show perf/embedding-sorted-rows:perf/gpu_checks.py > perf/base/gpu_checks_sorted.py
# Expected (perf/NOTES.md, session 68): about -0.3 ms a micro-step, -2.4 ms a full step (H100)
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cp train_gpt.py /tmp/original.py; cp perf/gpu_checks.py /tmp/gpu_checks.py
cp perf/base/sorted.py train_gpt.py; cp perf/base/gpu_checks_sorted.py perf/gpu_checks.py
timeout 90 python -c "import sys; sys.path.insert(0, 'perf'); import gpu_checks as g; r = g.add_rows_checks(); print('add_rows checks', sum(r), 'of', len(r), 'ok')" > $OUT/add_rows_checks.txt 2>&1
tail -4 $OUT/add_rows_checks.txt
cp /tmp/original.py train_gpt.py; cp /tmp/gpu_checks.py perf/gpu_checks.py
timeout 470 bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/main69.py perf/base/sorted.py > "$OUT/ab.txt" 2>&1
tail -9 "$OUT/ab.txt" | cut -c1-300; rm -rf "$OUT/ab/logs"
