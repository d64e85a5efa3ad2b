# Session 73, call 1: branch perf/grad-a-e5m2 in one call: its GPU checks (FP8MLP against fp64, the relu-square
# bytes with the e5m2 gradient, the e5m2 GEMM over the bound, the up projection; the start-up launches' host syncs),
# the pieces timed alone (perf/base/s73_grada_bench.py), then the full batch A B B A, main (A) against the branch (B).
# Rebuild first: git show main:train_gpt.py > perf/base/main73.py; git show perf/grad-a-e5m2:train_gpt.py >
# perf/base/grada.py; git show perf/grad-a-e5m2:perf/gpu_checks.py > perf/base/gpu_checks_grada.py
# Expected (perf/NOTES.md, session 73): relu-square pass ~341 -> ~284 us; full batch -3 to -5.5 ms
set -u
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cp train_gpt.py /tmp/original.py; cp perf/gpu_checks.py /tmp/gpu_checks.py
cp perf/base/grada.py train_gpt.py; cp perf/base/gpu_checks_grada.py perf/gpu_checks.py
timeout 150 python -c "import sys; sys.path.insert(0, 'perf'); import gpu_checks as g; r = g.fp8_mlp_checks() + g.host_sync_checks(); print('checks', sum(r), 'of', len(r), 'ok')" > $OUT/checks.txt 2>&1
grep -v "^ok " $OUT/checks.txt | cut -c1-250 | tail -8
timeout 100 python perf/base/s73_grada_bench.py > $OUT/bench.txt 2>&1; echo "bench rc $?"; cut -c1-200 $OUT/bench.txt | tail -5
cp /tmp/original.py train_gpt.py; cp /tmp/gpu_checks.py perf/gpu_checks.py
timeout 420 bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/main73.py perf/base/grada.py > "$OUT/ab.txt" 2>&1
tail -9 "$OUT/ab.txt" | cut -c1-300; rm -rf "$OUT/ab/logs"
