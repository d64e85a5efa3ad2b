# Session 67, call 1: on an H200 the standing (perf/proxy.sh: cold, warm proxy-400, full batch) first, while the
# machine's caches are empty; on any GPU the kernel census of main's full batch (warmup steps 9-10 profiled)
set -u
source perf/proxy_common.sh
unpack_proxy_data
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
start=$SECONDS
if [[ $gpu == *H200* ]]; then
    timeout 400 bash perf/proxy.sh short "$OUT/standing" > "$OUT/standing.txt" 2>&1; echo "standing rc $?"
    tail -8 "$OUT/standing.txt"
fi
mkdir -p $OUT/logs
left=$((585 - (SECONDS - start)))
timeout $left python perf/kernel_census.py short "${PROXY_DATA[@]}" --num_iterations=30 --val_loss_every=0 \
    --grad_accum_steps=8 --val_tokens=262144 --warmup_steps=10 --profile_steps=2 --logs_dir=$OUT/logs \
    --run_id=census_main > $OUT/census_main.out 2>&1
echo "census rc $? at $((SECONDS - start)) s"; grep 'step_avg' $OUT/census_main.out | tail -1 | cut -c1-90
sed -n '/^listed kernels/,/^== by phase/p' $OUT/census_main.out | cut -c1-160 | head -40
