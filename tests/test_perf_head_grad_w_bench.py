"""perf/head_grad_w_bench.py on small shapes on the CPU (--tiny, the kernel and the script's transpose under Triton's
interpreter, fp32, partial tiles): every way is timed, and each that makes the weight gradient is checked against
fp64 (the GPU numbers come from the device). Run in this process, so that the interpreter fixture's patch applies."""

import re
import sys


def test_tiny_run_times_every_way_and_the_kernel_matches_the_weight_gradient(repo_root, require_interpreted, capsys):
    sys.path.insert(0, str(repo_root / "perf"))
    import head_grad_w_bench
    require_interpreted(head_grad_w_bench.token_major_weight_grad_kernel)
    assert head_grad_w_bench.main(["--tiny"]) == 0
    errors = {}
    for line in capsys.readouterr().out.splitlines():
        match = re.fullmatch(r"(.+): [\d.]+ us(, largest error ([\d.e+-]+) of the largest entry)?", line)
        assert match, line
        errors[match[1]] = float(match[3]) if match[3] else None
    kernel = ("token_major_weight_grad_kernel BLOCK_M={} BLOCK_N={} BLOCK_K={} GROUP_M={} warps={} stages={} "
              "PROMOTE={}").format(*head_grad_w_bench.TINY_LAUNCHES[0])
    assert list(errors) == ["the script's transposed() of the gradient", "cuBLAS's GEMM of the copy (scaled_mm, "
                            "precise)", "both, as training runs them", kernel]
    assert errors["the script's transposed() of the gradient"] is None
    # fp32 throughout, only the sums' order differs; a wrong tile, transpose, mask or scale is off by O(1). The tiny
    # shapes leave partial tiles on all three dimensions (100 tokens, 72 rows, 40 columns against 16, 32, 16).
    assert errors["both, as training runs them"] < 1e-5
    assert errors[kernel] < 1e-5
