# Session 32: main's cold start (10 steps) from empty caches, then the census of its own Triton binaries: 9 if the
# start-up's 16-row launch of the fp32 head weight (892b6f5) builds the same specialisation as training's.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source perf/proxy_common.sh
r=$OUT/r; mkdir -p $r
unpack_proxy_data
caches=/tmp/cold; rm -rf $caches; mkdir -p $caches
export TORCHINDUCTOR_CACHE_DIR=$caches/inductor TRITON_CACHE_DIR=$caches/triton PROXY_ARTIFACTS=$caches
timeout 200 bash -c "source perf/proxy_common.sh; proxy_run train_gpt.py $r cold --num_iterations=10 \
    --val_loss_every=0 --grad_accum_steps=1 --val_tokens=262144 > /dev/null"
python perf/compile_census.py $caches/inductor $caches/triton > $r/census.txt 2>&1
proxy_summary $r cold
grep -h "startup:\|warmup parts" $r/logs/cold.txt | grep -v "{\|f\"" | cut -c1-200
grep -v "^triton_\|^ *triton_" $r/census.txt | head -40 | cut -c1-160
tar czf $OUT/job.tgz -C $OUT/r . && rm -rf $OUT/r
