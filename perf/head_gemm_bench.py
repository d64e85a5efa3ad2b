"""The heads' large GEMMs whole against in row chunks below 2^31 logits, written into one buffer (run on a GPU). Asked
when track 2's profile (session 27) listed the head's cuBLAS kernel 16 times a step; other GEMMs shared that kernel,
and session 27 measured the chunks no faster (perf/NOTES.md).

python perf/head_gemm_bench.py [--tiny]  ->  one line per (GEMM, chunks): microseconds, TFLOP/s, kernel launches a
call. --tiny: small shapes on the CPU, timed by the clock, without track 1's FP8 GEMM (the test runs this). --help
prints this. Track 1's FP8 GEMM runs on cuBLASLt with training's settings (train_gpt.CUBLASLT_SETTINGS, set at
import where the environment does not say otherwise); track 2's bf16 GEMMs run on cuBLAS, which they do not touch.
"""
import functools
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import cublaslt_as_training, timed_us, tiny_bench_refusal  # noqa: E402

cublaslt_as_training()  # before any CUDA work: torch may read the settings once


def cuda_kernels(run) -> list:
    """The profiler's events of the CUDA kernels one call of run() launches (after a first call)."""
    run()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profiler:
        run()
        torch.cuda.synchronize()
    return [event for event in profiler.events() if event.device_type == torch.autograd.DeviceType.CUDA]


def launches(run, tiny: bool) -> int | str:
    """CUDA kernels one call of run() launches ("-" for the tiny run on the CPU)."""
    return "-" if tiny else len(cuda_kernels(run))


def chunked_mm(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, chunks: int):
    """out = a @ b, computed chunks rows of a at a time into out's rows."""
    return lambda: [torch.mm(a_rows, b, out=out_rows) for a_rows, out_rows in zip(a.chunk(chunks), out.chunk(chunks))]


def chunked_scaled_mm(a: torch.Tensor, b: torch.Tensor, chunks: int):
    """Track 1's FP8 logits (as its scaled_mm), chunks rows at a time, each chunk its own output: a bound, without
    the concatenation."""
    one = torch.ones((), device="cuda")
    return lambda: [torch._scaled_mm(a_rows, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True)
                    for a_rows in a.chunk(chunks)]


def report(name: str, run, flops: float, tiny: bool) -> None:
    us = timed_us(run, tiny)
    print(f"{name}: {us:9.1f} us  {flops / us / 1e6:6.1f} TFLOP/s  {launches(run, tiny)} launches")


def main(argv: list[str]) -> int:
    if (answer := tiny_bench_refusal(argv, __doc__, "perf/head_gemm_bench.py")) is not None:
        return answer
    tiny = "--tiny" in argv
    device = "cpu" if tiny else "cuda"
    gen = torch.Generator(device).manual_seed(0)
    tokens, dim, vocab = (256, 64, 320) if tiny else (65536, 1024, 50304)  # track 2's step
    x = torch.randn(tokens, dim, device=device, generator=gen).bfloat16()
    w = torch.randn(vocab, dim, device=device, generator=gen).mul_(0.02).bfloat16()
    logits = torch.empty(tokens, vocab, device=device, dtype=torch.bfloat16)
    grad_x = torch.empty_like(x)
    flops = 2 * tokens * dim * vocab
    for chunks in (1, 2, 4):
        report(f"track 2 logits = x @ w.T, {chunks} chunks", chunked_mm(x, w.T, logits, chunks), flops, tiny)
    logits.normal_(generator=gen).mul_(1e-3)
    for chunks in (1, 2, 4):
        report(f"track 2 grad_x = grad_logits @ w, {chunks} chunks", chunked_mm(logits, w, grad_x, chunks), flops, tiny)
    report("track 2 grad_w = grad_logits.T @ x, whole", functools.partial(torch.matmul, logits.T, x), flops, tiny)
    if tiny:
        return 0
    del logits, grad_x
    tokens, dim = 49152, 768  # track 1's step, FP8
    x_f8 = torch.randn(tokens, dim, device="cuda", generator=gen).to(torch.float8_e4m3fn)
    w_f8 = torch.randn(vocab, dim, device="cuda", generator=gen).to(torch.float8_e4m3fn)
    for chunks in (1, 2, 4):
        report(f"track 1 FP8 logits, {chunks} chunks", chunked_scaled_mm(x_f8, w_f8.T, chunks),
               2 * tokens * dim * vocab, tiny)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
