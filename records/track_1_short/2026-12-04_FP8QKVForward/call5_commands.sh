# Session 44, call 5: the QKV projection's FP8 forward alone (branch perf/fp8-attention-rowwise at 3edc4a6, as
# perf/base/train_gpt_rowwise.py) against main's train_gpt.py (e696347), proxy-400 A B B A on one GPU, power logged;
# carry perf/carry (bash perf/pack.sh ../shared/proxy) and perf/base. The branch's first run shares the GPU's
# inductor cache with main's run before it (ab.sh), so its start is not a cold one.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/r
AB_GPUS=1 timeout 530 bash perf/power.sh $OUT/r ab bash perf/ab.sh short $OUT/r "--seed=0" \
    "perf/base/train_gpt_rowwise.py --seed=0" "perf/base/train_gpt_rowwise.py --seed=1" "--seed=1" \
    > $OUT/r/ab_console.txt 2>&1
tar czf $OUT/job.tgz -C $OUT/r .
