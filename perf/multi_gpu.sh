#!/usr/bin/env bash
# Several GPUs of one host: NPROC processes vs 1 process with NPROC times the micro-steps (same global batch,
# seed and data) on a short proxy schedule at the real 8-GPU batch, then the two loss curves side by side.
# Usage (on the device, repo root, proxy shards in data/proxy/): bash perf/multi_gpu.sh short|medium NPROC OUT_DIR [overrides]
#   short: 55 steps of 8 x 48K tokens; medium: 40 steps of 8 x 64K (both fit the 23.9M proxy training tokens).
# Add --profile_steps=2 (medium) to get the op table, NCCL kernels included, of two warmup steps in each log.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # NVLink multicast stays off
source "$(dirname "$0")/proxy_common.sh"
track=${1:?short or medium}; nproc=${2:?number of processes}; out=${3:?output folder}; shift 3
case $track in short) steps=55; script=train_gpt.py ;; medium) steps=40; script=train_gpt_medium.py ;;
    *) echo "error: track must be short or medium, not '$track'" >&2; exit 2 ;; esac
mkdir -p "$out"
schedule=(--num_iterations="$steps" --val_loss_every=10 --seed=0 --logs_dir="$out/logs")
PYTHONUNBUFFERED=1 torchrun --standalone --nproc_per_node="$nproc" "$script" "${PROXY_DATA[@]}" "${schedule[@]}" \
    --run_id="${track}_${nproc}proc" "$@" > "$out/${track}_${nproc}proc.out" 2>&1
PYTHONUNBUFFERED=1 python "$script" "${PROXY_DATA[@]}" "${schedule[@]}" --grad_accum_steps=8 \
    --run_id="${track}_1proc" "$@" > "$out/${track}_1proc.out" 2>&1
python - "$out/${track}_${nproc}proc.out" "$out/${track}_1proc.out" <<'PY'
import re, sys
curves = [dict(re.findall(r"^step:(\d+)/\d+ val_loss:([\d.]+)", open(path).read(), re.M)) for path in sys.argv[1:]]
print(f"== val loss: {sys.argv[1]} vs {sys.argv[2]}")
for step in sorted(set(curves[0]) & set(curves[1]), key=int):
    a, b = float(curves[0][step]), float(curves[1][step])
    print(f"step {step:>4}: {a:.4f} {b:.4f} relative difference {abs(a - b) / b:.2e}")
for path in sys.argv[1:]:
    text = open(path).read()
    print(path, "|", *re.findall(r"step_avg:[\d.]+ms", text)[-1:], "|", *re.findall(r"peak memory.*", text))
PY
