# Shared by perf/proxy.sh and perf/ab.sh: the proxy data settings, one logged run, the summary table.
PROXY_DATA=(--train_files='data/proxy/proxy_train_*.bin' --val_files='data/proxy/proxy_val_*.bin' --val_tokens=2097152)

proxy_steps() {  # the proxy schedule length of a track
    case $1 in short) echo 400 ;; medium) echo 300 ;; *) echo "error: track must be short or medium, not '$1'" >&2; return 2 ;; esac
}

track_script() {  # the script of a track
    case $1 in medium) echo train_gpt_medium.py ;; *) echo train_gpt.py ;; esac
}

proxy_run() {  # script, out dir, run name, overrides...: logs to OUT/logs/NAME.txt, console to OUT/NAME.out
    # (the start-up time comes from the script's own 'first timed step at' line: a pipe reader such as
    # mawk buffers its input, so timing the console lines from outside read them as late as the end of the run)
    local script=$1 out=$2 name=$3; shift 3
    mkdir -p "$out"
    PYTHONUNBUFFERED=1 python "$script" "${PROXY_DATA[@]}" --logs_dir="$out/logs" --run_id="$name" "$@" 2>&1 |
        tee "$out/$name.out"
}

proxy_summary() {  # out dir, run names...: one line per run
    local out=$1; shift
    echo "== summary: run | process start to first timed step | val lines (step, loss, step_avg) | peak memory"
    for name in "$@"; do
        local f="$out/$name.out"; [ -f "$f" ] || continue
        echo "$name | $(grep -m1 -o 'first timed step at .*' "$f") | $(grep 'val_loss' "$f" | awk '{printf "%s %s %s; ", $1, $2, $4}') | $(grep 'peak memory' "$f")"
    done
}
