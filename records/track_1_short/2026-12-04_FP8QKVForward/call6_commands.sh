# Session 44, call 6 (78 s of device time were left): the merged main (f2bfaf4) on a fresh machine, --check_only with
# the default 1,619 steps (stops at the data check: the probe for rowwise FP8 matmuls passed before it), then 20 steps.
source perf/proxy_common.sh; unpack_proxy_data; mkdir -p $OUT/r
python train_gpt.py "${PROXY_DATA[@]}" --check_only=true 2>&1 | tail -1
timeout 170 python train_gpt.py "${PROXY_DATA[@]}" --num_iterations=20 --val_loss_every=10 --grad_accum_steps=1 \
    --logs_dir=$OUT/r --run_id=merged > $OUT/r/merged.out 2>&1
