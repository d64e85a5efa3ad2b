"""perf/head_kernels_bench.py on small shapes on the CPU (--tiny, the kernels under Triton's interpreter): every launch
configuration it times gives the script's launch's output (the GPU numbers come from the device). Run in this
process, so that the interpreter fixture's patch applies."""

import re
import sys


def test_tiny_run_compares_every_launch_with_the_scripts(repo_root, require_interpreted, capsys):
    sys.path.insert(0, str(repo_root / "perf"))
    import head_kernels_bench
    tg = head_kernels_bench.load_script(head_kernels_bench.ROOT / "train_gpt.py")
    require_interpreted(tg.softcap_ce_kernel)
    assert head_kernels_bench.main(["--tiny"]) == 0
    lines = capsys.readouterr().out.splitlines()
    ce = [re.fullmatch(r"softcap_ce_kernel BLOCK=(\d+) warps=(\d+)( \(the script's\))?: [\d.]+ ms, loss within "
                       r"([\d.e+-]+), ([\d.]+) of the gradient equal", line) for line in lines[:7]]
    assert all(ce), lines[:7]
    assert [(int(m[1]), int(m[2])) for m in ce] == head_kernels_bench.CE_LAUNCHES
    assert [bool(m[3]) for m in ce] == [True] + [False] * 6
    # the row sum's order follows the block: losses within fp32 rounding, gradients equal but for a few ulps
    assert all(float(m[4]) < 1e-4 and float(m[5]) > 0.9 for m in ce), lines[:7]
    squares = lines[7:]
    assert len(squares) == 5 * len(head_kernels_bench.SQUARE_LAUNCHES)
    for line in squares:
        assert re.fullmatch(r"(transpose_kernel|float8_both_ways_kernel), .+ BLOCK=\d+ warps=\d+( \(the script's\))?: "
                            r"[\d.]+ ms, equal", line), line
    marked = [line.split(":")[0] for line in squares if "(the script's)" in line]
    assert marked == [f"transpose_kernel, the float8 gradient BLOCK={tg.TRANSPOSE_LAUNCH[0]} "
                      f"warps={tg.TRANSPOSE_LAUNCH[1]} (the script's)",
                      f"transpose_kernel, the QKV gradient BLOCK={tg.TRANSPOSE_LAUNCH[0]} "
                      f"warps={tg.TRANSPOSE_LAUNCH[1]} (the script's)",
                      f"transpose_kernel, the MLP's x BLOCK={tg.TRANSPOSE_LAUNCH[0]} "
                      f"warps={tg.TRANSPOSE_LAUNCH[1]} (the script's)",
                      "float8_both_ways_kernel, x (bf16) BLOCK=64 warps=4 (the script's)",
                      "float8_both_ways_kernel, w (fp32) BLOCK=64 warps=4 (the script's)"]
