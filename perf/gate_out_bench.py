"""Track 1's attention output projection with its gate: out = (y * gate) @ W at a proxy micro-step's 49,152 tokens,
y the attention's output (tokens x 6 heads x 128, bf16), gate one sigmoid value a token and head (bf16), W the
projection (768 x 768, bf16). Training runs the gate's product as a pass of its own (inductor's, 47.7 us a layer a
micro-step in session 70's census on an H100), then cuBLAS's GEMM (~97 us). The candidate, gated_matmul_kernel: one
Triton GEMM that scales each head's slice of y by its gate as it loads it (the bf16 products the GEMM gets now, never
stored). The backward's weight gradient needs the gated y again: gated_weight_grad_kernel rebuilds it the same way
as it loads y (the tokens split over programs, the splits' fp32 parts summed after; cuBLAS's split-K GEMM took ~86
us). Folding the gate into the projection pays if both kernels run within the product pass's time of cuBLAS's GEMMs:
the first question of that lever (perf/NOTES.md, session 71), before the op is built. Answered no (session 72,
H100, this bench on the branch perf/gate-fold's versions of both kernels): forward 157.7 us at its best launch
against 148.1, the weight gradient 369.5 against 143.2; the op cost the full step 30 ms.

python perf/gate_out_bench.py [--tiny]  ->  one line a way: us, and the output's largest error from fp64 relative to
its largest entry. The projection: compiled (y * gate) @ W as training runs it; cuBLAS's GEMM of the gated y alone;
the gate's product alone; gated_matmul_kernel at each launch of GATED_MATMUL_LAUNCHES. The weight gradient: compiled
(y * gate)^T @ grad; cuBLAS's GEMM of the gated y alone; gated_weight_grad_kernel at each launch of
WEIGHT_GRAD_LAUNCHES (with the parts' sum and cast). --tiny: small shapes in fp32 on the CPU, timed by
the clock, the kernels under Triton's interpreter (whose bf16 dots came out ~1e10 off in Triton 3.6) with partial
tiles (the test runs this). --help prints this.
"""
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.runtime.errors import OutOfResources

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import timed_us, tiny_bench_refusal  # noqa: E402

# BLOCK_M, BLOCK_N, GROUP_M, num_warps, num_stages: each stage holds a y tile and a W tile (BLOCK_M x 128 and
# 128 x BLOCK_N bf16), within the H100's 227 KB of shared memory a block; built for sm_90 on the CPU with
# perf/kernel_report.py's compile_kernel: 96-164 KB of shared memory, 166-255 registers, no spills
GATED_MATMUL_LAUNCHES = [(128, 128, 8, 8, 3), (128, 256, 8, 8, 2), (64, 128, 8, 4, 3), (128, 128, 16, 8, 2),
                         (64, 256, 8, 4, 2), (128, 64, 8, 4, 4)]
TINY_GATED_MATMUL_LAUNCHES = [(32, 32, 2, 4, 1)]
# BLOCK_T, BLOCK_N, splits (of the tokens), num_warps, num_stages: 6 heads x 6 column tiles x splits programs;
# built for sm_90 on the CPU: 32-128 KB of shared memory, 139-214 registers, no spills
WEIGHT_GRAD_LAUNCHES = [(64, 128, 4, 8, 3), (64, 128, 8, 8, 3), (128, 128, 4, 8, 2), (64, 256, 4, 8, 2),
                        (32, 128, 8, 4, 3)]
TINY_WEIGHT_GRAD_LAUNCHES = [(16, 32, 3, 4, 1)]


