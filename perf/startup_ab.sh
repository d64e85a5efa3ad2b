#!/usr/bin/env bash
# Start-ups of two versions of a track's script on one machine, for start-up changes, whose gain (a few seconds) is
# inside one machine's spread (warm starts: 1.5-3 s, perf/NOTES.md session 48). Each version is copied over the
# track's script in turn, so that their logs name the same script. The track's script is restored at the end;
# another job staging versions over it meanwhile stops with one error line, naming this one.
#   warm (default): a cold start of A and a first start of B (neither counted), then warm starts A B B A A B; both
#     versions share every inductor and Triton cache, and each keeps its own --compile_cache file, as a user rerunning
#     one command would.
#   --cold: cold starts A B B A, each with empty inductor and Triton caches and no --compile_cache file, as on a fresh
#     machine (each run's caches are deleted after it).
# A run counts only where it completed (its step:N/N line, no error: or stopped: line, exit 0): else it is 'failed',
# with its last such line, its version has no mean, and the script exits 1 after the summary (so does a failed
# uncounted start).
# Usage (on the device): bash perf/startup_ab.sh [--cold] short|medium OUT_DIR SCRIPT_A SCRIPT_B [overrides]
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0;; esac  # the header above
set -uo pipefail
source "$(dirname "$0")/proxy_common.sh"
cold=false
[ "${1:-}" = --cold ] && { cold=true; shift; }
track=${1:?short or medium}; out=${2:?output folder}; shift 2
script=$(track_script "$track") || exit 2
stage_versions "$script" "${1:-}" "${2:-}"; shift 2
unpack_proxy_data

short_run() {  # version (A or B), run name, --compile_cache folder, overrides...: 20 steps from the track's path
    run_version "$script" "$1" "$out" "$2" "$3" --num_iterations=20 --val_loss_every=0 --grad_accum_steps=1 "${@:4}"
}

start() {  # version, run name, overrides...: the machine's caches and the version's own artifact file
    short_run "$1" "$2" "$versions/artifacts_$1" "${@:3}"
}

start_cold() {  # version, run name, overrides...: empty caches of its own, deleted after the run
    local caches="$versions/cold/$2"
    mkdir -p "$caches/inductor" "$caches/triton" "$caches/artifacts"
    TORCHINDUCTOR_CACHE_DIR="$caches/inductor" TRITON_CACHE_DIR="$caches/triton" \
        short_run "$1" "$2" "$caches/artifacts" "${@:3}"
    rm -rf "$caches"
}

first_timed_step() {  # console file: the seconds of its start-up line
    grep -o 'first timed step at [0-9.]*s' "$1" | grep -o '[0-9.]*' | head -n 1
}

if $cold; then
    for name in A1 B1 B2 A2; do
        start_cold "${name:0:1}" "cold_$name" "$@"
    done
    versions_summary "$out" "cold starts, empty caches, A B B A (process start to the first timed step)" cold_ 2 \
        first_timed_step s 1
else
    start A cold_A "$@"
    start B first_B "$@"
    for name in A1 B1 B2 A2 A3 B3; do
        start "${name:0:1}" "warm_$name" "$@"
    done
    versions_summary "$out" "warm starts, A B B A A B (process start to the first timed step)" warm_ 3 \
        first_timed_step s 1
    status=$?
    for name in cold_A first_B; do  # not counted, but they fill the caches the warm starts load
        if why=$(run_failed "$out/$name.out"); then echo "$name (not counted) failed$why"; status=1; fi
    done
    exit "$status"
fi
