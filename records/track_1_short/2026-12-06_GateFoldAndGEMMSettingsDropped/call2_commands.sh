# Session 72, call 2: cuBLAS's own workspace (CUBLAS_WORKSPACE_CONFIG, :KiB:count), where the memsets left after
# session 71's merge run (234 a step, in aten::mm's bf16 split-K GEMMs). Full batch A B C C B A: main (A), main with
# ":0:0" (B, no workspace), main with ":16:8" (C, 128 KiB). perf/base/cwc0.py and cwc16.py = two lines + main72.py
# Expected (perf/NOTES.md, session 71's list, item 2): -0.5 to +1.5 ms a full step; worse if cuBLAS loses split-K
set -u
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 560 bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/main72.py perf/base/cwc0.py perf/base/cwc16.py \
    > "$OUT/ab.txt" 2>&1
tail -12 "$OUT/ab.txt" | cut -c1-300; rm -rf "$OUT/ab/logs"
