"""Launch configurations of track 1's head kernels at the proxy step's shapes (run on a GPU): softcap_ce_kernel by
block and warps, transpose_kernel (the float8 gradient's copy for grad_w, the QKV projection's e4m3 gradient's copy
for its weight gradient, fp8_qkv_weight_grad, and FP8MLP's copy of its e4m3 x, whose e5m2 grad_y has the same shape)
and float8_both_ways_kernel (x and w) by block and warps. Each configuration's output is compared with the script's
own launch: the transposes byte for byte, the loss kernel by its largest loss difference and the share of equal float8
gradient bytes (its row sum's order depends on the block).

python perf/head_kernels_bench.py [--tiny]  ->  one line per kernel and configuration: ms and the comparison; the
script's own launch is marked. --tiny: small shapes on the CPU under Triton's interpreter, fp32 outputs for the loss
kernel (the test runs this). --help prints this.
"""
import functools
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import timed_us, tiny_bench_refusal  # noqa: E402
from track_scripts import ROOT, load_script  # noqa: E402

CE_LAUNCHES = [(8192, 16), (4096, 8), (2048, 4), (4096, 4), (8192, 8), (2048, 8), (4096, 16)]  # BLOCK, warps
# the transposes' BLOCK, warps
SQUARE_LAUNCHES = [(64, 4), (64, 8), (128, 4), (128, 8), (32, 4), (128, 16), (256, 8), (256, 16)]


def bench_ce(tg, tiny: bool, device: str) -> None:
    rows, vocab = (8, 384) if tiny else (49152, 50304)
    gen = torch.Generator(device).manual_seed(0)
    logits = (torch.randn(rows, vocab, device=device, generator=gen) * 3).bfloat16()
    targets = torch.randint(0, vocab, (rows,), device=device, generator=gen, dtype=torch.int32)
    grad_dtype = torch.float32 if tiny else torch.float8_e5m2
    base = None
    for launch in CE_LAUNCHES:
        grad = torch.empty(rows, vocab, device=device, dtype=grad_dtype)
        run = functools.partial(tg.softcap_ce_rows, logits, targets, 1 / 448, grad, launch)
        us = timed_us(run, tiny)
        loss, grad_bytes = run(), grad if tiny else grad.view(torch.uint8)
        base = base or (loss, grad_bytes)
        loss_diff = (loss - base[0]).abs().max().item()
        same = (grad_bytes == base[1]).float().mean().item()
        mark = " (the script's)" if launch == (tg.CE_BLOCK, tg.CE_WARPS) else ""
        print(f"softcap_ce_kernel BLOCK={launch[0]} warps={launch[1]}{mark}: {us / 1000:.3f} ms, loss within "
              f"{loss_diff:.1e}, {same:.6f} of the gradient equal")


def bench_squares(tg, tiny: bool, device: str) -> None:
    gen = torch.Generator(device).manual_seed(1)
    rows, vocab, dim = (200, 300, 96) if tiny else (49152, 50304, 768)
    grad = (torch.randn(rows, vocab, device=device, generator=gen) * 100).to(torch.float8_e5m2)
    qkv_grad = (torch.randn(rows, 3 * dim, device=device, generator=gen) * 100).to(torch.float8_e4m3fn)
    mlp_x = (torch.randn(rows, dim, device=device, generator=gen) * 100).to(torch.float8_e4m3fn)
    x = (torch.randn(rows, dim, device=device, generator=gen) * 3).bfloat16()
    x_s = tg.normed_e4m3_scale(dim)
    w = torch.randn(vocab, dim, device=device, generator=gen) * 0.3
    cases = [("transpose_kernel, the float8 gradient", lambda launch: (tg.transposed(grad, launch),),
              tg.TRANSPOSE_LAUNCH),
             ("transpose_kernel, the QKV gradient", lambda launch: (tg.transposed(qkv_grad, launch),),
              tg.TRANSPOSE_LAUNCH),
             ("transpose_kernel, the MLP's x", lambda launch: (tg.transposed(mlp_x, launch),), tg.TRANSPOSE_LAUNCH),
             ("float8_both_ways_kernel, x (bf16)", lambda launch: tg.float8_both_ways(x, x_s, launch),
              tg.FLOAT8_BOTH_WAYS_LAUNCH),
             ("float8_both_ways_kernel, w (fp32)", lambda launch: tg.float8_both_ways(w, 2 ** -9, launch),
              tg.FLOAT8_BOTH_WAYS_LAUNCH)]
    for name, run, script_launch in cases:
        base = None
        for launch in SQUARE_LAUNCHES:
            us = timed_us(functools.partial(run, launch), tiny)
            raw = [t.view(torch.uint8) for t in run(launch)]
            base = base or raw
            equal = all(torch.equal(a, b) for a, b in zip(raw, base))
            mark = " (the script's)" if launch == script_launch else ""
            print(f"{name} BLOCK={launch[0]} warps={launch[1]}{mark}: {us / 1000:.3f} ms, "
                  f"{'equal' if equal else 'DIFFERS'}")


def main(argv: list[str]) -> int:
    if (answer := tiny_bench_refusal(argv, __doc__, "perf/head_kernels_bench.py")) is not None:
        return answer
    tiny = "--tiny" in argv
    tg = load_script(ROOT / "train_gpt.py")
    if not tiny:
        tg.configure_triton_builds()  # as in training: the transposed float8 stores need it
        print("ptxas:", tg.ptxas_in_use())
    device = "cpu" if tiny else "cuda"
    bench_ce(tg, tiny, device)
    bench_squares(tg, tiny, device)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
