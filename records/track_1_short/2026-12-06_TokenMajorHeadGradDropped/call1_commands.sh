# Session 69, call 1 (prepared in session 68): the two benches for the next levers, on main. ~2-3 min.
# (1) perf/embedding_bench.py: add_rows_kernel by launch, sorted_add_rows_kernel with its sort, the hand-over
# (2) perf/head_weight_grad_bench.py: training's transposed copy + cuBLAS against the token-major Triton GEMM
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
source perf/proxy_common.sh; unpack_proxy_data
timeout 200 python perf/embedding_bench.py > $OUT/embedding_bench.txt 2>&1; echo "embedding rc $?"
timeout 300 python perf/head_weight_grad_bench.py > $OUT/head_weight_grad_bench.txt 2>&1; echo "head grad rc $?"
cut -c1-200 $OUT/embedding_bench.txt | tail -20; cut -c1-200 $OUT/head_weight_grad_bench.txt | tail -12
