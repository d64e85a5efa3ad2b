#!/usr/bin/env bash
# Session 59, call 3: the review's launch and signal fixes on the GPU (both tracks): a LOCAL_RANK past the GPUs,
# WORLD_SIZE without torchrun's variables, SIGTERM and Ctrl-C mid-run (plain and under run.sh), and 20 proxy steps
# of each track to the end.
set -uo pipefail
out=${1:?out}
source perf/proxy_common.sh
unpack_proxy_data
nvidia-smi --query-gpu=name --format=csv,noheader
common=("${PROXY_DATA[@]}" --val_loss_every=0 --grad_accum_steps=1 --logs_dir="$out/logs")
for script in train_gpt.py train_gpt_medium.py; do
    echo "== $script LOCAL_RANK=1 RANK=1 WORLD_SIZE=2 (one GPU):"
    LOCAL_RANK=1 RANK=1 WORLD_SIZE=2 python $script "${common[@]}" --check_only=true; echo "exit $?"
    echo "== $script WORLD_SIZE=2 alone:"
    WORLD_SIZE=2 python $script "${common[@]}" --num_iterations=5 --run_id=ws_$script; echo "exit $?"
done
for script in train_gpt.py train_gpt_medium.py; do
    python $script "${common[@]}" --num_iterations=20 --run_id=ok_$script > "$out/ok_$script.out" 2>&1
    echo "== $script 20 steps: exit $?; $(grep -h 'step:20/20 val_loss' "$out/logs/ok_$script.txt" | cut -c1-70)"
done
for signal in TERM INT; do
    setsid python train_gpt.py "${common[@]}" --num_iterations=400 --run_id=sig_$signal > "$out/sig_$signal.out" 2>&1 &
    pid=$!
    until grep -q '^step:5/400' "$out/sig_$signal.out" 2>/dev/null || ! kill -0 $pid 2>/dev/null; do sleep 1; done
    kill -$signal -- -$pid; wait $pid
    echo "== SIG$signal plain train_gpt.py: exit $?; stderr tail: $(tail -1 "$out/sig_$signal.out"); log: $(tail -1 "$out/logs/sig_$signal.txt")"
done
NPROC=1 setsid ./run.sh medium "${common[@]}" --num_iterations=300 --run_id=sig_run > "$out/sig_run.out" 2>&1 &
pid=$!
until grep -q '^step:5/300' "$out/sig_run.out" 2>/dev/null || ! kill -0 $pid 2>/dev/null; do sleep 1; done
kill -INT -- -$pid; wait $pid
echo "== SIGINT run.sh medium: exit $?; tracebacks $(grep -c Traceback "$out/sig_run.out"); log: $(tail -1 "$out/logs/sig_run.txt")"
grep -v '^step:\|^startup\|^warmup\|^log:\|^note\|^ok:' "$out/sig_run.out" | tail -5
