"""Would track 2's MLP gain from its RMSNorm and relu-square in the epilogues of its bf16 GEMMs? Microseconds of each
pass as plain torch would run it (compiled: inductor's passes around cuBLAS's GEMM) against one persistent Triton
GEMM (TMA loads and stores) with the passes in its epilogue, at the proxy's 65,536 tokens, 1,024 -> 4,096, with
r = each row's reciprocal RMS of x:

  forward   h = rms_norm(x) @ fc_w^T, a = relu(h)^2   (a pass writes the normed x; cuBLAS writes h; a pass writes a)
  backward  2 relu(h) * (grad_y @ proj_w) * r          (cuBLAS writes grad_a, a pass reads it and h)

The kernel is train_gpt_medium.py's (--mlp_epilogue): its forward reads x, scales h's rows by r and writes only a, and
its backward takes relu(h) as sqrt(a) and returns the gradient at h times r, which is what fc_w's gradient and
RMSNorm's backward need. r comes from a reduction that inductor can fuse into the residual add before it (not
profiled), so it is computed once here, outside the timing.
A layer's epilogues save, forward, the write and the read of h (1.07 GB) and the normed x (0.13 GB written, 0.13 GB
read), and backward, grad_a's write and read (1.07 GB); that pays only if the Triton GEMM keeps within ~10% of cuBLAS
at K = 1,024.

python perf/medium_mlp_bench.py [--tiny] [--warps=N,...] [--script=PATH] [--best_script=PATH]  ->  per pass, the
torch path, then one line per launch configuration (tile shape, warps, stages, whether the epilogue stores each tile in
two halves, programs an SM) with its TFLOP/s and its largest difference from the torch path's output, then the
script's (MLP_LAUNCH of the pass) and the best. Two programs an SM are tried with 128 x 128 tiles, whose two, at 2 or
3 stages, fit in an SM's shared memory (perf/kernel_report.py).
--tiny runs a small shape and three configurations (one tile shape, the epilogue whole and split, split with two
programs a "SM") on the CPU in float32, the kernel under Triton's interpreter
(tests/test_perf_medium_mlp_bench.py). --best_script=PATH also writes a copy of train_gpt_medium.py whose
MLP_LAUNCH holds each pass's fastest launch (perf/ab.sh runs it next to the script); from loading the script to
writing the copy, the bench holds both files' locks (perf/proxy_common.sh's PATH.lock), so that a job staging versions
over either stops with one line, as this bench does while one is staging. --script=PATH benches the
kernel of another copy of the script (e.g. a branch's, in perf/base/) instead of the repository's. --warps=8 keeps
the configurations with that warp count (a list: 4,8; the script's launch always runs on the GPU). --help prints
this.
"""
import contextlib
import itertools
import re
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import (TINY_CPU_HINT, hold_script_lock, no_gpu_error, option_list, option_values,  # noqa: E402
                          timed_us, usage_or_error)
from track_scripts import load_script  # noqa: E402

SCRIPT = Path(__file__).resolve().parents[1] / "train_gpt_medium.py"

# BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages, split epilogue (only where a tile's epilogue is large),
# programs an SM. 16 warps ran slower in every shape that fit (session 28: forward 904-1,175 us, backward 1,161-1,388
# us, against the script's 857 / 1,032), so the table stops at 8
CONFIGS = [(m, n, k, 8, w, s, split, 1) for (m, n, k), w, s, split in itertools.product(
    ((128, 128, 64), (128, 256, 64), (128, 128, 128), (256, 128, 64)), (4, 8), (3, 4), (False, True))
    if not split or m * n > 128 * 128 or k > 64]
CONFIGS += [(128, 128, 64, 8, w, s, True, 2) for w, s in itertools.product((4, 8), (2, 3))]
TINY_CONFIGS = [(32, 64, 32, 2, 4, 1, False, 1), (32, 64, 32, 2, 4, 1, True, 1), (32, 64, 32, 2, 4, 1, True, 2)]


def forward_torch(x, fc_w):
    h = torch.nn.functional.rms_norm(x, (x.size(-1),)) @ fc_w.T
    return h, torch.relu(h).square()


def backward_torch(grad_y, proj_w, h, row_scale):
    return 2 * torch.relu(h) * (grad_y @ proj_w) * row_scale[:, None]


def bench_pass(name: str, torch_path, ours, args, teraflop: float, tiny: bool, launches: list,
               script_launch: tuple) -> tuple:
    """The torch path (compiled on the GPU) and each launch of ours: time, TFLOP/s, largest difference. Returns the
    fastest launch among those whose output matches the torch path's (float32 in the interpreter to 1e-5; bf16 on
    the GPU to 2e-2 of the largest output, where every launch differs by the same rounding, ~8e-3)."""
    reference = torch_path if tiny else torch.compile(torch_path, dynamic=False)
    expected = reference(*args)
    expected = expected[-1] if isinstance(expected, tuple) else expected
    before_us = timed_us(lambda: reference(*args), tiny)
    print(f"{name}: cuBLAS + inductor {before_us:.1f} us, {teraflop / before_us * 1e6:.0f} TFLOP/s")
    times, tolerance = {}, 1e-5 if tiny else 2e-2
    for launch in launches:
        try:
            result = ours(launch)
        except Exception as error:  # out of shared memory or registers for this tile shape
            print(f"{name} {launch}: {type(error).__name__}")
            continue
        difference = (result.float() - expected.float()).abs().max().item() / expected.float().abs().max().item()
        launch_us = timed_us(lambda: ours(launch), tiny)
        if difference <= tolerance:
            times[launch] = launch_us
        print(f"{name} {launch}: {launch_us:.1f} us, {teraflop / launch_us * 1e6:.0f} TFLOP/s, largest "
              f"difference {difference:.1e} of the largest output" + ("" if difference <= tolerance else " (wrong)"))
    best, script = min(times, key=times.get), script_launch
    print(f"== {name}: before {before_us:.1f} us, script {script} {times.get(script, float('nan')):.1f} us, best "
          f"{best} {times[best]:.1f} us ({len(times)} configurations ran)")
    return best


