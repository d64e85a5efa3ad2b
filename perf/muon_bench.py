"""Milliseconds of one Muon step over each track's real hidden matrices, run as the script runs it, and of the
Newton-Schulz orthogonalisation alone, matrix by matrix against stacked by shape (one batched call per group):
how much batching could take off the step (run on a GPU). Then, per shape group, one Newton-Schulz iteration's three
products as the script calls them (X X^T and a I + b A + c A A in the symmetric kernel, then (a I + poly) X in
bmm), each beside cuBLAS's plain bmm of the same product, and the update as one baddbmm (a X + poly X, the script's
call before session 25), with TFLOP/s counted as full products (2 m m n): which part is slow.

python perf/muon_bench.py [short|medium ...] [--tiny]  ->  per track (both when none is named) a line, then a parts
line per shape group. The first step's seconds are mostly the update's compile: run with
TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) for a cold figure.
--tiny runs small shapes on the CPU, without compiling, to check this script. --help prints this.
"""
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import train_gpt as short  # noqa: E402
import train_gpt_medium as medium  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import TINY_CPU_HINT, no_gpu_error, unknown_track_error, usage_or_error  # noqa: E402

TRACKS = {"short": short, "medium": medium}
NEWTON_SCHULZ_DTYPES = {"short": torch.bfloat16, "medium": torch.float16}  # orthogonalize's in each track
TINY = dict(model_dim=64, num_heads=2, head_dim=32, train_seq_len=512, val_seq_len=512)


def timed_ms(run, device: torch.device, repeat: int) -> float:
    """Wall milliseconds per call after two untimed calls (compiles), host overhead included."""
    run()
    run()
    short.sync(device)
    start = time.perf_counter()
    for _ in range(repeat):
        run()
    short.sync(device)
    return (time.perf_counter() - start) * 1000 / repeat


def bench(name: str, tiny: bool) -> str:
    script = TRACKS[name]
    device = torch.device("cpu" if tiny else "cuda")
    args = script.Hyperparameters(**(TINY if tiny else {}), device=device.type, compile=not tiny)
    torch.manual_seed(0)
    model = script.GPT(args).to(device)
    muon = script.build_optimizers(model, args, script.Comm(0, 1))[-1]
    for group in muon.param_groups:
        group["initial_lr"] = group["lr"]
        for p in group["params"]:
            p.grad = torch.randn_like(p) * 1e-3
    repeat = 2 if tiny else 20
    start = time.perf_counter()
    muon.step()  # compiles the update on the GPU: cold with an empty TORCHINDUCTOR_CACHE_DIR
    short.sync(device)
    first_s = time.perf_counter() - start
    step_ms = timed_ms(muon.step, device, repeat)
    # both tracks compile their update (orthogonalisation included), one call per group
    orthogonalize = script.orthogonalize if tiny else torch.compile(script.orthogonalize, dynamic=False)
    grads = [[p.grad for p in group["params"]] for group in muon.param_groups]
    stacks = [torch.stack(group).flatten(0, -3) for group in grads]  # (matrices, rows, cols) per shape
    per_matrix_ms = timed_ms(lambda: [orthogonalize(m[None]) for stack in stacks for m in stack], device, repeat)
    stacked_ms = timed_ms(lambda: [orthogonalize(stack) for stack in stacks], device, repeat)
    matrices = sum(stack.size(0) for stack in stacks)
    summary = (f"{name}: Muon step {step_ms:.2f} ms (first step {first_s:.1f} s); "
               f"Newton-Schulz of {matrices} matrices in {len(stacks)} shapes: "
               f"{per_matrix_ms:.2f} ms matrix by matrix, {stacked_ms:.2f} ms stacked by shape")
    return "\n".join([summary] + [newton_schulz_parts(name, script, stack, device, repeat) for stack in stacks])


def newton_schulz_parts(name: str, script, stack: torch.Tensor, device: torch.device, repeat: int) -> str:
    """One iteration's products on a group's stack, laid out as the compiled orthogonalize lays it out: short side
    first, contiguous (inductor writes the normed x that way), in orthogonalize's dtype; "poly A sym" is a product of
    two symmetric matrices that commute, as track 2's Gram Newton-Schulz steps take them."""
    x = stack.mT if stack.size(-2) > stack.size(-1) else stack
    x = (x / (x.norm(dim=(-2, -1), keepdim=True) + 1e-7)).to(NEWTON_SCHULZ_DTYPES[name]).contiguous()  # normed first
    xxt = script.sym_matmul(x)
    a, b, c = 3.4445, -4.7750, 2.0315  # Jordan's (a, b, c): sym_matmul takes c as alpha, b as beta, as orthogonalize
    poly = script.sym_matmul(xxt, xxt, alpha=c, beta=b)
    batch, m, n = x.shape
    parts = {"X X^T sym": (lambda: script.sym_matmul(x), 2 * m * m * n),
             "X X^T bmm": (lambda: torch.bmm(x, x.mT), 2 * m * m * n),
             "a I + b A + c A A sym": (lambda: script.sym_matmul(xxt, xxt, alpha=c, beta=b, diagonal=a),
                                       2 * m * m * m),
             "A A bmm": (lambda: torch.bmm(xxt, xxt), 2 * m * m * m),
             "poly X bmm": (lambda: torch.bmm(poly, x), 2 * m * m * n),
             "a X + poly X baddbmm": (lambda: torch.baddbmm(x, poly, x, beta=a), 2 * m * m * n)}
    if hasattr(script, "gram_newton_schulz"):
        parts["poly A sym"] = (lambda: script.sym_matmul(poly, y=xxt), 2 * m * m * m)
    times = {part: (timed_ms(run, device, repeat), flop * batch) for part, (run, flop) in parts.items()}
    return (f"{name} Newton-Schulz parts, {batch} x {m} x {n}: "
            + ", ".join(f"{part} {ms:.3f} ms ({flop / ms / 1e9:.0f} TFLOP/s)" for part, (ms, flop) in times.items()))


def main(argv: list[str]) -> int:
    if (answer := usage_or_error([arg for arg in argv if arg.startswith("-")], __doc__, ("--tiny",))) is not None:
        return answer
    tiny = "--tiny" in argv
    names = [arg for arg in argv if not arg.startswith("-")]
    if (answer := unknown_track_error(names, TRACKS)) is not None:
        return answer
    if not tiny and (answer := no_gpu_error("perf/muon_bench.py", TINY_CPU_HINT)):
        return answer
    for name in names or TRACKS:
        print(bench(name, tiny))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
