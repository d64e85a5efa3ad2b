"""Would track 2's MLP gain from its relu-square in the epilogues of its bf16 GEMMs? Microseconds of each pass as
training runs it (cuBLAS's GEMM, then inductor's pointwise pass over the GEMM's output) against one persistent
Triton GEMM (TMA loads and stores) with the pass in its epilogue, at the proxy's 65,536 tokens, 1,024 -> 4,096:

  forward   h = x @ fc_w^T, a = relu(h)^2             (cuBLAS writes h, a pass reads it and writes a)
  backward  grad_h = 2 relu(h) * (grad_y @ proj_w)     (cuBLAS writes grad_a, a pass reads it and h)

Written before any kernel enters train_gpt_medium.py: the epilogues save ~0.25 GB of traffic a layer forward and
~1 GB backward, which pays only if the Triton GEMM keeps within ~10% of cuBLAS at K = 1,024.

python perf/medium_mlp_bench.py  ->  per pass, the torch path, then one line per launch configuration (tile shape,
warps, stages) with its TFLOP/s and its largest difference from the torch path's output, then the best.
--tiny runs a small shape and one configuration on the CPU in float32, the kernel under Triton's interpreter
(tests/test_perf_medium_mlp_bench.py).
"""
import itertools
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mlp_bench import timed_us  # noqa: E402

# BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages
CONFIGS = [(m, n, k, 8, w, s) for (m, n, k), w, s in itertools.product(
    ((128, 128, 64), (128, 256, 64), (128, 128, 128), (256, 128, 64)), (4, 8), (3, 4))]
TINY_CONFIGS = [(32, 64, 32, 2, 4, 1)]


