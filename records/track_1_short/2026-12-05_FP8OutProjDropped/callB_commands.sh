# Session 62, call B: the full batch A B B A, main 0c8f798's train_gpt.py (= dbb97a6's) against perf/fp8-out-proj
# (--fp8_out), then which inductor kernels took the gate's product and the row scales (kernel names and sources)
set -u
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 500 bash perf/fullbatch_ab.sh short $OUT/ab perf/base/main_s62.py perf/base/oproj.py > $OUT/ab.txt 2>&1
tail -12 $OUT/ab.txt
cache=${TORCHINDUCTOR_CACHE_DIR:-/tmp/torchinductor_$(whoami)}
find "$cache" -name '*.py' -size -300k | xargs -r grep -l 'def triton_.*sigmoid' 2>/dev/null | head -40 |
    xargs -r grep -ho 'def triton_[a-z]*_fused[a-zA-Z0-9_]*sigmoid[a-zA-Z0-9_]*' | sort | uniq -c | cut -c1-230
{ find "$cache" -name '*.py' -size -300k | xargs -r grep -l '@triton.jit'; } 2>/dev/null |
    timeout 30 tar czf $OUT/inductor_kernels.tgz -T - 2>/dev/null; ls -la $OUT/inductor_kernels.tgz
