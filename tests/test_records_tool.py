"""Tests for records/tool.py.

Part A builds synthetic run logs in the exact format the track scripts write.
Part B makes real logs with tiny CPU runs of train_gpt.py (and of train_gpt_medium.py once it exists).
"""

import dataclasses
import errno
import json
import math
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
TOOL = REPO / "records" / "tool.py"
sys.path.insert(0, str(REPO / "data"))
import shards  # noqa: E402  (data/shards.py writes the Part B shards)
from stand_ins import records_tool  # noqa: E402

FAKE_SCRIPT = (
    "import sys\n"
    "lr = 0.05\n"
    "print('ARGS', sys.argv[1:])\n"
    "sys.exit(3)\n"
)




def this_environment():
    """The environment block values for the interpreter running the tests."""
    import torch

    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = "none"
    gpu = "none"
    if torch.cuda.is_available():
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        gpu = f"{names[0]} x{len(names)}"
    return {"python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.version.cuda or "none", "triton": triton_version, "gpu": gpu}


DEFAULT_ENV = {"python": "3.11.7", "torch": "2.13.0+cpu", "cuda": "none", "triton": "3.6.0", "gpu": "none"}


def make_log(path, source=FAKE_SCRIPT, script="train_gpt.py", overrides=("--device=cpu", "--num_iterations=20"),
             world_size=1, launcher=None, env=None, hparams=None, val_losses=(10.8258, 7.1234),
             extra_tail="", nvidia_smi=None, peak=True, total=20):
    """Write a run log in the track scripts' format and return its path (peak=False: a CPU run's log)."""
    src = source.encode() if isinstance(source, str) else source
    out = bytearray(src)
    if not src.endswith(b"\n"):
        out += b"\n"
    out += ("=" * 20 + f" end of source: {script}, {len(src)} bytes " + "=" * 20 + "\n").encode()
    argv = [script, *overrides]
    if launcher is None:
        launcher = "python" if world_size == 1 else f"torchrun --standalone --nproc_per_node={world_size}"
    lines = [
        "run_id: 0b6f2c1e-0000-4000-8000-000000000000",
        "date: 2026-11-29T08:40:00Z",
        f"command: {launcher} {shlex.join(argv)}",
        f"argv: {json.dumps(argv)}",
        f"world_size: {world_size}",
    ]
    lines += [f"{key}: {value}" for key, value in (env or DEFAULT_ENV).items()]
    lines.append("hyperparameters:")
    hp = {"train_files": "data/fineweb10B/fineweb_train_*.bin", "num_iterations": "20", "lr": "0.05"}
    hp.update(hparams or {})
    lines += [f"  {name}: {value}" for name, value in hp.items()]
    if nvidia_smi:
        lines.append("nvidia-smi:")
        lines += [f"  {line}" for line in nvidia_smi]
    lines.append("startup: settings and data checked, compile cache loaded, log opened at 1.1s")
    lines.append("warmup: 10 steps in 61.0s (compile included, state restored); training starts at 70.3s")
    lines.append(f"step:0/{total} val_loss:{val_losses[0]} train_time:0ms")  # no step_avg at step 0
    for step in range(1, total + 1):
        lines.append(f"step:{step}/{total} train_loss:{9 - step * 0.1:.4f} train_time:{35 * step}ms "
                     f"step_avg:35.00ms")
        if step == 10 and len(val_losses) > 2:
            lines.append(f"step:10/{total} val_loss:{val_losses[1]} train_time:350ms step_avg:35.00ms")
    lines.append(f"step:{total}/{total} val_loss:{val_losses[-1]} train_time:700ms step_avg:35.00ms "
                 "tokens/s:12345 mfu:1.2%")
    if peak:
        lines.append("peak memory allocated: 33512 MiB reserved: 34000 MiB")
    out += ("\n".join(lines) + "\n" + extra_tail).encode()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(out))
    return path


# conftest.py sets TRITON_INTERPRET=1 for in-process kernel tests; the tool and the scripts it launches
# run as a user would run them, without it. One thread per process (what torchrun sets for several): the
# tiny runs' ops are too small to gain from two, and it keeps them quick on a busy 2-core machine.
CHILD_ENV = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
CHILD_ENV.setdefault("OMP_NUM_THREADS", "1")


def tool(*args, cwd=None):
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], cwd=cwd, env=CHILD_ENV,
                          capture_output=True, text=True, timeout=600)


# ----------------------------------------------------------------------------------------------
# Part A: synthetic logs


@pytest.mark.parametrize("source", [FAKE_SCRIPT, FAKE_SCRIPT.rstrip("\n"), "", "x = 1\n\n\n"])
def test_extract_round_trips_bytes(tmp_path, source):
    log = make_log(tmp_path / "run.txt", source)
    result = tool("extract", log, "-o", tmp_path / "out.py")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out.py").read_bytes() == source.encode()


def test_extract_ignores_separator_lines_inside_the_source(tmp_path):
    fake_sep = "=" * 20 + " end of source: other.py, 3 bytes " + "=" * 20
    source = f"# a line that looks like a separator:\n{fake_sep}\nprint('hi')"
    log = make_log(tmp_path / "run.txt", source)
    result = tool("extract", log, "-o", tmp_path / "out.py")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out.py").read_bytes() == source.encode()


def test_extract_ignores_a_separator_line_inside_the_source_one_byte_past_its_count(tmp_path):
    """One byte past its count is a separator only after the newline a source without a final one gets: a blank
    line before a separator-like line whose count is its offset less one (the source before it then ends with a
    newline) is part of the source."""
    prefix = "# a blank line, then a line that looks like a separator:\n\n"
    fake_sep = "=" * 20 + f" end of source: other.py, {len(prefix) - 1} bytes " + "=" * 20
    source = f"{prefix}{fake_sep}\nprint('hi')\n"
    log = make_log(tmp_path / "run.txt", source)
    result = tool("extract", log, "-o", tmp_path / "out.py")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out.py").read_bytes() == source.encode()


