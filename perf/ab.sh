#!/usr/bin/env bash
# A/B of variants on the proxy benchmark in one device call; each quoted argument is one variant's overrides.
# Usage: bash perf/ab.sh short|medium OUT_DIR "--seed=0" "--seed=0 --muon_lr=0.04" ...
set -uo pipefail
source "$(dirname "$0")/proxy_common.sh"
track=${1:?short or medium}; out=${2:?output folder}; shift 2
steps=$(proxy_steps "$track") || exit 2
names=()
for variant in "$@"; do
    names+=("variant${#names[@]}")
    # shellcheck disable=SC2086  # a variant is a list of overrides
    proxy_run "$track" "$out" "${names[-1]}" --num_iterations="$steps" --val_loss_every=100 --grad_accum_steps=1 $variant > /dev/null
    echo "${names[-1]}: $variant"
done
proxy_summary "$out" "${names[@]}"
