"""train_gpt_medium.py end to end on CPU: 2 ranks == 1 rank with 2 micro-steps, loss falls, log holds the source."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from unittest.mock import ANY

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPT = REPO_ROOT / "train_gpt_medium.py"
sys.path.insert(0, str(REPO_ROOT / "data"))
import shards  # noqa: E402

TINY = ["--device=cpu", "--compile=false", "--model_dim=64", "--num_heads=2", "--head_dim=32", "--train_seq_len=256",
        "--val_seq_len=256", "--val_tokens=1024", "--num_iterations=4", "--val_loss_every=2"]
VAL_LINE = re.compile(r"^step:(\d+)/4 val_loss:(\S+) train_time:\S+", re.MULTILINE)
TRAIN_LINE = re.compile(r"^step:(\d+)/4 train_loss:(\S+) train_time:\S+", re.MULTILINE)


def documents(rng, n: int) -> np.ndarray:
    """Documents of skewed tokens from a small vocabulary: easy to learn a little of in a few steps."""
    parts, total = [], 0
    while total < n:
        length = int(rng.integers(60, 400))
        parts.append(np.concatenate([[shards.EOT], rng.zipf(1.5, length - 1).clip(1, 3000)]))
        total += length
    return np.concatenate(parts)[:n]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same training as 2 processes x 1 micro-step and as 1 process x 2 micro-steps (with a profile)."""
    root = tmp_path_factory.mktemp("medium_run")
    rng = np.random.default_rng(0)
    shards.write_shard(root / "run_train_000001.bin", documents(rng, 1 << 15))
    shards.write_shard(root / "run_val_000000.bin", documents(rng, 4096))
    data = [f"--train_files={root}/run_train_*.bin", f"--val_files={root}/run_val_*.bin", f"--logs_dir={root}/logs"]
    launchers = {"two_ranks": ([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"],
                               ["--grad_accum_steps=1", "--warmup_steps=1"]),
                 "one_rank": ([sys.executable], ["--grad_accum_steps=2", "--warmup_steps=2", "--profile_steps=1"])}
    results = {}
    for name, (launcher, extra) in launchers.items():  # one thread per process, as torchrun sets it
        result = subprocess.run([*launcher, str(SCRIPT), *TINY, *data, *extra, f"--run_id={name}"], cwd=root,
                                capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        results[name] = (result, (root / "logs" / f"{name}.txt").read_bytes())
    return results


def val_losses(log: bytes) -> dict:
    return {int(step): float(loss) for step, loss in VAL_LINE.findall(log.decode())}


def train_losses(log: bytes) -> dict:
    return {int(step): float(loss) for step, loss in TRAIN_LINE.findall(log.decode())}


def test_two_ranks_match_one_rank_with_gradient_accumulation(runs):
    two, one = val_losses(runs["two_ranks"][1]), val_losses(runs["one_rank"][1])
    assert "FutureWarning" not in runs["two_ranks"][0].stderr  # torch 2.13's renamed collectives warned per process
    assert sorted(two) == sorted(one) == [0, 2, 4]
    note = "note: a global batch of 1 process(es) x 2 micro-step(s), not the 8-GPU record's 8"
    assert note in runs["one_rank"][1].decode() and note in runs["one_rank"][0].stdout  # the console's too
    assert abs(two[4] - one[4]) / one[4] < 1e-4
    # the logged train loss is the global batch's: both ranks' sequences (rank 0's alone would pass step 1, where
    # every loss is uniform, and be ~1e-2 off after)
    two, one = train_losses(runs["two_ranks"][1]), train_losses(runs["one_rank"][1])
    assert sorted(two) == sorted(one) == [1, 2, 3, 4]
    assert all(abs(two[step] - one[step]) / one[step] < 1e-4 for step in one), (two, one)
    # the FLOPs a step, which the MFU divides by, are the global batch's: the same 2 sequences either way (a count of
    # one process's batch would put a run of several processes' MFU that many times too low)
    flops = [re.search(r" matmul params, (\S+) FLOPs per step$", log.decode(), re.MULTILINE).group(1)
             for _, log in (runs["two_ranks"], runs["one_rank"])]
    assert flops[0] == flops[1]


def test_validation_loss_falls(runs):
    losses = val_losses(runs["one_rank"][1])
    assert losses[0] == pytest.approx(np.log(50304), abs=1e-3)  # zero-initialised head: uniform
    assert losses[4] < losses[2] < losses[0] - 0.2


def test_the_first_train_loss_is_uniform_over_the_padded_vocabulary(runs):
    """Zero-initialised head: step 1's loss (the mean over the ranks, or over both micro-steps) is log(50304) to
    the printed precision."""
    for name, (_, log) in runs.items():
        train = [(int(step), float(loss)) for step, loss in TRAIN_LINE.findall(log.decode())]
        assert [step for step, _ in train] == [1, 2, 3, 4], name
        assert train[0][1] == round(np.log(50304), 4), (name, train)


def test_log_starts_with_the_exact_source_then_the_header(runs):
    source = SCRIPT.read_bytes()
    for name, (_, log) in runs.items():
        separator = f"==================== end of source: train_gpt_medium.py, {len(source)} bytes "
        head, _, rest = log.partition(separator.encode())
        assert head == source
        header = rest.decode().splitlines()[1:]
        launcher = "torchrun --standalone --nproc_per_node=2" if name == "two_ranks" else "python"
        assert header[2].startswith(f"command: {launcher} ")
        argv = json.loads(header[3].removeprefix("argv: "))  # the arguments as the process got them, quoted as JSON
        assert header[3].startswith("argv: [") and argv[0] == str(SCRIPT) and argv[-1] == f"--run_id={name}"
        assert "--model_dim=64" in argv
        assert f"world_size: {2 if name == 'two_ranks' else 1}" in header
        assert "  num_layers: 16" in header and "  compile: false" in header


def test_console_and_log_explain_the_time(runs):
    result, log = runs["one_rank"]
    text = log.decode()
    assert re.search(r"^startup: model and optimizers built at [\d.]+s; [\d,]+ matmul params, [\d.e+]+ FLOPs per step$",
                     text, re.MULTILINE)
    assert re.search(r"^step:4/4 val_loss:\S+ train_time:\d+ms step_avg:[\d.]+ms tokens/s:\d+ mfu:[\d.]+%$", text,
                     re.MULTILINE)
    assert re.search(r"^time: startup [\d.]+s, training [\d.]+s, validation [\d.]+s, total [\d.]+s$", text,
                     re.MULTILINE)
    # the benchmark's start-up time, stamped by the script after the step-0 validation, before step 1 runs
    first = re.search(r"^startup: first timed step at ([\d.]+)s$", text, re.MULTILINE)
    assert first and text.index("step:0/4 val_loss") < first.start() < text.index("step:1/4 train_loss")
    ready = re.search(r"^startup: settings and data checked, log opened at ([\d.]+)s$", text,
                      re.MULTILINE)
    assert ready and float(ready.group(1)) <= float(first.group(1))
    profile = text[text.index("profile of warmup steps 2-2:"):text.index("warmup: 2 steps")]
    assert "Self CPU" in profile and "aten::mm" in profile
    assert "profile of" not in result.stdout  # the table stays in the log
    parts = re.search(r"^warmup parts: (.*)$", text, re.MULTILINE)  # the warmup's time, part by part
    assert parts and re.fullmatch(r"step 1 [\d.]+s \(compiling 0\.0s\), steps 2-2 profiled [\d.]+s \(compiling "
                                  r"0\.0s\), validation [\d.]+s \(compiling 0\.0s\), state restored [\d.]+s "
                                  r"\(compiling 0\.0s\)", parts.group(1)), parts
    assert "step:4/4 val_loss" in result.stdout


@pytest.mark.parametrize("val_loss_every", [0, 2])
def test_a_non_finite_stop_counts_its_steps_in_the_time_line(tmp_path, val_loss_every):
    """train() returns at the non-finite step with the clock running; the time line used to leave those steps out
    (training 0.0s after 3 s of steps). The stop's line also goes to the error file torchrun reads for its summary.
    Step 1's update blows the head up, so step 2's train loss is NaN: read in the loop once step 3 is queued (no
    validation), or at step 2's validation, which it stops before (read there and not acted on, the run validated the
    NaN model and stopped on its validation loss instead)."""
    rng = np.random.default_rng(1)
    shards.write_shard(tmp_path / "nan_train_000001.bin", documents(rng, 1 << 15))
    shards.write_shard(tmp_path / "nan_val_000000.bin", documents(rng, 4096))
    result = subprocess.run([sys.executable, str(SCRIPT), *TINY, f"--train_files={tmp_path}/nan_train_*.bin",
                             f"--val_files={tmp_path}/nan_val_*.bin", f"--logs_dir={tmp_path}", "--run_id=nan",
                             "--grad_accum_steps=1", "--warmup_steps=0", f"--val_loss_every={val_loss_every}",
                             "--head_lr=1e38"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "OMP_NUM_THREADS": "1",
                                 "TORCHELASTIC_ERROR_FILE": str(tmp_path / "error.json")})
    text = (tmp_path / "nan.txt").read_text()
    assert result.returncode == 1 and "stopped: non-finite train loss at step" in text, text[-2000:]
    stopped = re.search(r"^stopped: .*$", text, re.MULTILINE).group(0)
    assert stopped == "stopped: non-finite train loss at step 2; lower the learning rates or check the data"
    assert "step:2/4 val_loss" not in text
    assert json.loads((tmp_path / "error.json").read_text()) == {"message": stopped, "timestamp": ANY, "shown": True}
    last_step_ms = int(re.findall(r"^step:\d+/4 train_loss:\S+ train_time:(\d+)ms", text, re.MULTILINE)[-1])
    training_s = float(re.search(r"^time: startup [\d.]+s, training ([\d.]+)s", text, re.MULTILINE).group(1))
    assert training_s >= last_step_ms / 1000 - 0.05
