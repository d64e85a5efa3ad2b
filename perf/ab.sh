#!/usr/bin/env bash
# A/B of variants on the proxy benchmark in one device call; each quoted argument is one variant: overrides,
# optionally after a script path (e.g. a copy of the version before a change, kept in the ignored perf/base/).
# With several GPUs the variants run side by side, variant i on GPU i mod N (set AB_GPUS=1 to run them in turn);
# AB_GPU_IDS="1" (a list) runs them on those GPUs only, leaving the others to a job started next to it.
# Each GPU's runs share their own inductor and Triton caches and compile artifact files (under AB_CACHES,
# /tmp/ab_caches by default), so that two first runs side by side both compile from cold, as on separate machines,
# and a GPU's later runs start warm from its earlier ones (one shared artifact file would serve the first run to
# finish its warmup to the other). The summary marks a run that did not complete (no step:N/N line, an error: or
# stopped: line, a non-zero exit) FAILED, with its exit status and last such line, and the script then exits 1.
# Every variant is checked before anything runs: its script must exist, with no spaces in its path, and each other
# word be an --override.
# Usage: bash perf/ab.sh short|medium OUT_DIR "--seed=0" "perf/base/train_gpt.py --seed=0" ...
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0;; esac  # the header above
set -uo pipefail
source "$(dirname "$0")/proxy_common.sh"
track=${1:?short or medium}; out=${2:?output folder}; shift 2
steps=$(proxy_steps "$track") || exit 2
[ $# -ge 1 ] || { echo "error: give one or more variants, each one quoted argument (see --help)" >&2; exit 2; }
variants=("$@"); names=(); scripts=(); overrides=()
for i in "${!variants[@]}"; do  # all checked before anything runs
    read -r -a words <<< "${variants[$i]}"
    script=$(track_script "$track")
    if [[ ${words[0]:-} == *.py ]]; then script=${words[0]}; words=("${words[@]:1}"); fi
    for word in "${words[@]}"; do
        [[ $word == --* ]] || { echo "error: variant$i: '$word' is neither its script (first, a .py path without" \
            "spaces) nor an --override" >&2; exit 2; }
    done
    [ -f "$script" ] || { echo "error: variant$i: no script $script" >&2; exit 2; }
    names+=("variant$i"); scripts+=("$script"); overrides+=("${words[*]}")
done
unpack_proxy_data
gpus=${AB_GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}; [ "$gpus" -ge 1 ] || gpus=1
read -r -a gpu_ids <<< "${AB_GPU_IDS:-$(seq -s ' ' 0 $((gpus - 1)))}"; gpus=${#gpu_ids[@]}
for i in "${!variants[@]}"; do
    echo "variant$i (GPU ${gpu_ids[$((i % gpus))]}): ${variants[$i]}"
done
for slot in $(seq 0 $((gpus - 1))); do
    gpu=${gpu_ids[$slot]}
    (
        caches=${AB_CACHES:-/tmp/ab_caches}/gpu$gpu
        export TORCHINDUCTOR_CACHE_DIR=$caches/inductor TRITON_CACHE_DIR=$caches/triton PROXY_ARTIFACTS=$caches
        mkdir -p "$caches"
        for i in "${!variants[@]}"; do
            [ $((i % gpus)) -eq "$slot" ] || continue
            read -r -a words <<< "${overrides[$i]}"
            CUDA_VISIBLE_DEVICES=$gpu proxy_run "${scripts[$i]}" "$out" "${names[$i]}" --num_iterations="$steps" \
                --val_loss_every=100 --grad_accum_steps=1 "${words[@]}" > /dev/null
        done
    ) &
done
wait
proxy_summary "$out" "${names[@]}"
