"""Time relu_square_grads_kernel (one pass, the script's launch) of one variant folder's train_gpt.py at a
micro-step's 49,152 x 3,072, with its registers, its bytes against the torch path's and the start-up check's answer
(session 64, call C). Usage: python bench.py VARIANT_FOLDER"""
import sys
from pathlib import Path

import torch

variant = Path(sys.argv[1]).resolve()
sys.path.insert(0, str(variant))
import train_gpt as tg  # noqa: E402

tg.configure_triton_builds()
from triton.testing import do_bench  # noqa: E402

rows, cols, dev = 49152, 3072, torch.device("cuda")
gen = torch.Generator(dev).manual_seed(0)
h = torch.randn(rows, cols, device=dev, generator=gen).bfloat16()
grad_a = (torch.randn(rows, cols, device=dev, generator=gen) * 1e-3).bfloat16()
if "h_ptr" in tg.relu_square_grads_kernel.arg_names:
    a_scale = tg.float8_scale(torch.relu(h.float()).square(), torch.float8_e4m3fn, 1)
    first = h
    grad_scale = tg.float8_scale(tg.relu_square_grad(h, grad_a), torch.float8_e5m2, 1)
else:
    first, a_scale = tg.to_float8_scaled(torch.relu(h.float()).square(), torch.float8_e4m3fn)
    grad_scale = tg.float8_scale(tg.relu_square_grad(first, a_scale, grad_a), torch.float8_e5m2, 1)
del h
args = (first, grad_a, a_scale, grad_scale)
a_t = first.new_empty(cols, rows, dtype=torch.float8_e4m3fn)
grad_h = first.new_empty(rows, cols, dtype=torch.float8_e5m2)
grad_h_t = first.new_empty(cols, rows, dtype=torch.float8_e5m2)
tg.launch_relu_square_grads(*args, a_t, grad_h, grad_h_t)
torch.cuda.synchronize()
try:
    compiled = next(iter(tg.relu_square_grads_kernel.device_caches[0][0].values()))
    regs, shared = compiled.n_regs, compiled.metadata.shared
except Exception as error:
    regs = shared = repr(error)[:60]
theirs = tg.relu_square_grads_torch(*args)
same = sum((a.view(torch.uint8) == b.view(torch.uint8)).float().mean().item()
           for a, b in zip((a_t, grad_h, grad_h_t), theirs)) / 3
us = [do_bench(lambda: tg.launch_relu_square_grads(*args, a_t, grad_h, grad_h_t), warmup=50, rep=300) * 1000
      for _ in range(3)]
mb = (first.numel() * first.element_size() + grad_a.numel() * 2 + 3 * rows * cols) / 1e6
print(f"{variant.name}: {' '.join(f'{u:.1f}' for u in us)} us, {mb:.0f} MB, {mb / min(us):.2f} TB/s, "
      f"{regs} registers, {shared} B shared, {same:.6f} of bytes equal torch's, "
      f"one_pass_check={tg.one_pass_relu_square_is_exact(dev)}")
