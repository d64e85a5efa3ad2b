# Session 71, call 2: the full batch A B B A, main (A) against main under CUDA graphs (B: perf/base/cg.py, the model
# compiled with mode="reduce-overhead", .grad allocated first and zeroed in place, a step mark before each
# micro-step). Expected (perf/NOTES.md, session 71): -2 to -5 ms a full step (H100), val@30 as main's.
set -u
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 540 bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/main71.py perf/base/cg.py > "$OUT/ab.txt" 2>&1
tail -9 "$OUT/ab.txt" | cut -c1-300
grep -h -i "cudagraph\|error\|skipping" "$OUT/ab/fullbatch_B1.out" | sort | uniq -c | head -12 | cut -c1-300
grep -h "^step:30\|peak" "$OUT"/ab/fullbatch_*.out | cut -c1-200
mkdir -p "$OUT/b1"; tail -c 20000 "$OUT/ab/fullbatch_B1.out" > "$OUT/b1/tail.txt"; rm -rf "$OUT/ab/logs"
