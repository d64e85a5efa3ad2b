# Session 37, call 1's runs (under perf/power.sh): track 1's full batch with the schedule's window, held at 1 block,
# held at 14 blocks, and with the schedule again. Usage: bash perf/base/s37_runs.sh OUT
set -uo pipefail
source perf/proxy_common.sh
out=${1:?out}
unpack_proxy_data
full=(--num_iterations=30 --val_loss_every=0 --grad_accum_steps=8 --val_tokens=262144)
proxy_run train_gpt.py "$out" schedule "${full[@]}"
proxy_run train_gpt.py "$out" window1 "${full[@]}" --window_start=128 --window_end=128
proxy_run train_gpt.py "$out" window14 "${full[@]}" --window_start=1792 --window_end=1792
proxy_run train_gpt.py "$out" schedule2 "${full[@]}"
proxy_summary "$out" schedule window1 window14 schedule2
