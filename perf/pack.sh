#!/usr/bin/env bash
# Compress the proxy shards into perf/carry/ (ignored) for device calls: carry perf/carry, not data/proxy (52 MB of
# the 64 MiB limit), and the perf scripts unpack them into data/proxy/ there (unpack_proxy_data).
# Usage: bash perf/pack.sh [FOLDER]   (FOLDER: where the proxy's *.bin shards are; data/proxy by default)
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0;; esac  # the header above
set -euo pipefail
source=${1:-data/proxy}
shopt -s nullglob
shards=("$source"/*.bin)
if [ ${#shards[@]} -eq 0 ]; then
    echo "error: no proxy shards (*.bin) in $source/; pass their folder (bash perf/pack.sh ../shared/proxy)" \
        "or copy them there" >&2
    exit 2
fi
mkdir -p perf/carry
for shard in "${shards[@]}"; do  # each through a .part file renamed once whole (a failed xz left a partial .xz, kept),
    # this shell's own (two packs at once wrote one, one renaming it while the other still wrote it)
    packed=perf/carry/$(basename "$shard").xz
    [ -e "$packed" ] && continue
    xz -T0 -6 -k -c "$shard" > "$packed.part$$" || { rm -f "$packed.part$$"; exit 1; }
    mv -f "$packed.part$$" "$packed"
done
du -sh perf/carry
