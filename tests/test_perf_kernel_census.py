"""perf/kernel_census.py on the CPU: its categories and phases on a made-up log and on a record's real profile, that
the two functions it widens in the track scripts still take the count it sets, and that --script runs a version of a
track's script in their place."""
import inspect
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "perf"))
import kernel_census  # noqa: E402

REAL_LOG = (Path(__file__).resolve().parents[1] / "records/track_1_short/2026-12-04_FP8QKVForward"
            / "call4_main_profiled.txt")  # 2 profiled steps
FORWARD = "## Call CompiledFxGraph abc ## < CompiledFunction < Torch-Compiled Region: 0/0"
BACKWARD = "## Call CompiledFxGraph def ## < CompiledFunctionBackward < autograd::engine::evaluate_function"
MADE_UP_LOG = f"""step:1/2 train_loss:10.8
Self CUDA time total: 40.000ms
kernel 10.0 ms in 4 calls: triton_tem_fused_flex_attention_backward_1 [from {BACKWARD}]
kernel 8.0 ms in 4 calls: nvjet_sm90_qqtst_x [from aten::_scaled_mm < nanogpt::fp8_mlp < {FORWARD}]
kernel 6.0 ms in 4 calls: nvjet_sm90_tst_y [from aten::mm < {BACKWARD}]
kernel 4.0 ms in 2 calls: softcap_ce_kernel [from nanogpt::fp8_head_ce < {FORWARD}]
kernel 3.0 ms in 6 calls: triton_poi_fused_add_2 [from {FORWARD}]
kernel 2.0 ms in 2 calls: triton_red_fused_sum_3 [from {BACKWARD}]
kernel 1.0 ms in 8 calls: void at::native::vectorized_elementwise_kernel<4> [from aten::add_ < AccumulateGrad]
kernel 0.5 ms in 2 calls: sym_matmul_kernel [from nanogpt::sym_matmul < Optimizer.step#Muon.step]
kernel 0.5 ms in 2 calls: some_vendor_kernel
"""


def rows_by(lines: list[str], title: str) -> dict[str, str]:
    """A table's lines by their group name (the text before the column of ms)."""
    start = next(i for i, line in enumerate(lines) if line.startswith(f"== {title}"))
    rows = {}
    for line in lines[start + 1:]:
        if line.startswith("=="):
            break
        rows[line[:28].strip()] = line[28:]
    return rows


def test_made_up_log_sums_each_kind_and_phase_per_step():
    lines = kernel_census.report(MADE_UP_LOG, 2, kernel_census.script_kernels())
    assert lines[0] == "listed kernels: 17.5 ms of the profile's 20.0 ms of GPU time a step (9 kernels)"
    kinds = rows_by(lines, "by kind")
    assert list(kinds) == ["FlexAttention", "cuBLAS FP8 GEMMs", "cuBLAS bf16 GEMMs", "the script's Triton kernels",
                           "inductor pointwise", "inductor reductions", "ATen elementwise", "other"]
    assert kinds["FlexAttention"].split()[:4] == ["5.00", "ms", "28.6%", "2"]
    assert kinds["the script's Triton kernels"].split()[:4] == ["2.25", "ms", "12.9%", "2"]  # softcap_ce + sym
    phases = rows_by(lines, "by phase")
    assert {name: row.split()[0] for name, row in phases.items()} == {
        "backward": "9.00", "forward": "7.50", "gradient accumulation": "0.50", "optimizer": "0.25", "other": "0.25"}


def test_a_records_profile_attributes_every_line():
    text = REAL_LOG.read_text()
    rows = kernel_census.census(text, kernel_census.script_kernels())
    assert len(rows) == 30 and sum(row.ms for row in rows) == pytest.approx(124.6)
    flex = sum(row.ms for row in rows if row.kind == "FlexAttention")
    assert flex == pytest.approx(15.4 + 3.2 + 2.4 + 2.0 + 1.2)
    assert {row.name for row in rows if row.kind == "the script's Triton kernels"} == {
        "relu_square_grads_kernel", "softcap_ce_kernel", "attention_inputs_backward_kernel", "transpose_kernel",
        "sym_matmul_kernel", "attention_inputs_kernel"}
    assert kernel_census.profiled_ms(text) == pytest.approx(144.401)
    assert kernel_census.profiled_ms("Self CUDA time total: 1.124s") == pytest.approx(1124.0)


@pytest.mark.parametrize("track", ["short", "medium"])
def test_the_functions_it_widens_still_take_a_count(track):
    module = kernel_census.load_script(kernel_census.SCRIPTS[track])
    for function in (module.longest_kernels, module.kernel_launchers):
        defaults = [p.default for p in inspect.signature(function).parameters.values()
                    if p.default is not inspect.Parameter.empty]
        assert len(defaults) == 1 and isinstance(defaults[0], int), function.__name__


