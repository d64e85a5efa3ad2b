# Session 82, call 1, on any card: main's full batch A B B A, A = train_gpt.py at 2b6db3c (cuBLASLt settings set
# after the checks' GPU probe), B = main with them set before (expected equal within ~1.5 ms on torch 2.11; on an
# H200 also the standing against the 500-ms bar, ~490-505 ms): perf/NOTES.md, session 82.
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$name; flock: $(command -v flock || echo none)"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 520 bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/main82a.py perf/base/main82b.py > "$OUT/ab.txt" 2>&1
echo "ab rc $?"; tail -12 "$OUT/ab.txt" | cut -c1-250
grep -h "^cublaslt\|^startup: first" "$OUT"/ab/logs/*.txt 2>/dev/null | sort | uniq -c | cut -c1-200
rm -rf "$OUT/ab/logs"
