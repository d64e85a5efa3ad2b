#!/usr/bin/env bash
# Several GPUs of one host: NPROC processes vs 1 process with 8 micro-steps (same global batch, seed and data)
# on a short proxy schedule at the real 8-GPU batch, for each track named; then the loss curves side by side.
# The 1-process references of the tracks run first, side by side on GPUs 0, 1, ...; then the NPROC runs,
# which profile two warmup steps (op table with the NCCL kernels in the log).
# Usage (on the device, repo root, proxy shards in data/proxy/):
#   bash perf/multi_gpu.sh NPROC OUT_DIR [short] [medium] [--overrides...]   (NPROC: 1, 2, 4 or 8, dividing the 8)
#   short: 55 steps of 8 x 48K tokens; medium: 40 steps of 8 x 64K (both fit the 23.9M proxy training tokens).
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0;; esac  # the header above
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # NVLink multicast stays off
source "$(dirname "$0")/proxy_common.sh"
nproc=${1:?number of processes}; out=${2:?output folder}; shift 2
case $nproc in
    1|2|4|8) ;;
    *) echo "error: NPROC must be 1, 2, 4 or 8 (dividing the 8 micro-steps), not '$nproc'" >&2; exit 2 ;;
esac
tracks=(); overrides=()
for arg in "$@"; do
    case $arg in short|medium) tracks+=("$arg") ;; --*) overrides+=("$arg") ;;
        *) echo "error: '$arg' is neither a track (short, medium) nor an --override" >&2; exit 2 ;; esac
done
[ ${#tracks[@]} -gt 0 ] || tracks=(short medium)
mkdir -p "$out/console"
unpack_proxy_data
schedule() {  # track: the schedule and logging settings of its runs, as the array settings
    local steps=55; [ "$1" = medium ] && steps=40
    settings=(--num_iterations=$steps --val_loss_every=10 --seed=0 --logs_dir="$out/logs"
              --compile_cache="$(compile_cache_of "$(track_script "$1")")")
}
for i in "${!tracks[@]}"; do
    track=${tracks[$i]}
    schedule "$track"
    CUDA_VISIBLE_DEVICES=$i PYTHONUNBUFFERED=1 python "$(track_script "$track")" "${PROXY_DATA[@]}" \
        "${settings[@]}" --grad_accum_steps=8 --run_id="${track}_1proc" "${overrides[@]}" \
        > "$out/console/${track}_1proc.out" 2>&1 &
done
wait
for track in "${tracks[@]}"; do
    schedule "$track"
    PYTHONUNBUFFERED=1 torchrun --standalone --nproc_per_node="$nproc" "$(track_script "$track")" "${PROXY_DATA[@]}" \
        "${settings[@]}" --profile_steps=2 --run_id="${track}_${nproc}proc" "${overrides[@]}" \
        > "$out/console/${track}_${nproc}proc.out" 2>&1
done
python - "$out/console" "$nproc" "${tracks[@]}" <<'PY'
import re, sys
folder, nproc, tracks = sys.argv[1], sys.argv[2], sys.argv[3:]
for track in tracks:
    paths = [f"{folder}/{track}_{nproc}proc.out", f"{folder}/{track}_1proc.out"]
    texts = [open(path).read() for path in paths]
    curves = [dict(re.findall(r"^step:(\d+)/\d+ val_loss:([\d.]+)", text, re.M)) for text in texts]
    print(f"== {track}: val loss with {nproc} processes vs 1 process with 8 micro-steps")
    for step in sorted(set(curves[0]) & set(curves[1]), key=int):
        a, b = float(curves[0][step]), float(curves[1][step])
        print(f"step {step:>4}: {a:.4f} {b:.4f} relative difference {abs(a - b) / b:.2e}")
    for path, text in zip(paths, texts):
        last = (re.findall(r"step_avg:[\d.]+ms", text) or ["no step lines"])[-1]
        ends = re.findall(r"^(?:error|stopped).*", text, re.M)
        print(path, "|", last, "|", *re.findall(r"peak memory.*", text), *ends)
PY
