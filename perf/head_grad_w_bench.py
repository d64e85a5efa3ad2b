"""Track 1's FP8 head weight gradient, grad_w = grad^T @ x over a micro-step's 49,152 tokens (vocabulary 50,304 x
dim 768, fp32), without the gradient's transposed copy. Training writes the e5m2 logits gradient token-major (the loss
kernel's rows), copies it vocabulary-major with transpose_kernel (2.47 GB read and written a micro-step) and hands
that copy to cuBLAS, whose FP8 GEMMs on sm_90 take both operands K-major (here: tokens last). The candidate,
token_major_weight_grad_kernel: a Triton FP8 GEMM that reads the gradient as the loss kernel stores it and swaps each
tile's layout on chip; x from its dim-major copy, which training makes anyway. It pays if it runs within the copy's
time of cuBLAS's GEMM (perf/NOTES.md, session 72's list, item 2; session 40 measured the other way out, the
loss kernel writing both layouts, no faster).

python perf/head_grad_w_bench.py [--tiny]  ->  one line a way: us, and the output's largest error from fp64 relative to
its largest entry: the script's transposed() alone; cuBLAS's GEMM of the copy (scaled_mm, precise accumulation, as
fp8_mm_backward); both, as training runs them; token_major_weight_grad_kernel at each launch of LAUNCHES (PROMOTE:
tokens a Hopper FP8 product sums before its fp32 accumulator takes them, at most BLOCK_K, as cuBLAS's precise mode;
None: Triton's default, fast accumulation, a bound: training's sum over the tokens is precise).
--tiny: small shapes in fp32 on the CPU, timed by the clock, the kernel under Triton's interpreter with partial tiles
(the test runs this). --help prints this.
"""
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.runtime.errors import OutOfResources

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import timed_us, tiny_bench_refusal  # noqa: E402
from track_scripts import ROOT, load_script  # noqa: E402

# BLOCK_M (vocabulary), BLOCK_N (dim), BLOCK_K (tokens), GROUP_M, num_warps, num_stages, PROMOTE; built for sm_90 on
# the CPU with perf/kernel_report.py's compile_kernel: 49-131 KB of shared memory, 176-255 registers, no spills (three
# 128 x 256 precise launches spilled and were left out)
LAUNCHES = [(128, 256, 128, 8, 8, 3, None), (256, 128, 128, 8, 8, 3, None), (128, 128, 128, 8, 8, 4, 128),
            (256, 128, 128, 8, 8, 3, 128), (256, 128, 128, 8, 8, 4, 128), (256, 128, 64, 8, 8, 4, 64),
            (128, 128, 64, 8, 4, 5, 64)]
TINY_LAUNCHES = [(32, 16, 16, 2, 4, 1, 16)]


