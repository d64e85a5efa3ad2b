# Session 55's one device call that ran (an nvidia-h200, a fresh machine; carry perf/carry and perf/base). A (main) =
# 232e5b8's train_gpt.py, B = 7d19af0's (launcher turns, KernelBuilds' futures); before the call:
#   git show 232e5b8:train_gpt.py > perf/base/main.py; cp train_gpt.py perf/base/fix.py
#   cp records/track_1_short/2026-12-05_LauncherTurns/launcher_race.py perf/base/
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# the race with real Triton kernels: 4 threads, 16 kernels of 3-18 parameters, each launch a new specialisation
for pair in "1e-6 1" "0.0005 2"; do set -- $pair
  for mode in plain patched; do
    timeout 60 python perf/base/launcher_race.py /tmp/race_$2 $mode $1 10 $2 > $OUT/race/${mode}_$1.txt 2>&1
  done
done
# Triton's driver set up from an empty Triton cache (now on the main thread, when KernelBuilds starts)
TRITON_CACHE_DIR=$(mktemp -d) python -c \
    "import time, torch, triton; t = time.perf_counter(); triton.runtime.driver.active; print(time.perf_counter() - t)"
# cold starts A B B A, each from empty caches
timeout 546 bash perf/startup_ab.sh --cold short $OUT/cold perf/base/main.py perf/base/fix.py > $OUT/cold_ab.txt 2>&1
