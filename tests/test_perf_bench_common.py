"""perf/bench_common.py: the benches' options read from argv, the tiny timing, that a tool reading only options
(perf/kernel_census.py) no longer loads a track script through it, the command lines of the benches that take
only --tiny, which answer through its helpers, and that the tools timing FP8 GEMMs set training's cuBLASLt settings."""
import ast
import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

PERF = Path(__file__).resolve().parents[1] / "perf"
sys.path.insert(0, str(PERF))
import bench_common  # noqa: E402

TINY_ONLY_BENCHES = ["attention_fp8_bench", "embedding_bench", "head_gemm_bench", "head_kernels_bench",
                     "medium_gemm_bench", "mlp_bench", "sym_bench"]


def fp8_gemm_tools() -> list[str]:
    """The perf tools that run FP8 GEMMs, by their source: a call of torch._scaled_mm, or of a function of
    train_gpt.py whose own body calls one (scaled_mm, rowwise_scaled_mm, relu_square_up_torch, ...)."""
    source = (PERF.parent / "train_gpt.py").read_text()
    callers = [node.name for node in ast.parse(source).body
               if isinstance(node, ast.FunctionDef) and "scaled_mm(" in ast.get_source_segment(source, node)]
    calls = re.compile(rf"\b_scaled_mm\(|\.(?:{'|'.join(callers)})\(")
    return sorted(path.stem for path in PERF.glob("*.py") if calls.search(path.read_text()))


FP8_GEMM_TOOLS = fp8_gemm_tools()


def test_option_values_keeps_every_occurrence_in_order():
    argv = ["--tiny", "--script=a.py", "--other=1", "--script=b.py", "--scripts=c.py"]
    assert bench_common.option_values(argv, "script") == ["a.py", "b.py"]
    assert bench_common.option_values(argv, "missing") == []


def test_option_list_splits_commas_and_drops_empty_items():
    argv = ["--warps=4,8", "--warps=16,", "--stages=3"]
    assert bench_common.option_list(argv, "warps") == ["4", "8", "16"]
    assert bench_common.option_list(argv, "none") == []


def test_tiny_timing_runs_twice_and_times_the_second():
    calls = []
    us = bench_common.timed_us(lambda: calls.append(1), tiny=True)
    assert calls == [1, 1] and 0 <= us < 1e6


def test_kernel_census_imports_no_track_script():
    code = f"import sys; sys.path.insert(0, {str(PERF)!r}); import kernel_census; " \
           "print(sorted(m for m in sys.modules if m.startswith('train_gpt')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_usage_or_error_takes_valued_options_by_name_and_names_them_in_its_error(capsys):
    doc = "python perf/x.py [--tiny] [--warps=N,...]  ->  lines"
    assert bench_common.usage_or_error(["--warps=4,8", "--tiny", "--warps=8"], doc, ("--tiny",), ("warps",)) is None
    assert bench_common.usage_or_error(["--warps"], doc, ("--tiny",), ("warps",)) == 2  # the option without its value
    assert bench_common.usage_or_error(["--tiny=1", "--warp=4"], doc, ("--tiny",), ("warps",)) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: unknown argument '--warps': its only options are --tiny --warps=... (see --help)",
        "error: unknown argument '--tiny=1': its only options are --tiny --warps=... (see --help)"]
    assert bench_common.usage_or_error(["--help", "--bogus"], doc, ("--tiny",), ("warps",)) == 0
    assert capsys.readouterr().out == doc + "\n"
    for flag in ("-h", "--help=1", "--help=true", "--help=false"):  # as the track scripts and run.sh read --help=VALUE
        assert bench_common.usage_or_error([flag], doc, ("--tiny",), ("warps",)) == 0
        assert capsys.readouterr().out == doc + "\n"


