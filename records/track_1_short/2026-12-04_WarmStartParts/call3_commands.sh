# Session 48, call 3: the compile cache loaded before the kernel builds' threads start (branch
# perf/cache-before-builds, perf/base/cache_first.py) against main, warm starts A B B A A B on one fresh machine
# after one cold start of main (which writes the artifact file); each script copied to train_gpt.py in turn, so
# both share every cache and the log names the same script.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source perf/proxy_common.sh
unpack_proxy_data
out=$1
cp train_gpt.py /tmp/main_train_gpt.py
run() {  # script, run name
    cp "$1" train_gpt.py
    proxy_run train_gpt.py "$out" "$2" --num_iterations=20 --val_loss_every=0 --grad_accum_steps=1 > /dev/null 2>&1
}
run /tmp/main_train_gpt.py cold
for r in "/tmp/main_train_gpt.py a1" "perf/base/cache_first.py b1" "perf/base/cache_first.py b2" \
         "/tmp/main_train_gpt.py a2" "/tmp/main_train_gpt.py a3" "perf/base/cache_first.py b3"; do
    read -r script name <<< "$r"
    run "$script" "warm_$name"
done
cp /tmp/main_train_gpt.py train_gpt.py
for name in cold warm_a1 warm_b1 warm_b2 warm_a2 warm_a3 warm_b3; do
    f=$out/logs/$name.txt
    echo "$name | $(grep -o 'settings and data checked at [0-9.]*s' $f) | $(grep -o 'loaded from .* in [0-9.]*s' $f | sed 's/.* in /load /') | $(grep -o 'model and optimizers built at [0-9.]*s' $f) | $(grep -o 'worker threads in [0-9.]*s' $f) | $(grep -o 'warmup parts: step 1 [0-9.]*s' $f) | $(grep -o 'first timed step at [0-9.]*s' $f) | $(grep -o 'step:20/20 val_loss:[0-9.]*' $f)"
done
