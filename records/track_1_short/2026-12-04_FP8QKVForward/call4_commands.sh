# Session 44, call 4: main (b437435's train_gpt.py as perf/base/train_gpt_main.py) and both projections' FP8 forward
# (branch perf/fp8-attention-rowwise at 786b99f as perf/base/train_gpt_rowwise.py), each 20 steps from empty caches
# with the last 2 of 10 warmup steps profiled; carry perf/carry and perf/base.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source perf/proxy_common.sh; unpack_proxy_data; mkdir -p $OUT/r/logs
for v in main rowwise; do
    timeout 270 python perf/base/train_gpt_$v.py "${PROXY_DATA[@]}" --num_iterations=20 --val_loss_every=0 \
        --grad_accum_steps=1 --profile_steps=2 --logs_dir=$OUT/r/logs --run_id=prof_$v > $OUT/r/prof_$v.out 2>&1
done