@pytest.mark.parametrize("name", TINY_ONLY_BENCHES)
def test_a_tiny_bench_prints_its_usage_and_an_unknown_argument_is_one_line_without_running(name, capsys):
    bench = importlib.import_module(name)
    assert bench.main(["--help"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == bench.__doc__.strip() and f"python perf/{name}.py [--tiny]  ->  " in out and err == ""
    assert bench.main(["--tiny", "--bogus"]) == 2  # was ignored: the bench ran
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        "error: unknown argument '--bogus': its only options are --tiny (see --help)"]


@pytest.mark.parametrize("name", TINY_ONLY_BENCHES)
def test_a_tiny_bench_without_a_gpu_is_one_line_that_points_to_tiny(name, capsys, monkeypatch):
    bench = importlib.import_module(name)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert bench.main([]) == 2  # was a CUDA traceback
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        f"error: perf/{name}.py runs on an NVIDIA GPU and torch sees none (torch.cuda.is_available() is False); run "
        "it on the GPU machine (--tiny runs small shapes on the CPU)"]


def test_the_tools_that_run_fp8_gemms_are_found():
    assert {"attention_fp8_bench", "gpu_checks", "head_gemm_bench", "mlp_up_bench"} <= set(FP8_GEMM_TOOLS)


@pytest.mark.parametrize("name", FP8_GEMM_TOOLS)
def test_a_tool_that_runs_fp8_gemms_sets_training_cublaslt_settings_at_import(name, monkeypatch):
    """Training runs cuBLASLt without a workspace (train_gpt.configure_cublaslt: 1.2-2.2 ms a full step faster,
    perf/NOTES.md, session 71); the benches timed its FP8 GEMMs with torch's default workspace, shared with cuBLAS,
    and a memset before each call. Set at import, before any CUDA work (torch may read them once), as gpu_checks.py
    set them already, and said in the tool's --help."""
    from track_scripts import ROOT, load_script
    settings = load_script(ROOT / "train_gpt.py").CUBLASLT_SETTINGS
    for setting in settings:
        monkeypatch.delenv(setting, raising=False)  # conftest's restored_environment puts back what is set
    spec = importlib.util.spec_from_file_location(f"fresh_{name}", PERF / f"{name}.py")  # its import run again
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert {setting: os.environ.get(setting) for setting in settings} == settings
    assert "cuBLASLt with training's settings (train_gpt.CUBLASLT_SETTINGS" in " ".join(tool.__doc__.split())


def test_a_script_lock_without_fcntl_is_one_warning_line_and_goes_on(tmp_path, monkeypatch, capsys):
    """Where fcntl is missing, hold_script_lock goes on unguarded and says so, as proxy_common.sh does without flock."""
    import contextlib
    monkeypatch.setitem(sys.modules, "fcntl", None)  # its import raises ImportError
    with contextlib.ExitStack() as held:
        assert bench_common.hold_script_lock(held, tmp_path / "best.py", "perf/tool.py") is None
    assert capsys.readouterr().err == (f"warning: fcntl is missing: nothing keeps another job from staging versions "
                                       f"over {tmp_path / 'best.py'}\n")
    assert not (tmp_path / "best.py.lock").exists()


@pytest.mark.parametrize("name", ["best.py", "best", "perf/base/best_copy", "best.txt"])
def test_a_script_lock_leaves_nothing_for_git_to_track(tmp_path, name):
    """PATH.lock stays after the lock is released (as proxy_common.sh's: removing it would race a job opening it), so
    .gitignore must cover it whatever PATH is called: it covered *.py.lock only, and perf/medium_mlp_bench.py
    --best_script=best_copy (no .py) left an untracked best_copy.lock in the repository."""
    import contextlib
    import shutil
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    shutil.copy(PERF.parent / ".gitignore", tmp_path / ".gitignore")
    script = tmp_path / name
    script.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as held:
        assert bench_common.hold_script_lock(held, script, "perf/medium_mlp_bench.py") is None
    assert Path(f"{script}.lock").read_text().startswith("perf/medium_mlp_bench.py, pid ")  # the lock was written
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path, check=True,
                            capture_output=True, text=True).stdout
    assert status.splitlines() == ["?? .gitignore"]


@pytest.mark.parametrize("tool", ["compile_census.py", "mlp_bench.py", "trace_time.py"])
def test_help_into_a_closed_pipe_exits_quietly(tool):
    """`--help | head -0`, as the track scripts' and run.sh's help: exit code 0 and nothing on stderr, where the perf
    tools printed a BrokenPipeError traceback (through bench_common's help, and trace_time.py's own print)."""
    import os
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run([sys.executable, str(PERF / tool), "--help"], stdout=write_end, stderr=subprocess.PIPE,
                                text=True, timeout=120)
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (0, "")
