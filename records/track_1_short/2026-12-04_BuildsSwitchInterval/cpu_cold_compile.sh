# The tiny model's cold compile on this CPU machine (2 cores): Python's switch interval set to $1 before train_gpt.py
# runs, fresh inductor and Triton caches. Run from the repo root with data/proxy/ filled: bash cpu_cold_compile.sh 0.005 NAME
i=$1; name=$2
d=$(mktemp -d)
TORCHINDUCTOR_CACHE_DIR=$d/ind TRITON_CACHE_DIR=$d/tri timeout 900 python -c "
import sys, runpy; sys.setswitchinterval($i); sys.argv = ['train_gpt.py'] + sys.argv[1:]
runpy.run_path('train_gpt.py', run_name='__main__')" --device=cpu --compile=true --model_dim=64 --num_heads=2 --head_dim=32 \
  --train_seq_len=256 --val_seq_len=256 --val_tokens=1024 --num_iterations=4 --val_loss_every=0 --warmup_steps=1 \
  --train_files='data/proxy/proxy_train_*.bin' --val_files='data/proxy/proxy_val_*.bin' --logs_dir=/tmp/coldlogs --run_id=$name 2>&1 | grep -E "first timed|error|Error" | head -3
rm -rf $d
