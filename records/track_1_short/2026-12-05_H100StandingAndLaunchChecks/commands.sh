#!/usr/bin/env bash
# Session 59's device calls (records moved out of the checkout for each, carry perf/carry and perf/base; the
# multicast variables NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 set).
# Call 1 (asked for an nvidia-h200, given an H100), main 3577cb8:
bash perf/proxy.sh short $OUT/p
# Call 2 (same machine, warm): the warm A/B of session 55's launcher turns, A = 232e5b8's train_gpt.py
# (perf/base/main.py), B = main 3577cb8's
cp train_gpt.py perf/base/head.py
bash perf/startup_ab.sh short $OUT/warm perf/base/main.py perf/base/head.py
# Call 3 (a fresh H100), main f590f1f's scripts (the review's launch and signal fixes): call3_script.sh
bash perf/base/s59_call3.sh $OUT/c3
# Call 4 (same machine): the signal part again, with runs the proxy data holds: call4_script.sh
bash perf/base/s59_call4.sh $OUT/c4
