# Session 68, call 2: perf/embedding-grads-fp32's add_rows_checks (gpu_checks of the branch), then the full batch
# A B B A, main (09095a0) against the branch. Expected (written before): -2 to -5 ms a full step (H100), peak +<=618 MB
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cp train_gpt.py /tmp/original.py; cp perf/gpu_checks.py /tmp/gpu_checks.py
cp perf/base/emb.py train_gpt.py; cp perf/base/gpu_checks_emb.py perf/gpu_checks.py
timeout 90 python -c "import sys; sys.path.insert(0, 'perf'); import gpu_checks as g; r = g.add_rows_checks(); print('add_rows checks', sum(r), 'of', len(r), 'ok')" > $OUT/add_rows_checks.txt 2>&1
tail -4 $OUT/add_rows_checks.txt
cp /tmp/original.py train_gpt.py; cp /tmp/gpu_checks.py perf/gpu_checks.py
timeout 470 bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/m68.py perf/base/emb.py > "$OUT/ab.txt" 2>&1
tail -9 "$OUT/ab.txt" | cut -c1-300
