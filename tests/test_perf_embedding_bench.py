"""perf/embedding_bench.py on small shapes on the CPU (--tiny): both ways of the four tables' backward are timed and
checked against the fp32 sums (the GPU numbers come from the device)."""

import re
import sys

import torch


def test_tiny_run_times_both_backwards_and_the_compiled_one_sums_in_fp32(repo_root, capsys):
    sys.path.insert(0, str(repo_root / "perf"))
    import embedding_bench
    assert embedding_bench.main(["--tiny"]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"512 ids, \d+ distinct, the most frequent \d+ times", header), header
    errors = {}
    for line in lines:
        match = re.fullmatch(r"(eager|compiled) \(.+\): [\d.]+ ms for 4 tables, largest gradient error ([\d.e+-]+) of "
                             r"the largest entry", line)
        assert match, line
        errors[match[1]] = float(match[2])
    assert set(errors) == {"eager", "compiled"}
    # inductor sums each entry in fp32, then rounds once to bf16; the CPU's eager backward sums in bf16, a looser bound
    assert 0 < errors["compiled"] <= 2 ** -8 and errors["eager"] < 0.05


def test_help_prints_the_usage_and_an_unknown_argument_is_one_line_without_running(repo_root, capsys):
    sys.path.insert(0, str(repo_root / "perf"))
    import embedding_bench
    assert embedding_bench.main(["--help"]) == 0
    out, err = capsys.readouterr()
    assert "python perf/embedding_bench.py [--tiny]  ->  one line a way" in out and err == ""
    assert embedding_bench.main(["--tiny", "--bogus"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        "error: unknown argument '--bogus': its only options are --tiny (see --help)"]


def test_without_a_gpu_it_is_one_line_that_points_to_tiny(repo_root, capsys, monkeypatch):
    sys.path.insert(0, str(repo_root / "perf"))
    import embedding_bench
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert embedding_bench.main([]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        "error: perf/embedding_bench.py runs on an NVIDIA GPU and torch sees none (torch.cuda.is_available() is "
        "False); run it on the GPU machine (--tiny runs small shapes on the CPU)"]