@pytest.mark.parametrize("resave", [lambda data: data.replace(b"\n", b"\r\n"), lambda data: b"\xef\xbb\xbf" + data,
                                    lambda data: b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n")],
                         ids=["CRLF", "BOM", "BOM and CRLF"])
def test_a_log_saved_again_with_crlf_or_a_bom_gives_back_the_script_that_ran(tmp_path, resave):
    """git on Windows checks a record's log out with CRLF line ends, and an editor may save it with a BOM in front:
    the separator's byte count then holds for the log with those undone, which is what ran. Both were 'not a run
    log'."""
    log = make_log(tmp_path / "run.txt", val_losses=(10.8, 3.27))
    log.write_bytes(resave(log.read_bytes()))
    result = tool("extract", log, "-o", tmp_path / "out.py")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out.py").read_bytes() == FAKE_SCRIPT.encode()
    assert result.stdout == f"python {tmp_path / 'out.py'} --device=cpu --num_iterations=20\n"
    result = tool("compare", log, "--target", "3.28")
    assert re.search(rf"^{re.escape(str(log))}\s+3\.27\s+0\.700\s.*\s20/20\s+33512\s+20/0\.70s\s+\S+$", result.stdout,
                     re.M), result.stdout + result.stderr


def test_a_script_with_its_own_bom_and_crlf_lines_is_extracted_as_it_ran(tmp_path):
    """A script's own BOM and CRLF lines are kept, from its log as written and from that log saved again with CRLF
    line ends or a BOM: a form of the log is taken only where the separator's byte count holds."""
    source = b"\xef\xbb\xbfimport sys\r\nprint('hi')\r\n"
    log = make_log(tmp_path / "run.txt", source)
    assert tool("extract", log, "-o", tmp_path / "out.py").returncode == 0
    assert (tmp_path / "out.py").read_bytes() == source
    log.write_bytes(log.read_bytes().replace(b"\n", b"\r\n"))  # and that log saved again with CRLF line ends
    assert tool("extract", log, "-o", tmp_path / "out.py").returncode == 0
    assert (tmp_path / "out.py").read_bytes() == source
    source = source[3:]  # a script with CRLF lines whose log was saved again with a BOM
    log = make_log(tmp_path / "run.txt", source)
    log.write_bytes(b"\xef\xbb\xbf" + log.read_bytes())
    assert tool("extract", log, "-o", tmp_path / "out.py", "--force").returncode == 0
    assert (tmp_path / "out.py").read_bytes() == source


def test_the_log_as_written_comes_before_its_line_ends_undone(tmp_path):
    """A script with one CRLF and no newline at its end: its log adds one, and with that CRLF undone the separator's
    byte count holds as well (one byte fewer, then the added newline), so the form tried first decides which script
    comes back. The log as it is must: tried after the others, LF lines came back, and a newline at the end."""
    source = b"import sys\r\nprint('hi')"
    log = make_log(tmp_path / "run.txt", source)
    assert tool("extract", log, "-o", tmp_path / "out.py").returncode == 0
    assert (tmp_path / "out.py").read_bytes() == source


def test_extract_default_name_and_python_command(tmp_path):
    log = make_log(tmp_path / "logs" / "run.txt")
    result = tool("extract", log, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "train_gpt.py").read_bytes() == FAKE_SCRIPT.encode()
    assert result.stdout.strip() == "python train_gpt.py --device=cpu --num_iterations=20"


def test_a_script_name_with_a_space_is_read_and_quoted(tmp_path):
    """The scripts name their own file in the separator line: a copy such as macOS's "train_gpt copy.py" wrote a log
    the tool called 'not a run log'."""
    log = make_log(tmp_path / "logs" / "run.txt", script="train_gpt copy.py")
    result = tool("extract", log, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "train_gpt copy.py").read_bytes() == FAKE_SCRIPT.encode()
    assert result.stdout == "python 'train_gpt copy.py' --device=cpu --num_iterations=20\n"


def test_extract_torchrun_command_is_shell_quoted(tmp_path):
    overrides = ("--device=cpu", "--train_files=my data/t_*.bin", "--num_iterations=20")
    log = make_log(tmp_path / "run.txt", overrides=overrides, world_size=2)
    result = tool("extract", log, "-o", tmp_path / "x.py")
    assert result.returncode == 0, result.stderr
    command = result.stdout.strip()
    assert command.startswith(f"torchrun --standalone --nproc_per_node=2 {tmp_path / 'x.py'} ")
    assert "'--train_files=my data/t_*.bin'" in command
    assert shlex.split(command)[4:] == list(overrides)


def test_extract_uses_torchrun_for_one_process_launched_by_torchrun(tmp_path):
    log = make_log(tmp_path / "run.txt", world_size=1, launcher="torchrun --standalone --nproc_per_node=1")
    result = tool("extract", log, "-o", tmp_path / "x.py")
    assert result.stdout.startswith("torchrun --standalone --nproc_per_node=1 ")


def test_extract_refuses_to_overwrite_a_different_file(tmp_path):
    log = make_log(tmp_path / "run.txt")
    target = tmp_path / "train_gpt.py"
    target.write_text("something else\n")
    result = tool("extract", log, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("error:") and "--force" in result.stderr
    assert target.read_text() == "something else\n"
    assert tool("extract", log, "--force", cwd=tmp_path).returncode == 0
    assert target.read_bytes() == FAKE_SCRIPT.encode()
    assert tool("extract", log, cwd=tmp_path).returncode == 0  # identical file: fine


@pytest.mark.parametrize("command", ["extract", "rerun"])
def test_extract_and_rerun_never_write_the_script_over_the_log_itself(tmp_path, command):
    """-o naming the log (also by another path to it), even with --force: one error line, the log kept."""
    log = make_log(tmp_path / "logs" / "run.txt")
    before = log.read_bytes()
    for out in (log, tmp_path / "logs" / ".." / "logs" / "run.txt"):
        result = tool(command, log, "-o", out, "--force")
        assert result.returncode == 2
        assert result.stderr.strip().splitlines()[-1] == f"error: {out} is the log itself: write the script to " \
                                                         f"another file (-o)"
        assert log.read_bytes() == before


def test_rerun_dry_run_without_mismatch(tmp_path):
    log = make_log(tmp_path / "run.txt", env=this_environment())
    result = tool("rerun", "--dry-run", log)
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stdout + result.stderr
    command = shlex.split(result.stdout.strip().splitlines()[-1])
    assert command[0] == sys.executable
    assert command[-2:] == ["--device=cpu", "--num_iterations=20"]


def test_rerun_dry_run_warns_per_mismatch_and_appends_extra_args(tmp_path):
    env = {"python": "3.9.0", "torch": "1.0.0", "cuda": "11.8", "triton": "2.0.0", "gpu": "NVIDIA H200 x8"}
    log = make_log(tmp_path / "run.txt", env=env, world_size=8,
                   nvidia_smi=["| NVIDIA-SMI 560.35 |", "| 0  NVIDIA H200 |"])
    result = tool("rerun", "--dry-run", log, "--", "--num_iterations=3", "--lr=0.1")
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    current = this_environment()
    assert warnings == [f"warning: {key} differs: log has {env[key]}, this machine has {current[key]}"
                        for key in ("python", "torch", "cuda", "triton", "gpu")]
    command = shlex.split(result.stdout.strip().splitlines()[-1])
    assert command[:4] == [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    assert "--nproc_per_node=8" in command
    assert command[-4:] == ["--device=cpu", "--num_iterations=20", "--num_iterations=3", "--lr=0.1"]


def test_rerun_dry_run_writes_nothing_and_names_the_script_extract_writes(tmp_path):
    log = make_log(tmp_path / "run.txt", env=this_environment())
    result = tool("rerun", "--dry-run", log, cwd=tmp_path / ".")
    assert result.returncode == 0, result.stderr
    assert shlex.split(result.stdout)[:2] == [sys.executable, "train_gpt.py"]
    assert not (tmp_path / "train_gpt.py").exists()
    assert (f"note: dry run, train_gpt.py not written; python records/tool.py extract {log} -o train_gpt.py"
            in result.stderr)
    assert tool("extract", log, cwd=tmp_path).returncode == 0
    assert "note" not in tool("rerun", "--dry-run", log, cwd=tmp_path).stderr


def test_rerun_dry_run_notes_that_a_different_file_under_the_scripts_name_is_not_the_logged_script(tmp_path):
    log = make_log(tmp_path / "run.txt", env=this_environment())
    (tmp_path / "train_gpt.py").write_text("print('another script')\n")
    result = tool("rerun", "--dry-run", log, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (f"note: dry run, train_gpt.py is not the logged script; python records/tool.py extract {log} "
            "-o train_gpt.py --force replaces it") in result.stderr
    assert (tmp_path / "train_gpt.py").read_text() == "print('another script')\n"
    assert tool("extract", log, "-o", "train_gpt.py", "--force", cwd=tmp_path).returncode == 0  # as the note says
    assert "note" not in tool("rerun", "--dry-run", log, cwd=tmp_path).stderr


def test_rerun_and_extract_drop_the_recorded_run_id(tmp_path):
    """The script names its log after --run_id: a re-run with the recorded one would write over the log it
    re-runs. Without it the script picks a fresh name; one given after -- still counts."""
    log = make_log(tmp_path / "run.txt", env=this_environment(), overrides=("--run_id=seed0", "--seed=0"))
    for result in [tool("extract", log, "-o", tmp_path / "t.py"), tool("rerun", "--dry-run", log)]:
        assert result.returncode == 0, result.stderr
        assert shlex.split(result.stdout.splitlines()[-1])[2:] == ["--seed=0"]  # after the launcher and script
    result = tool("rerun", "--dry-run", log, "--", "--run_id=again")
    assert shlex.split(result.stdout)[2:] == ["--seed=0", "--run_id=again"]


def test_rerun_refuses_a_run_id_that_would_write_over_the_log_it_reruns(tmp_path):
    """The scripts open logs/<run_id>.txt afresh: '-- --run_id=seed0' from the folder the run started in wrote the
    re-run's log over the record's. One line before anything runs, dry or not; the recorded --logs_dir counts unless
    one is given after --, and another run id or folder launches."""
    log = make_log(tmp_path / "runs" / "seed0.txt", env=this_environment(), overrides=("--run_id=seed0",),
                   hparams={"logs_dir": "runs", "run_id": "seed0"})
    before = log.read_bytes()
    for args in (["rerun", log], ["rerun", "--dry-run", log]):
        for extra in (["--run_id=seed0"], ["--run_id=x", "--logs_dir=elsewhere", "--run_id=seed0", "--logs_dir=runs"]):
            result = tool(*args, "--", *extra, cwd=tmp_path)
            assert result.returncode == 2 and result.stdout == ""
            assert result.stderr == (f"error: --run_id=seed0 would write the re-run's log over {log}: give another "
                                     "--run_id\n")
    assert log.read_bytes() == before
    for extra in (["--run_id=seed0b"], ["--run_id=seed0", "--logs_dir=again"]):
        result = tool("rerun", log, "--", *extra, cwd=tmp_path)
        assert result.returncode == 3 and f"ARGS {extra}" in result.stdout, result.stderr


def test_rerun_reads_a_tilde_in_logs_dir_both_ways(tmp_path, monkeypatch, capsys):
    """Most record logs hold a script from before path settings read a leading ~ as the home folder: theirs wrote
    --logs_dir=~/runs into a folder named ~ below the working one, and has no check of its own for an existing log.
    Reading ~ as the home folder alone, rerun let '-- --run_id=seed0' write over that log; today's scripts' home
    folder is refused too."""
    tool_module = records_tool()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    for folder in (tmp_path / "~" / "runs", tmp_path / "home" / "runs"):
        log = make_log(folder / "seed0.txt", overrides=("--logs_dir=~/runs", "--run_id=seed0"),
                       hparams={"logs_dir": "~/runs", "run_id": "seed0"})
        assert tool_module.main(["rerun", "--dry-run", str(log), "--", "--run_id=seed0"]) == 2
        assert capsys.readouterr().err == (f"error: --run_id=seed0 would write the re-run's log over {log}: give "
                                           "another --run_id\n")
        log.unlink()


def test_rerun_launches_and_returns_exit_code(tmp_path):
    log = make_log(tmp_path / "run.txt", env=this_environment())
    result = tool("rerun", log, "--", "--extra=1")
    assert result.returncode == 3
    assert "ARGS ['--device=cpu', '--num_iterations=20', '--extra=1']" in result.stdout


RANK_SCRIPT = (  # each rank leaves a file in the working folder (not only console output, which torchrun relays)
    "import os, sys\n"
    "line = f\"RANK {os.environ['RANK']} WORLD_SIZE {os.environ['WORLD_SIZE']} ARGS {sys.argv[1:]}\"\n"
    "open(f\"rank{os.environ['RANK']}.txt\", 'w').write(line)\n"
)


def test_rerun_of_a_two_process_log_really_starts_two_ranks_under_torchrun(tmp_path):
    log = make_log(tmp_path / "run.txt", RANK_SCRIPT, env=this_environment(), world_size=2, overrides=("--a=1",))
    workdir = tmp_path / "work"
    workdir.mkdir()
    result = tool("rerun", log, "--", "--b=2", cwd=workdir)
    assert result.returncode == 0, result.stdout + result.stderr
    launched = shlex.split(result.stdout.splitlines()[0])
    assert launched[:5] == [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    assert Path(launched[5]).name == "train_gpt.py" and launched[6:] == ["--a=1", "--b=2"]
    ranks = sorted(path.read_text() for path in workdir.glob("rank*.txt"))
    expected = [f"RANK {rank} WORLD_SIZE 2 ARGS ['--a=1', '--b=2']" for rank in (0, 1)]
    assert ranks == expected, result.stdout + result.stderr


def test_rerun_of_two_processes_that_fail_ends_in_their_error_and_one_line_naming_a_rank(tmp_path):
    """As under run.sh: a rank that fails prints its error, and torchrun's 30-40-line traceback after it becomes one
    line naming the rank; rerun exits with the rank's status."""
    script = "import sys\nprint('error: --lr=x is not a number', file=sys.stderr)\nsys.exit(2)\n"
    log = make_log(tmp_path / "run.txt", script, env=this_environment(), world_size=2)
    result = tool("rerun", log, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "ChildFailedError" not in result.stderr, result.stderr
    assert "error: --lr=x is not a number" in result.stderr
    assert re.fullmatch(r"error: rank [01] exited with status 2", result.stderr.splitlines()[-1]), result.stderr


def test_rerun_takes_its_launcher_from_run_sh_and_names_a_missing_one(tmp_path, monkeypatch):
    """One copy of the launcher code, run.sh's: rerun runs exactly it, and where run.sh is missing or has lost it,
    rerun says so in one line before writing the script."""
    module = records_tool()
    code = module.run_sh_launcher()
    assert "except ChildFailedError" in code and code in (REPO / "run.sh").read_text()
    argv = module.executed_argv([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "S"])
    assert argv == [sys.executable, "-c", code, "--nproc_per_node=2", "S"]
    assert module.executed_argv([sys.executable, "S", "--x=1"]) == [sys.executable, "S", "--x=1"]
    cut = "#!/bin/bash\nexec \"$python\" -c 'import sys\n"  # cut short: the launcher's start, not its end
    for text in [None, "#!/bin/bash\nexec torchrun \"$@\"\n", cut]:
        fake = tmp_path / "run.sh"
        if text is not None:
            fake.write_text(text)
        monkeypatch.setattr(module, "RUN_SH", fake)
        with pytest.raises(module.ToolError) as error:
            module.run_sh_launcher()
        assert str(error.value).startswith(f"{fake} is missing or holds no launcher"), error.value
    log = make_log(tmp_path / "run.txt", "print('ran')\n", env=this_environment(), world_size=2)
    monkeypatch.setattr(sys, "argv", ["tool.py", "rerun", str(log), "--output", str(tmp_path / "out.py")])
    assert module.main() == 2
    assert not (tmp_path / "out.py").exists()


def test_rerun_of_several_processes_sets_torchruns_one_thread_quietly(tmp_path):
    """torchrun gives each of several processes one CPU thread and announces it in a 4-line warning; rerun sets the
    same default, as run.sh does, unless the environment names a count."""
    script = RANK_SCRIPT + "open('threads.txt', 'w').write(os.environ['OMP_NUM_THREADS'])\n"
    log = make_log(tmp_path / "run.txt", script, env=this_environment(), world_size=2)
    for given, seen in [(None, "1"), ("3", "3")]:
        env = {key: value for key, value in CHILD_ENV.items() if key != "OMP_NUM_THREADS"}
        env.update({} if given is None else {"OMP_NUM_THREADS": given})
        result = subprocess.run([sys.executable, str(TOOL), "rerun", str(log)], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "OMP_NUM_THREADS" not in result.stderr and (tmp_path / "threads.txt").read_text() == seen


def test_rerun_of_a_one_process_torchrun_log_leaves_the_thread_count_to_torch(tmp_path):
    """torchrun gives one process all the cores (its one-thread default is for several, as run.sh's); a rerun of a
    one-GPU ./run.sh log, launched by torchrun too, must not hold that process to one thread."""
    script = RANK_SCRIPT + "open('threads.txt', 'w').write(os.environ.get('OMP_NUM_THREADS', 'unset'))\n"
    log = make_log(tmp_path / "run.txt", script, env=this_environment(), world_size=1,
                   launcher="torchrun --standalone --nproc_per_node=1")
    env = {key: value for key, value in CHILD_ENV.items() if key != "OMP_NUM_THREADS"}
    result = subprocess.run([sys.executable, str(TOOL), "rerun", str(log)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert shlex.split(result.stdout.splitlines()[0])[1:5] == ["-m", "torch.distributed.run", "--standalone",
                                                               "--nproc_per_node=1"]
    assert (tmp_path / "rank0.txt").exists() and (tmp_path / "threads.txt").read_text() == "unset"


def test_rerun_names_the_double_dash_for_a_setting_given_before_it(tmp_path):
    log = make_log(tmp_path / "run.txt")
    result = tool("rerun", log, "--num_iterations=2", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines()[-1].endswith("error: unrecognized arguments: --num_iterations=2; the script's "
                                                   "settings go after --: rerun LOG -- --name=value")
    result = tool("diff", log, log, "--nope", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.splitlines()[-1].endswith("unrecognized arguments: --nope")


def test_diff_shows_changed_source_line_and_hyperparameters(tmp_path):
    a = make_log(tmp_path / "a.txt", hparams={"lr": "0.05", "old_flag": "True"})
    b = make_log(tmp_path / "b.txt", FAKE_SCRIPT.replace("lr = 0.05", "lr = 0.04"),
                 hparams={"lr": "0.04", "new_flag": "3"})
    result = tool("diff", a, b)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "-lr = 0.05" in lines and "+lr = 0.04" in lines
    assert any(line.startswith("---") for line in lines) and any(line.startswith("+++") for line in lines)
    hp = lines[lines.index("hyperparameters:") + 1:]
    assert hp == ["- lr: 0.05", "+ lr: 0.04", "- old_flag: True", "+ new_flag: 3"]


def test_diff_marks_a_last_line_without_newline_as_diff_does(tmp_path):
    a = make_log(tmp_path / "a.txt", "x = 1\ny = 1")
    b = make_log(tmp_path / "b.txt", "x = 1\ny = 2")
    result = tool("diff", a, b)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    hunk = lines[lines.index("@@ -1,2 +1,2 @@") + 1:lines.index("setup is identical")]
    assert hunk == [" x = 1", "-y = 1", "\\ No newline at end of file", "+y = 2", "\\ No newline at end of file"]


def test_diff_of_identical_logs(tmp_path):
    a, b = make_log(tmp_path / "a.txt"), make_log(tmp_path / "b.txt")
    result = tool("diff", a, b)
    assert result.returncode == 0
    assert result.stdout.splitlines()[-2:] == ["setup is identical", "hyperparameters are identical"]
    assert "scripts are identical" in result.stdout


def test_diff_of_a_log_and_its_rerun_ignores_the_run_id_that_rerun_leaves_out(tmp_path):
    """rerun drops the recorded --run_id (the log's name), so the re-run logs an empty one: diff listed that as the
    one hyperparameter that changed. It names the log, as the header's run_id line, which diff leaves out too."""
    recorded = make_log(tmp_path / "seed0.txt", overrides=("--run_id=seed0", "--seed=0"),
                        hparams={"run_id": "seed0", "seed": "0"})
    again = make_log(tmp_path / "again.txt", overrides=("--seed=0",), hparams={"run_id": "", "seed": "0"})
    result = tool("diff", recorded, again)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-2:] == ["setup is identical", "hyperparameters are identical"]
    other = make_log(tmp_path / "seed1.txt", overrides=("--seed=1",), hparams={"run_id": "", "seed": "1"})
    lines = tool("diff", recorded, other).stdout.splitlines()
    assert lines[lines.index("hyperparameters:") + 1:] == ["- seed: 0", "+ seed: 1"]


def test_diff_names_a_different_world_size_and_torch(tmp_path):
    """Two processes and one process with two micro-steps differ in world_size, not in any hyperparameter."""
    a = make_log(tmp_path / "a.txt", world_size=2)
    b = make_log(tmp_path / "b.txt", env={**DEFAULT_ENV, "torch": "2.11.0+cu130"})
    result = tool("diff", a, b)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[lines.index("setup:") + 1:] == ["- world_size: 2", "+ world_size: 1", "- torch: 2.13.0+cpu",
                                                 "+ torch: 2.11.0+cu130", "hyperparameters are identical"]


def parse_group_line(stdout, name):
    line = next(line for line in stdout.splitlines() if line.startswith(f"group {name}:"))
    return dict(re.findall(r"(\w+)=(\S+)", line)), line


def assert_group_statistics(stdout, name, n, mean, std, t, p) -> str:
    """The group line of `compare` states n, mean, std, t and p as computed by hand; returns the line."""
    fields, line = parse_group_line(stdout, name)
    assert int(fields["n"]) == n
    assert float(fields["mean"]) == pytest.approx(mean, abs=1e-6)
    assert float(fields["std"]) == pytest.approx(std, abs=1e-6)
    assert float(fields["t"]) == pytest.approx(t, abs=1e-4)
    assert float(fields["p"]) == pytest.approx(p, rel=1e-4)
    return line


def test_compare_statistics_match_hand_computed_t_test(tmp_path):
    from scipy import stats

    losses = [3.27, 3.275, 3.279, 3.272]
    group = tmp_path / "record"
    for i, loss in enumerate(losses):
        make_log(group / f"run{i}.txt", val_losses=(10.8, 5.0, loss))
    (group / "notes.txt").write_text("not a log\n")
    result = tool("compare", group, "--target", "3.28", "--png", tmp_path / "curves.png")
    assert result.returncode == 0, result.stderr
    assert f'warning: skipping {group / "notes.txt"} is not a run log (no "end of source" separator line)\n' in (
        result.stderr)  # the cause alone: the file is left out, nothing to fix

    n = 4
    mean = sum(losses) / n
    s = math.sqrt(sum((x - mean) ** 2 for x in losses) / (n - 1))
    t = (mean - 3.28) / (s / math.sqrt(n))
    p = stats.t.cdf(t, n - 1)
    assert abs(mean - 3.274) < 1e-12 and abs(s - math.sqrt(46e-6 / 3)) < 1e-12
    assert abs(stats.ttest_1samp(losses, 3.28, alternative="less").pvalue - p) < 1e-12

    line = assert_group_statistics(result.stdout, str(group), 4, mean, s, t, p)
    assert "p >= 0.01" in line  # 0.027: not enough for a record

    for i in range(4):
        row = (rf"^{re.escape(str(group / f'run{i}.txt'))}\s+{losses[i]}\s+0\.700\s+35\.00\s+20/20\s+33512"
               rf"\s+20/0\.70s\s+\S+/\S+s\s*$")
        assert re.search(row, result.stdout, re.M)
    png = (tmp_path / "curves.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 1000


def test_compare_reports_where_the_validations_first_reach_the_target(tmp_path):
    """First val loss <= target at step 10 (350 ms); between step 0 (10.8 at 0 ms) and it, linearly: 5.0 -> 3.28
    is at share (10.8 - 5.0) / (10.8 - 3.2) of the way. A run that never reaches the target says n/a."""
    reached = make_log(tmp_path / "reached.txt", val_losses=(10.8, 3.2, 3.1))
    missed = make_log(tmp_path / "missed.txt", val_losses=(10.8, 4.0, 3.5))
    result = tool("compare", reached, missed, "--target", "5.0")
    assert result.returncode == 0, result.stderr
    share = (10.8 - 5.0) / (10.8 - 3.2)
    expected = f"10/0.35s\\s+{10 * share:.1f}/{0.35 * share:.2f}s"
    assert re.search(rf"^{re.escape(str(reached))}\s.*\s{expected}\s*$", result.stdout, re.M), result.stdout
    result = tool("compare", missed, "--target", "3.28")
    assert re.search(rf"^{re.escape(str(missed))}\s.*33512\s+n/a\s+n/a\s*$", result.stdout, re.M), result.stdout
    # reached at the last validation (3.1 at step 20, 700 ms): interpolated from the one before it (3.2 at step 10,
    # 350 ms), a quarter of the way, not from step 0's
    result = tool("compare", reached, "--target", "3.175")
    assert re.search(rf"^{re.escape(str(reached))}\s.*\s20/0\.70s\s+12\.5/0\.44s\s*$", result.stdout, re.M), \
        result.stdout


def test_compare_interpolates_from_the_last_finite_validation_before_the_target(tmp_path):
    """A non-finite validation between (an older log's: runs now stop there) is no point to interpolate from: step 0's
    10.8 is, so 5.0 lies (10.8 - 5.0) / (10.8 - 3.2) of the way to step 20, not nan."""
    log = make_log(tmp_path / "run.txt", val_losses=(10.8, "nan", 3.2))
    result = tool("compare", log, "--target", "5.0")
    assert result.returncode == 0, result.stderr
    share = (10.8 - 5.0) / (10.8 - 3.2)
    expected = re.escape(f"{20 * share:.1f}/{0.7 * share:.2f}s")
    assert re.search(rf"^{re.escape(str(log))}\s.*\s20/0\.70s\s+{expected}\s*$", result.stdout, re.M), result.stdout


def test_compare_lists_a_folders_logs_in_name_order(tmp_path):
    """Not in the order the file system lists them (on ext4, by a hash of the name)."""
    group = tmp_path / "record"
    names = ["b.txt", "d.txt", "c.txt", "a.txt", "run10.txt", "run09.txt"]
    for name in names:
        make_log(group / name, val_losses=(10.8, 3.27))
    result = tool("compare", group)
    assert result.returncode == 0, result.stderr
    rows = [line.split()[0] for line in result.stdout.splitlines()[1:] if line.startswith(str(group))]
    assert rows == [str(group / name) for name in sorted(names)]


@pytest.mark.parametrize("target", ["nan", "inf", "-inf", "0", "-1", "3,28"])
def test_compare_refuses_a_target_that_is_not_a_loss(tmp_path, target):
    """nan compares false with every loss (no run would reach it), inf and the rest are not losses: one error line
    from the parser, before any log is read."""
    log = make_log(tmp_path / "run.txt")
    result = tool("compare", log, f"--target={target}")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines()[-1] == (f"records/tool.py compare: error: argument --target: "
                                                      f"'{target}' is not a val loss: give a finite positive "
                                                      f"number, e.g. 3.28")


def test_compare_counts_a_loss_equal_to_the_target_and_a_first_validation_as_reaching_it(tmp_path):
    """The record rule is val loss <= target: 3.2 at step 10 reaches 3.2 there (share 1, no interpolation). With a
    target above the step-0 loss the first validation reaches it, with no earlier one to interpolate from."""
    log = make_log(tmp_path / "run.txt", val_losses=(10.8, 3.2, 3.1))
    result = tool("compare", log, "--target", "3.2")
    assert result.returncode == 0, result.stderr
    assert re.search(rf"^{re.escape(str(log))}\s.*\s10/0\.35s\s+10\.0/0\.35s\s*$", result.stdout, re.M), result.stdout
    result = tool("compare", log, "--target", "11")
    assert result.returncode == 0, result.stderr
    assert re.search(rf"^{re.escape(str(log))}\s.*\s0/0\.00s\s+0\.0/0\.00s\s*$", result.stdout, re.M), result.stdout


def test_compare_single_log_has_no_p_value_and_loose_files_form_one_group(tmp_path):
    one = make_log(tmp_path / "one.txt", val_losses=(10.8, 3.27))
    result = tool("compare", one)
    assert result.returncode == 0, result.stderr
    fields, _ = parse_group_line(result.stdout, "(files)")
    assert fields["n"] == "1" and fields["p"] == "n/a" and float(fields["mean"]) == 3.27
    two = make_log(tmp_path / "two.txt", val_losses=(10.8, 3.25))
    fields, _ = parse_group_line(tool("compare", one, two, "--target", "3.5").stdout, "(files)")
    assert fields["n"] == "2" and float(fields["p"]) < 0.05


def test_compare_tolerates_noise_nan_and_stopped_runs(tmp_path):
    good = make_log(tmp_path / "good.txt", val_losses=(10.8, 3.27), extra_tail="W1129 some warning: text\n")
    bad = make_log(tmp_path / "bad.txt", val_losses=(10.8, "nan"),
                   extra_tail="stopped: non-finite loss at step 20\n")
    result = tool("compare", good, bad)
    assert result.returncode == 0, result.stderr
    assert re.search(rf"^{re.escape(str(bad))}\s+nan\s.*stopped$", result.stdout, re.M)
    assert "without a finite val loss at their last step" in result.stderr and str(bad) in result.stderr
    fields, _ = parse_group_line(result.stdout, "(files)")
    assert fields["n"] == "1"


@pytest.mark.parametrize("last_line, status", [("error: KeyboardInterrupt: \n", "error"), ("", "cut short")],
                         ids=["an error line", "killed outright"])
def test_compare_leaves_out_a_run_cut_short(tmp_path, last_line, status):
    """A log whose last step line is below its total (a run stopped mid-way by Ctrl-C, with the scripts' last error
    line: "error", not the "stopped" of a non-finite loss; or killed outright by SIGKILL or a lost node, its log just
    ending after the validation at step 10 of 20: "cut short", not the blank of a finished run) has no result: its
    last val loss, from an earlier step, does not enter the statistics."""
    full = make_log(tmp_path / "full.txt", val_losses=(10.8, 3.27))
    cut = tmp_path / "cut.txt"
    text = make_log(cut, val_losses=(10.8, 4.0, 3.26)).read_text()
    cut.write_text(text[:text.index("step:11/20")] + last_line)
    result = tool("compare", full, cut)
    assert result.returncode == 0, result.stderr
    assert re.search(rf"^{re.escape(str(cut))}\s+4\.0\s.*\s10/20\s.*\s{status}$", result.stdout, re.M), result.stdout
    assert re.search(rf"^{re.escape(str(full))}\s.*\s20/20(\s+\S+){{3}}$", result.stdout, re.M)  # no note
    assert f"left out of the statistics: {cut} ({last_line.strip() or 'cut short'}" in result.stderr  # its why
    fields, _ = parse_group_line(result.stdout, "(files)")
    assert fields["n"] == "1" and float(fields["mean"]) == 3.27


@pytest.mark.parametrize("error", ["error: RuntimeError: NCCL communicator was aborted", "error: stopped by SIGTERM"])
def test_compare_counts_a_run_that_failed_after_its_final_validation_and_says_so(tmp_path, error):
    """A run whose error line follows its last step's finite validation (it failed leaving the process group, or a
    scheduler's SIGTERM came during its teardown) has its result: it counts, noted and with one warning quoting the
    error. It was left out with the warning of runs "without a finite val loss at their last step", which it has."""
    full = make_log(tmp_path / "full.txt", val_losses=(10.8, 3.27))
    late = make_log(tmp_path / "late.txt", val_losses=(10.8, 3.25), extra_tail=f"time: startup 70.3s, training 0.7s, "
                    f"validation 0.1s, total 71.2s\n{error}\n")
    result = tool("compare", full, late)
    assert result.returncode == 0, result.stderr
    assert re.search(rf"^{re.escape(str(late))}\s+3\.25\s.*\s20/20\s.*\serror after final val$", result.stdout, re.M)
    assert result.stderr == (f"warning: (files): {late} counted: it failed after its last validation, whose loss and "
                             f"time are its result ({error})\n")
    fields, _ = parse_group_line(result.stdout, "(files)")
    assert fields["n"] == "2" and float(fields["mean"]) == pytest.approx(3.26)


def test_compare_notes_the_stop_not_a_failure_while_stopping(tmp_path):
    """A run stopped for a non-finite loss whose shutdown then fails has both lines: the first is the cause."""
    log = make_log(tmp_path / "log.txt", val_losses=(10.8, "nan"),
                   extra_tail="stopped: non-finite train loss at step 20\nerror: RuntimeError: lost a rank\n")
    result = tool("compare", log)
    assert result.returncode == 0, result.stderr
    assert re.search(rf"^{re.escape(str(log))}\s+nan\s.*\sstopped$", result.stdout, re.M), result.stdout


def test_compare_notes_a_last_validation_that_is_not_finite_without_a_stopped_line(tmp_path):
    full = make_log(tmp_path / "full.txt", val_losses=(10.8, 3.27))
    nan = make_log(tmp_path / "nan.txt", val_losses=(10.8, "nan"))
    result = tool("compare", full, nan)
    assert result.returncode == 0, result.stderr
    assert re.search(rf"^{re.escape(str(nan))}\s+nan\s.*\s20/20\s.*\snon-finite$", result.stdout, re.M)
    assert "non-finite: the note column says which" in result.stderr and str(nan) in result.stderr


def test_compare_gives_no_p_value_without_spread_and_counts_a_file_once(tmp_path):
    """Two runs ending on the same loss (a seed run twice) have std 0: no t-test, where t = -inf gave p = 0 and a
    record's verdict. The same log named twice is one run."""
    a = make_log(tmp_path / "a.txt", val_losses=(10.8, 3.2), hparams={"seed": "0"})
    b = make_log(tmp_path / "b.txt", val_losses=(10.8, 3.2), hparams={"seed": "0"})
    result = tool("compare", a, b, "--target", "3.28")
    assert result.returncode == 0, result.stderr
    fields, line = parse_group_line(result.stdout, "(files)")
    assert fields["n"] == "2" and fields["p"] == "n/a" and "identical losses" in line and "p < " not in line
    assert "warning: (files): seed 0 appears more than once" in result.stderr
    result = tool("compare", a, tmp_path / "." / "a.txt")
    assert "named twice" in result.stderr
    fields, _ = parse_group_line(result.stdout, "(files)")
    assert fields["n"] == "1"


def test_compare_counts_a_folder_named_twice_once(tmp_path):
    """Its second naming found only logs already counted: neither 'holds no run logs' nor an empty group."""
    for seed in (0, 1):
        make_log(tmp_path / "g" / f"s{seed}.txt", val_losses=(10.8, 3.2 + seed / 100), hparams={"seed": str(seed)})
    result = tool("compare", tmp_path / "g", tmp_path / "g" / ".", tmp_path / "g" / "s0.txt")
    assert result.returncode == 0, result.stderr
    assert parse_group_line(result.stdout, str(tmp_path / "g"))[0]["n"] == "2"
    assert "(files)" not in result.stdout and "n=0" not in result.stdout
    assert result.stderr.count("named twice; counted once") == 3


def test_compare_names_a_folder_this_user_cannot_read(tmp_path, monkeypatch):
    """Its glob finds nothing, as in an empty folder. os.access stands in for the permissions, and the glob answers
    as it would there: the tests run as root, who reads any folder."""
    make_log(tmp_path / "g" / "s0.txt", val_losses=(10.8, 3.2), hparams={"seed": "0"})
    module = records_tool()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: str(path) != str(tmp_path / "g") and real_access(path, mode))
    monkeypatch.setattr(Path, "glob", lambda self, pattern: iter([]))
    with pytest.raises(module.ToolError) as error:
        module.collect_groups([str(tmp_path / "g")])
    assert str(error.value) == (f"this user cannot read the folder {tmp_path / 'g'}; make it readable "
                                f"(chmod a+rx {tmp_path / 'g'})")
    monkeypatch.setattr(os, "access", real_access)  # a readable folder whose glob finds nothing is empty
    with pytest.raises(module.ToolError) as error:
        module.collect_groups([str(tmp_path / "g")])
    assert str(error.value) == (f"{tmp_path / 'g'} holds no run logs; check the path (compare reads a folder's *.txt "
                                "files)")


def test_compare_warns_when_a_group_mixes_scripts_or_run_lengths(tmp_path):
    short = make_log(tmp_path / "g" / "short.txt", val_losses=(10.8, 3.27), hparams={"seed": "0"})
    make_log(tmp_path / "g" / "medium.txt", script="train_gpt_medium.py", val_losses=(10.8, 3.25),
             hparams={"seed": "1"})
    result = tool("compare", tmp_path / "g", "--target", "3.28")
    assert result.returncode == 0, result.stderr
    assert f"warning: {tmp_path / 'g'}: mixes scripts train_gpt.py, train_gpt_medium.py" in result.stderr
    longer = make_log(tmp_path / "longer.txt", val_losses=(10.8, 3.25), hparams={"seed": "1"}, total=100)
    result = tool("compare", short, longer)
    assert result.stderr == "warning: (files): mixes run lengths (num_iterations) 20, 100; compare like runs\n"


MEDIUM_SCRIPT = '"""NanoGPT speedrun, track 2: GPT-2 medium."""\n' + FAKE_SCRIPT


@pytest.mark.parametrize("script, source", [("train_gpt_medium.py", FAKE_SCRIPT), ("my_variant.py", MEDIUM_SCRIPT),
                                            ("my_variant.py", "\ufeff" + MEDIUM_SCRIPT)],  # an editor's BOM kept
                         ids=["by its name", "by its docstring", "by its docstring after its own BOM"])
def test_compare_tests_track_2_logs_against_track_2s_target(tmp_path, script, source):
    """Without --target, track 2's runs were tested against track 1's 3.28: runs ending at 2.95 (missing 2.92) got
    'p < 0.01' and reached the target at their last step. A variant keeps the track script's docstring."""
    for seed, loss in enumerate((2.95, 2.951, 2.949)):
        make_log(tmp_path / "g" / f"s{seed}.txt", source, script=script, val_losses=(10.8, loss),
                 hparams={"seed": str(seed)})
    result = tool("compare", tmp_path / "g")
    assert result.returncode == 0, result.stderr
    t = (2.95 - 2.92) / (0.001 / math.sqrt(3))  # the std of 2.95 +- 0.001 is 0.001
    p = 0.5 + t / (2 * math.sqrt(2 + t * t))  # Student's t CDF with 2 degrees of freedom, in closed form
    line = assert_group_statistics(result.stdout, str(tmp_path / "g"), 3, 2.95, 0.001, t, p)
    assert line.endswith("(H1: mean < 2.92; p >= 0.01)")
    assert re.search(rf"^{re.escape(str(tmp_path / 'g' / 's0.txt'))}\s.*\s33512\s+n/a\s+n/a$", result.stdout, re.M)


def test_compare_without_target_needs_logs_of_one_known_track(tmp_path):
    """Logs of both tracks, or of a script that is no track's, have no one target: one error line, naming a log of
    each, and the fix; with --target they compare."""
    short = make_log(tmp_path / "short.txt", val_losses=(10.8, 3.27))
    medium = make_log(tmp_path / "medium.txt", script="train_gpt_medium.py", val_losses=(10.8, 2.91))
    mine = make_log(tmp_path / "mine.txt", script="mine.py", val_losses=(10.8, 3.1))
    result = tool("compare", short, medium)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (f"error: the logs are of tracks 1 ({short}) and 2 ({medium}), whose targets differ: "
                             "compare one track at a time, or give --target\n")
    result = tool("compare", short, mine)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (f"error: {mine}: its script (mine.py) is no track script, so its target is unknown: "
                             "give --target\n")
    future = make_log(tmp_path / "future.txt", '"""NanoGPT speedrun, track 3: a new one."""\n' + FAKE_SCRIPT)
    result = tool("compare", future)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == f"error: {future}: track 3 has no known target: give --target\n"
    fields, line = parse_group_line(tool("compare", short, mine, "--target", "3.2").stdout, "(files)")
    assert fields["n"] == "2" and "H1: mean < 3.2;" in line
    fields, _ = parse_group_line(tool("compare", short).stdout, "(files)")
    assert fields["n"] == "1" and fields["mean"] == "3.2700"


def test_compare_png_needs_a_png_name_and_matplotlib(tmp_path, monkeypatch, capsys):
    log = make_log(tmp_path / "run.txt")
    result = tool("compare", log, "--png", tmp_path / "curves.pdf")
    assert result.returncode == 2 and result.stderr == f"error: --png {tmp_path / 'curves.pdf'}: give a file name " \
        "ending in .png\n" and result.stdout == ""
    module = records_tool()
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    assert module.main(["compare", str(log), "--png", str(tmp_path / "curves.png")]) == 2
    assert capsys.readouterr().err == "error: --png needs matplotlib: pip install matplotlib (or leave --png out)\n"
    assert not (tmp_path / "curves.png").exists()


def test_fallback_student_t_cdf_matches_scipy():
    from scipy import stats

    module = records_tool()
    for df in range(1, 30):
        for t in (-40.0, -6.5, -3.0645, -1.0, -0.1, 0.0, 0.7, 2.0, 9.0):
            assert module.student_t_cdf(t, df) == pytest.approx(stats.t.cdf(t, df), abs=1e-12)
        assert (module.student_t_cdf(-math.inf, df), module.student_t_cdf(math.inf, df)) == (0.0, 1.0)


def test_parser_reads_header_hyperparameters_and_steps(tmp_path):
    module = records_tool()
    log = module.load_log(make_log(tmp_path / "run.txt", world_size=2, val_losses=(10.8, 5.0, 3.3),
                                   nvidia_smi=["line one", "  indented"]))
    assert log.header["world_size"] == "2" and log.header["gpu"] == "none"
    assert log.hparams == {"train_files": "data/fineweb10B/fineweb_train_*.bin", "num_iterations": "20",
                           "lr": "0.05"}
    assert log.nvidia_smi == ["line one", "  indented"]
    assert log.last("val_loss") == "3.3" and log.last("mfu") == "1.2%"
    assert log.peak_allocated_mib == 33512
    assert [row["step"] for row in log.steps if "val_loss" in row] == [0, 10, 20]
    assert "step_avg" not in log.steps[0]
    assert "startup" not in log.header and "warmup" not in log.header  # progress notes, not header fields


def test_parser_reads_empty_values_whose_trailing_space_was_stripped(tmp_path):
    """The scripts write an empty value as "  name: "; a log kept in git may lose that trailing space."""
    module = records_tool()
    path = make_log(tmp_path / "run.txt", hparams={"run_id": "", "lr": "0.05"})
    path.write_bytes(path.read_bytes().replace(b"  run_id: \n", b"  run_id:\n"))
    log = module.load_log(path)
    assert log.hparams["run_id"] == "" and log.hparams["lr"] == "0.05" and "run_id:" not in log.hparams


def test_current_environment_matches_torch_and_imports_it_only_for_gpu_builds():
    import torch

    code = ("import importlib.util, json, sys\n"
            f"spec = importlib.util.spec_from_file_location('records_tool', {str(TOOL)!r})\n"
            "module = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(module)\n"
            "print(json.dumps([module.current_environment(), 'torch' in sys.modules]))\n")
    result = subprocess.run([sys.executable, "-c", code], env=CHILD_ENV, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    env, imported_torch = json.loads(result.stdout)
    assert env == this_environment()
    assert imported_torch == bool(torch.version.cuda or torch.version.hip)


@pytest.mark.parametrize("names", [["NVIDIA H200"] * 2, ["NVIDIA H200", "NVIDIA H100 80GB HBM3"]])
def test_current_environment_names_the_gpus_as_the_track_scripts_do(names, monkeypatch):
    """Else rerun warns that the GPU differs on the machine that wrote the log (mixed GPUs: the first one's name)."""
    import torch
    sys.path.insert(0, str(REPO))
    import train_gpt
    module = records_tool()
    monkeypatch.setattr(module, "torch_build", lambda: {"__version__": torch.__version__, "cuda": "13.0"})
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(names))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: names[i])
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))  # the header's ptxas line
    assert module.current_environment()["gpu"] == train_gpt.environment()["gpu"] == f"{names[0]} x2"


def test_cpu_log_without_peak_memory_line(tmp_path):
    log = make_log(tmp_path / "cpu.txt", val_losses=(10.8, 3.29), peak=False)
    assert records_tool().load_log(log).peak_allocated_mib is None
    result = tool("compare", log)
    assert result.returncode == 0, result.stderr
    row = rf"^{re.escape(str(log))}\s+3\.29\s+0\.700\s+35\.00\s+20/20\s+n/a\s+n/a\s+n/a\s*$"
    assert re.search(row, result.stdout, re.M)


TORCHRUN_1 = ["torchrun", "--standalone", "--nproc_per_node=1", "S"]
TORCHRUN_4 = ["torchrun", "--standalone", "--nproc_per_node=4", "S"]


@pytest.mark.parametrize("world_size, command, expected", [
    (1, "python train_gpt.py", ["python", "S"]),
    (1, "/usr/bin/python3 -u train_gpt.py", ["python", "S"]),
    (1, None, ["python", "S"]),  # no command line: one process needs no launcher
    (1, "torchrun --standalone --nproc_per_node=1 train_gpt.py", TORCHRUN_1),
    (1, "/opt/bin/torchrun --nproc_per_node=1 x.py", TORCHRUN_1),
    (1, "python -m torch.distributed.run --nproc_per_node=1 x.py", TORCHRUN_1),
    (4, "python train_gpt.py", TORCHRUN_4),
    (4, None, TORCHRUN_4),
])
def test_reproduce_command_follows_the_recorded_launch(tmp_path, world_size, command, expected):
    module = records_tool()
    path = make_log(tmp_path / "run.txt", world_size=world_size, overrides=("--a=1",))
    text = path.read_text()
    text = re.sub(r"^command: .*\n", "" if command is None else f"command: {command}\n", text, flags=re.M)
    path.write_text(text)
    assert module.reproduce_command(module.load_log(path), "S") == [*expected, "--a=1"]


RESTORE_ARGV = 'restore the line as the script wrote it, e.g. argv: ["train_gpt.py", "--seed=1"]'
RESTORE_HEADER = "restore its world_size and command lines as the script wrote them"


@pytest.mark.parametrize("line, replacement, message", [
    (r"^world_size: .*$", "world_size: two",
     f"unreadable header (invalid literal for int() with base 10: 'two'); {RESTORE_HEADER}"),
    (r"^world_size: .*$", "world_size: 0", "world_size 0 is not positive; restore the line as the script wrote it, "
                                           "e.g. world_size: 8"),
    (r"^command: .*$", "command: python 'train_gpt.py", f"unreadable header (No closing quotation); {RESTORE_HEADER}"),
    (r"^argv: .*$", 'argv: {"a": 1}', f"argv line is not a JSON list; {RESTORE_ARGV}"),
    (r"^argv: .*$", 'argv: ["x.py", 3]', f"argv line is not a JSON list of strings; {RESTORE_ARGV}"),
    (r"^argv: .*$", "argv: [not json", f"argv line is not a JSON list; {RESTORE_ARGV}"),
])
def test_bad_header_values_are_one_line_errors(tmp_path, line, replacement, message):
    log = make_log(tmp_path / "run.txt")
    log.write_text(re.sub(line, replacement, log.read_text(), count=1, flags=re.M))
    for args in (["extract", log, "-o", tmp_path / "x.py"], ["rerun", "--dry-run", log]):
        result = tool(*args)
        assert result.returncode == 2
        assert result.stderr == f"error: {log}: {message}\n"
    assert not (tmp_path / "x.py").exists()  # nothing written before the error


@pytest.mark.parametrize("tail", ["error: OSError: [Errno 5] Input/output error\n", "run_id: x\ndate: 2026-11-2", ""],
                         ids=["a crash before the header", "cut in the header", "cut after the separator"])
def test_a_log_that_ends_before_its_argv_line_still_gives_back_its_script(tmp_path, tail):
    """A run that failed while writing its header (the scripts end the log with the crash's error line from the
    separator on), or a copy of its log cut short there, still holds the whole script: extract writes it, then says
    in one line that the arguments are unknown. It wrote nothing ('has no argv line'), and rerun gave no way on."""
    full = make_log(tmp_path / "full.txt").read_bytes()
    separator_end = full.index(b"\n", full.index(b" end of source: ")) + 1
    log = tmp_path / "failed.txt"
    log.write_bytes(full[:separator_end] + tail.encode())
    result = tool("extract", log, "-o", tmp_path / "out.py")
    assert result.returncode == 2 and result.stdout == ""
    unknown = (f"error: {log} has no argv line (the run stopped, or its log was cut, before its header): the "
               "arguments it ran with are unknown")
    assert result.stderr == (f"{unknown}; its script is written to {tmp_path / 'out.py'} ({len(FAKE_SCRIPT)} bytes): "
                             "run it with settings of your own\n")
    assert (tmp_path / "out.py").read_bytes() == FAKE_SCRIPT.encode()
    (tmp_path / "out.py").write_text("edited\n")  # an existing different file is still kept without --force
    result = tool("extract", log, "-o", tmp_path / "out.py")
    assert result.returncode == 2 and "--force" in result.stderr and (tmp_path / "out.py").read_text() == "edited\n"
    for args in (["rerun", log], ["rerun", "--dry-run", log]):
        result = tool(*args, cwd=tmp_path)
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr == f"{unknown}; extract still writes its script\n"


def test_extract_writes_the_recorded_script_name_without_folders(tmp_path):
    log = make_log(tmp_path / "run.txt", script="train_gpt_medium.py")
    log.write_bytes(log.read_bytes().replace(b"end of source: train_gpt_medium.py",
                                             b"end of source: ../../x/train_gpt_medium.py"))
    work = tmp_path / "work"
    work.mkdir()
    result = tool("extract", log, cwd=work)
    assert result.returncode == 0, result.stderr
    assert [p.name for p in work.iterdir()] == ["train_gpt_medium.py"]
    assert result.stdout.split()[:2] == ["python", "train_gpt_medium.py"]


NOT_A_LOG_CASES = [
    ["extract", "{f}"],
    ["rerun", "--dry-run", "{f}"],
    ["rerun", "{f}"],
    ["diff", "{f}", "{log}"],
    ["diff", "{log}", "{f}"],
    ["compare", "{f}"],
    ["compare", "{log}", "{f}"],
]


@pytest.mark.parametrize("args", NOT_A_LOG_CASES)
def test_not_a_log_is_one_line_error(tmp_path, args):
    not_log = tmp_path / "notes.txt"
    not_log.write_text("hello\n" + "=" * 20 + " end of source: x.py, 999 bytes " + "=" * 20 + "\n")
    log = make_log(tmp_path / "run.txt")
    result = tool(*[a.format(f=not_log, log=log) for a in args], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (f'error: {not_log} is not a run log (no "end of source" separator line); give a run '
                             'log as a track script wrote it (logs/<run_id>.txt)\n')
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.parametrize("command", ["extract", "rerun", "diff", "compare"])
def test_missing_file_is_one_line_error(tmp_path, command):
    missing = tmp_path / "nope.txt"
    args = [command, missing, missing] if command == "diff" else [command, missing]
    result = tool(*args)
    assert result.returncode == 2
    assert result.stderr == (f"error: {missing}: no such file; give a run log as a track script wrote it "
                             "(logs/<run_id>.txt)\n")


@pytest.mark.parametrize("command", ["extract", "rerun", "diff"])
def test_a_folder_given_as_a_log_is_one_line_error(tmp_path, command):
    """compare reads a folder's logs; the others take one log file each."""
    folder = tmp_path / "logs"
    make_log(folder / "run.txt")
    args = [command, folder, folder / "run.txt"] if command == "diff" else [command, folder]
    result = tool(*args)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (f"error: {folder} is not a file; give a run log as a track script wrote it "
                             "(logs/<run_id>.txt)\n")


@pytest.mark.parametrize("option", ["-o", "--png"])
def test_unwritable_output_is_one_line_error(tmp_path, option):
    log = make_log(tmp_path / "run.txt")
    command = "extract" if option == "-o" else "compare"
    missing = tmp_path / "no such folder" / "out.png"
    result = tool(command, log, option, missing)
    assert result.returncode == 2
    assert result.stderr == f"error: {missing}: No such file or directory; check the path, or create its folder\n"


@pytest.mark.parametrize("where, line", [
    ("folder", "{out}: Is a directory; give the path of a file, not a folder"),
    ("file", "{out}: Not a directory; a file stands where a folder of the path goes; give another path"),
])
def test_a_path_in_the_way_of_the_output_is_one_line_error(tmp_path, where, line):
    """-o naming a folder, or a path through a file."""
    log = make_log(tmp_path / "run.txt")
    out = tmp_path / "out" if where == "folder" else log / "out.py"
    if where == "folder":
        out.mkdir()
    result = tool("extract", log, "-o", out)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == f"error: {line.format(out=out)}\n"


@pytest.mark.parametrize("error, line", [
    (PermissionError(errno.EACCES, "Permission denied", "OUT"),
     "OUT: Permission denied; check its permissions, or give another path"),
    (PermissionError(errno.EPERM, "Operation not permitted", "OUT"),
     "OUT: Operation not permitted; check its permissions, or give another path"),
    (OSError(errno.EROFS, "Read-only file system", "OUT"),
     "OUT: Read-only file system; give a path on a writable file system"),
    (OSError(errno.EIO, "Input/output error", "OUT"),
     "OUT: Input/output error; check the path, its permissions and the free disk space"),
    (OSError(errno.ENOSPC, "No space left on device"),  # names no file: no 'error: : ...' and no 'None'
     "No space left on device; free some disk space, or give a path on another disk"),
])
def test_a_write_error_is_one_line_error_naming_the_fix(tmp_path, monkeypatch, capsys, error, line):
    """What the tests cannot bring about as root on a roomy disk: the OSError that the write would raise."""
    module = records_tool()
    log = make_log(tmp_path / "run.txt")

    def failing_write(*args):
        raise error

    monkeypatch.setattr(module, "write_script", failing_write)
    assert module.main(["extract", str(log), "-o", str(tmp_path / "out.py")]) == 2
    assert capsys.readouterr().err == f"error: {line}\n"


@pytest.mark.parametrize("command", ["extract", "compare"])
def test_arguments_after_double_dash_are_only_for_rerun(tmp_path, command):
    log = make_log(tmp_path / "run.txt")
    result = tool(command, log, "--", "--seed=1", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert "arguments after -- are only accepted by rerun" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.txt"]  # extract wrote nothing


def test_folder_without_logs_is_an_error(tmp_path):
    (tmp_path / "empty").mkdir()
    result = tool("compare", tmp_path / "empty")
    assert result.returncode == 2 and result.stderr.startswith("error:") and "Traceback" not in result.stderr


# ----------------------------------------------------------------------------------------------
# Part B: real tiny CPU runs of the track scripts.
#
# train_gpt.py runs four times (a few seconds each on 2 cores), all with the default 12 layers and
# window pattern but tiny widths: A with python; B = the command that `extract A` prints; C = `rerun A
# -- --seed=1`; D with two processes under torchrun (one step). The runs live in module-scoped fixtures
# so that each check below is its own test without paying for its own training run. (Part A's
# test_rerun_of_a_two_process_log_really_starts_two_ranks_under_torchrun relaunches under torchrun for
# real, at a fraction of a training run's cost.)
# Each first run starts from a copy of the script taken just before it, so that the bytes it logs are
# known even while someone edits the working tree.

TINY_ARGS = [
    "--device=cpu", "--compile=false", "--model_dim=64", "--num_heads=2", "--head_dim=32",
    "--train_seq_len=256", "--val_seq_len=256", "--val_tokens=512", "--grad_accum_steps=1",
    "--num_iterations=2", "--val_loss_every=1", "--warmup_steps=0",
]
EOT = shards.EOT


def random_documents(rng, ntokens):
    """Random token documents, each starting with EOT, cut to exactly ntokens."""
    tokens = []
    while len(tokens) < ntokens:
        tokens.append(EOT)
        tokens.extend(rng.integers(0, EOT, size=int(rng.integers(20, 700))).tolist())
    return np.array(tokens[:ntokens], dtype=np.uint16)


@pytest.fixture(scope="module")
def tiny_shards(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shards")
    rng = np.random.default_rng(0)
    shards.write_shard(folder / "tiny_train_000001.bin", random_documents(rng, 1 << 15))
    shards.write_shard(folder / "tiny_val_000000.bin", random_documents(rng, 1 << 12))
    return folder


def losses(log_path):
    """Every (step, kind, loss) of a log, kind being val_loss or train_loss."""
    steps = records_tool().load_log(log_path).steps
    return [(row["step"], key, row[key]) for row in steps for key in ("val_loss", "train_loss") if key in row]


def final_val_loss(log_path):
    return records_tool().load_log(log_path).last("val_loss")


def runnable(command):
    """A printed command run with this interpreter: python -> sys.executable, torchrun -> -m torch.distributed.run."""
    if command[0] == "python":
        return [sys.executable, *command[1:]]
    assert command[0] == "torchrun", command
    return [sys.executable, "-m", "torch.distributed.run", *command[1:]]


def checked(result):
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def new_log(logs, before):
    """The one log that appeared in the folder `logs` since the set of paths `before`."""
    (log,) = set(logs.glob("*.txt")) - before
    return log


@dataclasses.dataclass
class RealRun:
    script: str  # its name
    source: bytes  # the bytes that ran
    world_size: int
    args: list
    logs: Path
    log: Path


def first_run(script, world_size, shard_folder, folder, *extra):
    """Run a copy of a track script from its folder the way a user does; return the run and its log."""
    checkout = folder / "checkout"
    checkout.mkdir()
    source = (REPO / script).read_bytes()
    (checkout / script).write_bytes(source)
    logs = folder / "logs"
    args = [*TINY_ARGS, f"--train_files={shard_folder}/tiny_train_*.bin",
            f"--val_files={shard_folder}/tiny_val_*.bin", f"--logs_dir={logs}", *extra]
    launch = ["python"] if world_size == 1 else ["torchrun", "--standalone", f"--nproc_per_node={world_size}"]
    checked(subprocess.run(runnable([*launch, script, *args]), cwd=checkout, env=CHILD_ENV, capture_output=True,
                           text=True, timeout=600))
    return RealRun(script, source, world_size, args, logs, new_log(logs, set()))


def extract_and_run(run, folder):
    """`extract` the run's log, then run the very command it printed; return (command, script, new log)."""
    script = folder / "extracted" / run.script
    script.parent.mkdir()
    result = checked(tool("extract", run.log, "-o", script))
    command = shlex.split(result.stdout.strip())
    before = set(run.logs.glob("*.txt"))
    checked(subprocess.run(runnable(command), cwd=folder, env=CHILD_ENV, capture_output=True, text=True,
                           timeout=600))
    return command, script, new_log(run.logs, before)


def rerun(run, *extra):
    """`rerun` the run's log (really launching it); return (the launch argv it printed, the new log)."""
    before = set(run.logs.glob("*.txt"))
    result = checked(tool("rerun", run.log, *(["--", *extra] if extra else [])))
    assert "warning" not in result.stderr  # the log was written on this very machine
    return shlex.split(result.stdout.splitlines()[0]), new_log(run.logs, before)


@pytest.fixture(scope="module")
def run_a(tiny_shards, tmp_path_factory):
    return first_run("train_gpt.py", 1, tiny_shards, tmp_path_factory.mktemp("run_a"))


@pytest.fixture(scope="module")
def run_b(run_a, tmp_path_factory):
    return extract_and_run(run_a, tmp_path_factory.mktemp("run_b"))


@pytest.fixture(scope="module")
def run_c(run_a):
    return rerun(run_a, "--seed=1")


@pytest.fixture(scope="module")
def run_d(tiny_shards, tmp_path_factory):
    return first_run("train_gpt.py", 2, tiny_shards, tmp_path_factory.mktemp("run_d"), "--num_iterations=1")


def test_real_log_is_parsed(run_a):
    log = records_tool().load_log(run_a.log)
    assert log.script_name == "train_gpt.py"
    assert log.source == run_a.source
    assert log.header["world_size"] == "1"
    assert log.header["command"].startswith("python train_gpt.py --device=cpu ")
    assert json.loads(log.header["argv"]) == ["train_gpt.py", *run_a.args]
    here = this_environment()  # a CUDA build of torch logs its CUDA version even in a --device=cpu run
    assert log.header["cuda"] == here["cuda"] and log.header["gpu"] == here["gpu"]
    assert "startup" not in log.header and "warmup" not in log.header
    assert log.hparams["num_layers"] == "12" and len(log.hparams["window_pattern"]) == 12
    assert log.hparams["seed"] == "0" and log.hparams["compile"] == "false"
    assert [(row["step"], "step_avg" in row) for row in log.steps if "val_loss" in row] == [
        (0, False), (1, True), (2, True)]
    assert [row["step"] for row in log.steps if "train_loss" in row] == [1, 2]
    assert log.peak_allocated_mib is None and log.end_line is None
    assert math.isfinite(float(log.last("val_loss")))


def test_real_extract_round_trips_byte_for_byte(run_a, run_b):
    command, script, _ = run_b
    assert script.read_bytes() == run_a.source
    assert command == ["python", str(script), *run_a.args]


def test_printed_command_reproduces_every_loss(run_a, run_b):
    command, script, log_b = run_b
    assert losses(log_b)[-1] == losses(run_a.log)[-1] == (2, "val_loss", final_val_loss(run_a.log))
    assert losses(log_b) == losses(run_a.log)
    log = records_tool().load_log(log_b)
    assert log.source == run_a.source and log.script_name == "train_gpt.py"
    assert json.loads(log.header["argv"]) == [str(script), *run_a.args]


def test_rerun_passes_extra_args_through_and_diff_shows_the_change(run_a, run_c):
    launched, log_c = run_c
    assert launched[0] == sys.executable and Path(launched[1]).name == "train_gpt.py"
    assert launched[2:] == [*run_a.args, "--seed=1"]
    assert records_tool().load_log(log_c).hparams["seed"] == "1"
    assert final_val_loss(log_c) != final_val_loss(run_a.log)  # so equal losses above mean something

    result = checked(tool("diff", run_a.log, log_c))
    lines = result.stdout.splitlines()
    assert lines == [f"scripts are identical (train_gpt.py, {len(run_a.source)} bytes)", "setup is identical",
                     "hyperparameters:", "- seed: 0", "+ seed: 1"]


def with_header_values(log_path, out, **values):
    """Copy a log to `out` with some header lines (after the separator only) given new values."""
    data = log_path.read_bytes()
    match, _ = records_tool().find_separator(data)
    tail = data[match.end():].decode()
    for key, value in values.items():
        tail, count = re.subn(rf"^{key}: .*$", f"{key}: {value}", tail, count=1, flags=re.M)
        assert count == 1, key
    out.write_bytes(data[:match.end()] + tail.encode())
    return out


def test_rerun_of_real_log_warns_about_an_edited_environment(run_a, tmp_path):
    clean = checked(tool("rerun", "--dry-run", run_a.log))
    assert clean.stderr == ""
    edited = with_header_values(run_a.log, tmp_path / "edited.txt", torch="2.5.1+cu124", gpu="NVIDIA H100 x8")
    result = checked(tool("rerun", "--dry-run", edited))
    here = this_environment()
    assert result.stderr.splitlines() == [
        f"warning: torch differs: log has 2.5.1+cu124, this machine has {here['torch']}",
        f"warning: gpu differs: log has NVIDIA H100 x8, this machine has {here['gpu']}",
    ]
    assert shlex.split(result.stdout.splitlines()[-1])[2:] == run_a.args


def test_compare_real_logs_with_fixed_final_losses(run_a, tmp_path):
    from scipy import stats

    fixed = [3.2791, 3.2702, 3.2755, 3.2738, 3.2689]
    data = run_a.log.read_text()
    final = f"step:2/2 val_loss:{final_val_loss(run_a.log)} "
    assert data.count(final) == 1
    group = tmp_path / "record"
    group.mkdir()
    for i, loss in enumerate(fixed):
        (group / f"run{i}.txt").write_text(data.replace(final, f"step:2/2 val_loss:{loss} "))
    result = checked(tool("compare", group, "--target", "3.28", "--png", tmp_path / "curves.png"))

    # by hand: mean 3.2735; deviations .0056 -.0033 .0020 .0003 -.0046, squares (31.36 + 10.89 + 4.00 + 0.09
    # + 21.16)e-6 = 67.5e-6; s = sqrt(67.5e-6 / 4) = 0.0041079; t = -0.0065 / (s / sqrt(5)) = -3.53815
    n, mean = 5, 3.2735
    s = math.sqrt(67.5e-6 / 4)
    t = (mean - 3.28) / (s / math.sqrt(n))
    assert abs(sum(fixed) / n - mean) < 1e-12
    assert abs(sum((x - mean) ** 2 for x in fixed) - 67.5e-6) < 1e-12
    assert t == pytest.approx(-3.53815, abs=1e-5)
    p = stats.ttest_1samp(fixed, 3.28, alternative="less").pvalue
    assert p == pytest.approx(stats.t.cdf(t, n - 1), rel=1e-9)

    line = assert_group_statistics(result.stdout, str(group), 5, mean, s, t, p)
    assert p == pytest.approx(0.012027, abs=1e-6) and "p >= 0.01" in line  # just short of a record

    log = records_tool().load_log(run_a.log)
    train_s = float(log.last("train_time")[:-2]) / 1000
    step_avg = float(log.last("step_avg")[:-2])
    for i, loss in enumerate(fixed):
        row = (rf"^{re.escape(str(group / f'run{i}.txt'))}\s+{loss}\s+{train_s:.3f}\s+{step_avg:.2f}\s+2/2"
               rf"\s+n/a\s+2/{train_s:.2f}s\s+\S+\s*$")  # CPU runs log no peak memory; all reach 3.28
        assert re.search(row, result.stdout, re.M), result.stdout
    png = (tmp_path / "curves.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000


@pytest.mark.parametrize("args", [["extract"], ["rerun"], ["rerun", "--dry-run"], ["diff", "A"], ["diff", "B"],
                                  ["compare"]])
def test_real_non_log_files_are_one_line_errors(run_a, tmp_path, args):
    source_only = tmp_path / "source_only.txt"  # a log cut before its separator line
    source_only.write_bytes(run_a.log.read_bytes()[:len(run_a.source) + 1])
    script = tmp_path / "train_gpt.py"  # the script quotes the separator text itself
    script.write_bytes(run_a.source)
    for not_log in [script, source_only]:
        if args[0] == "diff":
            argv = ["diff", not_log, run_a.log] if args[1] == "A" else ["diff", run_a.log, not_log]
        else:
            argv = [*args, not_log]
        result = tool(*argv, cwd=tmp_path)
        assert result.returncode == 2, result.stdout
        assert result.stderr == (f'error: {not_log} is not a run log (no "end of source" separator line); give a '
                                 'run log as a track script wrote it (logs/<run_id>.txt)\n')
        assert result.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["source_only.txt", "train_gpt.py"]  # nothing new


def test_two_process_run_extracts_and_reruns_under_torchrun(run_d, tmp_path):
    log = records_tool().load_log(run_d.log)
    assert log.header["world_size"] == "2"
    assert log.header["command"].startswith("torchrun --standalone --nproc_per_node=2 train_gpt.py ")
    assert log.hparams["grad_accum_steps"] == "1" and log.hparams["num_iterations"] == "1"
    assert [(row["step"], key) for row in log.steps for key in ("val_loss", "train_loss") if key in row] == [
        (0, "val_loss"), (1, "train_loss"), (1, "val_loss")]
    assert log.source == run_d.source

    result = checked(tool("extract", run_d.log, "-o", tmp_path / "train_gpt.py"))
    assert (tmp_path / "train_gpt.py").read_bytes() == run_d.source
    assert shlex.split(result.stdout) == ["torchrun", "--standalone", "--nproc_per_node=2",
                                          str(tmp_path / "train_gpt.py"), *run_d.args]
    result = checked(tool("rerun", "--dry-run", run_d.log, "--", "--seed=3"))
    launched = shlex.split(result.stdout.splitlines()[-1])
    assert launched[:5] == [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    assert Path(launched[5]).name == "train_gpt.py" and launched[6:] == [*run_d.args, "--seed=3"]


def test_medium_track_extracts_and_reruns_to_the_same_loss(tiny_shards, tmp_path):
    if not (REPO / "train_gpt_medium.py").exists():
        pytest.skip("train_gpt_medium.py is not in the repository yet")
    run = first_run("train_gpt_medium.py", 1, tiny_shards, tmp_path)
    command, script, log = extract_and_run(run, tmp_path)
    assert script.read_bytes() == run.source
    assert records_tool().load_log(run.log).source == run.source
    assert command == ["python", str(script), *run.args]
    assert losses(log)[-1][1] == "val_loss"
    assert losses(log) == losses(run.log)
    assert records_tool().load_log(log).script_name == "train_gpt_medium.py"
