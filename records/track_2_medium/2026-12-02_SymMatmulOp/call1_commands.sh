set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source perf/proxy_common.sh
r=$OUT/r; mkdir -p $r
unpack_proxy_data
nvidia-smi --query-gpu=name,serial,power.limit,clocks.max.sm --format=csv | tee $r/gpu.txt
timeout 270 bash perf/power.sh $r bench python perf/base/s33_sym_compiled.py 2>&1 | tee $r/bench.txt | grep -v Warning
run() {  # name, script, out
    local name=$1 script=$2 out=$3
    timeout 170 bash perf/power.sh $r $name bash -c "source perf/proxy_common.sh; proxy_run $script $out $name --num_iterations=30 --val_loss_every=0 --val_tokens=262144 --profile_steps=3 > /dev/null" | tee $r/$name.txt
}
run t2main train_gpt_medium.py $r/t2
run t2op perf/base/symop/train_gpt_medium.py $r/t2
if [ $SECONDS -lt 250 ]; then run t1main train_gpt.py $r/t1; run t1op perf/base/symop/train_gpt.py $r/t1; fi
echo "elapsed $SECONDS s"
for f in $r/t2/logs/t2main.txt $r/t2/logs/t2op.txt $r/t1/logs/t1main.txt $r/t1/logs/t1op.txt; do
    echo "== $f"; grep -m1 'first timed step' $f; grep 'step:30/' $f | head -1
    grep 'GPU idle' $f | tail -1 | cut -c1-200
    grep '^kernel' $f | grep -i 'sym_matmul\|Muon' | cut -c1-90
    grep 'Optimizer.step#Muon.step' $f | grep -v '^kernel' | tail -1 | cut -c1-60,150-200
done
tar czf $OUT/job.tgz -C $OUT/r . && rm -rf $OUT/r
