"""Microseconds of the FP8 MLP backward's pass over the hidden activations (train_gpt.py's fp8_relu_square_grads:
h and the gradient of relu(h)^2 in, three float8 tensors out, two of them transposed: its Triton kernel, then the
transpose kernel) for a grid of launch configurations of the first kernel, against inductor's kernel for the same
torch ops (the one training used before), at the proxy's 49,152 tokens x 3,072 hidden; each with its bandwidth and
whether its bytes equal those of the torch ops run eagerly (run on a GPU).

python perf/mlp_bench.py  ->  one line per configuration, then the script's and the best.
--tiny runs a small shape and two configurations on the CPU, the kernel under Triton's interpreter and the torch
ops uncompiled, to check this script (tests/test_perf_mlp_bench.py).
"""
import itertools
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import train_gpt  # noqa: E402

CONFIGS = list(itertools.product((32, 64, 128), (64, 128, 256), (4, 8)))  # BLOCK_ROWS, BLOCK_COLS, num_warps
TINY_CONFIGS = [train_gpt.RELU_SQUARE_LAUNCH, (32, 64, 4)]


def inputs(rows: int, cols: int, device: torch.device):
    """h and its upstream gradient as the backward sees them, with scales that fill e4m3's and e5m2's ranges."""
    gen = torch.Generator(device).manual_seed(0)
    h = torch.randn(rows, cols, device=device, generator=gen).bfloat16()
    grad_a = (torch.randn(rows, cols, device=device, generator=gen) * 1e-3).bfloat16()
    a_scale = train_gpt.float8_scale(torch.relu(h.float()).square(), torch.float8_e4m3fn, 1)
    grad_scale = train_gpt.float8_scale(train_gpt.relu_square_grad(h, grad_a), torch.float8_e5m2, 1)
    return h, grad_a, a_scale, grad_scale


def timed_us(run, tiny: bool) -> float:
    if not tiny:
        from triton.testing import do_bench
        return do_bench(run) * 1000
    run()
    start = time.perf_counter()
    run()
    return (time.perf_counter() - start) * 1e6


def kernel_run(args, launch):
    """The op's GPU path with the kernel's launch configuration (float32 outputs under the interpreter)."""
    h = args[0]
    dtypes = (torch.float32,) * 2 if not h.is_cuda else (torch.float8_e4m3fn, torch.float8_e5m2)

    def run():
        a_t, grad_h = h.new_empty(h.T.shape, dtype=dtypes[0]), h.new_empty(h.shape, dtype=dtypes[1])
        train_gpt.relu_square_grads(*args, a_t, grad_h, launch=launch)
        return a_t, grad_h, train_gpt.transposed(grad_h)
    return run


def equal_share(ours, theirs) -> float:
    """Fraction of the three outputs' bytes that equal the reference's (the torch ops run eagerly)."""
    same = sum((a.view(torch.uint8) == b.view(torch.uint8)).sum().item() for a, b in zip(ours, theirs))
    return same / sum(t.numel() for t in theirs)


def main(argv: list[str]) -> int:
    train_gpt.use_torch_ptxas()  # as the training run builds the kernel
    tiny = "--tiny" in argv
    device = torch.device("cpu" if tiny else "cuda")
    rows, cols = (256, 384) if tiny else (49152, 3072)
    args = inputs(rows, cols, device)
    torch_path = train_gpt.relu_square_grads_torch
    reference = torch_path if tiny else torch.compile(torch_path, dynamic=False)
    expected = torch_path(*args)
    gigabytes = (2 * 2 + 3 * 1) * rows * cols / 1e9  # bf16 h and gradient read, three float8 tensors written
    inductor_us = timed_us(lambda: reference(*args), tiny)
    same = float("nan") if tiny else equal_share(reference(*args), expected)
    print(f"inductor: {inductor_us:.1f} us, {gigabytes / inductor_us * 1e3:.2f} TB/s, {same:.6f} of the bytes equal "
          "torch's")
    times = {}
    for launch in (TINY_CONFIGS if tiny else CONFIGS):
        run = kernel_run(args, launch)
        try:
            outputs = run()
        except Exception as error:  # out of shared memory or registers for this block shape
            print(f"{launch}: {type(error).__name__}")
            continue
        # the interpreter's float8 casts misround, so its bytes are not compared
        same = float("nan") if tiny else equal_share(outputs, expected)
        times[launch] = timed_us(run, tiny)
        print(f"{launch}: {times[launch]:.1f} us, {gigabytes / times[launch] * 1e3:.2f} TB/s, "
              f"{same:.6f} of the bytes equal torch's")
    best = min(times, key=times.get)
    script = train_gpt.RELU_SQUARE_LAUNCH
    print(f"{rows}x{cols}: inductor {inductor_us:.1f} us, script {script} {times.get(script, float('nan')):.1f} us, "
          f"best {best} {times[best]:.1f} us ({len(times)} configurations ran)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
