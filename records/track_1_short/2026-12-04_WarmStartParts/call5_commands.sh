# Session 48, call 5: a cold start, then two warm starts of main with start-up timers (perf/base/s48_startup_probe.py).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source perf/proxy_common.sh
unpack_proxy_data
out=$1
mkdir -p $out/logs
for name in cold warm1 warm2; do
    PYTHONUNBUFFERED=1 python perf/base/s48_startup_probe.py "${PROXY_DATA[@]}" --compile_cache=/tmp/arts/c.bin \
        --logs_dir=$out/logs --run_id=$name --num_iterations=10 --val_loss_every=0 --grad_accum_steps=1 \
        > $out/$name.out 2>&1
    echo "== $name rc $?"
done
grep -h "^\[\|first timed\|settings and data checked\|model and optimizers built" $out/warm2.out | head -80
