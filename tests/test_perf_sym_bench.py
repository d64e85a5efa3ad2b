"""perf/sym_bench.py on small shapes on the CPU (--tiny, the kernel under Triton's interpreter): it times the
symmetric matmul kernel on each track's Muon stacks in the scripts' configuration and another, and torch's product;
the GPU numbers come from the device. Run in this process, so that the interpreter fixture's patch applies."""

import re
import sys


def test_tiny_run_times_both_products_of_every_stack_of_both_tracks(repo_root, require_interpreted, capsys):
    sys.path.insert(0, str(repo_root / "perf"))
    import sym_bench
    require_interpreted(sym_bench.short.sym_matmul_kernel)
    assert sym_bench.main(["--tiny"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for line in lines:
        match = re.fullmatch(r"(short|medium) (X X\^T|2 A A - A) [\dx]+: script \(128, 64, 8, 3\) ([\d.]+) ms, "
                             r"best \(\d+, \d+, \d+, \d+\) ([\d.]+) ms, torch ([\d.]+) ms \(2 configurations ran\)",
                             line)
        assert match, line
        assert float(match[4]) <= float(match[3])
    # three shapes of Muon matrices in each track, two products each
    assert [line.split()[0] for line in lines] == ["short"] * 6 + ["medium"] * 6
