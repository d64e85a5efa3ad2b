# Session 69, call 6 (the last 412 s of device time): perf/gpu_checks.py on main (the merged sorted add_rows_kernel,
# and the float8_transposed byte checks, never run on a GPU), then the kernel census of main with what remains
set -u
start=$SECONDS
nvidia-smi --query-gpu=name --format=csv,noheader
source perf/proxy_common.sh; unpack_proxy_data
timeout 150 python perf/gpu_checks.py > "$OUT/gpu_checks_main.txt" 2>&1; echo "gpu_checks rc $?"
grep -v "^ok " "$OUT/gpu_checks_main.txt" | cut -c1-200 | tail -12; grep -c "^ok " "$OUT/gpu_checks_main.txt"
left=$((330 - SECONDS + start)); echo "census gets ${left}s"
timeout $left python perf/kernel_census.py short "${PROXY_DATA[@]}" --num_iterations=30 --val_loss_every=0 \
    --grad_accum_steps=8 --val_tokens=262144 --warmup_steps=10 --profile_steps=2 --logs_dir=$OUT/logs \
    --run_id=main69 > $OUT/census.txt 2>&1; echo "census rc $?"
tail -32 $OUT/census.txt | cut -c1-200; rm -rf $OUT/logs
