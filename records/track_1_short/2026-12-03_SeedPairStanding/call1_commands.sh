#!/usr/bin/env bash
# Session 41, call 1: main 44606ce (attention_inputs' backward without ctx.has_ve; ptxas_in_use) on the GPU: the
# kernels' GPU checks, then proxy-400 with validation every 25: main seed 1 (from empty caches; session 39's owed
# seed-1 run of the window-term change, against session 36's 4.0979), 711cdc6 seed 1, main seed 0; the full batch.
set -uo pipefail
source perf/proxy_common.sh
unpack_proxy_data
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p "$R"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*" >> "$R/table.txt"; }
common="--val_loss_every=25"
AB_GPUS=1 timeout 330 bash perf/ab.sh short "$R/t1" "train_gpt.py --seed=1 $common" \
    "perf/base/short_711.py --seed=1 $common" "train_gpt.py --seed=0 $common" > "$R/t1_summary.txt" 2>&1
stamp "proxy rc=$?"
full="--num_iterations=30 --val_loss_every=0 --grad_accum_steps=8 --val_tokens=262144"
AB_GPUS=1 timeout 90 bash perf/ab.sh short "$R/full" "train_gpt.py $full" > "$R/full_summary.txt" 2>&1
stamp "full batch rc=$?"
timeout 100 python perf/gpu_checks.py > "$R/checks.out" 2>&1
stamp "checks rc=$?: $(grep -c '^ok' "$R/checks.out") ok, $(grep -c '^BAD' "$R/checks.out") BAD"
{ cat "$R/t1_summary.txt" "$R/full_summary.txt"; grep "^ptxas" "$R/checks.out"; tail -n 3 "$R/checks.out"
  for f in "$R"/t1/*.out "$R"/full/*.out; do echo "$f: $(grep -o 'step:[0-9]*/[0-9]* .*step_avg:[0-9.]*ms' "$f" | tail -n 1)"; done
  grep -h "head gradient\|FP8 MLP backward\|ptxas" "$R"/t1/logs/*.txt | sort | uniq -c | head
  cat "$R/table.txt"; } > "$R/report.txt"
cat "$R/report.txt"
tar czf "$OUT/job.tgz" -C "$R" . && rm -rf "$R"
