set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source perf/proxy_common.sh
r=$OUT/r; mkdir -p $r
unpack_proxy_data
nvidia-smi --query-gpu=name,serial,uuid,vbios_version,power.limit,clocks.max.sm --format=csv | tee $r/gpu.txt
bash perf/power.sh $r gemm python -c "
import torch, time
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16); b = torch.randn_like(a)
start, n = time.time(), 0
while time.time() - start < 10:
    for _ in range(20): a @ b
    torch.cuda.synchronize(); n += 20
print(f'gemm 8192^3 bf16: {n * 2 * 8192 ** 3 / (time.time() - start) / 1e12:.0f} TFLOP/s')" | tee $r/gemm.txt
run() {  # name, then proxy_run's arguments
    local name=$1; shift
    bash perf/power.sh $r $name bash -c "source perf/proxy_common.sh; proxy_run $* > /dev/null" | tee $r/$name.txt
}
run t2 train_gpt_medium.py $r/t2 cold --num_iterations=300 --val_loss_every=100 --grad_accum_steps=1
run t1 train_gpt.py $r/t1 cold --num_iterations=400 --val_loss_every=100 --grad_accum_steps=1
proxy_summary $r/t2 cold; proxy_summary $r/t1 cold
