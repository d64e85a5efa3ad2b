"""perf/varlen_bench.py's document boundaries on the CPU (the kernels it times need a GPU): the cumulative positions
varlen_attn takes, one sequence per run of equal document ids."""

import sys

import torch


def test_document_starts_are_the_runs_of_equal_ids(repo_root):
    sys.path.insert(0, str(repo_root / "perf"))
    import varlen_bench
    docs = torch.tensor([0, 0, 0, 1, 2, 2, 3, 3, 3, 3])
    starts = varlen_bench.document_starts(docs)
    assert starts.dtype == torch.int32
    assert starts.tolist() == [0, 3, 4, 6, 10]
    assert varlen_bench.document_starts(torch.zeros(5, dtype=torch.int64)).tolist() == [0, 5]
    # ids as the scripts make them: cumulative count of EOT tokens, each EOT opening its document
    tokens = torch.tensor([50256, 5, 6, 50256, 7, 50256, 50256, 8])
    assert varlen_bench.document_starts((tokens == 50256).cumsum(0)).tolist() == [0, 3, 5, 6, 8]
