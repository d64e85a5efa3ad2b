# Session 49, call 6 (a fresh nvidia-h200; carry perf/carry and perf/base), the branch as A so that the cold start is
# the branch's:  git show perf/switch-interval:train_gpt.py > perf/base/switch.py  (d61a32d)
#                git show main:train_gpt.py > perf/base/main.py                    (c0a86ad)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/r
timeout 335 bash perf/startup_ab.sh short $OUT/r perf/base/switch.py perf/base/main.py > $OUT/r/ab.txt 2>&1
# On this machine: python records/track_1_short/2026-12-04_BuildsSwitchInterval/cpu_convoy_probe.py 0.005 0.0005
# Session 50, call 1 (a fresh nvidia-h200), the owed cold starts, before (c0a86ad) as A, main 648a1c5 as B:
#   git show c0a86ad:train_gpt.py > perf/base/before.py
mkdir -p $OUT/r
timeout 570 bash perf/startup_ab.sh --cold short $OUT/r perf/base/before.py train_gpt.py > $OUT/r/cold_ab.txt 2>&1
# Session 50, call 4 (call 1's machine after track 2's calls 2-3; track 1's default caches empty), main's standing:
timeout 560 bash perf/proxy.sh short $OUT/r > $OUT/r/proxy.txt 2>&1
