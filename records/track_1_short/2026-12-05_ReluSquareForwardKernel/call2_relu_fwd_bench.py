"""Probe: the FP8 MLP forward's pass relu(h)^2 / scale -> e4m3 at 49,152 x 3,072, inductor vs a Triton kernel."""
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import train_gpt  # noqa: E402


@triton.jit
def relu_square_f8(h_ptr, scale_ptr, out_ptr, n, limit, BLOCK: tl.constexpr):
    at = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = at < n
    relu = tl.maximum(tl.load(h_ptr + at, mask=mask, other=0.0).to(tl.float32), 0.0)
    a = tl.minimum(relu * relu / tl.load(scale_ptr), limit)
    tl.store(out_ptr + at, a.to(out_ptr.dtype.element_ty), mask=mask)


def triton_pass(h, scale, block, warps):
    out = torch.empty_like(h, dtype=torch.float8_e4m3fn)
    n = h.numel()
    relu_square_f8[(triton.cdiv(n, block),)](h, scale, out, n, 448.0, BLOCK=block, num_warps=warps)
    return out


def torch_pass(h, scale):
    return train_gpt.to_float8(F.relu(h.float()).square(), scale, torch.float8_e4m3fn)


def main():
    rows, cols = 49152, 3072
    h = torch.randn(rows, cols, device="cuda").bfloat16()
    scale = train_gpt.float8_scale(F.relu(h.float()).square()[::16], torch.float8_e4m3fn, 16)
    nbytes = h.numel() * 3
    ref = torch_pass(h, scale)
    compiled = torch.compile(torch_pass)
    rows_out = []
    rows_out.append(("inductor", do_bench(lambda: compiled(h, scale)) * 1e3, compiled(h, scale)))
    rows_out.append(("clone bf16 (r+w 604MB)", do_bench(lambda: h.clone()) * 1e3 * 3 / 4, None))
    for block in (1024, 2048, 4096, 8192):
        for warps in (4, 8, 16):
            if block // (32 * warps) < 4:
                continue
            rows_out.append((f"triton {block}/{warps}", do_bench(lambda: triton_pass(h, scale, block, warps)) * 1e3,
                             triton_pass(h, scale, block, warps)))
    for name, us, out in rows_out:
        same = "" if out is None else f"equal {(out.view(torch.uint8) == ref.view(torch.uint8)).float().mean():.6f}"
        print(f"{name:28s} {us:8.1f} us  {nbytes / us / 1e6:5.2f} TB/s  {same}")


main()
