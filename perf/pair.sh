#!/usr/bin/env bash
# Two jobs side by side in one device call, job i on GPU i, each packed as soon as it ends: a device call returns at
# most 8 files and stops at its time limit, which in session 10 lost one job's logs to the file count and another's
# to the limit. Each job is a shell command; it sees JOB_OUT (its folder under OUT) and its GPU as GPU,
# CUDA_VISIBLE_DEVICES (a plain command's runs go there) and AB_GPU_IDS (perf/ab.sh sets each run's CUDA_VISIBLE_DEVICES
# from it, to the same GPU).
# When it ends, or when PAIR_LIMIT seconds have passed (default 540, under the 600-s limit of a call), each console
# file (*.out) with a traceback leaves *.out.err: its first traceback (300 lines of at most 300 characters) and its
# last 20 lines, where the error that ended it is (a 40-line cut lost one in session 19). The consoles are deleted,
# and the folder becomes OUT/jobI.tgz; the job's own output is OUT/jobI.txt. pair.sh exits 1 where a job did not
# exit 0. Usage:
#   bash perf/pair.sh OUT 'bash perf/ab.sh short $JOB_OUT "--seed=0"' 'python perf/muon_bench.py > $JOB_OUT/b.txt'
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0;; esac  # the header above
set -uo pipefail
out=${1:?output folder}; shift
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "error: give one or two job commands" >&2; exit 2; }
limit=${PAIR_LIMIT:-540}

pack() {  # job folder: tracebacks kept, consoles deleted, the folder as a .tgz next to it
    local folder=$1 console
    while IFS= read -r -d '' console; do  # NUL-separated: a path with a space is one
        grep -q Traceback "$console" || { rm -f "$console"; continue; }
        {  # the first traceback from its start (300 lines), then the console's end, where the error that ended it is
            awk '/Traceback/ && !seen {seen = 1} seen && n < 300 {print substr($0, 1, 300); n++}' "$console"
            echo "... the console's last 20 lines:"
            tail -n 20 "$console" | cut -c1-300
        } > "$console.err"
        rm -f "$console"
    done < <(find "$folder" -name '*.out' -print0)
    tar czf "$folder.tgz" -C "$(dirname "$folder")" "$(basename "$folder")" && rm -rf "$folder"
}

mkdir -p "$out"
pids=()
for i in $(seq 0 $(($# - 1))); do
    job=${*:$((i + 1)):1}
    (
        export JOB_OUT=$out/job$i AB_GPU_IDS=$i GPU=$i CUDA_VISIBLE_DEVICES=$i
        mkdir -p "$JOB_OUT"
        timeout -k 10 "$limit" bash -c "$job" > "$out/job$i.txt" 2>&1
        status=$?
        # 124: stopped by TERM; 137 at the limit: by the KILL that follows it 10 s later, the TERM ignored
        if [ $status -eq 124 ] || { [ $status -eq 137 ] && [ "$SECONDS" -ge "$limit" ]; }; then
            echo "pair.sh: stopped at PAIR_LIMIT=${limit}s" >> "$out/job$i.txt"
        fi
        pack "$JOB_OUT"
        echo "job$i: exit $status"
        exit $status
    ) &
    pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
exit $failed
