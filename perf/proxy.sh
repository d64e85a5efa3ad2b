#!/usr/bin/env bash
# The proxy benchmark of BENCH.md on one GPU: a cold run, a warm run (compile cache in place) and the
# full batch (8 micro-steps per step), then a summary table; it marks a run that did not complete (no step:N/N line,
# an error: or stopped: line, a non-zero exit) FAILED, with its exit status and last such line, and the script then
# exits 1.
# Usage (on the device, repo root, proxy shards in data/proxy/): bash perf/proxy.sh short|medium OUT_DIR [overrides]
#   short:  train_gpt.py, proxy-400 (48K tokens per step)     medium: train_gpt_medium.py, proxy-300 (64K)
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0;; esac  # the header above
set -uo pipefail
source "$(dirname "$0")/proxy_common.sh"
track=${1:?short or medium}; out=${2:?output folder}; shift 2
steps=$(proxy_steps "$track") || exit 2
unpack_proxy_data
proxy=(--num_iterations="$steps" --val_loss_every=100 --grad_accum_steps=1)
proxy_run "$(track_script "$track")" "$out" cold "${proxy[@]}" "$@"
proxy_run "$(track_script "$track")" "$out" warm "${proxy[@]}" "$@"
proxy_run "$(track_script "$track")" "$out" fullbatch "${FULL_BATCH[@]}" "$@"
proxy_summary "$out" cold warm fullbatch
