# Session 74, call 2: the kernel census of main (perf/base/main74.py = main da24bd1's train_gpt.py), two profiled
# full-batch steps, for the next lever (as run: perf/base/s74_call2.sh without its proxy-400 part)
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source perf/proxy_common.sh; unpack_proxy_data
cp train_gpt.py /tmp/original.py; cp perf/base/main74.py train_gpt.py
timeout 250 python perf/kernel_census.py short "${PROXY_DATA[@]}" --num_iterations=30 --val_loss_every=0 \
    --grad_accum_steps=8 --val_tokens=262144 --warmup_steps=10 --profile_steps=2 --logs_dir=$OUT/logs \
    --run_id=main74 > $OUT/census_main74.txt 2>&1; echo "census rc $?"
cp /tmp/original.py train_gpt.py
grep "^kernel" $OUT/logs/main74.txt > $OUT/main74_kernels.txt; wc -l < $OUT/main74_kernels.txt
grep -i "^GPU idle\|^idle gaps" $OUT/logs/main74.txt | head -5 | cut -c1-200
cp $OUT/logs/main74.txt $OUT/main74_log.txt; rm -rf $OUT/logs
