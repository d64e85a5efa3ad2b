# Session 46, call 5: the full batch (8 x 48K micro-steps, 30 steps) A B B A, TRANSPOSE_LAUNCH (128, 8) (train_gpt.py,
# perf/head-launches) against main 3659b88 (perf/base/main.py), power logged. perf/base/fullbatch_ab.sh is session
# 45's ../2026-12-04_FP8QKVGradInput/call3_fullbatch_ab.sh, unchanged.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/r
timeout 540 bash perf/power.sh $OUT/r fb bash perf/base/fullbatch_ab.sh $OUT/r > $OUT/r/fb_console.txt 2>&1; echo "rc $?"
tar czf $OUT/job.tgz -C $OUT r
tail -8 $OUT/r/fb_console.txt
