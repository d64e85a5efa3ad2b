#!/usr/bin/env bash
# A/B of track 1 variants on proxy-400 in one device call: each argument is one variant's overrides.
# Usage: bash perf/ab_track1.sh OUT_DIR "--head_lr_mult=1" "--head_lr_mult=27.5" ...
set -uo pipefail
out=${1:?output folder}; shift
proxy="--train_files=data/proxy/proxy_train_*.bin --val_files=data/proxy/proxy_val_*.bin --val_tokens=2097152"
i=0
for variant in "$@"; do
    i=$((i + 1))
    PYTHONUNBUFFERED=1 python train_gpt.py $proxy --num_iterations=400 --val_loss_every=100 --grad_accum_steps=1 \
        --logs_dir="$out/logs" --run_id="variant$i" $variant > "$out/variant$i.out" 2>&1
    tail -n 3 "$out/variant$i.out"
done
echo "== summary (val@100 200 300 400, step_avg, startup)"
i=0
for variant in "$@"; do
    i=$((i + 1)); f="$out/variant$i.out"
    echo "$variant | $(grep val_loss "$f" | awk '{printf "%s ", $2}') | $(grep 'step:400/400 val' "$f" | awk '{print $4}') | $(grep -o 'training starts at [0-9.]*s' "$f")"
done
