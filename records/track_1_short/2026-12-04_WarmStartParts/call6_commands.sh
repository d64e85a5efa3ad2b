# Session 48, call 6: the kernel builds' first launch alone (branch perf/first-build-alone, perf/base/first_alone.py)
# against main: a cold start of the branch, then one warm start of each, with start-up timers
# (perf/base/s48_startup_probe.py); each script copied to train_gpt.py in turn (shared caches and artifact file).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source perf/proxy_common.sh
unpack_proxy_data
out=$1
mkdir -p $out/logs
cp train_gpt.py /tmp/main_train_gpt.py
for r in "perf/base/first_alone.py cold_b" "perf/base/first_alone.py warm_b" "/tmp/main_train_gpt.py warm_a"; do
    read -r script name <<< "$r"
    cp "$script" train_gpt.py
    PYTHONUNBUFFERED=1 python perf/base/s48_startup_probe.py "${PROXY_DATA[@]}" --compile_cache=/tmp/arts/c.bin \
        --logs_dir=$out/logs --run_id=$name --num_iterations=10 --val_loss_every=0 --grad_accum_steps=1 \
        > $out/$name.out 2>&1
    echo "== $name rc $? $(grep -o 'settings and data checked at [0-9.]*s' $out/$name.out) $(grep -o 'first timed step at [0-9.]*s' $out/$name.out)"
done
cp /tmp/main_train_gpt.py train_gpt.py
