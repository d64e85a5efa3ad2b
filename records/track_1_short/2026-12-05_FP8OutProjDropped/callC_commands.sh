# Session 62, call C: where perf/fp8-out-proj's +9.4 ms a full batch step (call B) goes: the kernel census of the
# full batch (warmup steps 9-10 profiled) of the branch, then of main, each copied over train_gpt.py in turn
set -u
source perf/proxy_common.sh
unpack_proxy_data
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/logs
for version in oproj main_s62; do
    cp perf/base/$version.py train_gpt.py
    timeout 260 python perf/kernel_census.py short "${PROXY_DATA[@]}" --num_iterations=30 --val_loss_every=0 \
        --grad_accum_steps=8 --val_tokens=262144 --warmup_steps=10 --profile_steps=2 --logs_dir=$OUT/logs \
        --run_id=census_$version > $OUT/census_$version.out 2>&1
    echo "census $version rc $?"; grep 'step_avg' $OUT/census_$version.out | tail -1 | cut -c1-90
done
for version in oproj main_s62; do echo "== $version"; sed -n '/^listed kernels/,/^== by phase/p' $OUT/census_$version.out | cut -c1-200; done
