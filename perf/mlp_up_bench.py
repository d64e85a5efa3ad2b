"""Microseconds of the FP8 MLP's up projection (train_gpt.py's FP8MLP forward, from x's e4m3 copy to a = relu(h)^2's)
at the proxy's 49,152 tokens x 768 -> 3,072: the GEMM with a's e4m3 cast in its epilogue (relu_square_up_kernel) for a
grid of launch configurations, and with the sampled rows' GEMM that gives a's scale before it, against the path they
replace (cuBLAS's GEMM to a bf16 h, then inductor's relu-square cast); each configuration with its TFLOP/s, the share
of a's bytes equal to torch's (the fp32 product cast by torch) and the most e4m3 steps between the two (run on a GPU;
accumulation order moves a few entries one step).

python perf/mlp_up_bench.py [--tiny]  ->  one line for the replaced path, one per configuration, then the script's
configuration and the best, and the new path (the sampled rows' GEMM for a's scale, then the script's configuration,
timed together) against the replaced one. --tiny runs a small shape and two configurations on the CPU, the kernel under
Triton's interpreter (its float32 output cast to e4m3 by torch) and the torch ops uncompiled, to check this script
(tests/test_perf_mlp_up_bench.py). --help prints this. The replaced path's and the scale's GEMMs run on cuBLASLt
with training's settings (train_gpt.CUBLASLT_SETTINGS, set at import where the environment does not say otherwise).
"""
import itertools
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import train_gpt  # noqa: E402
from bench_common import cublaslt_as_training, timed_us, tiny_bench_refusal  # noqa: E402

cublaslt_as_training()  # before any CUDA work: torch may read the settings once

E4M3 = torch.float8_e4m3fn
# BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages, split epilogue
CONFIGS = [(128, n, k, 8, 8, stages, split) for n, k, stages, split in itertools.product(
    (128, 256), (64, 128), (3, 4), (True, False))]
TINY_CONFIGS = [train_gpt.RELU_SQUARE_UP_LAUNCH, (32, 64, 32, 2, 4, 1, False)]
ROW_STEP = 16  # training's --fp8_amax_row_step


def up_inputs(rows: int, dim: int, hidden: int, device: torch.device) -> tuple:
    """x's and fc_w's e4m3 copies and scales as FP8MLP takes them (x rms-normed, fc_w at init's scale, hidden x dim),
    and a's scale from every ROW_STEP-th row as FP8MLP computes it."""
    gen = torch.Generator(device).manual_seed(0)
    x = F.rms_norm(torch.randn(rows, dim, device=device, generator=gen), (dim,)).bfloat16()
    w = torch.randn(hidden, dim, device=device, generator=gen) * dim ** -0.5
    x_scale = torch.tensor(train_gpt.normed_e4m3_scale(dim), device=device)  # FP8MLP's fixed scale for its input
    x_f8, (w_f8, w_scale) = train_gpt.to_float8(x, x_scale, E4M3), train_gpt.to_float8_scaled(w, E4M3)
    return x_f8, w_f8, x_scale, w_scale, sampled_a_scale(x_f8, w_f8, x_scale, w_scale)


def sampled_a_scale(x_f8, w_f8, x_scale, w_scale):
    """a's scale as FP8MLP's forward makes it (train_gpt.sampled_relu_square_scale at training's row step)."""
    return train_gpt.sampled_relu_square_scale(x_f8, w_f8, x_scale, w_scale, ROW_STEP)


def replaced_path(x_f8, w_f8, x_scale, w_scale, a_scale):
    """The up projection as FP8MLP made it before: a bf16 h from the GEMM, then the relu-square cast."""
    h = train_gpt.scaled_mm(x_f8, w_f8.T, x_scale, w_scale, torch.bfloat16, fast_accum=True)
    return train_gpt.to_float8(F.relu(h.float()).square(), a_scale, E4M3)


def steps_apart(ours: torch.Tensor, theirs: torch.Tensor) -> tuple[float, int]:
    """(share of equal bytes, most e4m3 steps between the two) for non-negative e4m3 tensors."""
    steps = (ours.view(torch.uint8).int() - theirs.view(torch.uint8).int()).abs()
    return (steps == 0).float().mean().item(), int(steps.max())


def main(argv: list[str]) -> int:
    if (answer := tiny_bench_refusal(argv, __doc__, "perf/mlp_up_bench.py")) is not None:
        return answer
    tiny = "--tiny" in argv
    train_gpt.configure_triton_builds()  # as the training run builds the kernel
    device = torch.device("cpu" if tiny else "cuda")
    rows, dim, hidden = (256, 64, 128) if tiny else (49152, 768, 3072)
    args = up_inputs(rows, dim, hidden, device)
    expected = train_gpt.relu_square_up_torch(*args)
    out_dtype = torch.float32 if tiny else E4M3  # the interpreter's own float8 casts misround
    compiled = (lambda f: f) if tiny else (lambda f: torch.compile(f, dynamic=False))
    replaced, scale = compiled(replaced_path), compiled(sampled_a_scale)
    teraflops = 2 * rows * dim * hidden / 1e12
    replaced_us = timed_us(lambda: replaced(*args), tiny)
    equal, steps = steps_apart(replaced(*args), expected)
    print(f"replaced (GEMM to bf16 h, then the cast): {replaced_us:.1f} us, {equal:.6f} of a's bytes equal torch's "
          f"fp32 cast, up to {steps} steps apart")
    times = {}  # launch configuration -> us
    for launch in (TINY_CONFIGS if tiny else CONFIGS):
        def run(launch=launch):
            return train_gpt.relu_square_up_triton(*args, out_dtype=out_dtype, launch=launch)
        try:
            a = run().to(E4M3)
        except Exception as error:  # out of shared memory or registers for this tile shape
            print(f"{launch}: {type(error).__name__}")
            continue
        times[launch] = timed_us(run, tiny)
        equal, steps = steps_apart(a, expected)
        print(f"{launch}: {times[launch]:.1f} us, {teraflops / times[launch] * 1e6:.0f} TFLOP/s, {equal:.6f} of a's "
              f"bytes equal torch's, up to {steps} steps apart")
    script, best = train_gpt.RELU_SQUARE_UP_LAUNCH, min(times, key=times.get)
    # the new path timed whole: the sampled GEMM alone is small enough for the host's launches to set its time
    new_us = timed_us(lambda: train_gpt.relu_square_up_triton(*args[:4], scale(*args[:4]), out_dtype=out_dtype,
                                                              launch=script), tiny)
    print(f"{rows}x{dim}->{hidden}: replaced {replaced_us:.1f} us; script {script} "
          f"{times.get(script, float('nan')):.1f} us, best {best} {times[best]:.1f} us ({len(times)} configurations "
          f"ran); new path (a's scale from every {ROW_STEP}th row, then the script's) {new_us:.1f} us, "
          f"{new_us - replaced_us:+.1f} us a call")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
