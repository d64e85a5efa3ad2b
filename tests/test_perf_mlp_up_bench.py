"""perf/mlp_up_bench.py on a small shape on the CPU (--tiny, the kernel under Triton's interpreter): it times the FP8
MLP's up projection with a's cast in its GEMM's epilogue in the script's launch configuration and another, then with
the sampled rows' GEMM before it, and the path it replaces, and compares a's e4m3 bytes with torch's; the GPU numbers
come from the device. Run in this process, so that the interpreter fixture's patch applies."""

import re
import sys


def test_tiny_run_times_the_scripts_configuration_another_and_the_replaced_path(repo_root, require_interpreted,
                                                                               capsys, monkeypatch):
    sys.path.insert(0, str(repo_root / "perf"))
    import mlp_up_bench
    require_interpreted(mlp_up_bench.train_gpt.relu_square_up_kernel)
    # each run is timed, then reported at a fixed time by what it launches, the script's launch the slowest: which
    # one the summary calls best, and the new path's sum, are then known (the CPU's times say nothing of the GPU's)
    launches, timed_us = [], mlp_up_bench.timed_us
    triton_path = mlp_up_bench.train_gpt.relu_square_up_triton
    monkeypatch.setattr(mlp_up_bench.train_gpt, "relu_square_up_triton",
                        lambda *args, launch, **kwargs: launches.append(launch) or triton_path(*args, launch=launch,
                                                                                               **kwargs))

    scales, sampled_a_scale = [], mlp_up_bench.sampled_a_scale
    monkeypatch.setattr(mlp_up_bench, "sampled_a_scale", lambda *args: scales.append(args) or sampled_a_scale(*args))
    script = mlp_up_bench.train_gpt.RELU_SQUARE_UP_LAUNCH

    def fixed_time(run, tiny):
        launches.clear()
        scales.clear()
        timed_us(run, tiny)
        if scales:  # the new path: a's scale, then the script's launch
            return 30.0 if launches == [script, script] else 0.0
        return {(): 50.0, (script, script): 20.0}.get(tuple(launches), 10.0)
    monkeypatch.setattr(mlp_up_bench, "timed_us", fixed_time)
    assert mlp_up_bench.main(["--tiny"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # the replaced path keeps h in bf16, so a few of its bytes differ from the fp32 product's cast
    match = re.fullmatch(r"replaced \(GEMM to bf16 h, then the cast\): 50\.0 us, ([\d.]+) of a's bytes equal torch's "
                         r"fp32 cast, up to (\d) steps apart", lines[0])
    assert match and 0.9 < float(match[1]) < 1 and match[2] == "1", lines[0]
    for line, launch, us in zip(lines[1:3], ["(128, 256, 128, 8, 8, 4, False)", "(32, 64, 32, 2, 4, 1, False)"],
                                ["20.0", "10.0"]):
        # the kernel's float32 values cast by torch: torch's bytes but where the sum's order moves one a step
        match = re.fullmatch(rf"{re.escape(launch)}: {us} us, \d+ TFLOP/s, ([\d.]+) of a's bytes equal torch's, "
                             r"up to (\d) steps apart", line)
        assert match and float(match[1]) > 0.99 and int(match[2]) <= 1, line
    assert lines[3] == ("256x64->128: replaced 50.0 us; script (128, 256, 128, 8, 8, 4, False) 20.0 us, best (32, 64, "
                        "32, 2, 4, 1, False) 10.0 us (2 configurations ran); new path (a's scale from every 16th row, "
                        "then the script's) 30.0 us, -20.0 us a call")
    assert len(lines) == 4
