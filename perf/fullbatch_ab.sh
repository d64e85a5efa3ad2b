#!/usr/bin/env bash
# The full batch of BENCH.md (8 micro-steps a step, 30 steps) of two or more versions of a track's script on one GPU,
# in turn A B B A (three: A B C C B A), for changes to the step whose gain (a few ms of ~550) is smaller than the
# spread between machines (2-4%) but not than one machine's (A B B A pairs within ~0.5 ms: perf/NOTES.md, sessions
# 45-46). Several versions against one A save A's second compile and its runs (session 68's call 1 ran three in 368 s
# from a fresh machine). Each version is copied over the track's script in turn, so that their logs name the same
# script (restored at the end; another job staging versions over it meanwhile stops with one error line, naming this
# one); all share the machine's inductor and Triton caches and each keeps its own --compile_cache file. Each
# version's first run compiles, which does not reach its step times (the step clock starts after the warmup). A run
# counts only where it completed (its step:N/N line, no error: or stopped: line, exit 0): else it is 'failed', with
# its last such line, its version has no mean, and the script exits 1 after the summary.
# Usage (on the device): bash perf/fullbatch_ab.sh short|medium OUT_DIR SCRIPT_A SCRIPT_B [SCRIPT_C ...] [overrides]
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0;; esac  # the header above
set -uo pipefail
source "$(dirname "$0")/proxy_common.sh"
track=${1:?short or medium}; out=${2:?output folder}; shift 2
script=$(track_script "$track") || exit 2
scripts=()
while [ $# -gt 0 ] && [[ $1 != --* ]]; do scripts+=("$1"); shift; done  # the script files, then the overrides
stage_versions "$script" "${scripts[@]}"
unpack_proxy_data

step_average() {  # console file: the mean step time of its last step line, in ms
    grep -o 'step_avg:[0-9.]*ms' "$1" | tail -n 1 | grep -o '[0-9.]*'
}

order=()  # A1 B1 ... then back: ... B2 A2
for version in "${version_names[@]}"; do order+=("${version}1"); done
for ((i = ${#version_names[@]} - 1; i >= 0; i--)); do order+=("${version_names[$i]}2"); done
for name in "${order[@]}"; do
    version=${name:0:1}
    run_version "$script" "$version" "$out" "fullbatch_$name" "$versions/artifacts_$version" "${FULL_BATCH[@]}" "$@"
done
proxy_summary "$out" "${order[@]/#/fullbatch_}"
# the same runs: its status (1 where one failed) is the script's
versions_summary "$out" "full batch, $(echo "${order[@]}" | tr -d '12') (mean step time)" fullbatch_ 2 step_average ms 2
