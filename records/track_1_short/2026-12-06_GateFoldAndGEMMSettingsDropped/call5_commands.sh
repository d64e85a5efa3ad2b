# Session 72, call 4: main's bf16 GEMMs (aten::mm) through cuBLASLt, which main runs without a workspace, instead of
# cuBLAS (its split-K memsets, 234 a step). Full batch A B B A: main (A), main + preferred_blas_library("cublaslt")
# after importing torch and cuBLASLt's workspace 1 KiB (B, perf/base/lt.py; with 0 torch raised "OOM trying to allocate workspace for cublaslt"). Expected (perf/NOTES.md, session 72): -1 to +2 ms a full step
set -u
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 400 bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/main72.py perf/base/lt.py > "$OUT/ab.txt" 2>&1
tail -9 "$OUT/ab.txt" | cut -c1-300; rm -rf "$OUT/ab/logs"
