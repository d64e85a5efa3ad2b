# Session 69, call 3 (prepared in session 68): two one-line inductor settings from session 67's reading of inductor's
# code, full batch A B C C B A against main: B = combo_kernels (the 30 single-program scalar sums a micro-step and the
# amax second stages fused horizontally: ~0.7 ms expected), C = triton.multi_kernel = 1 (persistent reductions where
# they win, e.g. block 0's norm backward with its 302 MB of fp32 temporaries: ~0.8 ms expected). Also watch the cold
# start (both can add compile time). Rebuild perf/base/main69.py from main first.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
sed 's/^import torch$/import torch\nimport torch._inductor.config\ntorch._inductor.config.combo_kernels = True/' \
    perf/base/main69.py > perf/base/combo69.py
sed 's/^import torch$/import torch\nimport torch._inductor.config\ntorch._inductor.config.triton.multi_kernel = 1/' \
    perf/base/main69.py > perf/base/multi69.py
grep -c "_inductor.config\." perf/base/combo69.py perf/base/multi69.py
timeout 585 bash perf/fullbatch_ab.sh short "$OUT/ab" perf/base/main69.py perf/base/combo69.py perf/base/multi69.py \
    > "$OUT/ab.txt" 2>&1
tail -12 "$OUT/ab.txt" | cut -c1-300; rm -rf "$OUT/ab/logs"
