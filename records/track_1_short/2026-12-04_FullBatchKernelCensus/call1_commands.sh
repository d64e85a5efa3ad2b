# Session 48, call 1: the host-sync check's first GPU run, then the kernel census of track 1's full batch
# (8 x 48K micro-steps) at the profile window of warmup steps 9-10 and of steps 29-30 of a 30-step schedule.
source perf/proxy_common.sh
unpack_proxy_data
out=$1
mkdir -p "$out/logs"
timeout 200 python perf/gpu_checks.py > "$out/gpu_checks.txt" 2>&1; echo "gpu_checks rc $?"
tail -4 "$out/gpu_checks.txt"; grep -i "synchron" "$out/gpu_checks.txt"
for run in "10 early" "29 late"; do
    read -r warmup name <<< "$run"
    timeout 240 python perf/kernel_census.py short "${PROXY_DATA[@]}" --compile_cache="$(compile_cache_of train_gpt.py)" \
        --num_iterations=30 --val_loss_every=0 --grad_accum_steps=8 --val_tokens=262144 --warmup_steps=$warmup \
        --profile_steps=2 --logs_dir="$out/logs" --run_id=census_$name > "$out/census_$name.out" 2>&1
    echo "census $name rc $?"; grep -m1 "first timed step\|step_avg" "$out/census_$name.out" | tail -1
done
for name in early late; do echo "== $name"; sed -n '/^listed kernels/,$p' "$out/census_$name.out"; done
