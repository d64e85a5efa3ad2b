"""perf/flex_bench.py's and perf/varlen_bench.py's command lines on the CPU: --help, then one error line each for an
unknown track, an unknown option set, no GPU, and proxy documents missing, corrupt or too short; all before any
work (the kernels they time need a GPU)."""
import sys

import pytest
import torch
from shard_files import hand_made_shard


RUNS = []  # what the benches were asked to run, instead of running it


@pytest.fixture
def benches(repo_root, monkeypatch, tmp_path):
    sys.path.insert(0, str(repo_root / "perf"))
    import flex_bench
    import varlen_bench
    RUNS.clear()
    monkeypatch.setattr(flex_bench, "PROXY_VAL", str(tmp_path / "proxy_val_*.bin"))
    monkeypatch.setattr(flex_bench, "run", lambda *args: RUNS.append(("flex_bench", *args)))
    monkeypatch.setattr(varlen_bench, "run", lambda *args: RUNS.append(("varlen_bench", *args)))
    return flex_bench, varlen_bench


def one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1 and lines[0].startswith("error: ")
    return lines[0]


def write_shard(path, tokens: int, promised: int | None = None):
    hand_made_shard(path, [20240520, 1, tokens if promised is None else promised], 2 * tokens)


@pytest.mark.parametrize("bench", ["flex_bench", "varlen_bench"])
def test_help_prints_the_usage_and_runs_nothing(benches, capsys, bench):
    module = dict(zip(("flex_bench", "varlen_bench"), benches))[bench]
    assert module.main(["short", "--help"]) == 0
    assert f"python perf/{bench}.py [short|medium ...]" in capsys.readouterr().out
    assert RUNS == []


@pytest.mark.parametrize("bench", ["flex_bench", "varlen_bench"])
def test_an_unknown_track_is_one_line_naming_it(benches, capsys, bench):
    module = dict(zip(("flex_bench", "varlen_bench"), benches))[bench]
    assert module.main(["short", "long"]) == 2
    assert one_error_line(capsys) == ("error: unknown argument 'long': name tracks among short, medium, or none for "
                                      "all (see --help)")


def test_an_unknown_option_set_is_one_line_naming_it(benches, capsys):
    flex_bench = benches[0]
    assert flex_bench.main(["short", "--options=default,fwd 32x32"]) == 2
    assert one_error_line(capsys).startswith("error: unknown option set 'fwd 32x32' in --options; choose from "
                                             "default, rows safe,")


def test_without_a_gpu_each_bench_says_so_before_reading_data(benches, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for module, name in zip(benches, ("flex_bench", "varlen_bench")):
        assert module.main(["medium"]) == 2
        assert one_error_line(capsys).startswith(f"error: perf/{name}.py runs on an NVIDIA GPU and torch sees none")


def test_proxy_documents_missing_corrupt_or_short_are_one_line_each(benches, capsys, monkeypatch, tmp_path):
    """Track 2 takes 65,536 tokens, track 1 49,152: a shard of 49,152 serves track 1 alone."""
    flex_bench, varlen_bench = benches
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert varlen_bench.main([]) == 2
    assert one_error_line(capsys) == (f"error: the bench takes the first 65536 tokens of a proxy validation shard, but "
                                      f"no file matches {tmp_path}/proxy_val_*.bin; copy the proxy shards into "
                                      "data/proxy/ (on the device, perf/proxy_common.sh's unpack_proxy_data does)")
    shard = tmp_path / "proxy_val_000000.bin"
    write_shard(shard, 49152, promised=50000)
    assert flex_bench.main(["short"]) == 2
    assert one_error_line(capsys).startswith(f"error: {shard}: truncated: header promises 50000 tokens")
    write_shard(shard, 49152)
    assert flex_bench.main(["medium", "short"]) == 2
    assert one_error_line(capsys).startswith(f"error: the bench takes the first 65536 tokens of a proxy validation "
                                             f"shard, but {shard} holds 49152;")
    assert RUNS == []
    assert flex_bench.main(["short", "--options=default,rows safe"]) == 0
    assert varlen_bench.main(["short"]) == 0
    assert RUNS == [("flex_bench", ["short"], ["default", "rows safe"]), ("varlen_bench", ["short"])]


def test_the_benches_run_every_track_and_option_set_when_none_is_named(benches, monkeypatch, tmp_path):
    flex_bench, varlen_bench = benches
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    write_shard(tmp_path / "proxy_val_000000.bin", 65536)
    assert flex_bench.main([]) == 0 and varlen_bench.main([]) == 0
    assert RUNS == [("flex_bench", [], list(flex_bench.OPTIONS)), ("varlen_bench", [])]
