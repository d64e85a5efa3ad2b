"""perf/medium_gemm_bench.py on the CPU: every GEMM's two orders (as the script writes it, and the transposed problem)
give the same product with the operands' shapes the script's (the tiny run asserts the equality), and the run prints
one line per GEMM and order (the GPU numbers come from the device)."""

import re
import sys

import pytest


@pytest.fixture
def medium_gemm_bench(repo_root):
    sys.path.insert(0, str(repo_root / "perf"))
    import medium_gemm_bench
    return medium_gemm_bench


def test_operands_have_the_shapes_of_the_scripts_gemms(medium_gemm_bench):
    tokens, dim, hidden = 32, 8, 16
    shapes = {name: (tuple(left.shape), tuple(right.shape))
              for name, (left, right) in medium_gemm_bench.gemms(tokens, dim, hidden, "cpu").items()}
    assert shapes["attention qkv = x @ w_qkv.T"] == ((tokens, dim), (dim, 3 * dim))
    assert shapes["attention grad_w_qkv = g_qkv.T @ x"] == ((3 * dim, tokens), (tokens, dim))
    assert shapes["mlp out = a @ proj_w.T"] == ((tokens, hidden), (hidden, dim))
    assert shapes["mlp grad_proj_w = g.T @ a"] == ((dim, tokens), (tokens, hidden))
    for left, right in shapes.values():
        assert left[1] == right[0]


def test_tiny_run_reports_both_orders_of_every_gemm(medium_gemm_bench, capsys):
    assert medium_gemm_bench.main(["--tiny"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [re.fullmatch(r"(.+), (as written|transposed problem): +[\d.]+ us +[\d.]+ TFLOP/s - launches -", line)
            for line in lines]
    assert all(rows), lines
    names = list(medium_gemm_bench.gemms(8, 4, 8, "cpu"))
    assert [(row[1], row[2]) for row in rows] == [(name, order) for name in names
                                                  for order in ("as written", "transposed problem")]
