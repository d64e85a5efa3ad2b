set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source perf/proxy_common.sh
r=$OUT/r; mkdir -p $r
unpack_proxy_data
nvidia-smi --query-gpu=name,serial,power.limit,clocks.max.sm --format=csv | tee $r/gpu.txt
run() {  # name, then proxy_run's arguments
    local name=$1; shift
    timeout 300 bash perf/power.sh $r $name bash -c "source perf/proxy_common.sh; proxy_run $* > /dev/null" | tee $r/$name.txt
}
run t1full train_gpt.py $r/t1 full --num_iterations=30 --val_loss_every=0 --grad_accum_steps=8 --val_tokens=262144 --profile_steps=2
run t1one train_gpt.py $r/t1 one --num_iterations=30 --val_loss_every=0 --grad_accum_steps=1 --val_tokens=262144 --profile_steps=3
run t2one train_gpt_medium.py $r/t2 one --num_iterations=30 --val_loss_every=0 --grad_accum_steps=1 --val_tokens=262144 --profile_steps=3
proxy_summary $r/t1 full one; proxy_summary $r/t2 one
for f in $r/t1/logs/full.txt $r/t1/logs/one.txt $r/t2/logs/one.txt; do echo "== $f"; grep -A3 -i "GPU idle\|idle gaps" $f | head -12; done
tar czf $OUT/job.tgz -C $OUT/r . && rm -rf $OUT/r
