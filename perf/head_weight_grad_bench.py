"""The FP8 head's weight gradient, grad_w = grad_s x_s (grad^T @ x) (vocabulary x dim, fp32), at the proxy's 49,152
tokens, two ways: as training makes it (fp8_mm_backward: transpose_kernel's copy of the e5m2 gradient, 2.5 GB each
way, then cuBLAS's GEMM with precise accumulation), and by one Triton GEMM that reads the gradient token-major as the
loss kernel writes it, each block transposed on chip (token_major_weight_grad_kernel), so that no transposed copy is
made. The Triton GEMM runs for several launches, its accumulator promoted to fp32 after every block of tokens
(precise, as cuBLAS's) or left to the tensor cores (fast). Asked in session 68: transpose_kernel took 26.5 ms of a
full step on an H100 (session 68's census), ~1.75 ms of it a micro-step the head gradient's; Hopper's FP8 tensor
cores take both operands K-major, hence the copy.

python perf/head_weight_grad_bench.py [--tiny]  ->  one line a way: ms, TFLOP/s and the largest error from the fp64
product relative to its largest entry (or why a launch failed to build); then cuBLAS's GEMM alone (the copy's share
of training's way). --tiny: small shapes on the CPU, fp32 stand-ins for the float8 tensors (the interpreter's float8
casts misround), the kernels under Triton's interpreter (the test runs this). --help prints this.
"""
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import timed_us, tiny_bench_refusal  # noqa: E402
from track_scripts import ROOT, load_script  # noqa: E402

tg = load_script(ROOT / "train_gpt.py")
tile_origin = tg.tile_origin  # a global of this module, for the kernel below

# BLOCK_M (vocabulary), BLOCK_N (dim), BLOCK_T (tokens), GROUP_M, num_warps, num_stages, precise accumulation: each
# fits an sm_90 block's shared memory without spilling registers (tests/test_perf_head_weight_grad_bench.py compiles
# them; 4 warps, or precise 128 x 256 and 256 x 128 tiles, spill). Triton stages each gradient block through
# registers into a second shared buffer, transposed, for the tensor cores
LAUNCHES = [(128, 128, 128, 8, 8, 4, True), (128, 128, 128, 8, 8, 4, False), (128, 128, 128, 8, 8, 3, True),
            (128, 128, 128, 8, 8, 5, True), (128, 128, 64, 8, 8, 6, True), (128, 256, 64, 8, 8, 3, False),
            (128, 256, 128, 8, 8, 2, False), (256, 128, 128, 8, 8, 3, False)]
TINY_LAUNCHES = [(32, 32, 32, 2, 4, 1, True), (32, 64, 64, 1, 4, 1, False)]


