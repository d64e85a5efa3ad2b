# Session 67, call 9: the kernel census of the float8-transposes branch (on main with the loss kernel's hints), to
# compare with call 1's census of main before both
set -u
source perf/proxy_common.sh
unpack_proxy_data
nvidia-smi --query-gpu=name --format=csv,noheader
cp train_gpt.py /tmp/original.py; cp perf/base/tr.py train_gpt.py
mkdir -p $OUT/logs
timeout 250 python perf/kernel_census.py short "${PROXY_DATA[@]}" --num_iterations=30 --val_loss_every=0 \
    --grad_accum_steps=8 --val_tokens=262144 --warmup_steps=10 --profile_steps=2 --logs_dir=$OUT/logs \
    --run_id=census_tr > $OUT/census_tr.out 2>&1
echo "census rc $?"; grep 'step_avg' $OUT/census_tr.out | tail -1 | cut -c1-90
cp /tmp/original.py train_gpt.py
