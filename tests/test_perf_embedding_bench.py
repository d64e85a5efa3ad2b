"""perf/embedding_bench.py on small shapes on the CPU (--tiny): both ways of the four tables' backward are timed and
checked against the fp32 sums (the GPU numbers come from the device)."""

import re
import sys


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
