# Session 70, call 2: the kernel census of main (A) and of perf/gate-logits (C, with the reductions), and C's
# kernels against A's (perf/kernel_census.py --compare): what each lever moved on the GPU, where call 1's timing of
# the gate op alone (330.5 us against the linear layer's 64.0, forward + backward) disagreed with the full batch
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
source perf/proxy_common.sh; unpack_proxy_data
cp train_gpt.py /tmp/original.py
for v in main70 gate; do
    cp perf/base/$v.py train_gpt.py
    timeout 220 python perf/kernel_census.py short "${PROXY_DATA[@]}" --num_iterations=30 --val_loss_every=0 \
        --grad_accum_steps=8 --val_tokens=262144 --warmup_steps=10 --profile_steps=2 --logs_dir=$OUT/logs \
        --run_id=$v > $OUT/census_$v.txt 2>&1; echo "$v census rc $?"
done
cp /tmp/original.py train_gpt.py
python perf/kernel_census.py --log=$OUT/logs/main70.txt --steps=2 --compare=$OUT/logs/gate.txt > $OUT/compare.txt 2>&1
grep -A45 "against" $OUT/compare.txt | cut -c1-200 | head -50
grep "^kernel" $OUT/logs/main70.txt > $OUT/main_kernels.txt; grep "^kernel" $OUT/logs/gate.txt > $OUT/gate_kernels.txt
rm -rf $OUT/logs
