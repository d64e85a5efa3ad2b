#!/usr/bin/env bash
# Session 43, call 1 (queued as s42_call2): main's final scripts (configure_triton_builds) through run.sh on the GPU, 30 proxy steps a track.
set -uo pipefail
source perf/proxy_common.sh
unpack_proxy_data
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p "$R/logs"
common=("${PROXY_DATA[@]}" --num_iterations=30 --val_loss_every=30 --grad_accum_steps=1 --logs_dir="$R/logs")
t0=$(date +%s)
timeout 240 ./run.sh "${common[@]}" --run_id=t1 > "$R/t1.out" 2>&1; echo "t1 rc=$? $(( $(date +%s) - t0 ))s" >> "$R/table.txt"
t0=$(date +%s)
timeout 220 ./run.sh medium "${common[@]}" --run_id=t2 > "$R/t2.out" 2>&1; echo "t2 rc=$? $(( $(date +%s) - t0 ))s" >> "$R/table.txt"
for n in t1 t2; do
    python perf/base/tool.py extract "$R/logs/$n.txt" -o "$R/$n.py" > /dev/null 2>&1
    script=train_gpt.py; [ $n = t2 ] && script=train_gpt_medium.py
    cmp -s "$R/$n.py" "$script" && echo "$n source = $script" >> "$R/table.txt" || echo "$n source DIFFERS" >> "$R/table.txt"
    grep -E "^step:30/30 val|first timed step|peak memory|^note:" "$R/$n.out" | sed "s/^/$n: /" >> "$R/table.txt"
    echo "$n warnings: $(grep -ciE "UserWarning|FP_FUSION|fp_fusion" "$R/$n.out")" >> "$R/table.txt"
done
cat "$R/table.txt"
tar czf "$OUT/job.tgz" -C "$R" . && rm -rf "$R"
