# Session 48, call 2: main's standing on a fresh machine (perf/proxy.sh short: cold, warm, full batch), power logged.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=$1
mkdir -p $out
timeout 540 bash perf/power.sh $out standing bash perf/proxy.sh short $out > $out/standing.txt 2>&1
echo "standing rc $?"
tail -7 $out/standing.txt
