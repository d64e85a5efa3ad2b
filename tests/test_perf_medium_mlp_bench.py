"""perf/medium_mlp_bench.py on a small shape on the CPU (--tiny, the kernel under Triton's interpreter): both passes
of track 2's MLP, the torch path and three launches of the epilogue GEMM (its epilogue whole and split, split with two
programs a "SM"), whose outputs must match the torch path's; the GPU numbers come from the device. Run in this
process, so that the interpreter fixture's patch applies."""

import ast
import functools
import re
import subprocess
import sys
import time

import pytest
import torch


def test_tiny_run_times_both_passes_and_matches_the_torch_path(repo_root, require_interpreted, capsys):
    sys.path.insert(0, str(repo_root / "perf"))
    import medium_mlp_bench
    require_interpreted(medium_mlp_bench.load_script(medium_mlp_bench.SCRIPT).relu_square_gemm_kernel)
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
        script = re.escape(str(medium_mlp_bench.load_script(medium_mlp_bench.SCRIPT).MLP_LAUNCH[name]))
        assert re.fullmatch(rf"== {name}: before [\d.]+ us, script {script} nan us, best "
                            r"\(32, 64, 32, 2, 4, 1, (False|True), [12]\) [\d.]+ us \(3 configurations ran\)",
                            best), best


def test_best_script_is_the_script_with_each_pass_fastest_launch(repo_root, require_interpreted, capsys, tmp_path):
    """--best_script: a copy of train_gpt_medium.py that differs only in MLP_LAUNCH, which holds the launch the bench
    reported best for each pass (perf/ab.sh runs the copy against the script). The bench reads a copy of the script
    in tmp_path (--script): --best_script locks the file it copies, and the lock file (PATH.lock, kept) was left in the
    repository's root."""
    sys.path.insert(0, str(repo_root / "perf"))
    import medium_mlp_bench
    require_interpreted(medium_mlp_bench.load_script(medium_mlp_bench.SCRIPT).relu_square_gemm_kernel)
    source, target = tmp_path / "train_gpt_medium.py", tmp_path / "best_train_gpt_medium.py"
    source.write_text((repo_root / "train_gpt_medium.py").read_text())
    assert medium_mlp_bench.main(["--tiny", f"--script={source}", f"--best_script={target}"]) == 0
    out = capsys.readouterr().out
    best = {name: ast.literal_eval(re.search(rf"== {name}: .* best (\(.*?\)) ", out)[1])
            for name in ("forward", "backward")}
    namespace = {}
    copy, script = target.read_text(), (repo_root / "train_gpt_medium.py").read_text()
    exec(re.search(r"^MLP_LAUNCH = \{.*?\}\n", copy, flags=re.M | re.S)[0], namespace)
    assert namespace["MLP_LAUNCH"] == best
    strip = functools.partial(re.sub, r"^MLP_LAUNCH = \{.*?\}\n", "", flags=re.M | re.S)
    assert strip(copy) == strip(script) and copy != script


def test_script_option_benches_another_copy_of_the_kernel(repo_root, require_interpreted, capsys, tmp_path):
    """--script=PATH: the bench loads that copy (here one whose MLP_LAUNCH is a tiny launch, written by
    write_script_with_launches) and times its launch as the script's, where the repository's script launch is not
    among the tiny ones (nan)."""
    sys.path.insert(0, str(repo_root / "perf"))
    import medium_mlp_bench
    require_interpreted(medium_mlp_bench.load_script(medium_mlp_bench.SCRIPT).relu_square_gemm_kernel)
    launch = medium_mlp_bench.TINY_CONFIGS[1]
    copy = tmp_path / "copy_train_gpt_medium.py"
    medium_mlp_bench.write_script_with_launches(medium_mlp_bench.SCRIPT, str(copy),
                                                {"forward": launch, "backward": launch})
    assert medium_mlp_bench.main(["--tiny", f"--script={copy}"]) == 0
    summaries = [line for line in capsys.readouterr().out.splitlines() if line.startswith("== ")]
    assert len(summaries) == 2
    for line in summaries:
        assert re.search(rf"script {re.escape(str(launch))} [\d.]+ us", line), line


def test_warps_option_keeps_the_configurations_with_those_warp_counts(repo_root, require_interpreted, capsys):
    """--warps=LIST: only those warp counts run (the tiny configurations have 4 warps: --warps=4 keeps all three,
    --warps=4,8 as well), so a device call can search one dimension without the whole table."""
    sys.path.insert(0, str(repo_root / "perf"))
    import medium_mlp_bench
    require_interpreted(medium_mlp_bench.load_script(medium_mlp_bench.SCRIPT).relu_square_gemm_kernel)
    assert medium_mlp_bench.main(["--tiny", "--warps=4,8"]) == 0
    summaries = [line for line in capsys.readouterr().out.splitlines() if line.startswith("== ")]
    assert len(summaries) == 2 and all("(3 configurations ran)" in line for line in summaries)
    assert medium_mlp_bench.main(["--tiny", "--warps=8"]) == 2  # none left: one line says so
    assert capsys.readouterr().err.splitlines() == [
        "error: --warps=8: no configuration has those warp counts (the table's: 4)"]  # --tiny's table


