"""Probe: a norm whose float8 output inductor writes transposed (scattered stores) against the same written row-major
and then transposed by train_gpt's Triton kernel; and a bf16 -> e5m2 cast written both ways by inductor against
row-major plus the kernel. 49,152 x 768, as the FP8 MLP's x and grad_y."""
import sys
from pathlib import Path

import torch
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import train_gpt  # noqa: E402



def main():
    x = torch.randn(49152, 768, device="cuda").bfloat16()
    g = (torch.randn(49152, 768, device="cuda") * 1e-3).bfloat16()
    scale = torch.tensor(2.0 ** -6, device="cuda")
    gscale = torch.tensor(2.0 ** -20, device="cuda")

    def norm_backward_like(x, g, transposed_out):
        xf, gf = x.float(), g.float()
        rstd = torch.rsqrt(xf.square().mean(-1, keepdim=True) + 1e-7)
        grad = (gf - xf * rstd.square() * (gf * xf).mean(-1, keepdim=True)) * rstd
        f8 = train_gpt.to_float8(xf * rstd, scale, torch.float8_e4m3fn)
        return grad.bfloat16(), (f8.T.contiguous() if transposed_out else f8)

    fused = torch.compile(lambda x, g: norm_backward_like(x, g, True))
    rows = torch.compile(lambda x, g: norm_backward_like(x, g, False))
    cast_both = torch.compile(lambda g: (lambda f: (f, f.T.contiguous()))(train_gpt.to_float8(g.float(), gscale,
                                                                                               torch.float8_e5m2)))
    cast_row = torch.compile(lambda g: train_gpt.to_float8(g.float(), gscale, torch.float8_e5m2))
    a, b = fused(x, g), rows(x, g)
    same = (a[1].view(torch.uint8) == train_gpt.transposed(b[1]).view(torch.uint8)).float().mean().item()
    print(f"equal share of the two versions' e4m3 bytes: {same:.6f}")
    results = {
        "norm backward + e4m3 transposed (inductor)": do_bench(lambda: fused(x, g)),
        "norm backward + e4m3 row-major (inductor)": do_bench(lambda: rows(x, g)),
        "  + transpose kernel": do_bench(lambda: train_gpt.transposed(b[1])),
        "e5m2 both ways (inductor)": do_bench(lambda: cast_both(g)),
        "e5m2 row-major (inductor)": do_bench(lambda: cast_row(g)),
    }
    for name, ms in results.items():
        print(f"{name:48s} {ms * 1e3:8.1f} us")


main()
