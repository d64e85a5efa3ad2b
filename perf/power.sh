#!/usr/bin/env bash
# Power and clocks while a command runs: is the GPU at its power limit? nvidia-smi samples every PERIOD_MS (100 by
# default) into OUT/NAME_power.csv; at the end one line summarises the busy samples (utilisation >= 90%): median and
# 10th-90th percentile power draw and SM clock, and the share of them with the software power cap or a thermal or
# hardware slowdown active, of the command's first GPU. Clocks are only read, never set. Usage (on the device):
#   bash perf/power.sh OUT NAME command args...
#   e.g. bash perf/power.sh $OUT t2 bash perf/proxy.sh medium $OUT/t2
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0;; esac  # the header above
set -uo pipefail
out=${1:?output folder}; name=${2:?run name}; shift 2
[ $# -ge 1 ] || { echo "error: give the command to run" >&2; exit 2; }
mkdir -p "$out"
log="$out/${name}_power.csv"
fields=timestamp,utilization.gpu,power.draw,power.limit,clocks.sm,clocks.mem,temperature.gpu
fields+=,clocks_event_reasons.sw_power_cap,clocks_event_reasons.sw_thermal_slowdown,clocks_event_reasons.hw_slowdown
gpu=${CUDA_VISIBLE_DEVICES:-0}  # the command's first GPU
nvidia-smi -i "${gpu%%,*}" --query-gpu="$fields" --format=csv,noheader,nounits \
    -lms "${PERIOD_MS:-100}" > "$log" &
logger=$!
"$@"
status=$?
kill "$logger" 2>/dev/null
wait "$logger" 2>/dev/null
python "$(dirname "$0")/power_summary.py" "$log" "$name"
exit $status
