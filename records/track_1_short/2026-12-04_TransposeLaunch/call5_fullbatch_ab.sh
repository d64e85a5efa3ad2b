# Session 45, call 3: the full batch (8 x 48K micro-steps, 30 steps) of the branch (train_gpt.py) and main
# (perf/base/main.py), A B B A on one GPU sharing one inductor cache, power logged by the caller.
source perf/proxy_common.sh
unpack_proxy_data
out=$1
for run in "train_gpt.py branch_a" "perf/base/main.py main_a" "perf/base/main.py main_b" "train_gpt.py branch_b"; do
    read -r script name <<< "$run"
    proxy_run "$script" "$out" "$name" --num_iterations=30 --val_loss_every=0 --grad_accum_steps=8 \
        --val_tokens=262144 > /dev/null
done
proxy_summary "$out" branch_a main_a main_b branch_b
