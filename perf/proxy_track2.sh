#!/usr/bin/env bash
# Track 2 on the proxy benchmark of BENCH.md, one GPU: proxy-300 cold, proxy-300 warm, full batch.
# Usage (on the device, from the repo root, proxy shards in data/proxy/): bash perf/proxy_track2.sh OUT_DIR [overrides]
# Add --profile_steps=3 to get torch.profiler's op table of three warmup steps in each log.
set -uo pipefail
out=${1:?output folder}; shift
proxy="--train_files=data/proxy/proxy_train_*.bin --val_files=data/proxy/proxy_val_*.bin --val_tokens=2097152"
run() {  # name, then overrides; notes the seconds from process start to the first timed step
    local name=$1; shift
    local t0; t0=$(date +%s.%N)
    PYTHONUNBUFFERED=1 python train_gpt_medium.py $proxy --logs_dir="$out/logs" --run_id="$name" "$@" 2>&1 |
        awk -v t0="$t0" '/^step:0\// && !seen { "date +%s.%N" | getline now; printf "start_to_first_step_s: %.1f\n", now - t0; seen = 1 } { print; fflush() }' |
        tee "$out/$name.out"
}
run proxy300_cold --num_iterations=300 --val_loss_every=100 --grad_accum_steps=1 "$@"
run proxy300_warm --num_iterations=300 --val_loss_every=100 --grad_accum_steps=1 "$@"
run fullbatch --num_iterations=30 --val_loss_every=0 --grad_accum_steps=8 --val_tokens=262144 "$@"
echo "== summary"
for name in proxy300_cold proxy300_warm fullbatch; do
    f="$out/$name.out"; [ -f "$f" ] || continue
    echo "$name | $(grep -m1 start_to_first_step_s "$f") | $(grep 'val_loss' "$f" | awk '{printf "%s %s %s %s; ", $1, $2, $4, $6}') | $(grep '^time:' "$f") | $(grep 'peak memory' "$f")"
done
