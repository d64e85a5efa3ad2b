# Session 50 (nvidia-h200 machines, torch 2.11.0+cu130, Triton 3.6.0; carry perf/carry and perf/base), on this machine:
#   git show c0a86ad:train_gpt_medium.py > perf/base/medium_before.py   (before the short switch interval)
#   git show 648a1c5:train_gpt_medium.py > perf/base/medium_main.py     (main: the interval held until after warmup)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# Call 2 (call 1's machine, warm): warm starts, before as A, main as B
bash perf/startup_ab.sh medium $OUT/m perf/base/medium_before.py train_gpt_medium.py > $OUT/m/warm_ab.txt 2>&1
# Call 3 (the same machine): cold starts, each from empty caches of its own
bash perf/startup_ab.sh --cold medium $OUT/c perf/base/medium_before.py train_gpt_medium.py > $OUT/c/cold_ab.txt 2>&1
# Call 5 (a fresh machine, the session's last 338 s), checked out at perf/interval-until-last-build (d2b458a, since rebased on main as c05863f):
# libtriton.so and torch's inductor read once first, so that the first cold start does not pay the fresh file cache
python -c "import torch, triton, torch._inductor.compile_fx, os; open(os.path.join(os.path.dirname(triton.__file__), '_C', 'libtriton.so'), 'rb').read()"
timeout 320 bash perf/startup_ab.sh --cold medium $OUT/c perf/base/medium_main.py train_gpt_medium.py > $OUT/c/cold_ab.txt 2>&1
# Session 51, call 1 (a fresh machine), on this machine first:
#   git show perf/interval-until-last-build:train_gpt_medium.py > perf/base/medium_last.py   (c05863f)
nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader
timeout 585 bash perf/startup_ab.sh medium $OUT/m train_gpt_medium.py perf/base/medium_last.py > $OUT/m_ab.txt 2>&1
