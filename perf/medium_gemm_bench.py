"""Track 2's cuBLAS GEMMs one by one at the proxy's step (65,536 tokens, dim 1,024), each as the script writes it and
as the transposed problem (C^T = B^T A^T: the same numbers, cuBLAS's other operand order), with TFLOP/s and the
kernels it launches. Asked because cuBLAS takes ~128 of the step's ~206 ms of kernels (perf/NOTES.md, session 27)
at ~750 TFLOP/s on average: a GEMM well below that is the next place to look (run on a GPU).

python perf/medium_gemm_bench.py [--tiny]  ->  one line per (GEMM, order): microseconds, TFLOP/s, launches, the
longest kernel's name. --tiny: small shapes on the CPU, timed by the clock, checking that both orders give the same
product (the test runs this). --help prints this.
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from head_gemm_bench import cuda_kernels  # noqa: E402
from bench_common import timed_us, tiny_bench_refusal  # noqa: E402


def gemms(tokens: int, dim: int, hidden: int, device: str) -> dict:
    """Each GEMM of a block's forward and backward (NormedReluSquareMLP's three torch GEMMs, the attention's
    projections through the merged QKVO weight) as (the script's form, its two operands)."""
    gen = torch.Generator(device).manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, device=device, generator=gen).bfloat16()

    x, y, g = randn(tokens, dim), randn(tokens, dim), randn(tokens, dim)
    g_qkv, a, g_h = randn(tokens, 3 * dim), randn(tokens, hidden), randn(tokens, hidden)
    w_qkv, w_o, fc_w, proj_w = randn(3 * dim, dim), randn(dim, dim), randn(hidden, dim), randn(dim, hidden)
    return {"attention qkv = x @ w_qkv.T": (x, w_qkv.T), "attention out = y @ w_o": (y, w_o),
            "attention grad_y = g @ w_o.T": (g, w_o.T), "attention grad_w_o = y.T @ g": (y.T, g),
            "attention grad_x = g_qkv @ w_qkv": (g_qkv, w_qkv), "attention grad_w_qkv = g_qkv.T @ x": (g_qkv.T, x),
            "mlp out = a @ proj_w.T": (a, proj_w.T), "mlp u = grad_h @ fc_w": (g_h, fc_w),
            "mlp grad_fc_w = grad_h.T @ x": (g_h.T, x), "mlp grad_proj_w = g.T @ a": (g.T, a)}


def kernels_launched(run, tiny: bool) -> str:
    """How many kernels one call launches and the longest one's name ("- launches -" on the CPU's tiny run)."""
    if tiny:
        return "- launches -"
    kernels = cuda_kernels(run)
    return f"{len(kernels)} launches {max(kernels, key=lambda event: event.device_time_total).name[:90]}"


def main(argv: list[str]) -> int:
    if (answer := tiny_bench_refusal(argv, __doc__, "perf/medium_gemm_bench.py")) is not None:
        return answer
    tiny = "--tiny" in argv
    device = "cpu" if tiny else "cuda"
    tokens, dim, hidden = (256, 64, 256) if tiny else (65536, 1024, 4096)
    for name, (left, right) in gemms(tokens, dim, hidden, device).items():
        flops = 2 * left.size(0) * left.size(1) * right.size(1)
        orders = {"as written": lambda: left @ right, "transposed problem": lambda: (right.T @ left.T).T}
        if tiny:
            assert torch.equal(orders["as written"](), orders["transposed problem"]()), name
        for order, run in orders.items():
            us = timed_us(run, tiny)
            print(f"{name}, {order}: {us:8.1f} us {flops / us / 1e6:6.1f} TFLOP/s {kernels_launched(run, tiny)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
