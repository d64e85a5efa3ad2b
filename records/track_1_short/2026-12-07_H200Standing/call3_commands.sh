# Session 82, call 2 (H200 only, right after call 1): proxy-400 at seeds 0 and 1, main's standing (bar 75 ms).
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$name; flock: $(command -v flock || echo none)"
case "$name" in *H200*) ;; *) echo "not an H200: nothing run"; exit 0;; esac
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 520 bash perf/ab.sh short "$OUT/proxy" "--seed=0" "--seed=1" > "$OUT/proxy.txt" 2>&1
echo "proxy rc $?"; tail -12 "$OUT/proxy.txt" | cut -c1-250; rm -rf "$OUT/proxy/logs"
