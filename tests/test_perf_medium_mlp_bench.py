"""perf/medium_mlp_bench.py on a small shape on the CPU (--tiny, the kernel under Triton's interpreter): both passes
of track 2's MLP, the torch path and three launches of the epilogue GEMM (its epilogue whole and split, split with two
programs a "SM"), whose outputs must match the torch path's; the GPU numbers come from the device. Run in this
process, so that the interpreter fixture's patch applies."""

import re
import sys


def test_tiny_run_times_both_passes_and_matches_the_torch_path(repo_root, require_interpreted, capsys):
    sys.path.insert(0, str(repo_root / "perf"))
    import medium_mlp_bench
    require_interpreted(medium_mlp_bench.medium.relu_square_gemm_kernel)
    assert medium_mlp_bench.main(["--tiny"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 10, lines
    for name, (before, *launches, best) in zip(["forward", "backward"], [lines[:5], lines[5:]]):
        assert re.fullmatch(rf"{name}: cuBLAS \+ inductor [\d.]+ us, \d+ TFLOP/s", before), before
        for launch, settings in zip(launches, ["False, 1", "True, 1", "True, 2"]):
            match = re.fullmatch(rf"{name} \(32, 64, 32, 2, 4, 1, {settings}\): [\d.]+ us, \d+ TFLOP/s, largest "
                                 r"difference ([\d.e+-]+) of the largest output", launch)
            assert match, launch
            assert float(match[1]) < 1e-5  # float32 under the interpreter: only the order of the sums differs
        script = re.escape(str(medium_mlp_bench.medium.MLP_LAUNCH[name]))
        assert re.fullmatch(rf"== {name}: before [\d.]+ us, script {script} nan us, best "
                            r"\(32, 64, 32, 2, 4, 1, (False|True), [12]\) [\d.]+ us \(3 configurations ran\)",
                            best), best