@triton.jit
def token_major_weight_grad_kernel(grad_ptr, x_t_ptr, out_ptr, tokens, vocab, dim, scale, BLOCK_M: tl.constexpr,
                                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                                   PROMOTE: tl.constexpr):
    """One BLOCK_M x BLOCK_N tile of out = scale * grad^T @ x (vocabulary x dim): grad (tokens x vocabulary) read
    token-major, its tiles transposed on chip; x from its dim-major copy x_t (dim x tokens). Tiles ordered in groups
    of GROUP_M rows of tiles, so that the programs reading one strip of grad run together and share it in L2."""
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(dim, BLOCK_N)
    first_m = (pid // (GROUP_M * tiles_n)) * GROUP_M
    group_rows = tl.minimum(tl.cdiv(vocab, BLOCK_M) - first_m, GROUP_M)
    tile_m = first_m + (pid % (GROUP_M * tiles_n)) % group_rows
    tile_n = (pid % (GROUP_M * tiles_n)) // group_rows
    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok, col_ok = rows < vocab, cols < dim
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for first in range(0, tokens, BLOCK_K):
        ks = first + tl.arange(0, BLOCK_K)
        k_ok = ks < tokens
        grad = tl.load(grad_ptr + ks.to(tl.int64)[:, None] * vocab + rows[None, :],
                       mask=k_ok[:, None] & row_ok[None, :], other=0.0)
        x_t = tl.load(x_t_ptr + cols.to(tl.int64)[:, None] * tokens + ks[None, :],
                      mask=col_ok[:, None] & k_ok[None, :], other=0.0)
        acc = tl.dot(tl.trans(grad), tl.trans(x_t), acc, max_num_imprecise_acc=PROMOTE)
    tl.store(out_ptr + rows.to(tl.int64)[:, None] * dim + cols[None, :], acc * scale,
             mask=row_ok[:, None] & col_ok[None, :])


def token_major_weight_grad(grad: torch.Tensor, x_t: torch.Tensor, scale: float, launch: tuple) -> torch.Tensor:
    """scale * grad^T @ x_t^T in fp32 by token_major_weight_grad_kernel: grad (tokens x vocabulary), x_t (dim x
    tokens), both contiguous."""
    tokens, vocab = grad.shape
    dim = x_t.shape[0]
    block_m, block_n, block_k, group_m, warps, stages, promote = launch
    out = torch.empty(vocab, dim, device=grad.device)
    grid = (triton.cdiv(vocab, block_m) * triton.cdiv(dim, block_n),)
    token_major_weight_grad_kernel[grid](grad, x_t, out, tokens, vocab, dim, scale, BLOCK_M=block_m, BLOCK_N=block_n,
                                         BLOCK_K=block_k, GROUP_M=group_m, PROMOTE=promote, num_warps=warps,
                                         num_stages=stages)
    return out


def exact_weight_grad(grad: torch.Tensor, x: torch.Tensor, scale: float, chunk: int = 4096) -> torch.Tensor:
    """scale * grad^T @ x in fp64, chunk tokens at a time (the whole gradient in fp64 would be 20 GB)."""
    out = torch.zeros(grad.shape[1], x.shape[1], dtype=torch.float64, device=grad.device)
    for first in range(0, grad.shape[0], chunk):
        out += grad[first:first + chunk].double().T @ x[first:first + chunk].double()
    return out * scale


def largest_error(out: torch.Tensor, exact: torch.Tensor) -> float:
    return ((out.double() - exact).abs().max() / exact.abs().max()).item()


def main(argv: list[str]) -> int:
    if (answer := tiny_bench_refusal(argv, __doc__, "perf/head_grad_w_bench.py")) is not None:
        return answer
    tiny = "--tiny" in argv
    device = "cpu" if tiny else "cuda"
    tokens, vocab, dim = (100, 72, 40) if tiny else (49152, 50304, 768)
    script = load_script(ROOT / "train_gpt.py")
    gen = torch.Generator(device).manual_seed(0)
    grad = torch.randn(tokens, vocab, device=device, generator=gen) * 1000
    x = torch.randn(tokens, dim, device=device, generator=gen) * 50  # within e4m3's 448
    if not tiny:
        grad, x = grad.to(torch.float8_e5m2), x.to(torch.float8_e4m3fn)
    x_t, grad_s, x_s = x.T.contiguous(), 2.0**-12, 0.01
    exact = exact_weight_grad(grad, x, grad_s * x_s)
    grad_t = script.transposed(grad)
    ways = [("the script's transposed() of the gradient", lambda: script.transposed(grad), None),
            ("cuBLAS's GEMM of the copy (scaled_mm, precise)",
             lambda: script.scaled_mm(grad_t, x_t.T, grad_s, x_s, torch.float32, fast_accum=False), exact),
            ("both, as training runs them",
             lambda: script.scaled_mm(script.transposed(grad), x_t.T, grad_s, x_s, torch.float32, fast_accum=False),
             exact)]
    for name, run, reference in ways:
        error = "" if reference is None else f", largest error {largest_error(run(), reference):.1e} of the largest " \
            "entry"
        print(f"{name}: {timed_us(run, tiny):.1f} us{error}")
    for launch in TINY_LAUNCHES if tiny else LAUNCHES:
        name = ("token_major_weight_grad_kernel BLOCK_M={} BLOCK_N={} BLOCK_K={} GROUP_M={} warps={} stages={} "
                "PROMOTE={}").format(*launch)
        try:
            error = largest_error(token_major_weight_grad(grad, x_t, grad_s * x_s, launch), exact)
        except OutOfResources as e:
            print(f"{name}: not built ({e})")
            continue
        us = timed_us(lambda: token_major_weight_grad(grad, x_t, grad_s * x_s, launch), tiny)
        print(f"{name}: {us:.1f} us, largest error {error:.1e} of the largest entry")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
