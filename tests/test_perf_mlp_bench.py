"""perf/mlp_bench.py on a small shape on the CPU (--tiny, the kernel under Triton's interpreter): it times the FP8
MLP's relu-square backward kernel in one pass and in two, in the script's launch configuration and another, and the
torch ops; the GPU numbers come from the device. Run in this process, so that the interpreter fixture's patch
applies."""

import re
import sys


def test_tiny_run_times_both_passes_in_the_scripts_configuration_another_and_the_torch_ops(repo_root,
                                                                                           require_interpreted, capsys):
    sys.path.insert(0, str(repo_root / "perf"))
    import mlp_bench
    require_interpreted(mlp_bench.train_gpt.relu_square_grads_kernel)
    assert mlp_bench.main(["--tiny"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"inductor: [\d.]+ us, [\d.]+ TB/s, nan of the bytes equal torch's", lines[0]), lines[0]
    passes = []
    for line in lines[1:5]:
        match = re.fullmatch(r"(\(\d+, \d+, \d+\)) (one pass|two passes): [\d.]+ us, [\d.]+ TB/s, nan of the bytes "
                             r"equal torch's", line)
        assert match, line
        passes.append(match.groups())
    assert passes == [("(32, 128, 4)", "one pass"), ("(32, 128, 4)", "two passes"), ("(32, 64, 4)", "one pass"),
                      ("(32, 64, 4)", "two passes")]
    summary = r"{}: script \(32, 128, 4\) ([\d.]+) us, best \(\d+, \d+, \d+\) ([\d.]+) us \(2 configurations ran\)"
    match = re.fullmatch(r"256x384: inductor [\d.]+ us; " + summary.format("one pass") + "; "
                         + summary.format("two passes"), lines[5])
    assert match, lines[5]
    assert float(match[2]) <= float(match[1]) and float(match[4]) <= float(match[3])
    assert len(lines) == 6