def write_script_with_launches(script: Path, path: str, launches: dict) -> None:
    """A copy of the script whose MLP_LAUNCH holds the given launches, for perf/ab.sh next to the script."""
    source = script.read_text()
    table = re.search(r"^MLP_LAUNCH = \{.*?\}\n", source, flags=re.M | re.S)
    lines = ",\n              ".join(f'"{name}": {launch}' for name, launch in launches.items())
    Path(path).write_text(source[:table.start()] + f"MLP_LAUNCH = {{{lines}}}\n" + source[table.end():])
    print(f"best launches written to {path}")


def path_error(argv: list[str]) -> int | None:
    """2 after one line when a --script names no file or a --best_script a file in no folder; None when none does."""
    for script in option_values(argv, "script"):
        if not Path(script).is_file():
            print(f"error: --script={script}: no such file; give a copy of train_gpt_medium.py (see --help)",
                  file=sys.stderr)
            return 2
    for path in option_values(argv, "best_script"):
        if not Path(path).parent.is_dir():
            print(f"error: --best_script={path}: no folder {Path(path).parent} to write it in; create it or give "
                  "another path", file=sys.stderr)
            return 2
    return None


def main(argv: list[str]) -> int:
    if (answer := usage_or_error(argv, __doc__, ("--tiny",), ("script", "warps", "best_script"))) is not None:
        return answer
    if (answer := path_error(argv)) is not None:
        return answer
    tiny = "--tiny" in argv
    warps = option_list(argv, "warps")
    table = TINY_CONFIGS if tiny else CONFIGS
    configs = [launch for launch in table if not warps or str(launch[4]) in warps]
    if not configs:
        counts = ", ".join(str(count) for count in sorted({launch[4] for launch in table}))
        print(f"error: --warps={','.join(warps)}: no configuration has those warp counts (the table's: {counts})",
              file=sys.stderr)
        return 2
    if not tiny and (answer := no_gpu_error("perf/medium_mlp_bench.py", TINY_CPU_HINT)):
        return answer
    script = Path((option_values(argv, "script") or [SCRIPT])[-1])
    best_scripts = option_values(argv, "best_script")
    with contextlib.ExitStack() as held:
        locked = {}  # by the file itself: a second flock of one file from this process would find the first held
        for path in [script, *best_scripts] if best_scripts else []:
            locked.setdefault(Path(path).resolve(), path)
        for path in locked.values():
            if (answer := hold_script_lock(held, path, "perf/medium_mlp_bench.py")) is not None:
                return answer
        return bench(script, best_scripts, configs, tiny)


def bench(script: Path, best_scripts: list[str], configs: list, tiny: bool) -> int:
    """Both passes' benches of script's kernel over configs; each of best_scripts, a copy of script with the best."""
    medium = load_script(script)
    medium.configure_triton_builds()  # as the training run builds the kernel
    device = torch.device("cpu" if tiny else "cuda")
    rows, dim, hidden = (256, 128, 384) if tiny else (65536, 1024, 4096)
    dtype = torch.float32 if tiny else torch.bfloat16  # the interpreter's TMA loads of bf16 read garbage
    gen = torch.Generator(device).manual_seed(0)
    x, grad_y = (torch.randn(rows, dim, device=device, generator=gen).to(dtype) for _ in range(2))
    fc_w = (torch.randn(hidden, dim, device=device, generator=gen) * dim ** -0.5).to(dtype)
    proj_w = (torch.randn(dim, hidden, device=device, generator=gen) * hidden ** -0.5).to(dtype)
    teraflop = 2 * rows * dim * hidden / 1e12
    row_scale = medium.reciprocal_rms(x)

    def launches(name: str) -> tuple[list, tuple]:
        """The configurations for the pass, with the script's launch first on the GPU whatever --warps keeps (the
        tiny shapes have their own), and the script's launch."""
        script_launch = medium.MLP_LAUNCH[name]
        ours = [launch for launch in configs if tiny or launch != script_launch]
        return [script_launch] * (not tiny) + ours, script_launch

    best = {"forward": bench_pass("forward", forward_torch,
                                  lambda launch: medium.relu_square_gemm(x, fc_w, row_scale, launch=launch),
                                  (x, fc_w), teraflop, tiny, *launches("forward"))}
    h_reference, a_reference = forward_torch(x, fc_w)
    best["backward"] = bench_pass("backward", backward_torch,
                                  lambda launch: medium.relu_square_gemm(grad_y, proj_w, row_scale, a_reference,
                                                                         launch),
                                  (grad_y, proj_w, h_reference, row_scale), teraflop, tiny,
                                  *launches("backward"))
    for path in best_scripts:
        write_script_with_launches(script, path, best)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
