"""Session 33 probe: does the symmetric matmul kernel run slower launched from a compiled graph (inductor's
user-defined-Triton-kernel path, as in training's compiled Muon update) than launched eagerly, and does an opaque
custom op around it restore the eager time? Kernel microseconds a call from torch.profiler, cold (calls back to back)
and hot (each call after an 8192^3 bf16 GEMM, the power-capped state of training). Then orthogonalize whole, eager
and compiled: the sum of its kernels a call, and its wall time."""
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import train_gpt as short  # noqa: E402
import train_gpt_medium as medium  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sym_bench import stacks  # noqa: E402

A, B, C = 3.4445, -4.7750, 2.0315


@torch.library.custom_op("s33::sym", mutates_args=())
def sym_op(x: torch.Tensor, c: torch.Tensor | None, alpha: float, beta: float, diagonal: float) -> torch.Tensor:
    return medium.sym_matmul_triton(x, c, alpha, beta, diagonal)


@sym_op.register_fake
def _(x, c, alpha, beta, diagonal):
    return x.new_empty(x.size(0), x.size(1), x.size(1))


HEATER = None


def kernel_us(run, name: str, hot: bool, calls: int = 40) -> float:
    """Mean device microseconds of the kernels whose name holds `name`, a call of run()."""
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            if hot:
                HEATER @ HEATER
            run()
        torch.cuda.synchronize()
    total = sum(e.device_time_total for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
                and name in e.name)
    return total / calls


def wall_us(run, calls: int = 40) -> float:
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        run()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e6 / calls


def main():
    global HEATER
    device = torch.device("cuda")
    HEATER = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    print("track stack product | eager cold | compiled cold | op cold | eager hot | compiled hot | op hot (us)")
    for track, script in (("medium", medium), ("short", short)):
        for raw in stacks(script, False, device):
            if min(raw.shape[-2:]) < 128:  # track 1's 11 x 6 x 12 stack: launch-bound
                continue
            x = (raw / (raw.norm(dim=(-2, -1), keepdim=True) + 1e-7)).contiguous()
            xxt = script.sym_matmul(x)
            shape = "x".join(map(str, x.shape))
            compiled_xxt = torch.compile(lambda t: script.sym_matmul(t), dynamic=False)
            compiled_poly = torch.compile(lambda t: script.sym_matmul(t, t, alpha=C, beta=B, diagonal=A),
                                          dynamic=False)
            op_xxt = torch.compile(lambda t: sym_op(t, None, 1.0, 0.0, 0.0), dynamic=False)
            op_poly = torch.compile(lambda t: sym_op(t, t, C, B, A), dynamic=False)
            torch._dynamo.reset()
            rows = {"X X^T": (lambda: script.sym_matmul_triton(x), lambda: compiled_xxt(x), lambda: op_xxt(x)),
                    "poly": (lambda: script.sym_matmul_triton(xxt, xxt, C, B, A), lambda: compiled_poly(xxt),
                             lambda: op_poly(xxt))}
            for product, runs in rows.items():
                torch.testing.assert_close(runs[1]().float(), runs[0]().float(), rtol=2e-2, atol=1e-2)
                cold = [kernel_us(run, "sym_matmul", False) for run in runs]
                hot = [kernel_us(run, "sym_matmul", True) for run in runs]
                print(f"{track} {shape} {product} | " + " | ".join(f"{t:.1f}" for t in cold + hot), flush=True)
            ortho = torch.compile(script.orthogonalize, dynamic=False)
            eager = [kernel_us(lambda: script.orthogonalize(raw), "", hot) for hot in (False, True)]
            comp = [kernel_us(lambda: ortho(raw), "", hot) for hot in (False, True)]
            heater = kernel_us(lambda: None, "", True)
            print(f"{track} {shape} orthogonalize kernels a call: eager {eager[0]:.1f} / hot {eager[1] - heater:.1f}, "
                  f"compiled {comp[0]:.1f} / hot {comp[1] - heater:.1f} us; wall eager "
                  f"{wall_us(lambda: script.orthogonalize(raw)):.1f}, compiled {wall_us(lambda: ortho(raw)):.1f} us",
                  flush=True)


if __name__ == "__main__":
    main()
