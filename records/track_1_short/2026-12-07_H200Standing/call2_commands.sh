# Session 82, call 1 trimmed to the budget left (H200 only; any other card prints its name and stops): main's full
# batch twice (cold, then warm), the H200's standing against the 500-ms bar: perf/NOTES.md, session 82.
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$name; flock: $(command -v flock || echo none)"
case "$name" in *H200*) ;; *) echo "not an H200: nothing run"; exit 0;; esac
source perf/proxy_common.sh; unpack_proxy_data
for run in 1 2; do
    timeout 200 bash -c 'source perf/proxy_common.sh; proxy_run train_gpt.py "$1" "main$2" "${FULL_BATCH[@]}"' _ \
        "$OUT/fb" $run > /dev/null 2>&1; echo "run $run rc $?"
    grep -E "^step:30/30|^startup:|^peak" "$OUT/fb/logs/main$run.txt" | cut -c1-200
done
rm -rf "$OUT/fb/logs"
