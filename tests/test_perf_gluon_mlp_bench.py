"""perf/gluon_mlp_bench.py --compile_only: the ping-pong candidate of track 2's MLP GEMM, built for sm_90 on this
(GPU-less) machine: both passes at each ring depth fit an SM's shared memory, the warp groups ask for the registers the
kernel assigns them (setmaxnreg: 40 for the loading group, 232 for each computing group), and the builds with only
parts of the epilogue (--epilogue_parts) keep all their MMAs. Its speed and its outputs against the script's kernel
come from the device. A subprocess, as perf/kernel_report.py's test: it needs Triton's GPU compiler, not the
interpreter the other tests import the scripts under."""

import re

import triton


def test_both_passes_build_for_sm90_and_fit_in_shared_memory(run_gpu_compiler):
    result = run_gpu_compiler("perf/gluon_mlp_bench.py", "--compile_only", timeout=600)
    if triton.__version__.rsplit(".", 1)[0] != "3.6":  # the bench's Gluon API: one line, not a traceback
        assert (result.returncode, result.stderr) == (1, (
            "error: this bench is written against Triton 3.6's Gluon API, which is experimental and has changed "
            f"since; this is Triton {triton.__version__} (torch 2.11 ships 3.6)\n"))
        return
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    passes = ("forward", "backward")
    assert [line.split(":")[0] for line in lines] == [
        label for name in passes for label in [f"{name} STAGES={stages}" for stages in (3, 4, 5)]
        + [f"{name} MMA instructions"]]
    shared = []
    for line in lines:
        if "MMA instructions" in line:
            # the builds with parts of the epilogue (--epilogue_parts) keep every MMA: ptxas drops those whose
            # results go unused
            counts = re.findall(r"(\d+) (?:with the whole epilogue|MMAs only|without the TMA store|with only the TMA "
                                r"store)", line)
            assert len(counts) == 4 and int(counts[0]) > 0 and len(set(counts)) == 1, line
            continue
        match = re.fullmatch(r".*: (\d+) B shared \((fits|does not fit) in \d+\), setmaxnreg \[([\d, ]+)\]", line)
        assert match and match[2] == "fits", line
        shared.append(int(match[1]))
        assert {40, 232} <= {int(n) for n in match[3].split(", ")}, line
    for fewer, more in zip(shared[:2], shared[1:3]):  # a ring stage: 128 x 64 of x and of w, bf16, and its barriers
        assert 32_768 <= more - fewer <= 32_768 + 64
