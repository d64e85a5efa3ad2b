"""perf/gate_out_bench.py on small shapes on the CPU (--tiny, the kernel under Triton's interpreter, fp32, partial
tiles): every way is timed, and each that makes the projection's output is checked against fp64 (the GPU numbers come
from the device). Run in this process, so that the interpreter fixture's patch applies."""

import re
import sys


def test_tiny_run_times_every_way_and_the_kernel_matches_the_projection(repo_root, require_interpreted, capsys):
    sys.path.insert(0, str(repo_root / "perf"))
    import gate_out_bench
    require_interpreted(gate_out_bench.gated_matmul_kernel)
    assert gate_out_bench.main(["--tiny"]) == 0
    lines = capsys.readouterr().out.splitlines()
    errors = {}
    for line in lines:
        match = re.fullmatch(r"(.+): [\d.]+ us(, largest error ([\d.e+-]+) of the largest entry)?", line)
        assert match, line
        errors[match[1]] = float(match[3]) if match[3] else None
    forward = gate_out_bench.TINY_GATED_MATMUL_LAUNCHES[0]
    kernel = "gated_matmul_kernel BLOCK_M={} BLOCK_N={} GROUP_M={} warps={} stages={}".format(*forward)
    backward = gate_out_bench.TINY_WEIGHT_GRAD_LAUNCHES[0]
    grad_kernel = ("weight gradient: gated_weight_grad_kernel BLOCK_T={} BLOCK_N={} splits={} warps={} stages={} "
                   "(with the parts' sum)").format(*backward)
    assert list(errors) == ["compiled (y * gate) @ W, as training runs it", "cuBLAS's GEMM of the gated y alone",
                            "the gate's product alone (compiled)", kernel,
                            "weight gradient: compiled (y * gate)^T @ grad",
                            "weight gradient: cuBLAS's GEMM of the gated y alone", grad_kernel]
    assert errors["the gate's product alone (compiled)"] is None
    assert errors["compiled (y * gate) @ W, as training runs it"] < 1e-5  # fp32 on the CPU
    assert errors["weight gradient: compiled (y * gate)^T @ grad"] < 1e-5
    # fp32 throughout, only the sums' order differs (1.7e-7 and 1.4e-7 seen); a wrong tile, head, gate or split is off
    # by O(1). The tiny shapes leave partial tiles (100 tokens, 80 columns) and a last split past the tokens.
    assert errors[kernel] < 1e-5 and errors[grad_kernel] < 1e-5
