# The tiny model's cold compile on this CPU machine (2 cores): Python's switch interval set to $1 before train_gpt.py
# runs, fresh inductor and Triton caches. From the repo root with data/proxy/ filled:
#   bash cpu_cold_compile.sh INTERVAL_SECONDS RUN_NAME
interval=$1; name=$2
caches=$(mktemp -d)
TORCHINDUCTOR_CACHE_DIR=$caches/inductor TRITON_CACHE_DIR=$caches/triton timeout 900 python -c "
import runpy, sys
sys.setswitchinterval($interval)
sys.argv = ['train_gpt.py'] + sys.argv[1:]
runpy.run_path('train_gpt.py', run_name='__main__')" \
    --device=cpu --compile=true --model_dim=64 --num_heads=2 --head_dim=32 --train_seq_len=256 --val_seq_len=256 \
    --val_tokens=1024 --num_iterations=4 --val_loss_every=0 --warmup_steps=1 \
    --train_files='data/proxy/proxy_train_*.bin' --val_files='data/proxy/proxy_val_*.bin' \
    --logs_dir=/tmp/cold_compile_logs --run_id="$name" 2>&1 | grep -E "first timed|[Ee]rror" | head -3
rm -rf "$caches"
