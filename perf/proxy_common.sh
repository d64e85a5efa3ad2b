# Shared by perf/proxy.sh, ab.sh, fullbatch_ab.sh, startup_ab.sh and multi_gpu.sh: the proxy data settings, one logged
# run, the summary table. Device calls carry perf/carry/ (ignored): the proxy shards xz-compressed (perf/pack.sh: 29 MB
# instead of 52 MB, so the 64 MiB carry limit leaves room). Each script's torch.compile artifact file (--compile_cache),
# which a run loads before compiling and rewrites after its warmup, lives in PROXY_ARTIFACTS (perf/carry unless set): at
# 74-89 MB for track 1 it no longer fits the carry, so it serves the later runs on the same machine (perf/ab.sh gives
# each GPU its own).
PROXY_DATA=(--train_files='data/proxy/proxy_train_*.bin' --val_files='data/proxy/proxy_val_*.bin' --val_tokens=2097152)
# BENCH.md's full batch: 8 micro-steps of the proxy's tokens a step (what one GPU of the 8-GPU run does), 30 steps
FULL_BATCH=(--num_iterations=30 --val_loss_every=0 --grad_accum_steps=8 --val_tokens=262144)
PROXY_CARRY=${PROXY_CARRY:-perf/carry}
PROXY_ARTIFACTS=${PROXY_ARTIFACTS:-$PROXY_CARRY}

