"""perf/attention_fp8_bench.py on the CPU: its FP8 GEMMs multiply the operands it means to (each product within
float8's rounding of the bf16 one, a wrong layout far from it), and its tiny run prints a line per GEMM, per cast
and the totals (the GPU numbers come from the device)."""

import re
import sys

import pytest
import torch


@pytest.fixture
def bench(repo_root):
    sys.path.insert(0, str(repo_root / "perf"))
    import attention_fp8_bench
    return attention_fp8_bench


def products(bench, f8, t):
    return {name: (fp8().float(), bf16().float())
            for (name, bf16), fp8 in zip(bench.bf16_gemms(t).items(), bench.fp8_gemms(f8).values())}


def relative_error(approx, exact) -> float:
    return float((approx - exact).norm() / exact.norm())


def test_each_fp8_gemm_is_its_bf16_product_to_float8_rounding(bench):
    t = bench.tensors(256, 64, "cpu")
    f8 = {name: bench.both_layouts(t[name], *bench.FORMATS[name]) for name in bench.FORMATS}
    errors = {name: relative_error(*pair) for name, pair in products(bench, f8, t).items()}
    assert set(errors) == {"qkv = x @ w_qkv.T", "grad_x = g_qkv @ w_qkv", "grad_w_qkv = g_qkv.T @ x",
                           "out = y @ w_o", "grad_y = g_o @ w_o.T", "grad_w_o = y.T @ g_o"}
    assert all(0 < error < 0.1 for error in errors.values()), errors  # e4m3 / e5m2: 4-6%
    # w_o is square: its row-major copy where the transposed one belongs gives a product of the right shape, wrong
    row_major, transposed, scale = f8["w_o"]
    swapped = products(bench, {**f8, "w_o": (transposed, row_major, scale)}, t)
    assert relative_error(*swapped["out = y @ w_o"]) > 0.5


def test_both_layouts_hold_the_same_float8_values(bench):
    t = torch.randn(48, 16).bfloat16()
    row_major, transposed, scale = bench.both_layouts(t, torch.float8_e5m2, 16)
    assert row_major.dtype == transposed.dtype == torch.float8_e5m2 and transposed.is_contiguous()
    assert torch.equal(transposed.T.float(), row_major.float())
    assert torch.equal(scale, 2 * t[::16].abs().amax().float() / torch.finfo(torch.float8_e5m2).max)


def test_tiny_run_reports_every_gemm_cast_and_total(bench, capsys):
    assert bench.main(["--tiny"]) == 0
    lines = capsys.readouterr().out.splitlines()
    gemms = [re.fullmatch(r"(.+): bf16 +[\d.]+ us, FP8 +[\d.]+ us", line) for line in lines[:6]]
    assert [match[1] for match in gemms] == list(bench.bf16_gemms(bench.tensors(8, 4, "cpu")))
    casts = [re.fullmatch(r"cast (\w+) \(\d+, \d+\) to float8_e(4m3fn|5m2), both layouts: +[\d.]+ us", line)
             for line in lines[6:12]]
    assert [match[1] for match in casts] == list(bench.FORMATS)
    totals = r"bf16 GEMMs [\d.]+ ms; FP8 GEMMs [\d.]+ ms \+ casts [\d.]+ ms; saved with the casts fused away -?[\d.]+ " \
             r"ms, unfused -?[\d.]+ ms"
    assert re.fullmatch(f"a block: {totals}", lines[12])
    assert re.fullmatch(f"a micro-step \\(11 blocks\\): {totals}", lines[13])
    assert len(lines) == 14
