"""perf/head_gemm_bench.py on the CPU: its chunked GEMM writes the whole product into the output buffer, and its tiny
run prints a line per GEMM and chunk count (the GPU numbers come from the device)."""

import re
import sys

import pytest
import torch


@pytest.fixture
def head_gemm_bench(repo_root):
    sys.path.insert(0, str(repo_root / "perf"))
    import head_gemm_bench
    return head_gemm_bench


@pytest.mark.parametrize("chunks", [1, 2, 4])
def test_chunked_mm_fills_the_buffer_with_the_whole_product(head_gemm_bench, chunks):
    gen = torch.Generator().manual_seed(chunks)
    a, b = torch.randn(10, 6, generator=gen), torch.randn(6, 7, generator=gen)  # 10 rows: uneven chunks
    out = torch.full((10, 7), float("nan"))
    head_gemm_bench.chunked_mm(a, b, out, chunks)()
    torch.testing.assert_close(out, a @ b)


def test_tiny_run_reports_every_gemm_and_chunk_count(head_gemm_bench, capsys):
    assert head_gemm_bench.main(["--tiny"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [re.fullmatch(r"(.+): +[\d.]+ us +[\d.]+ TFLOP/s +- launches", line)[1] for line in lines]
    assert names == [f"track 2 logits = x @ w.T, {n} chunks" for n in (1, 2, 4)] + \
        [f"track 2 grad_x = grad_logits @ w, {n} chunks" for n in (1, 2, 4)] + \
        ["track 2 grad_w = grad_logits.T @ x, whole"]