@triton.jit
def gated_matmul_kernel(y_ptr, gate_ptr, w_ptr, out_ptr, tokens, dim, HEADS: tl.constexpr,
                        HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """One BLOCK_M x BLOCK_N tile of out: over the heads, y's head slice times its gate (in fp32, rounded to W's
    dtype, bf16 in training, as the product pass stores it) into a dot with W's rows of that head. Tiles ordered in
    groups of GROUP_M rows of tiles, so that a group's programs share their y rows in L2."""
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(dim, BLOCK_N)
    first_m = (pid // (GROUP_M * tiles_n)) * GROUP_M
    group_rows = tl.minimum(tl.cdiv(tokens, BLOCK_M) - first_m, GROUP_M)
    tile_m = first_m + (pid % (GROUP_M * tiles_n)) % group_rows
    tile_n = (pid % (GROUP_M * tiles_n)) // group_rows
    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    dims = tl.arange(0, HEAD_DIM)
    row_ok, col_ok = rows < tokens, cols < dim
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for head in range(HEADS):
        y = tl.load(y_ptr + rows[:, None] * (HEADS * HEAD_DIM) + head * HEAD_DIM + dims[None, :],
                    mask=row_ok[:, None], other=0.0)
        gate = tl.load(gate_ptr + rows * HEADS + head, mask=row_ok, other=0.0)
        gated = (y.to(tl.float32) * gate.to(tl.float32)[:, None]).to(w_ptr.dtype.element_ty)
        w = tl.load(w_ptr + (head * HEAD_DIM + dims)[:, None] * dim + cols[None, :], mask=col_ok[None, :], other=0.0)
        acc = tl.dot(gated, w, acc)
    tl.store(out_ptr + rows[:, None] * dim + cols[None, :], acc.to(out_ptr.dtype.element_ty),
             mask=row_ok[:, None] & col_ok[None, :])


def gated_matmul(y: torch.Tensor, gate: torch.Tensor, w: torch.Tensor, launch: tuple) -> torch.Tensor:
    """(y * gate) @ w by gated_matmul_kernel: y (tokens, heads, head_dim), gate (tokens, heads), w (heads * head_dim,
    dim), all contiguous and of one dtype."""
    tokens, heads, head_dim = y.shape
    dim = w.shape[1]
    block_m, block_n, group_m, warps, stages = launch
    out = y.new_empty(tokens, dim)
    grid = (triton.cdiv(tokens, block_m) * triton.cdiv(dim, block_n),)
    gated_matmul_kernel[grid](y, gate, w, out, tokens, dim, HEADS=heads, HEAD_DIM=head_dim, BLOCK_M=block_m,
                              BLOCK_N=block_n, GROUP_M=group_m, num_warps=warps, num_stages=stages)
    return out


@triton.jit
def gated_weight_grad_kernel(y_ptr, gate_ptr, grad_ptr, parts_ptr, tokens, dim, tokens_per_split,
                             HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_T: tl.constexpr,
                             BLOCK_N: tl.constexpr):
    """One head's HEAD_DIM rows by BLOCK_N columns of the projection's weight gradient, summed over one split of the
    tokens into parts[split]: (y's head slice * its gate, rounded as the product pass stores it)^T @ grad, BLOCK_T
    tokens a dot."""
    head, tile_n, split = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    dims = tl.arange(0, HEAD_DIM)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < dim
    acc = tl.zeros((HEAD_DIM, BLOCK_N), dtype=tl.float32)
    for first in range(split * tokens_per_split, (split + 1) * tokens_per_split, BLOCK_T):
        rows = first + tl.arange(0, BLOCK_T)
        row_ok = rows < tokens
        y = tl.load(y_ptr + rows[:, None] * (HEADS * HEAD_DIM) + head * HEAD_DIM + dims[None, :],
                    mask=row_ok[:, None], other=0.0)
        gate = tl.load(gate_ptr + rows * HEADS + head, mask=row_ok, other=0.0)
        gated = (y.to(tl.float32) * gate.to(tl.float32)[:, None]).to(grad_ptr.dtype.element_ty)
        grad = tl.load(grad_ptr + rows[:, None] * dim + cols[None, :], mask=row_ok[:, None] & col_ok[None, :],
                       other=0.0)
        acc = tl.dot(tl.trans(gated), grad, acc)
    tl.store(parts_ptr + split * (HEADS * HEAD_DIM * dim) + (head * HEAD_DIM + dims)[:, None] * dim + cols[None, :],
             acc, mask=col_ok[None, :])


def gated_weight_grad(y: torch.Tensor, gate: torch.Tensor, grad: torch.Tensor, launch: tuple) -> torch.Tensor:
    """(y * gate)^T @ grad by gated_weight_grad_kernel, the splits' fp32 parts summed and rounded to grad's dtype:
    y (tokens, heads, head_dim), gate (tokens, heads), grad (tokens, dim)."""
    tokens, heads, head_dim = y.shape
    dim = grad.shape[1]
    block_t, block_n, splits, warps, stages = launch
    tokens_per_split = triton.cdiv(triton.cdiv(tokens, splits), block_t) * block_t
    parts = torch.empty(splits, heads * head_dim, dim, device=y.device)
    grid = (heads, triton.cdiv(dim, block_n), splits)
    gated_weight_grad_kernel[grid](y, gate, grad, parts, tokens, dim, tokens_per_split, HEADS=heads,
                                   HEAD_DIM=head_dim, BLOCK_T=block_t, BLOCK_N=block_n, num_warps=warps,
                                   num_stages=stages)
    return parts.sum(0).to(grad.dtype)


def gate_product(y: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    return (y * gate[..., None]).flatten(1)


def gated_projection(y: torch.Tensor, gate: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The model's way (CausalSelfAttention.forward): the gate's product, then the projection."""
    return gate_product(y, gate) @ w


def projection_weight_grad(y: torch.Tensor, gate: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """The projection's weight gradient from the gated y, rebuilt by the product."""
    return gate_product(y, gate).T @ grad


def largest_error(out: torch.Tensor, exact: torch.Tensor) -> float:
    return ((out.double() - exact).abs().max() / exact.abs().max()).item()


def main(argv: list[str]) -> int:
    if (answer := tiny_bench_refusal(argv, __doc__, "perf/gate_out_bench.py")) is not None:
        return answer
    tiny = "--tiny" in argv
    device = "cpu" if tiny else "cuda"
    tokens, heads, head_dim, dim = (100, 2, 32, 80) if tiny else (49152, 6, 128, 768)
    dtype = torch.float32 if tiny else torch.bfloat16
    gen = torch.Generator(device).manual_seed(0)
    y = torch.randn(tokens, heads, head_dim, device=device, generator=gen).to(dtype)
    gate = torch.rand(tokens, heads, device=device, generator=gen).to(dtype)
    w = (torch.randn(heads * head_dim, dim, device=device, generator=gen) / (heads * head_dim) ** 0.5).to(dtype)
    grad = torch.randn(tokens, dim, device=device, generator=gen).to(dtype)
    gated_exact = (y.double() * gate.double()[..., None]).flatten(1)
    gated, out_exact = gate_product(y, gate), gated_exact @ w.double()
    print_ways([("compiled (y * gate) @ W, as training runs it", torch.compile(gated_projection), (y, gate, w)),
                ("cuBLAS's GEMM of the gated y alone", torch.matmul, (gated, w))], out_exact, tiny)
    print_ways([("the gate's product alone (compiled)", torch.compile(gate_product), (y, gate))], None, tiny)
    print_launches("gated_matmul_kernel BLOCK_M={} BLOCK_N={} GROUP_M={} warps={} stages={}",
                   TINY_GATED_MATMUL_LAUNCHES if tiny else GATED_MATMUL_LAUNCHES,
                   lambda launch: gated_matmul(y, gate, w, launch), out_exact, tiny)
    weight_grad_exact = gated_exact.T @ grad.double()
    print_ways([("weight gradient: compiled (y * gate)^T @ grad", torch.compile(projection_weight_grad),
                 (y, gate, grad)),
                ("weight gradient: cuBLAS's GEMM of the gated y alone", lambda a, b: a.T @ b, (gated, grad))],
               weight_grad_exact, tiny)
    print_launches("weight gradient: gated_weight_grad_kernel BLOCK_T={} BLOCK_N={} splits={} warps={} stages={} "
                   "(with the parts' sum)", TINY_WEIGHT_GRAD_LAUNCHES if tiny else WEIGHT_GRAD_LAUNCHES,
                   lambda launch: gated_weight_grad(y, gate, grad, launch), weight_grad_exact, tiny)
    return 0


def print_ways(ways: list, exact: torch.Tensor | None, tiny: bool):
    """One line a way (name, function, inputs): its time, and its output's largest error from exact if given."""
    for name, run, inputs in ways:
        error = "" if exact is None else f", largest error {largest_error(run(*inputs), exact):.1e} of the largest " \
            "entry"
        print(f"{name}: {timed_us(lambda: run(*inputs), tiny):.1f} us{error}")


def print_launches(name: str, launches: list, run, exact: torch.Tensor, tiny: bool):
    """One line a launch of run(launch): its time and its output's largest error from exact; name's {} take the
    launch's numbers. A launch past the GPU's shared memory or registers is a line too, and the others still run."""
    for launch in launches:
        try:
            error = largest_error(run(launch), exact)
        except OutOfResources as e:
            print(f"{name.format(*launch)}: not built ({e})")
            continue
        print(f"{name.format(*launch)}: {timed_us(lambda: run(launch), tiny):.1f} us, largest error {error:.1e} of "
              "the largest entry")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
