# Session 69, call 5 (call 4's machine, warm): the full batch A B B A again with the order turned round, the branch
# perf/embedding-sorted-rows (d88298d) as A and main (ed1cdc3) as B: call 2's -0.83 ms was inside main's spread (0.83)
nvidia-smi --query-gpu=name --format=csv,noheader; export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1; timeout 420 bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/sorted.py perf/base/main69.py > "$OUT/ab.txt" 2>&1; tail -9 "$OUT/ab.txt" | cut -c1-300; rm -rf "$OUT/ab/logs"
