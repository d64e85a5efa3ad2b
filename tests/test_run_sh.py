"""run.sh: picks the process count, checks everything before launching, falls back without torchrun."""
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch.distributed.run
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

from data.shards import write_shard
from records.tool import run_sh_launcher
from stand_ins import popen_that_takes_ctrl_c

REPO = Path(__file__).resolve().parents[1]
TINY = ["--device=cpu", "--compile=false", "--model_dim=64", "--num_heads=2", "--head_dim=32",
        "--train_seq_len=512", "--val_seq_len=512", "--val_tokens=1024", "--num_iterations=2",
        "--val_loss_every=0", "--warmup_steps=0"]


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("shards")
    rng = np.random.default_rng(0)
    for name in ["tiny_val_000000.bin", "tiny_train_000001.bin"]:
        documents = [np.concatenate([[50256], rng.integers(0, 1000, 127)]) for _ in range(256)]
        write_shard(folder / name, np.concatenate(documents))
    return folder


def data_args(shards: Path) -> list[str]:
    return [f"--train_files={shards}/tiny_train_*.bin", f"--val_files={shards}/tiny_val_*.bin"]


def run_sh(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """run.sh with os.environ updated by env, where a value of None removes that variable; PYTHON is this interpreter
    unless env says otherwise (the PATH's python may be another, e.g. when a virtualenv is not activated)."""
    merged = {"PYTHON": sys.executable, **os.environ, **(env or {})}
    merged = {name: value for name, value in merged.items() if value is not None}
    return subprocess.run(["bash", str(REPO / "run.sh"), *args], cwd=REPO, capture_output=True, text=True,
                          env=merged, timeout=600)


def recording_python(tmp_path: Path, recorded: str, answer: str = ""):
    """A stub PYTHON that appends json of recorded (an expression over os and sys) to a file on each call, then runs
    answer; and a reader of the calls so far."""
    calls = tmp_path / "calls.jsonl"
    stub = tmp_path / "python"
    stub.write_text(f"#!{sys.executable}\nimport json, os, sys\nwith open({str(calls)!r}, 'a') as f:\n"
                    f"    f.write(json.dumps({recorded}) + '\\n')\n{answer}")
    stub.chmod(0o755)
    return stub, lambda: [json.loads(line) for line in calls.read_text().splitlines()]


def test_no_gpu_is_one_error_line():
    result = run_sh(env={"CUDA_VISIBLE_DEVICES": ""})
    assert result.returncode == 2
    assert result.stderr.strip() == ("error: no CUDA GPU found; run on a GPU machine, or pass --device=cpu (and "
                                     "NPROC=n for n processes) for a tiny CPU run")


def test_without_a_gpu_device_cpu_is_one_process_whose_settings_are_checked(shards):
    """No NPROC: a mistyped setting is named by the script's check, not hidden behind "no CUDA GPU found"."""
    result = run_sh(*TINY, *data_args(shards), "--num_iteration=5", env={"CUDA_VISIBLE_DEVICES": "", "NPROC": ""})
    assert result.returncode == 2
    output = (result.stdout + result.stderr).strip()
    assert len(output.splitlines()) == 1 and "num_iteration" in output and "CUDA" not in output, output


@pytest.mark.parametrize("gpus, nproc", [(1, 1), (3, 2), (6, 4), (8, 8)])
def test_the_process_count_is_the_largest_divisor_of_8_within_the_gpu_count(tmp_path, gpus, nproc):
    """A stub PYTHON answers run.sh's GPU count probe and records how it is run: the check, then the launch, both
    with the chosen count; a count below the GPUs' is noted on the console."""
    stub, calls = recording_python(tmp_path, "[os.environ.get('WORLD_SIZE'), sys.argv[1:]]",
                                   f"if 'device_count' in ' '.join(sys.argv):\n    print({gpus})\n")
    result = run_sh("--num_iterations=5", env={"PYTHON": str(stub), "NPROC": ""})
    assert result.returncode == 0, result.stderr
    note = f"note: {gpus} GPUs found; using {nproc} (the number of processes must divide 8)\n"
    assert result.stdout == (note if gpus != nproc else "")
    probe, check, launch = calls()
    assert probe[1] == ["-c", "import torch; print(torch.cuda.device_count())"]
    assert check == [str(nproc), ["train_gpt.py", "--num_iterations=5", "--check_only=true"]]
    assert launch[1][0] == "-c" and "torch.distributed.run" in launch[1][1]
    assert launch[1][2:] == ["--standalone", f"--nproc_per_node={nproc}", "train_gpt.py", "--num_iterations=5"]


@pytest.mark.parametrize("given, launched", [("--check_only=true", False), ("--check_only=YES", False),
                                             ("--check_only= true ", False), ("--check_only=1", False),
                                             ("--check_only=false", True), ("--check_only= 0", True)])
def test_a_check_only_run_stops_after_the_check(tmp_path, given, launched):
    """run.sh's check already is the whole of --check_only=true: no launch to print the same line again."""
    stub, calls = recording_python(tmp_path, "sys.argv[1:]")
    result = run_sh("--device=cpu", given, env={"PYTHON": str(stub), "NPROC": "2"})
    assert result.returncode == 0, result.stderr
    runs = calls()
    assert runs[0] == ["train_gpt.py", "--device=cpu", given, "--check_only=true"]
    assert len(runs) == (2 if launched else 1)


@pytest.mark.parametrize("nproc, given, threads", [("1", None, None), ("2", None, "1"), ("2", "3", "3")])
def test_several_processes_get_one_thread_each_unless_the_shell_sets_it(tmp_path, nproc, given, threads):
    """torchrun's own default for several processes, set quietly; one process keeps torch's (all cores, which a CPU
    run uses), and a count the user set stands."""
    stub, calls = recording_python(tmp_path, "os.environ.get('OMP_NUM_THREADS')")
    result = run_sh("--device=cpu", env={"PYTHON": str(stub), "NPROC": nproc, "OMP_NUM_THREADS": given})
    assert result.returncode == 0, result.stderr
    assert calls() == [threads, threads]  # check, launch


def test_run_sh_runs_in_the_repository_wherever_it_is_called_from(tmp_path):
    """The check and the launch name the script by its bare name, and relative settings are read from the
    repository: both run there, not in the caller's folder."""
    stub, calls = recording_python(tmp_path, "os.getcwd()")
    result = subprocess.run(["bash", str(REPO / "run.sh"), "--device=cpu"], cwd=tmp_path, capture_output=True,
                            text=True, env={**os.environ, "PYTHON": str(stub), "NPROC": "2"}, timeout=600)
    assert result.returncode == 0, result.stderr
    assert calls() == [str(REPO), str(REPO)]  # check, launch


@pytest.mark.parametrize("nproc", ["3", "16"])
def test_a_process_count_not_dividing_8_stops_before_anything(shards, nproc):
    result = run_sh(*TINY, *data_args(shards), env={"NPROC": nproc})
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == f"error: NPROC={nproc} does not divide 8; use 1, 2, 4 or 8\n"


def test_unknown_override_stops_before_launch(shards):
    result = run_sh(*TINY, *data_args(shards), "--num_iteration=5", env={"NPROC": "2"})
    assert result.returncode == 2
    output = result.stdout + result.stderr
    assert len(output.strip().splitlines()) == 1 and "num_iteration" in output
    assert "Traceback" not in output


@pytest.mark.parametrize("nproc", ["0", "-1", "abc", "2x"])
def test_a_process_count_that_is_no_count_stops_before_anything(nproc):
    result = run_sh(env={"NPROC": nproc})
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == f"error: NPROC={nproc} is not a process count; use 1, 2, 4 or 8\n"


@pytest.mark.parametrize("track", [[], ["medium"]])
def test_help_prints_once_without_a_gpu_or_a_launch(track):
    """run.sh's own usage first (it was only the script's, whose torchrun line read as the answer to ./run.sh --help),
    then the script's: its torchrun usage and its settings, printed once (not by the check and again by each rank)."""
    result = run_sh(*track, "--num_iterations=5", "--help", env={"CUDA_VISIBLE_DEVICES": "", "NPROC": "2"})
    assert result.returncode == 0, result.stderr
    script = "train_gpt_medium.py" if track else "train_gpt.py"
    assert result.stdout.splitlines()[:2] == [
        f"usage: {REPO / 'run.sh'}{' medium' if track else ''} [--name=value ...]   one process per GPU (8, 4, 2 or 1; "
        "NPROC=n to choose), through torchrun",
        f"usage: torchrun --standalone --nproc_per_node=N {script} [--name=value ...]"]
    assert result.stdout.count("usage:") == 2 and result.stdout.count("--window_pattern=") == 1


@pytest.mark.parametrize("flag", ["--help", "-h", "--help=1", "--help=true", "--help=false"])  # any value: no launch
def test_help_is_the_scripts_help_alone_for_either_flag(tmp_path, flag):
    """-h too, as the scripts take it: not a settings check and a launch with -h among the settings; and
    --help=1, as the scripts read it (it was a settings check, which without a GPU said no CUDA GPU was found)."""
    stub, calls = recording_python(tmp_path, "sys.argv[1:]")
    result = run_sh("--num_iterations=5", flag, env={"PYTHON": str(stub), "NPROC": "2"})
    assert result.returncode == 0 and result.stdout.startswith("usage: "), result.stderr
    assert calls() == [["train_gpt.py", "--help"]]


def test_help_to_a_closed_pipe_ends_quietly():
    """A reader that closed the pipe before run.sh's usage line (| head -0) gets no broken-pipe message and status 0,
    as from the script's help alone: the pipe's read end is closed before run.sh starts."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(["bash", str(REPO / "run.sh"), "--help"], cwd=REPO, stdout=write_end,
                                stderr=subprocess.PIPE, text=True, env={"PYTHON": sys.executable, **os.environ},
                                timeout=600)
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (0, "")


@pytest.mark.parametrize("nproc", ["", "2"])
def test_a_python_that_does_not_exist_is_named_before_anything(tmp_path, nproc):
    """Not 'cannot import torch' (without NPROC), nor bash's own 'No such file' line (with it)."""
    missing = tmp_path / "no" / "python"
    result = run_sh("--device=cpu", env={"PYTHON": str(missing), "NPROC": nproc})
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == f"error: no python at '{missing}'; set PYTHON to an interpreter (default: python)\n"


@pytest.mark.parametrize("how", ["TRACK", "argument"])
def test_unknown_track(how):
    """A first argument that is not a setting names a track (the scripts take only --name=value): a misspelt one is
    this line, not a GPU check's or the script's complaint about a malformed argument."""
    result = run_sh(env={"TRACK": "huge"}) if how == "TRACK" else run_sh("huge", "--device=cpu")
    assert result.returncode == 2
    assert result.stderr.strip() == "error: unknown track 'huge'; use short (default) or medium"


def test_two_processes_without_torchrun_on_path(shards, tmp_path):
    """With no torchrun on PATH, run.sh launches through python -m torch.distributed.run."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"  # this interpreter by its own path: a link would lose a virtualenv's packages
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    path = os.pathsep.join([str(bin_dir), "/usr/bin", "/bin"])
    assert shutil.which("torchrun", path=path) is None
    logs = tmp_path / "logs"
    result = run_sh(*TINY, *data_args(shards), f"--logs_dir={logs}", "--run_id=viarunsh",
                    env={"NPROC": "2", "PATH": path, "OMP_NUM_THREADS": None, "PYTHON": None})
    assert result.returncode == 0, result.stdout + result.stderr
    log = (logs / "viarunsh.txt").read_text()
    assert "world_size: 2" in log
    assert "step:2/2 val_loss:" in log
    assert "note: a global batch" not in log.split(" end of source: ")[-1]  # 2 processes x 4 micro-steps: 8
    assert "OMP_NUM_THREADS" not in result.stderr  # run.sh sets torchrun's default itself, without its warning


def test_a_process_that_fails_after_the_launch_ends_in_its_error_and_one_line_from_the_launcher(shards, tmp_path):
    """A compile cache that cannot be loaded is found by the processes (loading it is the check): each rank's one
    line, then one line naming the rank, where torchrun printed its launcher's 30-40-line traceback."""
    cache = tmp_path / "cache.bin"
    cache.write_bytes(b"not torch.compile artifacts")
    result = run_sh(*TINY, *data_args(shards), f"--logs_dir={tmp_path / 'logs'}", f"--compile_cache={cache}",
                    env={"NPROC": "2"})
    assert result.returncode == 2
    output = result.stdout + result.stderr
    assert "Traceback" not in output and "ChildFailedError" not in output
    assert "error file" not in output  # main's @record logged 3 lines on copying it
    assert f"error: --compile_cache={cache} could not be loaded" in result.stderr
    last = result.stderr.strip().splitlines()[-1]  # rank 0 shows the error; torchrun may see only rank 1 fail
    assert last in ["error: rank 0 exited with status 2 (its output is above)",
                    f"error: rank 1 exited with status 2: --compile_cache={cache} could not be loaded (corrupt, or not "
                    "torch.compile artifacts); delete it to compile from scratch and write a new one"], last


def launcher(failures: dict, monkeypatch, capsys) -> tuple[int, str]:
    """run.sh's launcher code, run here with torchrun's run raising the failures given: its exit status and line."""
    code = run_sh_launcher()  # the one reader of run.sh's launcher code, rerun's

    def run(args):
        raise ChildFailedError("train_gpt.py", failures)

    monkeypatch.setattr(torch.distributed.run, "run", run)
    monkeypatch.setattr(sys, "argv", ["-c", "--standalone", "--nproc_per_node=2", "train_gpt.py"])
    with pytest.raises(SystemExit) as exited:
        exec(code, {"__name__": "__main__"})
    return exited.value.code, capsys.readouterr().err.strip()


def failure(tmp_path: Path, rank: int, exitcode: int, shown: bool | None = None, at: int = 100) -> ProcessFailure:
    """A rank's failure as torchrun reads it: with the error file the scripts write, unless shown is None."""
    error_file = tmp_path / f"error_{rank}.json"
    if shown is not None:
        message = "error: no shards match x_*.bin"
        error_file.write_text(json.dumps({"message": message, "timestamp": at, "shown": shown}))
    return ProcessFailure(local_rank=rank, pid=1000 + rank, exitcode=exitcode, error_file=str(error_file))


@pytest.mark.parametrize("ranks, line, status", [
    # a setting's error, found by both ranks; rank 0 prints it, whichever second each wrote its file in
    ({0: (2, True, 101), 1: (2, False, 100)}, "error: rank 0 exited with status 2 (its output is above)", 2),
    # rank 1 ran out of memory (and printed it); rank 0, stopped by torchrun's SIGTERM, wrote its file first
    ({0: (143, True, 100), 1: (2, True, 101)}, "error: rank 1 exited with status 2 (its output is above)", 2),
    # a rank killed before its handler ran leaves no file
    ({0: (2, True, 101), 1: (-15, None, 100)}, "error: rank 0 exited with status 2 (its output is above)", 2),
    ({0: (-9, None, 100)}, "error: rank 0 was killed by signal 9", 1),
    # torchrun saw rank 1 fail first, and stopped rank 0 before it exited: rank 1's error, which its console lacks
    ({1: (2, False, 100)}, "error: rank 1 exited with status 2: no shards match x_*.bin", 2),
    # two crashes (each console shows its traceback): the first
    ({0: (1, True, 101), 1: (1, True, 100)}, "error: rank 1 exited with status 1 (its output is above)", 1),
], ids=["setting", "oom-on-rank-1", "killed-before-its-handler", "sigkill", "only-rank-1-seen", "first-crash"])
def test_the_launcher_names_a_rank_that_failed_on_its_own_and_shows_its_error(tmp_path, monkeypatch, capsys, ranks,
                                                                              line, status):
    """torchrun's own choice (the earliest error file, to the second) named a rank that printed nothing, or one that
    torchrun had stopped, in some runs of the test above, and said its output was above."""
    failures = {rank: failure(tmp_path, rank, *how) for rank, how in ranks.items()}
    assert launcher(failures, monkeypatch, capsys) == (status, line)


def test_a_rank_left_in_the_shell_changes_nothing(shards, tmp_path):
    """The check is rank 0 of the run whatever the shell holds (torchrun sets the ranks' own): with RANK=1 in the
    environment, the check used to print nothing, not even its "ok" line, since only rank 0 prints."""
    result = run_sh(*TINY, *data_args(shards), f"--logs_dir={tmp_path}", "--check_only=true",
                    env={"NPROC": "2", "RANK": "1", "LOCAL_RANK": "1"})
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == "ok: settings, data and device checked for world size 2\n"


def test_device_cpu_in_capitals_without_a_gpu_is_the_scripts_error_not_no_gpu(shards):
    settings = [arg for arg in TINY if arg != "--device=cpu"]
    result = run_sh(*settings, *data_args(shards), "--device=CPU", env={"CUDA_VISIBLE_DEVICES": "", "NPROC": ""})
    assert (result.returncode, result.stderr) == (2, "error: --device=CPU: use cuda or cpu\n")


@pytest.mark.parametrize("device, said", [
    (["--device", "cpu"], "error: malformed argument '--device': write settings as --name=value (see --help)\n"),
    (["--device= cpu"], ""),  # spaces around a value are dropped, as the script drops them
    ([" --device=cuda "], "error: no CUDA GPU found; run on a GPU machine, or pass --device=cpu (and NPROC=n for n "
                          "processes) for a tiny CPU run\n"),  # run.sh's own line, as without --device
    # --device=cuda said: run.sh's own line too, not the script's "CUDA is not available"
    (["--device=cuda"], "error: no CUDA GPU found; run on a GPU machine, or pass --device=cpu (and NPROC=n for n "
                        "processes) for a tiny CPU run\n"),
    # only cuda as the script reads it (case and all): CUDA got run.sh's line, and on a GPU machine the script's
    # rejection after it; now the script's line at once, naming the values it takes
    (["--device=CUDA"], "error: --device=CUDA: use cuda or cpu\n"),
    (["--device=gpu"], "error: --device=gpu: use cuda or cpu\n"),
    (["--device=cpu", "--device=cuda"], "error: no CUDA GPU found; run on a GPU machine, or pass --device=cpu (and "
                                        "NPROC=n for n processes) for a tiny CPU run\n"),  # the last one wins
])
def test_without_a_gpu_a_device_setting_run_sh_cannot_read_is_left_to_the_scripts_check(shards, device, said):
    """Without a GPU, run.sh stops at "no CUDA GPU found" only for --device=cuda (the default): a --device it cannot
    read is not that error, which asks for the --device=cpu the user meant to give; the script's check names what is
    wrong with it, or runs it."""
    settings = [arg for arg in TINY if arg != "--device=cpu"]
    result = run_sh(*settings, *data_args(shards), *device, "--check_only=true",
                    env={"CUDA_VISIBLE_DEVICES": "", "NPROC": ""})
    assert (result.returncode, result.stderr) == ((2, said) if said else (0, "")), result.stdout + result.stderr


def test_a_device_setting_after_check_only_leaves_check_only_as_given(shards, tmp_path):
    """run.sh reads --check_only=true and --device=cpu in one loop: the --device after it is not a --check_only, and
    the run is the check alone (no training, no log)."""
    settings = [arg for arg in TINY if arg != "--device=cpu"]
    result = run_sh(*settings, *data_args(shards), f"--logs_dir={tmp_path}", "--check_only=true", "--device=cpu",
                    env={"CUDA_VISIBLE_DEVICES": "", "NPROC": ""})
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == "ok: settings, data and device checked for world size 1\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_a_signal_to_a_two_process_run_ends_in_one_line_and_128_plus_the_signal(shards, tmp_path, signal_name):
    """Ctrl-C (SIGINT to the terminal's process group) or SIGTERM to the group (a scheduler): rank 0's one line, where
    every rank and the launcher printed a traceback (SIGTERM's run ended in the launcher's alone), and run.sh ends
    with 128 + the signal, as a shell gives."""
    signum = getattr(signal, signal_name)
    rng = np.random.default_rng(1)  # 400 steps of two ranks' sequences: the run is still training when stopped
    documents = [np.concatenate([[50256], rng.integers(0, 1000, 511)]) for _ in range(801)]
    write_shard(tmp_path / "long_train_000001.bin", np.concatenate(documents))
    env = {"PYTHON": sys.executable, **os.environ, "NPROC": "2"}
    process = popen_that_takes_ctrl_c(["bash", str(REPO / "run.sh"), *TINY, *data_args(shards), "--num_iterations=400",
                                       f"--train_files={tmp_path}/long_train_*.bin", "--grad_accum_steps=1",
                                       f"--logs_dir={tmp_path}", "--run_id=stopped"], cwd=REPO, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      start_new_session=True)
    for line in process.stdout:
        if line.startswith("step:1/400"):  # both ranks are in the training loop
            break
    os.killpg(process.pid, signum)
    try:
        _, stderr = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        pytest.fail(f"the run went on after {signal_name}")
    assert process.returncode == 128 + signum
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: stopped by {signal_name}"], stderr
    assert (tmp_path / "stopped.txt").read_text().splitlines()[-1] == f"error: stopped by {signal_name}"
