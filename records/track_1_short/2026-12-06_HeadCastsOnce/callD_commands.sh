set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
start=$SECONDS
timeout 200 python perf/gpu_checks.py > "$OUT/gpu_checks_main.txt" 2>&1; echo "gpu_checks rc $?"
grep -v '^ok ' "$OUT/gpu_checks_main.txt" | tail -8
left=$((590 - (SECONDS - start)))
timeout $left bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/main.py perf/base/head.py > "$OUT/ab.txt" 2>&1
tail -9 "$OUT/ab.txt"
