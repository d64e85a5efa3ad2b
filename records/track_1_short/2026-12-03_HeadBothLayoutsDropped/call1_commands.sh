#!/usr/bin/env bash
# Session 40, call 1: the head's loss kernel writing the float8 gradient in both layouts (branch perf/ce-both-ways,
# the working tree's train_gpt.py) against main 022ff0e (perf/base/short_main.py): the op's GPU checks, the fused
# head op timed in turn (main, branch at four launches), the full batch of each, then proxy-400 A B B A with
# validation every 25 (main's pair is also session 39's owed proxy-400 of the window-term change); the table last.
set -uo pipefail
source perf/proxy_common.sh
unpack_proxy_data
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p "$R"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*" >> "$R/table.txt"; }
timeout 90 python -c "
import sys; sys.path.insert(0, 'perf')
import gpu_checks
results = gpu_checks.fused_head_ce_checks()
print('head checks:', 'all ok' if all(results) else 'FAILED')" > "$R/checks.out" 2>&1
stamp "checks rc=$?: $(grep -c '^ok' "$R/checks.out") ok, $(grep -c '^BAD' "$R/checks.out") BAD"
timeout 60 python perf/head_bench.py perf/base/short_main.py >> "$R/head_bench.out" 2>&1
timeout 90 python perf/head_bench.py --launch=32,128,8 --launch=16,256,8 --launch=64,64,8 --launch=16,128,4 \
    >> "$R/head_bench.out" 2>&1
timeout 60 python perf/head_bench.py perf/base/short_main.py >> "$R/head_bench.out" 2>&1
stamp "head bench done"
full="--num_iterations=30 --val_loss_every=0 --grad_accum_steps=8 --val_tokens=262144"
AB_GPUS=1 timeout 200 bash perf/ab.sh short "$R/full" "perf/base/short_main.py $full" "train_gpt.py $full" \
    > "$R/full_summary.txt" 2>&1
stamp "full batch rc=$?"
common="--val_loss_every=25"
AB_GPUS=1 timeout 300 bash perf/ab.sh short "$R/t1" "perf/base/short_main.py --seed=0 $common" \
    "train_gpt.py --seed=0 $common" "train_gpt.py --seed=1 $common" "perf/base/short_main.py --seed=1 $common" \
    > "$R/t1_summary.txt" 2>&1
stamp "proxy A B B A rc=$?"
{ cat "$R/checks.out"; cat "$R/head_bench.out"; cat "$R/t1_summary.txt"
  for f in "$R"/t1/*.out "$R"/full/*.out; do echo "$f: $(grep -o 'step:[0-9]*/[0-9]* .*step_avg:[0-9.]*ms' "$f" | tail -n 1)"; done
  grep -h "head gradient\|FP8 MLP backward" "$R"/t1/logs/*.txt | sort | uniq -c
  cat "$R/table.txt"; } > "$R/report.txt"
cat "$R/report.txt"
tar czf "$OUT/job.tgz" -C "$R" . && rm -rf "$R"
