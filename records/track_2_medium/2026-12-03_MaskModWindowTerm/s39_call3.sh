#!/usr/bin/env bash
# Session 39, call 3: mask_mod without the window term in compiled runs (block lists carry it). Track 1: that
# version (s39) against the same script with the term (window_term), A B B A, 100 proxy steps; track 2: s39
# against main at f61f206 (the version before the term was added), once each.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT/r"
common="--seed=0 --num_iterations=100 --val_loss_every=50"
AB_GPUS=1 timeout 300 bash perf/ab.sh short "$OUT/r/t1" "perf/base/short_s39.py $common" \
    "perf/base/short_window_term.py $common" "perf/base/short_window_term.py $common" \
    "perf/base/short_s39.py $common" > "$OUT/r/t1_summary.txt" 2>&1
AB_GPUS=1 timeout 230 bash perf/ab.sh medium "$OUT/r/t2" "perf/base/medium_s39.py $common" \
    "perf/base/medium_f61.py $common" > "$OUT/r/t2_summary.txt" 2>&1
cat "$OUT/r/t1_summary.txt" "$OUT/r/t2_summary.txt"
tar czf "$OUT/job.tgz" -C "$OUT/r" . && rm -rf "$OUT/r"