@triton.jit
def token_major_weight_grad_kernel(a_desc, b_t_desc, out_ptr, scale, M, N, T, BLOCK_M: tl.constexpr,
                                   BLOCK_N: tl.constexpr, BLOCK_T: tl.constexpr, GROUP_M: tl.constexpr,
                                   PROGRAMS: tl.constexpr, PRECISE: tl.constexpr):
    """out (M x N, fp32) = scale (a^T @ b) for a token-major a (T x M) and b given transposed, b_t (N x T): a's
    blocks are transposed on chip. PRECISE: each block's product is summed into the fp32 accumulator by an add, not
    accumulated by the tensor cores (whose FP8 accumulation keeps fewer bits)."""
    tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for tile in tl.range(tl.program_id(0), tiles, PROGRAMS, flatten=True):
        first_m, first_n = tile_origin(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for t0 in range(0, T, BLOCK_T):
            a_block, b_block = a_desc.load([t0, first_m]).T, b_t_desc.load([first_n, t0]).T
            if PRECISE:
                acc += tl.dot(a_block, b_block)
            else:
                acc = tl.dot(a_block, b_block, acc)
        rows, cols = first_m + tl.arange(0, BLOCK_M), first_n + tl.arange(0, BLOCK_N)
        tl.store(out_ptr + rows.to(tl.int64)[:, None] * N + cols[None, :], acc * scale,
                 mask=(rows < M)[:, None] & (cols < N)[None, :])


def token_major_weight_grad(a: torch.Tensor, b_t: torch.Tensor, scale: float, launch: tuple) -> torch.Tensor:
    """scale (a^T @ b_t^T) by the kernel: a (tokens x M), b_t (N x tokens); TMA needs 16-byte rows."""
    block_m, block_n, block_t, group_m, num_warps, num_stages, precise = launch
    (tokens, m), n = a.shape, b_t.size(0)
    programs = min(triton.cdiv(m, block_m) * triton.cdiv(n, block_n), tg.multiprocessors(a.device))
    out = torch.empty(m, n, device=a.device, dtype=torch.float32)
    token_major_weight_grad_kernel[(programs,)](
        TensorDescriptor.from_tensor(a, [block_t, block_m]), TensorDescriptor.from_tensor(b_t, [block_n, block_t]),
        out, scale, m, n, tokens, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_T=block_t, GROUP_M=group_m,
        PROGRAMS=programs, PRECISE=precise, num_warps=num_warps, num_stages=num_stages)
    return out


def head_gradients(tiny: bool, device: str) -> tuple:
    """The loss kernel's float8 gradient (tokens x vocabulary) of softcapped random logits and x's transposed e4m3
    copy (dim x tokens), as the head makes them, with their scales; fp32 stand-ins under --tiny."""
    tokens, vocab, dim = (256, 200, 96) if tiny else (49152, 50304, 768)
    gen = torch.Generator(device).manual_seed(2)
    logits = (torch.randn(tokens, vocab, device=device, generator=gen) * 3).bfloat16()
    targets = torch.randint(0, vocab, (tokens,), device=device, generator=gen, dtype=torch.int32)
    grad_s, x_s = 1 / 448, tg.normed_e4m3_scale(dim)
    grad = torch.empty(tokens, vocab, device=device, dtype=torch.float32 if tiny else torch.float8_e5m2)
    tg.softcap_ce_rows(logits, targets, grad_s, grad)
    del logits
    x = F.rms_norm(torch.randn(tokens, dim, device=device, generator=gen), (dim,))
    x_t = (x / x_s).T.contiguous() if tiny else tg.float8_both_ways(x.bfloat16(), x_s)[1]
    return grad, x_t, grad_s, x_s


def fp64_product(grad: torch.Tensor, x_t: torch.Tensor, scale: float, chunk: int = 4096) -> torch.Tensor:
    """scale (grad^T @ x_t^T) in fp64, summed over chunks of tokens (the whole fp64 gradient would take 20 GB)."""
    out = torch.zeros(grad.size(1), x_t.size(0), device=grad.device, dtype=torch.float64)
    for start in range(0, grad.size(0), chunk):
        out += grad[start:start + chunk].double().T @ x_t[:, start:start + chunk].double().T
    return out * scale


def main(argv: list[str]) -> int:
    if (answer := tiny_bench_refusal(argv, __doc__, "perf/head_weight_grad_bench.py")) is not None:
        return answer
    tiny = "--tiny" in argv
    device = "cpu" if tiny else "cuda"
    if not tiny:
        tg.configure_triton_builds()  # as in training
    grad, x_t, grad_s, x_s = head_gradients(tiny, device)
    exact = fp64_product(grad, x_t, grad_s * x_s)
    flops = 2 * exact.numel() * grad.size(0)

    def line(name: str, run) -> None:
        try:  # a launch Triton cannot build (shared memory, an operand layout) is a line, not the end of the bench
            error = ((run().double() - exact).abs().max() / exact.abs().max()).item()
        except Exception as failure:  # noqa: BLE001
            print(f"{name}: failed, {type(failure).__name__}: {str(failure).strip().splitlines()[-1][:200]}")
            return
        ms = timed_us(run, tiny) / 1000
        print(f"{name}: {ms:.3f} ms, {flops / ms / 1e9:.0f} TFLOP/s, largest error {error:.1e} of the largest entry")

    grad_t = tg.transposed(grad)
    line("training's (transpose_kernel, then cuBLAS's GEMM, precise)",
         lambda: tg.scaled_mm(tg.transposed(grad), x_t.T, grad_s, x_s, torch.float32, fast_accum=False))
    for launch in TINY_LAUNCHES if tiny else LAUNCHES:
        line(f"token_major_weight_grad_kernel {launch}",
             lambda: token_major_weight_grad(grad, x_t, grad_s * x_s, launch))
    line("cuBLAS's GEMM alone (the gradient's copy made before)",
         lambda: tg.scaled_mm(grad_t, x_t.T, grad_s, x_s, torch.float32, fast_accum=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