def test_help_prints_the_usage_and_an_unknown_argument_is_one_line_without_running(repo_root, capsys):
    sys.path.insert(0, str(repo_root / "perf"))
    import medium_mlp_bench
    assert medium_mlp_bench.main(["--help"]) == 0
    out, err = capsys.readouterr()
    assert ("python perf/medium_mlp_bench.py [--tiny] [--warps=N,...] [--script=PATH] [--best_script=PATH]  ->"
            in out and err == "")
    for argv in (["--tiny", "--bogus"], ["--tiny", "--script", "copy.py"]):  # the value belongs after an =
        assert medium_mlp_bench.main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.splitlines() == [
            f"error: unknown argument {argv[1]!r}: its only options are --tiny --script=... --warps=... "
            "--best_script=... (see --help)"]


def test_a_missing_script_or_best_script_folder_is_one_line_before_loading(repo_root, capsys, monkeypatch, tmp_path):
    """Was a FileNotFoundError: for --script at the start, for --best_script after the whole bench had run."""
    sys.path.insert(0, str(repo_root / "perf"))
    import medium_mlp_bench
    monkeypatch.setattr(medium_mlp_bench, "load_script", lambda path: pytest.fail(f"loaded {path}"))
    assert medium_mlp_bench.main(["--tiny", f"--script={tmp_path}/missing.py"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        f"error: --script={tmp_path}/missing.py: no such file; give a copy of train_gpt_medium.py (see --help)"]
    assert medium_mlp_bench.main(["--tiny", f"--best_script={tmp_path}/no/best.py"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        f"error: --best_script={tmp_path}/no/best.py: no folder {tmp_path}/no to write it in; create it or give "
        "another path"]


def test_without_a_gpu_it_is_one_line_that_points_to_tiny(repo_root, capsys, monkeypatch):
    sys.path.insert(0, str(repo_root / "perf"))
    import medium_mlp_bench
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(medium_mlp_bench, "load_script", lambda path: pytest.fail(f"loaded {path}"))
    assert medium_mlp_bench.main(["--warps=8"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        "error: perf/medium_mlp_bench.py runs on an NVIDIA GPU and torch sees none (torch.cuda.is_available() is "
        "False); run it on the GPU machine (--tiny runs small shapes on the CPU)"]


def hold_with_bash(repo_root, path, ready):
    """A bash job that holds perf/proxy_common.sh's lock of path (as fullbatch_ab.sh does while it stages versions
    over its track script) until killed; started once ready exists."""
    job = subprocess.Popen(["bash", "-c", f"source {repo_root / 'perf' / 'proxy_common.sh'} && lock_track_script "
                            f"{path} && touch {ready} && sleep 60"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
    for _ in range(300):
        if ready.exists() or job.poll() is not None:
            break
        time.sleep(0.1)
    assert ready.exists(), job.stderr.read()
    return job


@pytest.mark.parametrize("held", ["best_script", "script"])
def test_best_script_stops_in_one_line_while_a_job_stages_over_either_file(repo_root, capsys, monkeypatch, tmp_path,
                                                                           held):
    """--best_script wrote its copy without the lock a job staging versions over a script holds (proxy_common.sh's
    PATH.lock): a staging job swapping the script under it made a copy of a staged version, or its restore wrote over
    the copy. While the file copied (--script) or the one written is held, the bench stops before loading anything."""
    sys.path.insert(0, str(repo_root / "perf"))
    import medium_mlp_bench
    monkeypatch.setattr(medium_mlp_bench, "load_script", lambda path: pytest.fail(f"loaded {path}"))
    copy, target = tmp_path / "copy.py", tmp_path / "best.py"
    copy.write_text("# a copy of train_gpt_medium.py\n")
    job = hold_with_bash(repo_root, copy if held == "script" else target, tmp_path / "ready")
    try:
        answer = medium_mlp_bench.main(["--tiny", f"--script={copy}", f"--best_script={target}"])
    finally:
        job.kill()
        job.wait()
    out, err = capsys.readouterr()
    assert answer == 2 and out == "" and not target.exists()
    assert re.fullmatch(rf"error: {re.escape(str(copy if held == 'script' else target))} is staged by another job "
                        r"\(bash, pid \d+, since [\d-]+ [\d:]+\); run this one after it\n", err), err


def test_best_script_holds_both_locks_while_it_runs(repo_root, monkeypatch, tmp_path):
    """While the bench runs (here: while it loads the script), a job staging over the script or the copy's path
    stops with proxy_common.sh's line naming the bench; afterwards both locks are free. A --best_script that is the
    script itself is locked once (a second flock from the same process found the first held)."""
    sys.path.insert(0, str(repo_root / "perf"))
    import medium_mlp_bench
    copy, target = tmp_path / "copy.py", tmp_path / "best.py"
    copy.write_text("# a copy of train_gpt_medium.py\n")
    staged = []

    def stage(path):
        return subprocess.run(["bash", "-c", f"source {repo_root / 'perf' / 'proxy_common.sh'} && lock_track_script "
                               f"{path}"], capture_output=True, text=True, timeout=60)

    def loading(path):
        staged.extend(stage(file) for file in (copy, target))
        raise KeyboardInterrupt  # the bench's end, its locks' release, without the bench

    monkeypatch.setattr(medium_mlp_bench, "load_script", loading)
    with pytest.raises(KeyboardInterrupt):
        medium_mlp_bench.main(["--tiny", f"--script={copy}", f"--best_script={target}", f"--best_script={copy}"])
    for file, result in zip((copy, target), staged):
        assert result.returncode == 2 and re.fullmatch(
            rf"error: {re.escape(str(file))} is staged by another job \(perf/medium_mlp_bench\.py, pid \d+, since "
            r"[\d-]+ [\d:]+\); run this one after it\n", result.stderr), result.stderr
    assert [stage(file).returncode for file in (copy, target)] == [0, 0]