def test_compare_lists_the_changed_kernels_by_name_without_inductors_build_numbers(tmp_path, capsys):
    """B's log: the flex backward renumbered (_1 -> _7) and 2 ms faster, the pointwise kernel gone, a new kernel; the
    changes come largest first, a renumbered kernel as one line, and the total is B's listed time less A's."""
    changed = (MADE_UP_LOG.replace("kernel 10.0 ms in 4 calls: triton_tem_fused_flex_attention_backward_1",
                                   "kernel 6.0 ms in 4 calls: triton_tem_fused_flex_attention_backward_7")
               .replace(f"kernel 3.0 ms in 6 calls: triton_poi_fused_add_2 [from {FORWARD}]\n", "")
               + f"kernel 1.0 ms in 2 calls: gated_rowwise_float8_kernel [from {FORWARD}]\n")
    rows = [kernel_census.census(text, {"gated_rowwise_float8_kernel"}) for text in (MADE_UP_LOG, changed)]
    lines = kernel_census.comparison(*rows, steps=2, count=3)
    assert lines[0].startswith("== B - A by kernel: ms a profiled step (-3.00 ms in all)")
    assert [line.split()[0] for line in lines[1:]] == ["-2.00", "-1.50", "+0.50"]
    assert lines[1].endswith("triton_tem_fused_flex_attention_backward") and "A    5.00 /     2  B    3.00 /     2" \
        in lines[1]
    assert lines[2].endswith("triton_poi_fused_add") and lines[3].endswith("gated_rowwise_float8_kernel")
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text(MADE_UP_LOG)
    b.write_text(changed)
    kernel_census.main([f"--log={a}", "--steps=2", f"--compare={b}"])
    out = capsys.readouterr().out
    assert "== by kind" in out and out.count("== B - A by kernel") == 1 and "triton_poi_fused_add\n" in out


VERSION = """import pathlib, sys
import triton


@triton.jit
def branch_only_kernel(x):
    pass


def longest_kernels(count=30):
    return count


def kernel_launchers(depth=4):
    return depth


def main():
    logs_dir, run_id = (next(a.split("=", 1)[1] for a in sys.argv if a.startswith(f"--{name}="))
                        for name in ("logs_dir", "run_id"))
    widened = f"{longest_kernels()} {kernel_launchers()}"
    pathlib.Path(logs_dir, f"{run_id}.txt").write_text(f"{widened} {sys.argv}\\n" + LOG)
"""


def test_script_runs_a_version_in_the_tracks_place_and_counts_its_kernels_as_own(tmp_path, capsys, monkeypatch):
    """A stand-in version (its main writes the log; the real scripts cannot be loaded twice in one process: their
    custom ops register once): it runs with every kernel listed, its command line names it and not --script, and its
    own kernel, which neither track script defines, counts among the script's Triton kernels."""
    version = tmp_path / "B.py"
    log = MADE_UP_LOG + f"kernel 2.0 ms in 2 calls: branch_only_kernel [from {FORWARD}]\n"
    version.write_text(VERSION.replace("LOG", repr(log)))
    monkeypatch.chdir(tmp_path)
    assert kernel_census.main(["short", f"--script={version}", "--profile_steps=2", f"--logs_dir={tmp_path}",
                               "--run_id=r", "--seed=1"]) == 0
    first_line = (tmp_path / "r.txt").read_text().splitlines()[0]
    assert first_line == f"{sys.maxsize} {kernel_census.LAUNCHER_DEPTH} " + str(
        ["B.py", "--profile_steps=2", f"--logs_dir={tmp_path}", "--run_id=r", "--seed=1"])
    rows = rows_by(capsys.readouterr().out.splitlines(), "by kind")
    assert rows["the script's Triton kernels"].split()[0] == "3.25"  # softcap 2.0 + branch 1.0 + sym_matmul 0.25


@pytest.mark.parametrize("argv, line", [
    ([], "error: give --log=PATH and --steps=N together, or a track and its run's options (see --help)"),
    (["--bogus"], "error: unknown argument '--bogus': its only options are --log=... --steps=... --compare=... (see "
                  "--help)"),
    (["--log=LOG"], "error: give --log=PATH and --steps=N together, or a track and its run's options (see --help)"),
    (["--log=none.txt", "--steps=2"], "error: none.txt: no such file; give a log the track script wrote with "
                                      "--profile_steps (see --help)"),
    (["--log=LOG", "--steps=2", "--compare=none.txt"], "error: none.txt: no such file; give a log the track script "
                                                       "wrote with --profile_steps (see --help)"),
    (["--log=LOG", "--steps=0"], "error: --steps=0: give the log's number of profiled steps, a positive integer (see "
                                 "--help)"),
    (["shrt", "--profile_steps=2"], "error: unknown argument 'shrt': name a track (short or medium) or give "
                                    "--log=PATH --steps=N (see --help)"),
    (["short", "--profile_steps=2", "--run_id=r"], "error: give --logs_dir: the run's log is read after, from "
                                                   "--logs_dir/--run_id.txt, over --profile_steps steps (see --help)"),
    (["short", "--script=B.py", "--profile_steps=2", "--logs_dir=.", "--run_id=r"],
     "error: --script=B.py: no such file; give a version of the short track's script (see --help)")])
def test_a_bad_command_line_is_one_line_before_any_work(tmp_path, capsys, monkeypatch, argv, line):
    """Were a usage line with exit status 1 (no options, a bad track), a FileNotFoundError or ValueError traceback,
    a silently ignored option, or a census of zero steps (--steps=0: a ZeroDivisionError)."""
    log = tmp_path / "a.txt"
    log.write_text(MADE_UP_LOG)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(kernel_census, "run_track", lambda *args: pytest.fail("ran the track"))
    assert kernel_census.main([arg.replace("LOG", str(log)) for arg in argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [line]


def test_help_prints_the_usage(capsys):
    assert kernel_census.main(["--help"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == kernel_census.__doc__.strip() and err == ""
