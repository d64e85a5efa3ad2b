# Session 72, call 6: the kernel census of main (perf/base/main72.py) after session 71's merge, two profiled
# full-batch steps, for the next list (item 5, the kernel count): the kernels by time and the idle gaps
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
source perf/proxy_common.sh; unpack_proxy_data
cp train_gpt.py /tmp/original.py; cp perf/base/main72.py train_gpt.py
timeout 250 python perf/kernel_census.py short "${PROXY_DATA[@]}" --num_iterations=30 --val_loss_every=0 \
    --grad_accum_steps=8 --val_tokens=262144 --warmup_steps=10 --profile_steps=2 --logs_dir=$OUT/logs \
    --run_id=main72 > $OUT/census_main72.txt 2>&1; echo "census rc $?"
cp /tmp/original.py train_gpt.py
grep "^kernel" $OUT/logs/main72.txt > $OUT/main72_kernels.txt; wc -l < $OUT/main72_kernels.txt
grep -i "^GPU idle\|^idle gaps\|^memset\|Memset\|^hand" $OUT/logs/main72.txt | head -20 | cut -c1-200
cp $OUT/logs/main72.txt $OUT/main72_log.txt; rm -rf $OUT/logs
