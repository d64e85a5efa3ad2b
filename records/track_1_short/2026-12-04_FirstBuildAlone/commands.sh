# Session 49's five device calls (each `run` on an nvidia-h200; calls 1-2 and 3-4 each on one machine, one after the
# other; carry perf/carry and perf/base). Scripts compared, written to perf/base/ before the calls:
#   main.py          git show ee0cc56:train_gpt.py (calls 1) / git show c0a86ad:train_gpt.py (call 4)
#   first_alone.py   git show perf/first-build-alone:train_gpt.py (then 6600cde; merged as c0a86ad)
#   both.py          first_alone.py with perf/skip-held-cache's two commits cherry-picked on it
#   skip.py          git show perf/skip-held-cache:train_gpt.py (d02a773: c0a86ad with the same two commits)
#   medium_before.py git show ee0cc56:train_gpt_medium.py;  medium_first.py git show c0a86ad:train_gpt_medium.py
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/r
# call 1: the first build alone against main (track 1)
timeout 560 bash perf/startup_ab.sh short $OUT/r perf/base/main.py perf/base/first_alone.py > $OUT/r/ab.txt 2>&1
# call 2 (call 1's machine): the held-cache skip on top of the first build alone (track 1)
timeout 560 bash perf/startup_ab.sh short $OUT/r perf/base/first_alone.py perf/base/both.py > $OUT/r/ab.txt 2>&1
# call 3 (a fresh machine): main c0a86ad's standing, power logged
timeout 570 bash perf/power.sh $OUT/r std bash perf/proxy.sh short $OUT/r > $OUT/r/std.txt 2>&1
# call 4 (call 3's machine): the held-cache skip against main c0a86ad (track 1)
timeout 560 bash perf/startup_ab.sh short $OUT/r perf/base/main.py perf/base/skip.py > $OUT/r/ab.txt 2>&1
# call 5 (a fresh machine): the first build alone against the script before it (track 2)
timeout 560 bash perf/startup_ab.sh medium $OUT/r perf/base/medium_before.py perf/base/medium_first.py \
    > $OUT/r/ab.txt 2>&1
