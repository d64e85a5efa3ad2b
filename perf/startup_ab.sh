#!/usr/bin/env bash
# Warm starts of two versions of a track's script on one machine, A B B A A B, after a cold start of A and a first
# start of B (neither counted): for start-up changes, whose gain (a few seconds) is inside one machine's spread of
# warm starts (1.5-3 s, perf/NOTES.md session 48). Each version is copied over the track's script in turn, so that
# both share every inductor and Triton cache and their logs name the same script; each keeps its own --compile_cache
# file, as a user rerunning one command would. The track's script is restored at the end.
# Usage (on the device): bash perf/startup_ab.sh short|medium OUT_DIR SCRIPT_A SCRIPT_B [overrides]
set -uo pipefail
source "$(dirname "$0")/proxy_common.sh"
track=${1:?short or medium}; out=${2:?output folder}; shift 2
[ $# -ge 2 ] && [ -f "$1" ] && [ -f "$2" ] || { echo "error: give two script files, A then B" >&2; exit 2; }
script=$(track_script "$track") || exit 2
versions=$(mktemp -d)
cp "$1" "$versions/A.py"; cp "$2" "$versions/B.py"; cp "$script" "$versions/original.py"; shift 2
trap 'cp "$versions/original.py" "$script"; rm -rf "$versions"' EXIT
unpack_proxy_data

start() {  # version (A or B), run name, overrides...
    local version=$1 name=$2; shift 2
    cp "$versions/$version.py" "$script"
    PROXY_ARTIFACTS="$versions/artifacts_$version" proxy_run "$script" "$out" "$name" --num_iterations=20 \
        --val_loss_every=0 --grad_accum_steps=1 "$@" > /dev/null
}

first_timed_step() {  # run name: the seconds of its log's start-up line
    grep -o 'first timed step at [0-9.]*s' "$out/$1.out" | grep -o '[0-9.]*' | head -n 1
}

start A cold_A "$@"
start B first_B "$@"
for name in A1 B1 B2 A2 A3 B3; do
    start "${name:0:1}" "warm_$name" "$@"
done
echo "== warm starts (process start to the first timed step), A B B A A B"
for version in A B; do
    seconds=()
    for i in 1 2 3; do seconds+=("$(first_timed_step "warm_$version$i")"); done
    mean=$(printf '%s\n' "${seconds[@]}" | awk '{ sum += $1; n += ($1 != "") } END { if (n) printf "%.1f", sum / n }')
    echo "$version: ${seconds[*]} s, mean ${mean:-?} s"
done
