# Call A: the branch's FP8 MLP checks on the GPU (the two epilogue GEMMs' bytes against torch's casts), the backward's
# epilogue GEMM over launch configurations against the path it replaces (perf/mlp_grads_gemm_bench.py), then the full
# batch A B B A of main against the branch (~-15 ms expected on an H100, perf/NOTES.md session 65) in the rest of the
# 600 s. Run at the repository root after prepare.sh.
set -u
start=$SECONDS
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
(cd perf/base/grads_tree && timeout 150 python -c '
import sys; sys.path[:0] = ["perf", "."]
import gpu_checks
results = gpu_checks.fp8_mlp_checks()
print("checks all ok:", all(results), len(results))') > "$OUT/checks_grads.txt" 2>&1
grep -v '^ok ' "$OUT/checks_grads.txt" | tail -12
(cd perf/base/grads_tree && timeout 200 python perf/mlp_grads_gemm_bench.py) > "$OUT/grads_bench.txt" 2>&1
tail -5 "$OUT/grads_bench.txt"
left=$((585 - (SECONDS - start)))
echo "checks and bench took $((SECONDS - start)) s; full batch given $left s"
timeout $left bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/main.py perf/base/grads.py > "$OUT/ab.txt" 2>&1
tail -9 "$OUT/ab.txt"