unpack_proxy_data() {  # data/proxy/*.bin from $PROXY_CARRY/*.bin.xz where they are missing, each through a .part
    # file of this shell's own, renamed once whole: a truncated .xz left a short shard that later calls took as
    # unpacked, and two jobs side by side (perf/pair.sh) shared one .part file, one renaming it while the other still
    # wrote it. A .xz that does not unpack, or no shards to run on once done (the carry left out?), is one error line
    # naming the file and the fix, and the calling shell exits 2 (a traceback went by, then every run failed)
    local packed shard part
    mkdir -p data/proxy
    for packed in "$PROXY_CARRY"/*.bin.xz; do
        [ -e "$packed" ] || continue
        shard=data/proxy/$(basename "$packed" .xz); part=$shard.part$$
        [ -e "$shard" ] && continue
        if python - "$packed" "$shard" "$part" <<'EOF'
import lzma, os, sys
packed, shard, part = sys.argv[1:]
try:
    with lzma.open(packed) as source, open(part, "wb") as target:
        while chunk := source.read(1 << 24):
            target.write(chunk)
except (EOFError, lzma.LZMAError, OSError) as error:
    if isinstance(error, OSError) and error.filename != packed:  # the shard's side: its folder, or the disk
        sys.exit(f"error: cannot write {shard} ({error.strerror or error}); free space in data/proxy/ or make it "
                 "writable")
    sys.exit(f"error: {packed} does not unpack ({getattr(error, 'strerror', None) or error}); delete it, re-create "
             f"it with bash perf/pack.sh ../shared/proxy and carry {os.path.dirname(packed) or '.'} again")
EOF
        then
            mv -f "$part" "$shard"
        else
            rm -f "$part"
            exit 2
        fi
    done
    if ! compgen -G 'data/proxy/proxy_val_*.bin' > /dev/null || ! compgen -G 'data/proxy/proxy_train_*.bin' > /dev/null
    then
        echo "error: no proxy shards (proxy_val_*.bin and proxy_train_*.bin) in data/proxy/ or packed in" \
            "$PROXY_CARRY/; pack them (bash perf/pack.sh ../shared/proxy) and carry $PROXY_CARRY" >&2
        exit 2
    fi
}

compile_cache_of() {  # script: its torch.compile artifact file
    echo "$PROXY_ARTIFACTS/compile_cache_$(basename "$1" .py).bin"
}

proxy_steps() {  # the proxy schedule length of a track (not a track: track_script's error)
    track_script "$1" > /dev/null || return
    case $1 in short) echo 400 ;; medium) echo 300 ;; esac
}

track_script() {  # the script of a track; a name that is no track is one error line, status 2
    case $1 in
        short) echo train_gpt.py ;;
        medium) echo train_gpt_medium.py ;;
        *) echo "error: track must be short or medium, not '$1'" >&2; return 2 ;;
    esac
}

stage_versions() {  # track script, script files A, B (, C, ...): each copied into $versions (a new temporary folder)
    # as A.py, B.py, ..., so that run_version can put any at the track script's path (their logs then name the same
    # script), and their letters in version_names; the track script is restored, and the folder removed, when the
    # calling shell exits, which holds the track script's lock until then. Without two or more script files, or with
    # the track script staged by another job: one error line, and the calling shell exits
    local track_script=$1 letters=ABCDEFGH file i ok; shift
    ok=$(( $# >= 2 && $# <= ${#letters} ))
    for file in "$@"; do [ -f "$file" ] || ok=0; done
    [ "$ok" = 1 ] || { echo "error: give two to ${#letters} script files, A then B (then C, ...)" >&2; exit 2; }
    lock_track_script "$track_script"
    versions=$(mktemp -d); version_names=()
    for i in $(seq 0 $(($# - 1))); do
        version_names+=("${letters:$i:1}")
        cp "${@:$((i + 1)):1}" "$versions/${letters:$i:1}.py"
    done
    cp "$track_script" "$versions/original.py"
    trap 'cp "$versions/original.py" "'"$track_script"'"; rm -rf "$versions"' EXIT
}

lock_track_script() {  # track script: an exclusive lock on TRACK.lock (ignored; it names its holder) for the calling
    # shell's life, so that a second job staging versions over the same script (the two swapped each other's versions
    # and left the wrong file restored) stops with one error line naming the first; without flock, a warning line
    local lock=$1.lock
    if ! command -v flock > /dev/null; then
        echo "warning: flock (util-linux) is missing: nothing keeps another job from staging versions over $1" >&2
        return 0
    fi
    exec {track_lock}>> "$lock"
    flock -n "$track_lock" ||
        { echo "error: $1 is staged by another job ($(cat "$lock")); run this one after it" >&2; exit 2; }
    echo "$0, pid $$, since $(date '+%F %T')" > "$lock"
}

run_version() {  # track script, version (A, B, ...), out dir, run name, --compile_cache folder, overrides...: a
    # proxy run of that version from the track script's path, its console kept in OUT/NAME.out only
    local script=$1 version=$2 out=$3 name=$4 artifacts=$5; shift 5
    cp "$versions/$version.py" "$script"
    PROXY_ARTIFACTS="$artifacts" proxy_run "$script" "$out" "$name" "$@" > /dev/null
}

proxy_run() {  # script, out dir, run name, overrides...: logs to OUT/logs/NAME.txt, console to OUT/NAME.out
    # (the start-up time comes from the script's own 'first timed step at' line: a pipe reader such as
    # mawk buffers its input, so timing the console lines from outside read them as late as the end of the run);
    # python's exit status is its status, and where it is not 0 the console ends in 'proxy_run: exit N'
    local script=$1 out=$2 name=$3 status; shift 3
    mkdir -p "$out"
    PYTHONUNBUFFERED=1 python "$script" "${PROXY_DATA[@]}" --compile_cache="$(compile_cache_of "$script")" \
        --logs_dir="$out/logs" --run_id="$name" "$@" 2>&1 |
        tee "$out/$name.out"
    status=${PIPESTATUS[0]}
    [ "$status" = 0 ] || echo "proxy_run: exit $status" | tee -a "$out/$name.out"
    keep_kernel_sources "$out" "$name"
    return "$status"
}

run_failed() {  # console file: true where its run did not complete, printing why: ' (exit N)' where proxy_run
    # marked one, then ': ' and its last error: or stopped: line, else its last line. A run completed where its console
    # holds its last step's line (step:N/N), no error: or stopped: line and no exit status from proxy_run
    local console=$1 status end
    [ -f "$console" ] || { echo ": no console $console"; return 0; }
    status=$(sed -n 's/^proxy_run: exit //p' "$console")
    end=$(grep -E '^(error|stopped):' "$console" | tail -n 1)
    [ -z "$status$end" ] && grep -Eq '^step:([0-9]+)/\1 ' "$console" && return 1
    [ -n "$end" ] || end=$(grep -v '^proxy_run: exit ' "$console" | tail -n 1)
    echo "${status:+ (exit $status)}: ${end:-no step:N/N line}"
}

keep_kernel_sources() {  # out dir, run name: for a profiled run, the inductor source of each Triton kernel its log
    # lists among the longest ('kernel ... calls: NAME'), the smallest cached file defining it, as OUT/kernels/NAME_i.py
    local out=$1 name=$2 cache=${TORCHINDUCTOR_CACHE_DIR:-/tmp/torchinductor_$(whoami)} i=0 kernel source
    for kernel in $(grep -o 'calls: triton_[A-Za-z0-9_]*' "$out/logs/$name.txt" 2>/dev/null | cut -d' ' -f2); do
        i=$((i + 1))
        source=$(grep -rl --include='*.py' "def $kernel(" "$cache" 2>/dev/null | xargs -r ls -S | tail -n 1)
        [ -n "$source" ] || continue
        mkdir -p "$out/kernels"
        cp "$source" "$out/kernels/${name}_$i.py"
    done
}

proxy_summary() {  # out dir, run names...: one line per run, 'FAILED' and why for a run that did not complete (the
    # status then 1)
    local out=$1 status=0 name f start cache vals why; shift
    echo "== summary: run | process start to first timed step | val lines (step, loss, step_avg) | peak memory"
    for name in "$@"; do
        f="$out/$name.out"
        if why=$(run_failed "$f"); then echo "$name | FAILED$why"; status=1; continue; fi
        start=$(grep -m1 -o 'first timed step at .*' "$f")
        cache=$(grep -m1 -o '[0-9]* artifacts loaded' "$f" || echo 'no compile cache')
        vals=$(grep 'val_loss' "$f" | awk '{printf "%s %s %s; ", $1, $2, $4}')
        echo "$name | $start ($cache) | $vals | $(grep 'peak memory' "$f")"
    done
    return "$status"
}

versions_summary() {  # out dir, title, run name prefix, runs a version, reader (a function of a console file),
    # unit, decimals: each staged version's values (runs PREFIX A1, A2, ..., B1, ...) and their mean; a run that did not
    # complete is 'failed', with why on a line of its own, and leaves its version no mean (the status then 1)
    local out=$1 title=$2 prefix=$3 runs=$4 reader=$5 unit=$6 decimals=$7 version i mean values failed why notes
    local status=0
    echo "== $title"
    for version in "${version_names[@]}"; do
        values=(); failed=(); notes=()
        for i in $(seq "$runs"); do
            if why=$(run_failed "$out/$prefix$version$i.out"); then
                values+=(failed); failed+=("$version$i"); notes+=("  $prefix$version$i failed$why")
            else
                values+=("$("$reader" "$out/$prefix$version$i.out")")
            fi
        done
        if [ ${#failed[@]} -gt 0 ]; then
            echo "$version: ${values[*]} $unit, no mean (${failed[*]} failed)"
            printf '%s\n' "${notes[@]}"
            status=1
            continue
        fi
        mean=$(printf '%s\n' "${values[@]}" |
            awk -v places="$decimals" '{ sum += $1; n += ($1 != "") } END { if (n) printf "%." places "f", sum / n }')
        echo "$version: ${values[*]} $unit, mean ${mean:-?} $unit"
    done
    return "$status"
}
