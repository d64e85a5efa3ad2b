# Session 72, call 1: branch perf/gate-fold in one call: its GPU checks (gated_projection in both layouts against the
# product + GEMM and fp64; the start-up launches' host syncs), perf/gate_out_bench.py on the branch's kernels, then the
# full batch A B B A, main (A) against the branch (B). Rebuild first: git show main:train_gpt.py > perf/base/main72.py;
# git show perf/gate-fold:train_gpt.py > perf/base/fold.py; git show perf/gate-fold:perf/gpu_checks.py >
# perf/base/gpu_checks_fold.py; git show perf/gate-fold:perf/gate_out_bench.py > perf/base/gate_out_bench_fold.py
# Expected (perf/NOTES.md, session 71's list, item 4): forward kernel 105-125 us against ~145, weight gradient 90-110
# against ~134; the full batch up to -3 ms
set -u
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cp train_gpt.py /tmp/original.py; cp perf/gpu_checks.py /tmp/gpu_checks.py; cp perf/gate_out_bench.py /tmp/bench.py
cp perf/base/fold.py train_gpt.py; cp perf/base/gpu_checks_fold.py perf/gpu_checks.py
cp perf/base/gate_out_bench_fold.py perf/gate_out_bench.py
timeout 150 python -c "import sys; sys.path.insert(0, 'perf'); import gpu_checks as g; r = g.gated_projection_checks() + g.host_sync_checks(); print('checks', sum(r), 'of', len(r), 'ok')" > $OUT/checks.txt 2>&1
grep -v "^ok " $OUT/checks.txt | cut -c1-250 | tail -8
timeout 200 python perf/gate_out_bench.py > $OUT/gate_out_bench.txt 2>&1; echo "bench rc $?"; cut -c1-200 $OUT/gate_out_bench.txt
cp /tmp/original.py train_gpt.py; cp /tmp/gpu_checks.py perf/gpu_checks.py; cp /tmp/bench.py perf/gate_out_bench.py
timeout 420 bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/main72.py perf/base/fold.py > "$OUT/ab.txt" 2>&1
tail -9 "$OUT/ab.txt" | cut -c1-300; rm -rf "$OUT/ab/logs"
