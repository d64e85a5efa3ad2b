#!/usr/bin/env bash
# Session 60's device calls (records moved out of the checkout for each, carry perf/carry and perf/base; the
# multicast variables NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 set). Every call
# asked for an nvidia-h200; the scripts of calls 3, 6 and 8 run nothing unless nvidia-smi names an H200.
# perf/base/main_s60.py = main 9b21816's train_gpt.py; perf/base/relu_fwd.py = branch perf/relu-square-forward's.
# Call 1 (an H100), main 9b21816:
bash perf/proxy.sh short $OUT/p
# Call 2 (a fresh H100): the pass's probe (call7_relu_fwd_bench.py without its three added measurements, as
# perf/base/relu_fwd_bench.py)
timeout 280 python perf/base/relu_fwd_bench.py
# Call 3 (refused): the probe, call 4's check and call 5's A/B, on an H200 only
# Call 4 (an H100, which ran nothing of call 3's script; then on it, warm):
timeout 60 python perf/base/relu_fwd_check.py
# Call 6 (an H100, nothing run), then call 5 on it (warm), branch at d1ac12b:
timeout 500 bash perf/fullbatch_ab.sh short $OUT/ab perf/base/main_s60.py perf/base/relu_fwd.py
# Call 8 (an H100, nothing run), then call 7 on it (warm), the probe as call7_relu_fwd_bench.py:
timeout 90 python perf/base/relu_fwd_bench.py
# Call 9 (an H100, nothing run): s60_call8.sh, the probe and the A/B on an H200 only
# Call 10 (an H100, nothing run): the probe alone on an H200 only; calls 11-12 on it (warm):
timeout 150 python perf/base/transpose_probe.py   # call 11: a first version with an assert; call 12: as kept
