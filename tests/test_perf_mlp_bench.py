"""perf/mlp_bench.py on a small shape on the CPU (--tiny, the kernel under Triton's interpreter): it times the FP8
MLP's relu-square backward kernel in one pass and in two, in the script's launch configuration and another, and the
torch ops, and compares every output's float8 bytes with the torch ops'; the GPU numbers come from the device. Run in
this process, so that the interpreter fixture's patch applies."""

import re
import sys


def test_tiny_run_times_both_passes_in_the_scripts_configuration_another_and_the_torch_ops(repo_root,
                                                                                           require_interpreted, capsys,
                                                                                           monkeypatch):
    sys.path.insert(0, str(repo_root / "perf"))
    import mlp_bench
    require_interpreted(mlp_bench.train_gpt.relu_square_grads_kernel)
    # each run is timed, then reported at a fixed time, the script's launch the slowest: which one the summary calls
    # best is then known (the CPU's times say nothing of the GPU's)
    kernel_run, timed_us = mlp_bench.kernel_run, mlp_bench.timed_us
    fake_us = {(mlp_bench.train_gpt.RELU_SQUARE_LAUNCH, True): 20.0, ((32, 64, 4), True): 10.0,
               (mlp_bench.train_gpt.RELU_SQUARE_LAUNCH, False): 40.0, ((32, 64, 4), False): 30.0}

    def labelled_kernel_run(args, launch, one_pass):
        run = kernel_run(args, launch, one_pass)
        run.label = (launch, one_pass)
        return run

    def fixed_time(run, tiny):
        timed_us(run, tiny)
        return fake_us.get(getattr(run, "label", None), 50.0)  # the torch ops: no label
    monkeypatch.setattr(mlp_bench, "kernel_run", labelled_kernel_run)
    monkeypatch.setattr(mlp_bench, "timed_us", fixed_time)
    assert mlp_bench.main(["--tiny"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # the reference is the torch ops themselves here, so no share of equal bytes (it would be 1 by construction)
    assert re.fullmatch(r"torch ops, uncompiled \(--tiny\): 50\.0 us, [\d.]+ TB/s", lines[0]), lines[0]
    passes = []
    for line in lines[1:5]:
        match = re.fullmatch(r"(\(\d+, \d+, \d+\)) (one pass|two passes): [\d.]+ us, [\d.]+ TB/s, ([\d.]+) of the "
                             r"bytes equal torch's", line)
        assert match, line
        passes.append(match.groups()[:2])
        # the kernel's float32 values cast by torch against the torch ops' casts: equal on this CPU; a float32 value a
        # ulp off (a division as a product with the reciprocal) would round a rare byte the other way
        assert float(match[3]) >= 0.9999, line
    assert passes == [("(32, 128, 4)", "one pass"), ("(32, 128, 4)", "two passes"), ("(32, 64, 4)", "one pass"),
                      ("(32, 64, 4)", "two passes")]
    assert lines[5] == ("256x384: torch ops, uncompiled (--tiny) 50.0 us; one pass: script (32, 128, 4) 20.0 us, "
                        "best (32, 64, 4) 10.0 us (2 configurations ran); two passes: script (32, 128, 4) 40.0 us, "
                        "best (32, 64, 4) 30.0 us (2 configurations ran)")
    assert len(lines) == 6
