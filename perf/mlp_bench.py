"""Microseconds of the FP8 MLP backward's pass over the hidden activations (train_gpt.py's fp8_relu_square_grads:
a = relu(h)^2's e4m3 copy and a's gradient in, three float8 tensors out, two of them transposed) in one pass (its
Triton kernel writing all three) and in two (the kernel, then the transpose kernel for the gradient's transposed
copy) for a grid of launch configurations of the kernel, against inductor's kernel for the same torch ops (the one
training used before), at the proxy's 49,152 tokens x 3,072 hidden; each with its bandwidth and whether its bytes
equal those of the torch ops run eagerly (run on a GPU; a miscompiled one pass shows as fewer equal bytes).

python perf/mlp_bench.py [--tiny]  ->  one line per configuration and number of passes, then the script's and the
best. --tiny runs a small shape and two configurations on the CPU, the kernel under Triton's interpreter (its float32
outputs cast to float8 by torch) and the torch ops uncompiled, to check this script (tests/test_perf_mlp_bench.py).
--help prints this.
"""
import itertools
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import train_gpt  # noqa: E402
from bench_common import timed_us, tiny_bench_refusal  # noqa: E402

CONFIGS = list(itertools.product((32, 64, 128), (64, 128, 256), (4, 8)))  # BLOCK_ROWS, BLOCK_COLS, num_warps
TINY_CONFIGS = [train_gpt.RELU_SQUARE_LAUNCH, (32, 64, 4)]


def kernel_run(args, launch, one_pass: bool):
    """The op's GPU path in one pass or two with the kernel's launch configuration (float32 outputs under the
    interpreter)."""
    a_f8 = args[0]
    dtypes = (torch.float32,) * 2 if not a_f8.is_cuda else (torch.float8_e4m3fn, torch.float8_e5m2)

    def run():
        a_t, grad_h = a_f8.new_empty(a_f8.T.shape, dtype=dtypes[0]), a_f8.new_empty(a_f8.shape, dtype=dtypes[1])
        grad_h_t = a_f8.new_empty(a_f8.T.shape, dtype=dtypes[1]) if one_pass else None
        train_gpt.launch_relu_square_grads(*args, a_t, grad_h, grad_h_t, launch=launch)
        return a_t, grad_h, grad_h_t if one_pass else train_gpt.transposed(grad_h)
    return run


def torch_cast(outputs, like) -> tuple:
    """The interpreter's float32 outputs cast by torch to like's dtypes (the interpreter's own float8 casts
    misround), so that their bytes can be compared with the torch ops'."""
    return tuple(out.to(ref.dtype) for out, ref in zip(outputs, like))


def equal_share(ours, theirs) -> float:
    """Fraction of the three outputs' bytes that equal the reference's (the torch ops run eagerly)."""
    same = sum((a.view(torch.uint8) == b.view(torch.uint8)).sum().item() for a, b in zip(ours, theirs))
    return same / sum(t.numel() for t in theirs)


def main(argv: list[str]) -> int:
    if (answer := tiny_bench_refusal(argv, __doc__, "perf/mlp_bench.py")) is not None:
        return answer
    tiny = "--tiny" in argv
    train_gpt.configure_triton_builds()  # as the training run builds the kernel
    device = torch.device("cpu" if tiny else "cuda")
    rows, cols = (256, 384) if tiny else (49152, 3072)
    args = train_gpt.relu_square_check_inputs(rows, cols, device)  # scales that fill e4m3's and e5m2's ranges
    torch_path = train_gpt.relu_square_grads_torch
    reference = torch_path if tiny else torch.compile(torch_path, dynamic=False)
    expected = torch_path(*args)
    gigabytes = (1 + args[1].element_size() + 3 * 1) * rows * cols / 1e9  # e4m3 a and the gradient read, three
    # float8 tensors written
    reference_name = "torch ops, uncompiled (--tiny)" if tiny else "inductor"  # tiny: the reference itself
    inductor_us = timed_us(lambda: reference(*args), tiny)
    same = "" if tiny else f", {equal_share(reference(*args), expected):.6f} of the bytes equal torch's"
    print(f"{reference_name}: {inductor_us:.1f} us, {gigabytes / inductor_us * 1e3:.2f} TB/s{same}")
    times = {"one pass": {}, "two passes": {}}  # launch configuration -> us
    for launch in (TINY_CONFIGS if tiny else CONFIGS):
        for passes, passes_times in times.items():
            run = kernel_run(args, launch, one_pass=passes == "one pass")
            try:
                outputs = run()
            except Exception as error:  # out of shared memory or registers for this block shape
                print(f"{launch} {passes}: {type(error).__name__}")
                continue
            same = equal_share(torch_cast(outputs, expected) if tiny else outputs, expected)
            passes_times[launch] = timed_us(run, tiny)
            print(f"{launch} {passes}: {passes_times[launch]:.1f} us, "
                  f"{gigabytes / passes_times[launch] * 1e3:.2f} TB/s, {same:.6f} of the bytes equal torch's")
    script = train_gpt.RELU_SQUARE_LAUNCH
    summary = [f"{reference_name} {inductor_us:.1f} us"]
    for passes, passes_times in times.items():
        best = min(passes_times, key=passes_times.get)
        summary.append(f"{passes}: script {script} {passes_times.get(script, float('nan')):.1f} us, best {best} "
                       f"{passes_times[best]:.1f} us ({len(passes_times)} configurations ran)")
    print(f"{rows}x{cols}: " + "; ".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
