set -u
g=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$g"
case "$g" in *H200*) ;; *) echo "not an H200: nothing run"; exit 0;; esac
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 60 python perf/base/relu_fwd_bench.py > $OUT/probe.txt 2>&1; cat $OUT/probe.txt
timeout 60 python perf/base/transpose_probe.py > $OUT/transpose_probe.txt 2>&1; cat $OUT/transpose_probe.txt
timeout 420 bash perf/fullbatch_ab.sh short $OUT/ab perf/base/main_s62.py perf/base/relu_fwd.py > $OUT/ab.txt 2>&1
tail -8 $OUT/ab.txt
cache=${TORCHINDUCTOR_CACHE_DIR:-/tmp/torchinductor_$(whoami)}
{ find "$cache" -name '*.py' -size -300k | xargs -r grep -l '@triton.jit'; find "$cache" -name '*.best_config'; } 2>/dev/null |
    timeout 30 tar czf $OUT/inductor_kernels.tgz -T - 2>/dev/null
