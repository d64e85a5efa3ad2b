# Cold starts A B B A: main's copy (perf/base/main/) against this tree, each from empty inductor and Triton caches and
# no artifact file; then the census of each run's caches. Usage: bash perf/base/s31_cold_ab.sh SCRIPT STEPS
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source perf/proxy_common.sh
script=$1; steps=$2; r=$OUT/r; mkdir -p $r
unpack_proxy_data
nvidia-smi --query-gpu=name,serial,power.limit,clocks.max.sm --format=csv | tee $r/gpu.txt
names=()
for name in A1 B1 B2 A2; do
    path=$script; [[ $name == A* ]] && path=perf/base/main/$script
    caches=/tmp/cold_$name; rm -rf $caches; mkdir -p $caches
    ( export TORCHINDUCTOR_CACHE_DIR=$caches/inductor TRITON_CACHE_DIR=$caches/triton PROXY_ARTIFACTS=$caches
      timeout 170 bash perf/power.sh $r $name bash -c "source perf/proxy_common.sh; proxy_run $path $r/runs $name \
        --num_iterations=$steps --val_loss_every=0 --grad_accum_steps=1 --val_tokens=262144 > /dev/null" | tee $r/$name.txt
      python perf/compile_census.py $caches/inductor $caches/triton > $r/census_$name.txt 2>&1 )
    rm -rf $caches; names+=($name)
done
proxy_summary $r/runs "${names[@]}"
for name in "${names[@]}"; do
    echo "== $name: $(grep -h -o 'step 1 [^,]*' $r/runs/logs/$name.txt | head -1); $(grep -h 'kernel launches built' $r/runs/logs/$name.txt)"
    grep -h -E "attention_inputs|softcap_ce|transpose_kernel|float8_both|relu_square" $r/census_$name.txt | head -12 | cut -c1-160
done
tar czf $OUT/job.tgz -C $OUT/r . && rm -rf $OUT/r
