"""Tests for records/tool.py.

Part A builds synthetic run logs in the exact format the track scripts write.
Part B makes real logs with tiny CPU runs of the track scripts (skipped until they exist).
"""

import importlib.util
import json
import math
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

FAKE_SCRIPT = (
    "import sys\n"
    "lr = 0.05\n"
    "print('ARGS', sys.argv[1:])\n"
    "sys.exit(3)\n"
)


def load_tool_module():
    spec = importlib.util.spec_from_file_location("records_tool", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
        gpu = f"{names[0]} x{len(names)}" if len(set(names)) == 1 else ", ".join(names)
    return {"python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.version.cuda or "none", "triton": triton_version, "gpu": gpu}


DEFAULT_ENV = {"python": "3.11.7", "torch": "2.13.0+cpu", "cuda": "none", "triton": "3.6.0", "gpu": "none"}


def make_log(path, source=FAKE_SCRIPT, script="train_gpt.py", overrides=("--device=cpu", "--num_iterations=20"),
             world_size=1, launcher=None, env=None, hparams=None, val_losses=(10.8258, 7.1234),
             extra_tail="", nvidia_smi=None):
    """Write a run log in the track scripts' format and return its path."""
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
    total = 20
    lines.append(f"step:0/{total} val_loss:{val_losses[0]} train_time:0ms step_avg:0.00ms")
    lines.append("warmup done in 1.2s")
    for step in range(1, total + 1):
        lines.append(f"step:{step}/{total} train_loss:{9 - step * 0.1:.4f} train_time:{35 * step}ms "
                     f"step_avg:35.00ms")
        if step == 10 and len(val_losses) > 2:
            lines.append(f"step:10/{total} val_loss:{val_losses[1]} train_time:350ms step_avg:35.00ms")
    lines.append(f"step:{total}/{total} val_loss:{val_losses[-1]} train_time:700ms step_avg:35.00ms "
                 "tokens/s:12345 mfu:1.2%")
    lines.append("peak memory allocated: 33512 MiB reserved: 34000 MiB")
    out += ("\n".join(lines) + "\n" + extra_tail).encode()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(out))
    return path


def tool(*args, cwd=None):
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


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


def test_extract_default_name_and_python_command(tmp_path):
    log = make_log(tmp_path / "logs" / "run.txt")
    result = tool("extract", log, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "train_gpt.py").read_bytes() == FAKE_SCRIPT.encode()
    assert result.stdout.strip() == "python train_gpt.py --device=cpu --num_iterations=20"


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


def test_rerun_dry_run_without_mismatch(tmp_path):
    log = make_log(tmp_path / "run.txt", env=this_environment())
    result = tool("rerun", "--dry-run", log)
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stdout + result.stderr
    command = shlex.split(result.stdout.strip().splitlines()[-1])
    assert command[0] == sys.executable
    assert command[-2:] == ["--device=cpu", "--num_iterations=20"]


def test_rerun_dry_run_warns_per_mismatch_and_appends_extra_args(tmp_path):
    env = this_environment()
    env["torch"] = "1.0.0"
    env["gpu"] = "NVIDIA H200 x8"
    log = make_log(tmp_path / "run.txt", env=env, world_size=8,
                   nvidia_smi=["| NVIDIA-SMI 560.35 |", "| 0  NVIDIA H200 |"])
    result = tool("rerun", "--dry-run", log, "--", "--num_iterations=3", "--lr=0.1")
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    current = this_environment()
    assert warnings == [
        f"warning: torch differs: log has 1.0.0, this machine has {current['torch']}",
        f"warning: gpu differs: log has NVIDIA H200 x8, this machine has {current['gpu']}",
    ]
    command = shlex.split(result.stdout.strip().splitlines()[-1])
    assert command[:4] == [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    assert "--nproc_per_node=8" in command
    assert command[-4:] == ["--device=cpu", "--num_iterations=20", "--num_iterations=3", "--lr=0.1"]


def test_rerun_launches_and_returns_exit_code(tmp_path):
    log = make_log(tmp_path / "run.txt", env=this_environment())
    result = tool("rerun", log, "--", "--extra=1")
    assert result.returncode == 3
    assert "ARGS ['--device=cpu', '--num_iterations=20', '--extra=1']" in result.stdout


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


def test_diff_of_identical_logs(tmp_path):
    a, b = make_log(tmp_path / "a.txt"), make_log(tmp_path / "b.txt")
    result = tool("diff", a, b)
    assert result.returncode == 0
    assert "scripts are identical" in result.stdout and "hyperparameters are identical" in result.stdout


def parse_group_line(stdout, name):
    line = next(line for line in stdout.splitlines() if line.startswith(f"group {name}:"))
    return dict(re.findall(r"(\w+)=(\S+)", line)), line


def test_compare_statistics_match_hand_computed_t_test(tmp_path):
    from scipy import stats

    losses = [3.27, 3.275, 3.279, 3.272]
    group = tmp_path / "record"
    for i, loss in enumerate(losses):
        make_log(group / f"run{i}.txt", val_losses=(10.8, 5.0, loss))
    (group / "notes.txt").write_text("not a log\n")
    result = tool("compare", group, "--target", "3.28", "--png", tmp_path / "curves.png")
    assert result.returncode == 0, result.stderr
    assert "warning: skipping" in result.stderr and "notes.txt" in result.stderr

    n = 4
    mean = sum(losses) / n
    s = math.sqrt(sum((x - mean) ** 2 for x in losses) / (n - 1))
    t = (mean - 3.28) / (s / math.sqrt(n))
    p = stats.t.cdf(t, n - 1)
    assert abs(mean - 3.274) < 1e-12 and abs(s - math.sqrt(46e-6 / 3)) < 1e-12
    assert abs(stats.ttest_1samp(losses, 3.28, alternative="less").pvalue - p) < 1e-12

    fields, line = parse_group_line(result.stdout, str(group))
    assert int(fields["n"]) == 4
    assert float(fields["mean"]) == pytest.approx(mean, abs=1e-6)
    assert float(fields["std"]) == pytest.approx(s, abs=1e-6)
    assert float(fields["t"]) == pytest.approx(t, abs=1e-4)
    assert float(fields["p"]) == pytest.approx(p, rel=1e-4)
    assert "p >= 0.01" in line  # 0.027: not enough for a record

    for i in range(4):
        row = rf"^{re.escape(str(group / f'run{i}.txt'))}\s+{losses[i]}\s+0\.700\s+35\.00\s+20/20\s+33512\s*$"
        assert re.search(row, result.stdout, re.M)
    png = (tmp_path / "curves.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 1000


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
    assert "without a finite final val loss" in result.stderr
    fields, _ = parse_group_line(result.stdout, "(files)")
    assert fields["n"] == "1"


def test_fallback_student_t_cdf_matches_scipy():
    from scipy import stats

    module = load_tool_module()
    for df in range(1, 30):
        for t in (-40.0, -6.5, -3.0645, -1.0, -0.1, 0.0, 0.7, 2.0, 9.0):
            assert module.student_t_cdf(t, df) == pytest.approx(stats.t.cdf(t, df), abs=1e-12)


def test_parser_reads_header_hyperparameters_and_steps(tmp_path):
    module = load_tool_module()
    log = module.load_log(make_log(tmp_path / "run.txt", world_size=2, val_losses=(10.8, 5.0, 3.3),
                                   nvidia_smi=["line one", "  indented"]))
    assert log.header["world_size"] == "2" and log.header["gpu"] == "none"
    assert log.hparams == {"train_files": "data/fineweb10B/fineweb_train_*.bin", "num_iterations": "20",
                           "lr": "0.05"}
    assert log.nvidia_smi == ["line one", "  indented"]
    assert log.last("val_loss") == "3.3" and log.last("mfu") == "1.2%"
    assert log.peak_allocated_mib == 33512
    assert [row["step"] for row in log.steps if "val_loss" in row] == [0, 10, 20]


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
    assert result.stderr == f'error: {not_log} is not a run log (no "end of source" separator line)\n'
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.parametrize("command", ["extract", "rerun", "diff", "compare"])
def test_missing_file_is_one_line_error(tmp_path, command):
    missing = tmp_path / "nope.txt"
    args = [command, missing, missing] if command == "diff" else [command, missing]
    result = tool(*args)
    assert result.returncode == 2
    assert result.stderr == f"error: {missing}: no such file\n"


@pytest.mark.parametrize("option", ["-o", "--png"])
def test_unwritable_output_is_one_line_error(tmp_path, option):
    log = make_log(tmp_path / "run.txt")
    command = "extract" if option == "-o" else "compare"
    missing = tmp_path / "no such folder" / "out.png"
    result = tool(command, log, option, missing)
    assert result.returncode == 2
    assert result.stderr == f"error: {missing}: No such file or directory\n"


def test_folder_without_logs_is_an_error(tmp_path):
    (tmp_path / "empty").mkdir()
    result = tool("compare", tmp_path / "empty")
    assert result.returncode == 2 and result.stderr.startswith("error:") and "Traceback" not in result.stderr


# ----------------------------------------------------------------------------------------------
# Part B: real tiny CPU runs of the track scripts

TINY_ARGS = [
    "--device=cpu", "--compile=False", "--num_iterations=4", "--val_loss_every=2", "--val_tokens=8192",
    "--val_seq_len=2048", "--train_seq_len=1024", "--grad_accum_steps=1", "--model_dim=64",
    "--num_layers=6", "--num_heads=2", "--head_dim=32", "--window_pattern=LSSSSL", "--warmup_steps=1",
]


def write_shard(path, tokens):
    header = np.zeros(256, dtype="<i4")
    header[:3] = (20240520, 1, len(tokens))
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype="<u2").tobytes())


def random_documents(rng, ntokens):
    tokens = []
    while len(tokens) < ntokens:
        tokens.append(50256)
        tokens.extend(rng.integers(0, 50256, size=int(rng.integers(20, 700))).tolist())
    return tokens[:ntokens]


@pytest.fixture(scope="module")
def tiny_shards(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shards")
    rng = np.random.default_rng(0)
    write_shard(folder / "t_train_000001.bin", random_documents(rng, 1 << 16))
    write_shard(folder / "t_val_000000.bin", random_documents(rng, 1 << 14))
    return folder


def losses(log_path):
    """Every (step, kind, loss) of a log, kind being val_loss or train_loss."""
    steps = load_tool_module().load_log(log_path).steps
    return [(row["step"], key, row[key]) for row in steps for key in ("val_loss", "train_loss") if key in row]


def launcher(world_size):
    """How to start a script with this interpreter: plain python, or torchrun for several processes."""
    if world_size == 1:
        return [sys.executable]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={world_size}"]


@pytest.mark.parametrize("world_size", [1, 2])
@pytest.mark.parametrize("script", ["train_gpt.py", "train_gpt_medium.py"])
def test_real_run_extracts_and_reruns_to_the_same_loss(tmp_path, tiny_shards, script, world_size):
    if not (REPO / script).exists():
        pytest.skip(f"{script} is not in the repository yet")
    logs = tmp_path / "logs"
    args = [*TINY_ARGS, f"--train_files={tiny_shards}/t_train_*.bin", f"--val_files={tiny_shards}/t_val_*.bin",
            f"--logs_dir={logs}"]
    first = subprocess.run([*launcher(world_size), script, *args], cwd=REPO, capture_output=True, text=True,
                           timeout=900)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    (log,) = logs.glob("*.txt")

    extracted = tmp_path / "extracted" / script
    extracted.parent.mkdir()
    result = tool("extract", log, "-o", extracted)
    assert result.returncode == 0, result.stderr
    assert extracted.read_bytes() == (REPO / script).read_bytes()
    command = shlex.split(result.stdout.strip())
    prefix = ["python"] if world_size == 1 else ["torchrun", "--standalone", f"--nproc_per_node={world_size}"]
    assert command == [*prefix, str(extracted), *args]

    second = subprocess.run([*launcher(world_size), *command[len(prefix):]], cwd=tmp_path, capture_output=True,
                            text=True, timeout=900)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    (new_log,) = [p for p in logs.glob("*.txt") if p != log]
    assert losses(log)[-1][1] == "val_loss"
    assert losses(new_log) == losses(log)
    assert load_tool_module().load_log(new_log).source == (REPO / script).read_bytes()
