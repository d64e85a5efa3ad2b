"""perf/head_weight_grad_bench.py on small shapes on the CPU (--tiny, fp32 stand-ins, the kernels under Triton's
interpreter): training's way, the token-major GEMM at each launch and cuBLAS's GEMM alone all give the fp64 product
(the GPU numbers come from the device). Run in this process, so that the interpreter fixture's patch applies."""

import re
import sys

import torch


def test_tiny_run_gives_the_fp64_product_every_way(repo_root, require_interpreted, capsys):
    sys.path.insert(0, str(repo_root / "perf"))
    import head_weight_grad_bench as bench
    require_interpreted(bench.token_major_weight_grad_kernel)
    assert bench.main(["--tiny"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = ["training's (transpose_kernel, then cuBLAS's GEMM, precise)",
             *(f"token_major_weight_grad_kernel {launch}" for launch in bench.TINY_LAUNCHES),
             "cuBLAS's GEMM alone (the gradient's copy made before)"]
    assert len(lines) == len(names)
    for line, name in zip(lines, names):
        match = re.fullmatch(rf"{re.escape(name)}: [\d.]+ ms, \d+ TFLOP/s, largest error ([\d.e+-]+) of the largest "
                             r"entry", line)
        assert match and float(match[1]) < 1e-5, line  # fp32 sums of fp32 products


def test_the_kernel_covers_partial_tiles_and_scales(repo_root, require_interpreted):
    """200 x 96 outputs over tiles of 32 x 64 (partial at both edges, more tiles than the interpreter's 4 programs),
    tokens in blocks of 32 and 64: every entry is scale (a^T @ b), precise or fast."""
    sys.path.insert(0, str(repo_root / "perf"))
    import head_weight_grad_bench as bench
    require_interpreted(bench.token_major_weight_grad_kernel)
    gen = torch.Generator().manual_seed(5)
    a, b = torch.randn(128, 200, generator=gen), torch.randn(128, 96, generator=gen)
    for launch in [(32, 64, 32, 2, 4, 1, True), (32, 64, 64, 1, 4, 1, False)]:
        out = bench.token_major_weight_grad(a, b.T.contiguous(), 0.25, launch)
        torch.testing.assert_close(out, 0.25 * a.T @ b, rtol=1e-5, atol=1e-5)
