# Session 46, call 2: --fp8_attention_out alone (perf/fp8-out-grad-only) against main 3659b88 (perf/base/main.py),
# proxy-400 A B B A, then 20 steps of each with the last 2 of 10 warmup steps profiled (the kernels around the GEMM).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/r/logs
AB_GPUS=1 timeout 450 bash perf/power.sh $OUT/r ab bash perf/ab.sh short $OUT/r "--seed=0" \
    "perf/base/main.py --seed=0" "perf/base/main.py --seed=1" "--seed=1" > $OUT/r/ab.txt 2>&1; echo "ab rc $?"
source perf/proxy_common.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/ab_caches/gpu0/inductor TRITON_CACHE_DIR=/tmp/ab_caches/gpu0/triton
for v in train_gpt.py perf/base/main.py; do
    timeout 60 python $v "${PROXY_DATA[@]}" --num_iterations=20 --val_loss_every=0 --grad_accum_steps=1 \
        --profile_steps=2 --logs_dir=$OUT/r/logs --run_id=prof_$(basename $v .py) > /dev/null 2>&1; echo "prof rc $?"
done
tar czf $OUT/job.tgz -C $OUT r
tail -7 $OUT/r/ab.txt
for f in $OUT/r/logs/prof_*.txt; do echo $f; grep -E "^kernel .*(nvjet|triton_per|triton_red)" $f | head -14 | cut -c1-150; done
