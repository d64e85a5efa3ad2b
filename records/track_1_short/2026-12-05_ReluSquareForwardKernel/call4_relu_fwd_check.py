"""The branch's forward relu-square op on the GPU: bytes against torch's cast and the backward kernel's a_t."""
import importlib.util

import torch

spec = importlib.util.spec_from_file_location("train_gpt", "perf/base/relu_fwd.py")
tg = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tg)
h = torch.randn(8192, 3072, device="cuda").bfloat16()
h[0, 0] = 1000.0
scale, grad_scale = torch.tensor(2.0 ** -5, device="cuda"), torch.tensor(2.0 ** -18, device="cuda")
a = tg.fp8_relu_square(h, scale)
ref = tg.to_float8(torch.relu(h.float()).square(), scale, torch.float8_e4m3fn)
a_t = tg.relu_square_grads_triton(h, (torch.randn_like(h.float()) * 1e-3).bfloat16(), scale, grad_scale)[0]
print("unequal share vs torch's cast", (a.view(torch.uint8) != ref.view(torch.uint8)).float().mean().item())
print("unequal share vs the backward kernel's a_t", (a.view(torch.uint8) != a_t.view(torch.uint8).T).float().mean().item())
print("a[0, 0] (448 = saturated)", a[0, 0].float().item())
