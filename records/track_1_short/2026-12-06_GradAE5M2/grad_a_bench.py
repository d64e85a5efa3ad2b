"""Session 73: the branch's grad_a pieces timed alone at the proxy's shape (49,152 tokens, 768 -> 3,072): the GEMM
to bf16 (main) against to e5m2 over the bound, and the relu-square pass reading a bf16 against an e5m2 gradient."""
import sys
import torch
sys.path[:0] = [".", "perf"]
import train_gpt as tg  # the branch's script, copied over train_gpt.py
from bench_common import timed_us

gen = torch.Generator("cuda").manual_seed(0)
proj_w = torch.randn(768, 3072, device="cuda", generator=gen) * 0.02
*_, proj_f8, proj_f8_t, _, proj_scale, bound = tg.mlp_weight_casts(proj_w, proj_w)
grad_y = torch.randn(49152, 768, device="cuda", generator=gen).bfloat16()
grad_y_f8, grad_y_scale = tg.to_float8_scaled(grad_y, torch.float8_e5m2, 16)
bf16 = timed_us(lambda: tg.scaled_mm(grad_y_f8, proj_f8_t.T, grad_y_scale, proj_scale, torch.bfloat16, True), False)
e5m2 = timed_us(lambda: tg.scaled_mm(grad_y_f8, proj_f8_t.T, 1.0, 1 / bound, torch.float8_e5m2, True), False)
grad_a = tg.scaled_mm(grad_y_f8, proj_f8_t.T, 1.0, 1 / bound, torch.float8_e5m2, True).float()
print(f"grad_a GEMM: bf16 out {bf16:.1f} us, e5m2 out {e5m2:.1f} us; largest entry 2^{grad_a.abs().max().log2():.2f}, "
      f"zeros {(grad_a == 0).float().mean():.4f}, bound 2^{bound.log2():.2f}")
a_f8, grad_a_f8, a_scale, grad_scale = tg.relu_square_check_inputs(49152, 3072, torch.device("cuda"))
grad_a_bf16 = grad_a_f8.float().bfloat16()
for name, grad in (("bf16", grad_a_bf16), ("e5m2", grad_a_f8)):
    us = timed_us(lambda: tg.relu_square_grads_triton(a_f8, grad, a_scale, grad_scale), False)
    gigabytes = (1 + grad.element_size() + 3) * 49152 * 3072 / 1e9
    print(f"relu-square pass, {name} gradient: {us:.1f} us, {gigabytes / us * 1e3:.2f} TB/s")
