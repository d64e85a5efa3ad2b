"""What FP8 could save on track 1's attention projections, and what its float8 casts cost, one block at the proxy's
48K-token micro-step (49,152 x 768; QKV 2,304 wide): the six GEMMs of a block's forward and backward in bf16, as the
script runs them, and on the FP8 tensor cores with the operand layouts they need (both operands K-major), then each
cast those FP8 GEMMs need (float8 in both layouts, scales from every 16th row as FP8MLP's), compiled as the script's
graph would compile them. Then a hybrid: the four GEMMs whose sum runs over a width (768 or 2,304), not over the
tokens, with one scale per row (per token, per output feature: e4m3 both, bf16 out; the script's --fp8_qkv), which a
kernel can compute from the row it holds; the two weight gradients stay bf16, so nothing needs a transposed float8
copy. Asked in session 44: the lever's bound is what the FP8 GEMMs save over bf16 with the casts free (fused into
neighbouring kernels); the unfused version, session 32's branch, gained 0.5% (perf/NOTES.md).

python perf/attention_fp8_bench.py [--tiny]  ->  one line per GEMM (bf16, FP8 and rowwise FP8 microseconds), one per
cast, then a block's totals and a micro-step's (11 attention blocks) for each way. --tiny: small shapes on the CPU,
uncompiled, FP8 emulated (the script's scaled_mm, rowwise_scaled_mm) and timed by the clock; each FP8 product is checked
against its bf16 one (the test runs this). --help prints this. The FP8 GEMMs run on cuBLASLt with training's
settings (train_gpt.CUBLASLT_SETTINGS, set at import where the environment does not say otherwise).
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_gpt  # noqa: E402
from bench_common import cublaslt_as_training, timed_us, tiny_bench_refusal  # noqa: E402

cublaslt_as_training()  # before any CUDA work: torch may read the settings once

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
ROW_STEP = 16  # --fp8_amax_row_step's default
ATTENTION_BLOCKS = 11  # track 1's 12 blocks, one without attention


# each tensor's float8 format and the rows its scale is taken from (FP8Linear's: every 16th for activations and
# gradients, every row for the weights)
FORMATS = dict(x=(E4M3, ROW_STEP), y=(E4M3, ROW_STEP), g_qkv=(E5M2, ROW_STEP), g_o=(E5M2, ROW_STEP), w_qkv=(E4M3, 1),
               w_o=(E4M3, 1))


def both_layouts(t: torch.Tensor, dtype: torch.dtype, row_step: int) -> tuple:
    """t in float8 (its scale from every row_step-th row), row-major and transposed, and the scale."""
    t_f8, scale = train_gpt.to_float8_scaled(t, dtype, row_step)
    return t_f8, t_f8.T.contiguous(), scale


def tensors(tokens: int, dim: int, device: str) -> dict:
    """A block's projection inputs and gradients in bf16: x (normed stream), y (attention output), g_qkv and g_o
    (the gradients of the QKV and output projections' outputs), and the weights as the script holds them (fp32)."""
    gen = torch.Generator(device).manual_seed(0)

    def randn(*shape, std=1.0, dtype=torch.bfloat16):
        return (torch.randn(*shape, device=device, generator=gen) * std).to(dtype)

    return dict(x=randn(tokens, dim), y=randn(tokens, dim, std=0.5), g_qkv=randn(tokens, 3 * dim, std=1e-4),
                g_o=randn(tokens, dim, std=1e-4), w_qkv=randn(3 * dim, dim, std=dim ** -0.5, dtype=torch.float32),
                w_o=randn(dim, dim, std=dim ** -0.5, dtype=torch.float32))


def bf16_gemms(t: dict) -> dict:
    """The six GEMMs as the script and autograd run them (bf16 operands, bf16 products)."""
    w_qkv, w_o = t["w_qkv"].bfloat16(), t["w_o"].bfloat16()
    return {"qkv = x @ w_qkv.T": lambda: t["x"] @ w_qkv.T, "grad_x = g_qkv @ w_qkv": lambda: t["g_qkv"] @ w_qkv,
            "grad_w_qkv = g_qkv.T @ x": lambda: t["g_qkv"].T @ t["x"], "out = y @ w_o": lambda: t["y"] @ w_o,
            "grad_y = g_o @ w_o.T": lambda: t["g_o"] @ w_o.T, "grad_w_o = y.T @ g_o": lambda: t["y"].T @ t["g_o"]}


def fp8_gemms(f8: dict) -> dict:
    """The same six products on the FP8 tensor cores from f8[name] = (row-major, transposed copy, scale): the first
    operand a stored layout (row-major), the second a stored layout's .T (column-major), as FP8Linear ran them (fast
    accumulation except for the weight gradients' sum over the tokens; the weight gradients in fp32)."""
    def mm(a_name, a_layout, b_name, b_layout, out_dtype=torch.bfloat16, fast=True):
        a, b = f8[a_name][a_layout], f8[b_name][b_layout].T
        return lambda: train_gpt.scaled_mm(a, b, f8[a_name][2], f8[b_name][2], out_dtype, fast)

    row, transposed = 0, 1
    return {"qkv = x @ w_qkv.T": mm("x", row, "w_qkv", row),
            "grad_x = g_qkv @ w_qkv": mm("g_qkv", row, "w_qkv", transposed),
            "grad_w_qkv = g_qkv.T @ x": mm("g_qkv", transposed, "x", transposed, torch.float32, False),
            "out = y @ w_o": mm("y", row, "w_o", transposed),
            "grad_y = g_o @ w_o.T": mm("g_o", row, "w_o", row),
            "grad_w_o = y.T @ g_o": mm("y", transposed, "g_o", transposed, torch.float32, False)}


# the rowwise GEMMs' operands: the first operand's rows are tokens; the second is stored with the product's columns as
# rows, so the GEMMs that multiply by a weight's transpose (grad_x, out) take a transposed copy of it
ROWWISE_SOURCES = dict(x="x", y="y", g_qkv="g_qkv", g_o="g_o", w_qkv="w_qkv", w_qkv_t="w_qkv.T", w_o="w_o",
                       w_o_t="w_o.T")


def rowwise_gemms(rw: dict) -> dict:
    """The four GEMMs whose sum runs over a width, from rw[name] = (e4m3 rows, their scales)."""
    def mm(a_name, b_name):
        return lambda: train_gpt.rowwise_scaled_mm(*rw[a_name], *rw[b_name])

    return {"qkv = x @ w_qkv.T": mm("x", "w_qkv"), "grad_x = g_qkv @ w_qkv": mm("g_qkv", "w_qkv_t"),
            "out = y @ w_o": mm("y", "w_o_t"), "grad_y = g_o @ w_o.T": mm("g_o", "w_o")}


def compare(name: str, way: str, bf16_run, fp8_run, tiny: bool) -> tuple[float, float]:
    """Print both times and return them (microseconds); the tiny run first checks that the products agree to
    float8's rounding (a wrong operand layout is far off)."""
    if tiny:
        exact, approx = bf16_run().float(), fp8_run().float()
        error = (approx - exact).norm() / exact.norm()
        assert error < 0.1, f"{name}: {way} product {error:.3f} from bf16's"
    bf16_us, fp8_us = timed_us(bf16_run, tiny), timed_us(fp8_run, tiny)
    print(f"{name}: bf16 {bf16_us:8.1f} us, {way} {fp8_us:8.1f} us")
    return bf16_us, fp8_us


def tensorwise(t: dict, tiny: bool) -> tuple[float, float, float]:
    """The six GEMMs in bf16 and FP8, then the casts: (bf16 GEMM us, FP8 saved us, casts us) for a block."""
    cast = both_layouts if tiny else torch.compile(both_layouts, dynamic=False)
    f8 = {name: cast(t[name], *FORMATS[name]) for name in FORMATS}
    bf16_runs = bf16_gemms(t)
    times = [compare(name, "FP8", bf16_runs[name], run, tiny) for name, run in fp8_gemms(f8).items()]
    casts = 0.0
    for name, (dtype, row_step) in FORMATS.items():
        us = timed_us(lambda: cast(t[name], dtype, row_step), tiny)
        casts += us
        print(f"cast {name} {tuple(t[name].shape)} to {str(dtype).removeprefix('torch.')}, both layouts: {us:8.1f} us")
    return sum(bf16 for bf16, _ in times), sum(bf16 - fp8 for bf16, fp8 in times), casts


def rowwise(t: dict, tiny: bool) -> tuple[float, float]:
    """The four width-sum GEMMs in bf16 and rowwise FP8, then their casts: (saved us, casts us) for a block."""
    cast = train_gpt.rowwise_float8 if tiny else torch.compile(train_gpt.rowwise_float8, dynamic=False)
    sources = {name: t[source.removesuffix(".T")].T.contiguous() if source.endswith(".T") else t[source]
               for name, source in ROWWISE_SOURCES.items()}
    rw = {name: cast(source) for name, source in sources.items()}
    bf16_runs = bf16_gemms(t)
    saved = sum(bf16 - fp8 for bf16, fp8 in (compare(name, "rowwise FP8", bf16_runs[name], run, tiny)
                                             for name, run in rowwise_gemms(rw).items()))
    casts = 0.0
    for name, source in sources.items():
        us = timed_us(lambda: cast(source), tiny)
        casts += us
        print(f"rowwise cast {name} {tuple(source.shape)} to float8_e4m3fn: {us:8.1f} us")
    return saved, casts


def main(argv: list[str]) -> int:
    if (answer := tiny_bench_refusal(argv, __doc__, "perf/attention_fp8_bench.py")) is not None:
        return answer
    tiny = "--tiny" in argv
    tokens, dim = (512, 64) if tiny else (49152, 768)
    t = tensors(tokens, dim, "cpu" if tiny else "cuda")
    bf16_us, fp8_saved_us, casts_us = tensorwise(t, tiny)
    rowwise_saved_us, rowwise_casts_us = rowwise(t, tiny)
    for label, blocks in [("a block", 1), (f"a micro-step ({ATTENTION_BLOCKS} blocks)", ATTENTION_BLOCKS)]:
        bf16, fp8_saved, casts, rowwise_saved, rowwise_casts = (
            us * blocks / 1000 for us in (bf16_us, fp8_saved_us, casts_us, rowwise_saved_us, rowwise_casts_us))
        print(f"{label}: bf16 GEMMs {bf16:.3f} ms; FP8 saves {fp8_saved:.3f} ms with the casts fused away, "
              f"{fp8_saved - casts:.3f} ms unfused (casts {casts:.3f} ms); the hybrid saves {rowwise_saved:.3f} ms "
              f"with the casts fused away, {rowwise_saved - rowwise_casts:.3f} ms unfused "
              f"(casts {rowwise_casts:.3f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
