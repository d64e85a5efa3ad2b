"""perf/gluon_mlp_bench.py --compile_only: the ping-pong candidate of track 2's MLP GEMM, built for sm_90 on this
(GPU-less) machine: both passes at each ring depth fit an SM's shared memory, the warp groups ask for the registers the
kernel assigns them (setmaxnreg: 40 for the loading group, 232 for each computing group), and the builds with only
parts of the epilogue (--epilogue_parts) keep all their MMAs. Its speed and its outputs against the script's kernel
come from the device. A subprocess, as perf/kernel_report.py's test: it needs Triton's GPU compiler, not the
interpreter the other tests import the scripts under. Its command line's errors: one line each, from a subprocess
too (importing the bench in this process would take TRITON_INTERPRET away from the tests after it)."""

import os
import re
import subprocess
import sys

import pytest
import triton

NEEDS_GLUON_TRITON = pytest.mark.skipif(triton.__version__.rsplit(".", 1)[0] != "3.6",
                                        reason="the bench stops at import on another Triton than its Gluon API's, 3.6")


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


def run_without_a_gpu(repo_root, *args: str) -> "subprocess.CompletedProcess[str]":
    """The bench in a subprocess that sees no GPU (CUDA_VISIBLE_DEVICES empty), on any machine."""
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    return subprocess.run([sys.executable, "perf/gluon_mlp_bench.py", *args], cwd=repo_root, capture_output=True,
                          text=True, timeout=120, env={**env, "CUDA_VISIBLE_DEVICES": ""})


def one_error_line(result: "subprocess.CompletedProcess[str]") -> str:
    assert result.returncode == 2 and result.stdout == "" and len(result.stderr.splitlines()) == 1, result.stderr
    return result.stderr.strip()


@NEEDS_GLUON_TRITON
def test_help_prints_the_usage_and_a_bad_argument_is_one_line_without_running(repo_root):
    result = run_without_a_gpu(repo_root, "--check=forward,128,128", "--help")
    assert result.returncode == 0 and result.stderr == ""
    assert "python perf/gluon_mlp_bench.py --compile_only  ->  both passes built for sm_90" in result.stdout
    assert one_error_line(run_without_a_gpu(repo_root, "--compile_only", "--bogus")) == (
        "error: unknown argument '--bogus': its only options are --epilogue_parts --compile_only --check=... "
        "--stages=... (see --help)")
    for check in ("forward,128", "fwd,128,128", "backward,128,x"):  # were a ValueError, or a forward pass for "fwd"
        assert one_error_line(run_without_a_gpu(repo_root, "--compile_only", f"--check={check}")) == (
            f"error: --check={check}: give PASS,ROWS,COLS, PASS forward or backward and ROWS and COLS integers, e.g. "
            "--check=backward,65536,4096 (see --help)")
    assert one_error_line(run_without_a_gpu(repo_root, "--compile_only", "--stages=4,five")) == (
        "error: --stages: 'five' is not a ring depth; give integers, e.g. --stages=4 (see --help)")


def test_on_another_triton_help_still_prints_and_a_run_is_one_line_naming_the_version(repo_root):
    """Gluon's API is Triton 3.6's: on another Triton (faked here as 3.9.0 before the bench loads) --help prints the
    usage, which needs no Gluon, and anything else stops at one line before Gluon is imported."""
    fake = ("import runpy, sys, triton; triton.__version__ = '3.9.0'; sys.argv = ['perf/gluon_mlp_bench.py', "
            "*sys.argv[1:]]; runpy.run_path('perf/gluon_mlp_bench.py', run_name='__main__')")
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}

    def run(*args):
        return subprocess.run([sys.executable, "-c", fake, *args], cwd=repo_root, capture_output=True, text=True,
                              timeout=120, env=env)
    result = run("--help")
    assert result.returncode == 0 and result.stderr == ""
    assert "python perf/gluon_mlp_bench.py --compile_only  ->  both passes built for sm_90" in result.stdout
    result = run("--compile_only")
    assert result.returncode == 1 and result.stdout == "" and result.stderr.strip() == (
        "error: this bench is written against Triton 3.6's Gluon API, which is experimental and has changed since; "
        "this is Triton 3.9.0 (torch 2.11 ships 3.6)")


@NEEDS_GLUON_TRITON
def test_without_a_gpu_the_bench_and_a_check_are_one_line_that_points_to_compile_only(repo_root):
    # a --check runs first and on the GPU, --compile_only or not
    for args in ([], ["--stages=4", "--epilogue_parts"], ["--check=backward,1024,512", "--compile_only"]):
        assert one_error_line(run_without_a_gpu(repo_root, *args)) == (
            "error: perf/gluon_mlp_bench.py runs on an NVIDIA GPU and torch sees none (torch.cuda.is_available() is "
            "False); run it on the GPU machine (--compile_only builds the kernels for sm_90 without one)"), args
