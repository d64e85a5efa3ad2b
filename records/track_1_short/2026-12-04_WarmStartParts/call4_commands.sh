# Session 48, call 4: --compile_cache skipped where the machine's caches already hold it (branch
# perf/skip-held-cache, perf/base/skip_held.py) against main, warm starts A B B A A B on one fresh machine. Each
# script is copied to train_gpt.py in turn (shared inductor and Triton caches); each keeps its own artifact file
# (PROXY_ARTIFACTS), as a user rerunning one command would. The branch starts cold (writes its file and marker),
# then main once to write its file; neither of those two counts.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source perf/proxy_common.sh
unpack_proxy_data
out=$1
cp train_gpt.py /tmp/main_train_gpt.py
run() {  # script, artifact folder, run name
    cp "$1" train_gpt.py
    PROXY_ARTIFACTS=$2 proxy_run train_gpt.py "$out" "$3" --num_iterations=20 --val_loss_every=0 \
        --grad_accum_steps=1 > /dev/null 2>&1
}
run perf/base/skip_held.py /tmp/arts_b cold_b
run /tmp/main_train_gpt.py /tmp/arts_a first_a
for r in "/tmp/main_train_gpt.py /tmp/arts_a a1" "perf/base/skip_held.py /tmp/arts_b b1" \
         "perf/base/skip_held.py /tmp/arts_b b2" "/tmp/main_train_gpt.py /tmp/arts_a a2" \
         "/tmp/main_train_gpt.py /tmp/arts_a a3" "perf/base/skip_held.py /tmp/arts_b b3"; do
    read -r script arts name <<< "$r"
    run "$script" "$arts" "warm_$name"
done
cp /tmp/main_train_gpt.py train_gpt.py
for name in cold_b first_a warm_a1 warm_b1 warm_b2 warm_a2 warm_a3 warm_b3; do
    f=$out/logs/$name.txt
    echo "$name | $(grep -o 'settings and data checked at [0-9.]*s' $f) | $(grep -o 'compile cache: [0-9]* artifacts loaded.* in [0-9.]*s\|already hold\|compile cache: [0-9.]* MiB written' $f | sed 's/from .* in/in/' | tr '\n' ';') | $(grep -o 'model and optimizers built at [0-9.]*s' $f) | $(grep -o 'warmup parts: step 1 [0-9.]*s' $f) | $(grep -o 'cache lookups: .*' $f | cut -c1-120) | $(grep -o 'first timed step at [0-9.]*s' $f) | $(grep -o 'step:20/20 val_loss:[0-9.]*' $f)"
done
