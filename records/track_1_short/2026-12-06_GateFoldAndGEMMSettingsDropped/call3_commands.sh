# Session 72: track 2's full batch A B B A, main (A) against main with cuBLASLt's workspace 0 (B), as track 1 since
# session 71. perf/base/medium_ws0.py = three lines + medium72.py (git show main:train_gpt_medium.py)
# Expected (perf/NOTES.md, session 71's list, item 3): as track 1's, -1 to -3 ms a full step of ~1,600
set -u
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 580 bash perf/fullbatch_ab.sh medium "$OUT/ab" perf/base/medium72.py perf/base/medium_ws0.py > "$OUT/ab.txt" 2>&1
tail -9 "$OUT/ab.txt" | cut -c1-300; rm -rf "$OUT/ab/logs"