@triton.jit
def tile_origin(tile, rows, cols, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """First row and column of output tile number `tile`, GROUP_M block-rows at a time down each block-column."""
    blocks_m, blocks_n = tl.cdiv(rows, BLOCK_M), tl.cdiv(cols, BLOCK_N)
    group, in_group = tile // (GROUP_M * blocks_n), tile % (GROUP_M * blocks_n)
    group_rows = min(blocks_m - group * GROUP_M, GROUP_M)
    return (group * GROUP_M + in_group % group_rows) * BLOCK_M, (in_group // group_rows) * BLOCK_N


@triton.jit
def gemm_relu_square_kernel(x_desc, w_desc, out_desc, h_desc, rows, cols, K: tl.constexpr, BLOCK_M: tl.constexpr,
                            BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                            PROGRAMS: tl.constexpr, BACKWARD: tl.constexpr):
    """x (rows x K) times w: forward, w is (cols x K) and the tile's product is h, stored to h_desc with relu(h)^2
    to out_desc; backward, w is (K x cols) and the product is grad_a, rounded to bf16 as torch's GEMM would, times
    2 relu(h) read from h_desc, stored to out_desc. Each of PROGRAMS programs walks tiles; flatten pipelines the
    next tile's loads under this tile's epilogue."""
    tiles = tl.cdiv(rows, BLOCK_M) * tl.cdiv(cols, BLOCK_N)
    for tile in tl.range(tl.program_id(0), tiles, PROGRAMS, flatten=True):
        first_row, first_col = tile_origin(tile, rows, cols, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            x = x_desc.load([first_row, k0])
            w = w_desc.load([k0, first_col]) if BACKWARD else w_desc.load([first_col, k0]).T
            acc = tl.dot(x, w, acc)
        product = acc.to(tl.bfloat16)
        if BACKWARD:
            relu = tl.maximum(h_desc.load([first_row, first_col]).to(tl.float32), 0.0)
            out_desc.store([first_row, first_col], (2.0 * relu * product.to(tl.float32)).to(out_desc.dtype))
        else:
            h_desc.store([first_row, first_col], product)
            relu = tl.maximum(product.to(tl.float32), 0.0)
            out_desc.store([first_row, first_col], (relu * relu).to(out_desc.dtype))


def epilogue_gemm(x: torch.Tensor, w: torch.Tensor, h: torch.Tensor, backward: bool, launch: tuple) -> torch.Tensor:
    """Forward (backward=False): fills h and returns relu(h)^2. Backward: returns 2 relu(h) (x @ w)."""
    block_m, block_n, block_k, group_m, num_warps, num_stages = launch
    rows, k = x.shape
    cols = w.size(1) if backward else w.size(0)
    tiles = triton.cdiv(rows, block_m) * triton.cdiv(cols, block_n)
    programs = min(tiles, torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 4)
    out = torch.empty(rows, cols, dtype=x.dtype, device=x.device)
    descriptors = [TensorDescriptor.from_tensor(x, [block_m, block_k]),
                   TensorDescriptor.from_tensor(w, [block_k, block_n] if backward else [block_n, block_k]),
                   TensorDescriptor.from_tensor(out, [block_m, block_n]),
                   TensorDescriptor.from_tensor(h, [block_m, block_n])]
    gemm_relu_square_kernel[(programs,)](*descriptors, rows, cols, K=k, BLOCK_M=block_m, BLOCK_N=block_n,
                                         BLOCK_K=block_k, GROUP_M=group_m, PROGRAMS=programs, BACKWARD=backward,
                                         num_warps=num_warps, num_stages=num_stages)
    return out


def forward_torch(x, fc_w):
    h = x @ fc_w.T
    return h, torch.relu(h).square()


def backward_torch(grad_y, proj_w, h):
    return 2 * torch.relu(h) * (grad_y @ proj_w)


def bench_pass(name: str, torch_path, ours, args, teraflop: float, tiny: bool) -> None:
    """The torch path (compiled on the GPU) and each launch of ours: time, TFLOP/s, largest difference."""
    reference = torch_path if tiny else torch.compile(torch_path, dynamic=False)
    expected = reference(*args)
    expected = expected[-1] if isinstance(expected, tuple) else expected
    before_us = timed_us(lambda: reference(*args), tiny)
    print(f"{name}: cuBLAS + inductor {before_us:.1f} us, {teraflop / before_us * 1e6:.0f} TFLOP/s")
    times = {}
    for launch in (TINY_CONFIGS if tiny else CONFIGS):
        try:
            result = ours(launch)
        except Exception as error:  # out of shared memory or registers for this tile shape
            print(f"{name} {launch}: {type(error).__name__}")
            continue
        difference = (result.float() - expected.float()).abs().max().item() / expected.float().abs().max().item()
        times[launch] = timed_us(lambda: ours(launch), tiny)
        print(f"{name} {launch}: {times[launch]:.1f} us, {teraflop / times[launch] * 1e6:.0f} TFLOP/s, largest "
              f"difference {difference:.1e} of the largest output")
    best = min(times, key=times.get)
    print(f"== {name}: before {before_us:.1f} us, best {best} {times[best]:.1f} us ({len(times)} configurations ran)")


def main(argv: list[str]) -> int:
    tiny = "--tiny" in argv
    device = torch.device("cpu" if tiny else "cuda")
    rows, dim, hidden = (256, 128, 384) if tiny else (65536, 1024, 4096)
    dtype = torch.float32 if tiny else torch.bfloat16  # the interpreter's TMA loads of bf16 read garbage
    gen = torch.Generator(device).manual_seed(0)
    x, grad_y = (torch.randn(rows, dim, device=device, generator=gen).to(dtype) for _ in range(2))
    fc_w = (torch.randn(hidden, dim, device=device, generator=gen) * dim ** -0.5).to(dtype)
    proj_w = (torch.randn(dim, hidden, device=device, generator=gen) * hidden ** -0.5).to(dtype)
    teraflop = 2 * rows * dim * hidden / 1e12
    h = torch.empty(rows, hidden, dtype=dtype, device=device)
    bench_pass("forward", forward_torch, lambda launch: epilogue_gemm(x, fc_w, h, False, launch), (x, fc_w),
               teraflop, tiny)
    h_reference = forward_torch(x, fc_w)[0]
    bench_pass("backward", backward_torch, lambda launch: epilogue_gemm(grad_y, proj_w, h_reference, True, launch),
               (grad_y, proj_w, h_reference), teraflop, tiny)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
