"""perf/muon_bench.py on small shapes on the CPU (--tiny): it builds each track's Muon over the model's hidden
matrices and times the step, the orthogonalisation both ways and one iteration's products per shape group; the GPU
numbers come from the device."""

import re
import subprocess
import sys

import pytest
import torch


def test_tiny_run_reports_both_tracks_with_their_matrix_counts(repo_root):
    result = subprocess.run([sys.executable, "perf/muon_bench.py", "--tiny"], cwd=repo_root, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    counts, parts = {}, {}
    for line in result.stdout.splitlines():
        part_line = re.fullmatch(r"(\w+) Newton-Schulz parts, (\d+) x (\d+) x (\d+): (.*)", line)
        if part_line:  # one iteration's products, each timed, the script's and cuBLAS's side by side
            timed = re.findall(r"([^,]+?) ([\d.]+) ms \((\d+) TFLOP/s\)", part_line[5])
            gram = ["poly A sym"] if part_line[1] == "medium" else []  # track 2's Gram Newton-Schulz products
            assert [name.strip() for name, _, _ in timed] == [
                "X X^T sym", "X X^T bmm", "a I + b A + c A A sym", "A A bmm", "poly X bmm", "a X + poly X baddbmm",
                *gram]
            assert all(float(ms) > 0 for _, ms, _ in timed)
            assert int(part_line[3]) <= int(part_line[4])  # the short side first, as orthogonalize lays it out
            parts.setdefault(part_line[1], []).append(int(part_line[2]))
            continue
        match = re.fullmatch(r"(\w+): Muon step ([\d.]+) ms \(first step ([\d.]+) s\); "
                             r"Newton-Schulz of (\d+) matrices in (\d+) shapes: "
                             r"([\d.]+) ms matrix by matrix, ([\d.]+) ms stacked by shape", line)
        assert match, line
        assert all(float(match[i]) > 0 for i in (2, 6, 7))  # the first step (3) rounds to 0.0 s uncompiled
        counts[match[1]] = (int(match[4]), int(match[5]))
    # track 1: 11 QKVO stacks of 4 and 11 attention gates, 12 up and 12 down projections of one shape (dim, hidden);
    # track 2: 15 QKVO stacks of 4, 16 up and 16 down projections
    assert counts == {"short": (79, 3), "medium": (92, 3)}
    assert {name: sum(batches) for name, batches in parts.items()} == {"short": 79, "medium": 92}


@pytest.fixture
def muon_bench(repo_root):
    sys.path.insert(0, str(repo_root / "perf"))
    import muon_bench
    return muon_bench


def test_help_prints_the_usage_and_an_unknown_argument_is_one_line_without_running(muon_bench, capsys):
    assert muon_bench.main(["short", "--help"]) == 0
    out, err = capsys.readouterr()
    assert "python perf/muon_bench.py [short|medium ...] [--tiny]  ->" in out and err == ""
    assert muon_bench.main(["short", "--tiny", "--bogus"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        "error: unknown argument '--bogus': its only options are --tiny (see --help)"]


def test_an_unknown_track_is_one_line_naming_it(muon_bench, capsys):
    """Was a KeyError after the first track's bench had run."""
    assert muon_bench.main(["--tiny", "short", "long"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        "error: unknown argument 'long': name tracks among short, medium, or none for all (see --help)"]


def test_without_a_gpu_it_is_one_line_that_points_to_tiny(muon_bench, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert muon_bench.main(["medium"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        "error: perf/muon_bench.py runs on an NVIDIA GPU and torch sees none (torch.cuda.is_available() is False); "
        "run it on the GPU machine (--tiny runs small shapes on the CPU)"]
