#!/usr/bin/env bash
# Session 59, call 4: the signal part of call 3 again, with runs the proxy data holds (call 3 asked for 2000 steps)
set -uo pipefail
out=${1:?out}
sed -n '/^for signal in/,$p' perf/base/s59_call3.sh > "$out/signals.sh"
source perf/proxy_common.sh
unpack_proxy_data
common=("${PROXY_DATA[@]}" --val_loss_every=0 --grad_accum_steps=1 --logs_dir="$out/logs")
source "$out/signals.sh"
