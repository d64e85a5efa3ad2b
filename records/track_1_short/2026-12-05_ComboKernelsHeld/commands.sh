# Session 54's four device calls (each `run` on an nvidia-h200; call 1 on a fresh machine, calls 2-4 on one other
# machine, one after the other; carry perf/carry and perf/base). main = fe7db09. The variant, written before the
# calls (one line added before torch.compile in main()):
#   sed 's/^        model = torch.compile(raw_model, dynamic=False)$/        torch._inductor.config.combo_kernels = True\n&/' train_gpt.py > perf/base/combo.py
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# call 1: main (A) against combo kernels (B), the full batch A B B A
timeout 570 bash perf/fullbatch_ab.sh short $OUT/fb train_gpt.py perf/base/combo.py > $OUT/fb_console.txt 2>&1
# call 2 (a fresh machine): the same with the versions swapped, combo kernels as A
timeout 570 bash perf/fullbatch_ab.sh short $OUT/fb2 perf/base/combo.py train_gpt.py > $OUT/fb2_console.txt 2>&1
# call 3 (call 2's machine, caches warm): call 1's order again, 10 steps a run
timeout 420 bash perf/fullbatch_ab.sh short $OUT/fb3 train_gpt.py perf/base/combo.py --num_iterations=10 \
    > $OUT/fb3_console.txt 2>&1
# call 4 (call 2's machine): six warm starts of combo kernels, one compile-cache file between them
cp perf/base/combo.py train_gpt.py; source perf/proxy_common.sh; unpack_proxy_data
for i in 1 2 3 4 5 6; do
    timeout 90 python train_gpt.py "${PROXY_DATA[@]}" --num_iterations=3 --val_loss_every=0 --grad_accum_steps=8 \
        --val_tokens=262144 --compile_cache=$OUT/cc.bin --logs_dir=$OUT/logs > $OUT/w$i.out 2>&1
done
