# Session 71, call 3: the kernel census of main (A) and of VERSION (perf/base/VERSION.py), with the idle-gap lines
# kept: what calls 1-2's winners moved on the GPU, and where a full step waits. Usage: bash s71_call3.sh VERSION
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
source perf/proxy_common.sh; unpack_proxy_data
cp train_gpt.py /tmp/original.py
for v in main71 "$1"; do
    cp perf/base/$v.py train_gpt.py
    timeout 250 python perf/kernel_census.py short "${PROXY_DATA[@]}" --num_iterations=30 --val_loss_every=0 \
        --grad_accum_steps=8 --val_tokens=262144 --warmup_steps=10 --profile_steps=2 --logs_dir=$OUT/logs \
        --run_id=$v > $OUT/census_$v.txt 2>&1; echo "$v census rc $?"
    grep "^kernel" $OUT/logs/$v.txt > $OUT/${v}_kernels.txt
    grep -i "^GPU idle\|^idle gaps\|^memset\|Memset" $OUT/logs/$v.txt | head -20 > $OUT/${v}_idle.txt
done
cp /tmp/original.py train_gpt.py
python perf/kernel_census.py --log=$OUT/logs/main71.txt --steps=2 --compare=$OUT/logs/$1.txt > $OUT/compare.txt 2>&1
grep -A45 "against" $OUT/compare.txt | cut -c1-200 | head -50; cat $OUT/*_idle.txt | cut -c1-200
rm -rf $OUT/logs
