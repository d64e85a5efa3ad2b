# Session 67, call 8: FP8MLP's float8 transposes by float8_transposed (x's in the forward, kept; grad_y's in the
# backward) against main (with the loss kernel's L2 hints): the MLP checks of perf/gpu_checks.py on the branch, then
# the full batch A B B A. Expected: -2.5 to -5 ms a full step (H100), peak +~450 MB
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cp train_gpt.py /tmp/original.py; cp perf/base/tr.py train_gpt.py
timeout 120 python -c "import sys; sys.path.insert(0, 'perf'); import gpu_checks as g; r = g.fp8_mlp_checks(); print('mlp checks', sum(r), 'of', len(r), 'ok')" > $OUT/mlp_checks.txt 2>&1
grep -v '^ok ' $OUT/mlp_checks.txt | tail -5
cp /tmp/original.py train_gpt.py
timeout 480 bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/main2.py perf/base/tr.py > "$OUT/ab.txt" 2>&1
tail -9 "$OUT/ab.txt"
