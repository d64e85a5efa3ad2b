"""Milliseconds of the symmetric matmul kernel (both tracks' Newton-Schulz: A = X X^T, then b A + c A A) on each
track's real Muon stacks, for a grid of launch configurations against the one the scripts use and against
torch's bmm / baddbmm: whether another tile shape would shorten the Newton-Schulz (run on a GPU).

python perf/sym_bench.py [--tiny]  ->  one line per stack and product.
--tiny runs small shapes and two configurations on the CPU, the kernel under Triton's interpreter, to check this
script (tests/test_perf_sym_bench.py). --help prints this.
"""
import functools
import itertools
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import train_gpt as short  # noqa: E402
import train_gpt_medium as medium  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import timed_us, tiny_bench_refusal  # noqa: E402

SCRIPT_CONFIG = (128, 64, 8, 3)  # BLOCK_M, BLOCK_K, num_warps, num_stages in sym_matmul_triton
CONFIGS = list(itertools.product((64, 128), (32, 64, 128), (4, 8), (3, 4)))
TINY_CONFIGS = [SCRIPT_CONFIG, (64, 32, 4, 3)]


def stacks(script, tiny: bool, device: torch.device) -> list[torch.Tensor]:
    """One bf16 (matrices, rows, cols) stack per shape of the track's Muon matrices, wide as orthogonalize takes them
    (contiguous: track 2's tall fc_w reaches the kernel as a transposed view). Both tracks' stacks go through track
    1's kernel in bf16; track 2 launches the same tiles in fp16, at the same tensor-core rate."""
    sizes = dict(model_dim=64, num_heads=2, head_dim=32, train_seq_len=512, val_seq_len=512) if tiny else {}
    with torch.device("meta"):
        model = script.GPT(script.Hyperparameters(**sizes))
    by_shape = {}
    for p in model.blocks.parameters():
        if p.ndim >= 2:
            by_shape.setdefault(tuple(p.shape), []).append(p)
    result = []
    for shape, params in by_shape.items():
        rows, cols = shape[-2:]
        count = 2 if tiny else len(params) * (shape[0] if len(shape) == 3 else 1)
        # the interpreter's tl.dot cannot multiply bf16: fp32 there
        stack = torch.randn(count, min(rows, cols), max(rows, cols), device=device)
        result.append(stack if tiny else stack.bfloat16())
    return result


def launch(x: torch.Tensor, c: torch.Tensor | None, config, alpha=1.0, beta=0.0) -> torch.Tensor:
    block_m, block_k, warps, stages = config
    batch, m, k = x.shape
    out = x.new_empty(batch, m, m)
    grid = (triton.cdiv(m, block_m) ** 2, batch)
    short.sym_matmul_kernel[grid](x, out if c is None else c, out, m, k, alpha, beta, 0.0,  # no diagonal term
                                  *x.stride(), *out.stride(), HAS_C=c is not None, BLOCK_M=block_m,
                                  BLOCK_K=block_k, num_warps=warps, num_stages=stages)
    return out


def timed_ms(run, tiny: bool) -> float:
    return timed_us(run, tiny) / 1000


def bench_product(name: str, x: torch.Tensor, c: torch.Tensor | None, reference, configs, tiny: bool) -> str:
    """Time each configuration (skipping those that do not fit or compute wrongly) and torch's product."""
    expected = reference()
    scalars = (2.0, -1.0) if c is not None else ()  # alpha, beta of the reference's 2 A A - A
    times = {}
    for config in configs:
        run = functools.partial(launch, x, c, config, *scalars)
        try:
            out = run()
        except Exception as error:  # out of shared memory or registers for this tile shape
            print(f"  {name} {config}: {type(error).__name__}", file=sys.stderr)
            continue
        if not torch.allclose(out.float(), expected.float(), rtol=2e-2, atol=2e-2 * expected.float().abs().max()):
            print(f"  {name} {config}: wrong result", file=sys.stderr)
            continue
        times[config] = timed_ms(run, tiny)
    best = min(times, key=times.get)
    return (f"{name}: script {SCRIPT_CONFIG} {times.get(SCRIPT_CONFIG, float('nan')):.3f} ms, best {best} "
            f"{times[best]:.3f} ms, torch {timed_ms(reference, tiny):.3f} ms ({len(times)} configurations ran)")


def main(argv: list[str]) -> int:
    if (answer := tiny_bench_refusal(argv, __doc__, "perf/sym_bench.py")) is not None:
        return answer
    tiny = "--tiny" in argv
    device = torch.device("cpu" if tiny else "cuda")
    configs = TINY_CONFIGS if tiny else CONFIGS
    for track, script in (("short", short), ("medium", medium)):
        for x in stacks(script, tiny, device):
            shape = "x".join(map(str, x.shape))
            print(bench_product(f"{track} X X^T {shape}", x, None, lambda: torch.bmm(x, x.mT), configs, tiny))
            a = torch.bmm(x, x.mT)
            print(bench_product(f"{track} 2 A A - A {a.size(0)}x{a.size(1)}", a, a,
                                lambda: torch.baddbmm(a, a, a, beta=-1.0, alpha=2.0), configs, tiny))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
