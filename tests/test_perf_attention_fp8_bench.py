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


def test_each_rowwise_gemm_is_its_bf16_product_to_float8_rounding(bench):
    t = bench.tensors(256, 64, "cpu")
    sources = dict(x=t["x"], y=t["y"], g_qkv=t["g_qkv"], g_o=t["g_o"], w_qkv=t["w_qkv"], w_o=t["w_o"],
                   w_qkv_t=t["w_qkv"].T.contiguous(), w_o_t=t["w_o"].T.contiguous())
    rw = {name: bench.train_gpt.rowwise_float8(source) for name, source in sources.items()}
    assert set(rw) == set(bench.ROWWISE_SOURCES)
    bf16 = bench.bf16_gemms(t)
    errors = {name: relative_error(run().float(), bf16[name]().float())
              for name, run in bench.rowwise_gemms(rw).items()}
    assert set(errors) == {"qkv = x @ w_qkv.T", "grad_x = g_qkv @ w_qkv", "out = y @ w_o", "grad_y = g_o @ w_o.T"}
    assert all(0 < error < 0.1 for error in errors.values()), errors
    # w_o where its transpose belongs: a product of the right shape, wrong
    swapped = bench.rowwise_gemms({**rw, "w_o_t": rw["w_o"]})
    assert relative_error(swapped["out = y @ w_o"]().float(), bf16["out = y @ w_o"]().float()) > 0.5


def test_tiny_run_reports_every_gemm_cast_and_total(bench, capsys):
    assert bench.main(["--tiny"]) == 0
    lines = capsys.readouterr().out.splitlines()
    gemm_names = list(bench.bf16_gemms(bench.tensors(8, 4, "cpu")))
    gemms = [re.fullmatch(r"(.+): bf16 +[\d.]+ us, FP8 +[\d.]+ us", line) for line in lines[:6]]
    assert [match[1] for match in gemms] == gemm_names
    casts = [re.fullmatch(r"cast (\w+) \(\d+, \d+\) to float8_e(4m3fn|5m2), both layouts: +[\d.]+ us", line)
             for line in lines[6:12]]
    assert [match[1] for match in casts] == list(bench.FORMATS)
    rowwise = [re.fullmatch(r"(.+): bf16 +[\d.]+ us, rowwise FP8 +[\d.]+ us", line) for line in lines[12:16]]
    assert [match[1] for match in rowwise] == [gemm_names[i] for i in (0, 1, 3, 4)]
    row_casts = [re.fullmatch(r"rowwise cast (\w+) \(\d+, \d+\) to float8_e4m3fn: +[\d.]+ us", line)
                 for line in lines[16:24]]
    assert [match[1] for match in row_casts] == list(bench.ROWWISE_SOURCES)
    ms = r"-?[\d.]+ ms"
    totals = (f"bf16 GEMMs {ms}; FP8 saves {ms} with the casts fused away, {ms} unfused \\(casts {ms}\\); the hybrid "
              f"saves {ms} with the casts fused away, {ms} unfused \\(casts {ms}\\)")
    assert re.fullmatch(f"a block: {totals}", lines[24]), lines[24]
    assert re.fullmatch(f"a micro-step \\(11 blocks\\): {totals}", lines[25]), lines[25]
    assert len(lines) == 26
