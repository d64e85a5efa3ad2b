"""Launch each MLP GEMM variant once after a warm-up, inside an NVTX range 'profiled_NAME' (for ncu --nvtx).
Ran as perf/base/ncu_mlp.py (copy it there): it imports perf/gluon_mlp_bench.py from the folder above its own."""
import sys
from pathlib import Path
import torch
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import gluon_mlp_bench as g
import train_gpt_medium as medium

medium.use_torch_ptxas()
gen = torch.Generator("cuda").manual_seed(0)
rows, dim, hidden = 65536, 1024, 4096
x, grad_y = (torch.randn(rows, dim, device="cuda", generator=gen).bfloat16() for _ in range(2))
fc_w = (torch.randn(hidden, dim, device="cuda", generator=gen) * dim ** -0.5).bfloat16()
proj_w = (torch.randn(dim, hidden, device="cuda", generator=gen) * hidden ** -0.5).bfloat16()
r = medium.reciprocal_rms(x)
a = medium.relu_square_gemm(x, fc_w, r)
fwd, bwd = (x, fc_w, r), (grad_y, proj_w, r, a)
variants = {
    "cublas_fwd": lambda: x @ fc_w.T, "cublas_bwd": lambda: grad_y @ proj_w,
    "script_fwd": lambda: medium.relu_square_gemm(*fwd), "script_bwd": lambda: medium.relu_square_gemm(*bwd),
    "pp_fwd": lambda: g.ping_pong_relu_square_gemm(*fwd, stages=4),
    "pp_bwd": lambda: g.ping_pong_relu_square_gemm(*bwd, stages=5),
    "pp_fwd_mma": lambda: g.ping_pong_relu_square_gemm(*fwd, stages=4, epilogue=0),
    "pp_bwd_mma": lambda: g.ping_pong_relu_square_gemm(*bwd, stages=5, epilogue=0),
}
chosen = sys.argv[1].split(",") if len(sys.argv) > 1 else list(variants)
for name in chosen:
    for _ in range(3):
        variants[name]()
torch.cuda.synchronize()
for name in chosen:
    torch.cuda.nvtx.range_push(f"profiled_{name}")
    variants[name]()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
print("launched", chosen)
