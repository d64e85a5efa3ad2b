#!/usr/bin/env bash
# Session 39, call 1: track 2 after this session's changes (mask_mod holds the window rule, orthogonalize norms
# before its fp16 cast) against main at f61f206, A B B A, 100 proxy steps each, one GPU in turn.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT/r"
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > "$OUT/r/gpu.txt"
AB_GPUS=1 timeout 540 bash perf/ab.sh medium "$OUT/r/t2" "--seed=0 --num_iterations=100 --val_loss_every=50" \
    "perf/base/medium_f61.py --seed=0 --num_iterations=100 --val_loss_every=50" \
    "perf/base/medium_f61.py --seed=0 --num_iterations=100 --val_loss_every=50" \
    "--seed=0 --num_iterations=100 --val_loss_every=50" > "$OUT/r/t2_summary.txt" 2>&1
echo "rc=$?" >> "$OUT/r/t2_summary.txt"
for f in "$OUT"/r/t2/logs/*.txt; do echo "== $f"; grep -E "^step:(50|100)/100 val|first timed step|peak|error|stopped" "$f"; done \
    > "$OUT/r/table.txt" 2>&1
cat "$OUT/r/t2_summary.txt" "$OUT/r/table.txt"
tar czf "$OUT/job.tgz" -C "$OUT/r" . && rm -rf "$OUT/r"
