# Session 44, call 3: branch perf/fp8-attention-rowwise (786b99f: its train_gpt.py is the script in the
# both_projections logs) against main (b437435's train_gpt.py, copied to perf/base/train_gpt_main.py), proxy-400
# A B B A on one GPU, power logged; carry perf/carry (bash perf/pack.sh after copying ../shared/proxy/*.bin to
# data/proxy/) and perf/base.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/r
AB_GPUS=1 timeout 580 bash perf/power.sh $OUT/r ab bash perf/ab.sh short $OUT/r "perf/base/train_gpt_main.py --seed=0" \
    "--seed=0" "--seed=1" "perf/base/train_gpt_main.py --seed=1" > $OUT/r/ab_console.txt 2>&1
tar czf $OUT/job.tgz -C $OUT/r .
