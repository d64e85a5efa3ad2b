# Track 1 with the builds ahead: a cold start (10 steps), then two warm starts from its caches and artifact file.
set -uo pipefail
source perf/proxy_common.sh
r=$OUT/r; mkdir -p $r
unpack_proxy_data
for name in cold warm1 warm2; do
    timeout 200 bash -c "source perf/proxy_common.sh; proxy_run train_gpt.py $r $name --num_iterations=10 \
        --val_loss_every=0 --grad_accum_steps=1 --val_tokens=262144 > /dev/null"
done
proxy_summary $r cold warm1 warm2
for name in cold warm1 warm2; do
    echo "$name: $(grep -h 'startup:' $r/logs/$name.txt | grep -v '{\|f"' | sed 's/startup: //' | tr '\n' ';')"
    grep -h "warmup parts\|cache lookups" $r/logs/$name.txt | grep -v "{" | cut -c1-220
done
tar czf $OUT/job.tgz -C $OUT/r . && rm -rf $OUT/r
