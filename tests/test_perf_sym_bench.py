"""perf/sym_bench.py on small shapes on the CPU (--tiny, the kernel under Triton's interpreter): it times the
symmetric matmul kernel on each track's Muon stacks in the scripts' configuration and another, and torch's product;
the GPU numbers come from the device. Run in this process, so that the interpreter fixture's patch applies."""

import functools
import re
import sys

import pytest
import torch


def test_tiny_run_times_both_products_of_every_stack_of_both_tracks(repo_root, require_interpreted, capsys,
                                                                   monkeypatch):
    sys.path.insert(0, str(repo_root / "perf"))
    import sym_bench
    require_interpreted(sym_bench.short.sym_matmul_kernel)
    # each run is timed, then reported at a fixed time, the script's configuration the slower: which one the summary
    # calls best is then known (the CPU's times say nothing of the GPU's)
    timed_us, fake_us = sym_bench.timed_us, {sym_bench.SCRIPT_CONFIG: 2000.0, (64, 32, 4, 3): 1000.0}

    def fixed_time(run, tiny):
        timed_us(run, tiny)
        return fake_us[run.args[2]] if isinstance(run, functools.partial) else 3000.0  # a launch, or torch's
    monkeypatch.setattr(sym_bench, "timed_us", fixed_time)
    assert sym_bench.main(["--tiny"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for line in lines:  # both configurations computed the product right (a wrong one is not timed)
        assert re.fullmatch(r"(short|medium) (X X\^T|2 A A - A) [\dx]+: script \(128, 64, 8, 3\) 2\.000 ms, "
                            r"best \(64, 32, 4, 3\) 1\.000 ms, torch 3\.000 ms \(2 configurations ran\)", line), line
    # three shapes of Muon matrices in each track, two products each
    assert [line.split()[0] for line in lines] == ["short"] * 6 + ["medium"] * 6


@pytest.mark.parametrize("track", ["short", "medium"])
def test_the_script_configuration_is_the_one_each_track_launches(repo_root, monkeypatch, track):
    """The bench's 'script' line times SCRIPT_CONFIG: the tile shape, warps and stages of sym_matmul_triton's launch
    in both tracks."""
    sys.path.insert(0, str(repo_root / "perf"))
    import sym_bench
    script, launches = getattr(sym_bench, track), []

    class Recorder:
        def __getitem__(self, grid):
            return lambda *args, **options: launches.append(options)
    monkeypatch.setattr(script, "sym_matmul_kernel", Recorder())
    script.sym_matmul_triton(torch.zeros(1, 4, 8))
    [options] = launches
    assert tuple(options[name] for name in ("BLOCK_M", "BLOCK_K", "num_warps", "num_stages")) == sym_bench.SCRIPT_CONFIG
