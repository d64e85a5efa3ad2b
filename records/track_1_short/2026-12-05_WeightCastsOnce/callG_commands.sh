# Session 63, call G (an nvidia-h100-x1 call free to take either card; an H200 came): the full batch A B B A of main
# against perf/weight-casts-once-a-step at 474d1e3 (its scales fixed after call F), both as copies in perf/base/
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1; nvidia-smi --query-gpu=name --format=csv,noheader; timeout 540 bash perf/fullbatch_ab.sh short $OUT/ab perf/base/main_s62.py perf/base/casts_once.py > $OUT/ab.txt 2>&1; tail -9 $OUT/ab.txt; grep -h "Error" $OUT/ab/fullbatch_B1.out | head -3
