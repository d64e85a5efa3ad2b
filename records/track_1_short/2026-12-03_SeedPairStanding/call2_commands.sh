#!/usr/bin/env bash
# Session 41, call 2: main after the session's CPU changes (both scripts' --logs_dir check, attention_inputs'
# backward without ctx.has_ve, run.sh's NPROC check and OMP default) on the GPU through run.sh (torchrun, 1 GPU):
# each track trains 60 proxy steps from empty caches; then the new one-line errors; the table last.
set -uo pipefail
source perf/proxy_common.sh
unpack_proxy_data
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p "$R/logs"
common=("${PROXY_DATA[@]}" --num_iterations=60 --val_loss_every=30 --grad_accum_steps=1 --logs_dir="$R/logs")
t0=$(date +%s)
timeout 250 ./run.sh "${common[@]}" --run_id=t1_runsh > "$R/t1_runsh.out" 2>&1; echo "t1 rc=$? $(( $(date +%s) - t0 ))s" >> "$R/table.txt"
t0=$(date +%s)
timeout 220 ./run.sh medium "${common[@]}" --run_id=t2_runsh > "$R/t2_runsh.out" 2>&1; echo "t2 rc=$? $(( $(date +%s) - t0 ))s" >> "$R/table.txt"
check() {  # name, command...: exit status and the output's line count and last line
    local name=$1; shift
    local t0; t0=$(date +%s%N)
    "$@" > "$R/$name.err" 2>&1; local rc=$?
    echo "$name rc=$rc lines=$(wc -l < "$R/$name.err") ms=$(( ($(date +%s%N) - t0) / 1000000 )) last: $(tail -n 1 "$R/$name.err")" >> "$R/table.txt"
}
check logs_in_proc ./run.sh "${common[@]}" --logs_dir=/proc/nope
check logs_below_file ./run.sh medium "${common[@]}" --logs_dir=README.md/logs
check nproc3 env NPROC=3 ./run.sh "${common[@]}"
for n in t1_runsh t2_runsh; do
    python perf/base/tool.py extract "$R/logs/$n.txt" -o "$R/$n.py" > /dev/null 2>&1
    script=train_gpt.py; [ $n = t2_runsh ] && script=train_gpt_medium.py
    cmp -s "$R/$n.py" "$script" && echo "$n source = $script" >> "$R/table.txt" || echo "$n source DIFFERS" >> "$R/table.txt"
    grep -E "^step:(30|60)/60 val|first timed step|peak memory|OMP_NUM" "$R/$n.out" | sed "s/^/$n: /" >> "$R/table.txt"
done
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader >> "$R/table.txt"
cat "$R/table.txt"
tar czf "$OUT/job.tgz" -C "$R" . && rm -rf "$R"
