"""train_gpt.py end to end on CPU: real runs on generated shards, with torchrun (2 processes) and without.

Three runs in all (the whole suite has to stay within CI's time): a 2-process torchrun run with one warmup
step, the same run as 1 process with 2 accumulation steps and no warmup, and a run whose lr blows up; and, without
a run, how both tracks split the validation tokens over ranks."""

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPT = REPO_ROOT / "train_gpt.py"
sys.path.insert(0, str(REPO_ROOT / "data"))
from shards import write_shard  # noqa: E402
from stand_ins import popen_that_takes_ctrl_c  # noqa: E402

EOT = 50256
TINY = ["--device=cpu", "--compile=false", "--model_dim=64", "--num_heads=2", "--head_dim=32",
        "--train_seq_len=256", "--val_seq_len=256", "--val_tokens=1024", "--num_iterations=6", "--val_loss_every=3"]
LINE = re.compile(r"^step:(\d+)/(\d+) (train_loss|val_loss):(\S+)", re.M)


def structured_documents(rng, phrases, ntokens):
    """Documents made of phrases drawn from a small set, so there is something to learn within a few steps."""
    tokens = []
    while len(tokens) < ntokens:
        tokens.append(EOT)
        for _ in range(int(rng.integers(4, 80))):
            tokens.extend(phrases[int(rng.integers(len(phrases)))])
    return np.array(tokens[:ntokens])


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("e2e_shards")
    rng = np.random.default_rng(0)
    phrases = [rng.integers(0, 2000, size=int(rng.integers(3, 9))).tolist() for _ in range(64)]
    write_shard(folder / "e2e_train_000001.bin", structured_documents(rng, phrases, 120_000))
    write_shard(folder / "e2e_train_000002.bin", structured_documents(rng, phrases, 80_000))
    write_shard(folder / "e2e_val_000000.bin", structured_documents(rng, phrases, 8_000))
    return [f"--train_files={folder}/e2e_train_*.bin", f"--val_files={folder}/e2e_val_*.bin"]


def run(args, processes=1, cwd=REPO_ROOT):
    unset = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT", "CUBLASLT_WORKSPACE_SIZE",
             "TORCH_CUBLASLT_UNIFIED_WORKSPACE")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    launcher = [sys.executable]
    if processes > 1:
        launcher += ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"]
    return subprocess.run([*launcher, str(SCRIPT), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def losses(text, kind):
    return [(int(step), float(value)) for step, _, k, value in LINE.findall(text) if k == kind]


def log_of(logs_dir, run_id):
    return (logs_dir / f"{run_id}.txt").read_bytes()


@pytest.fixture(scope="module")
def two_process_run(data, tmp_path_factory):
    logs = tmp_path_factory.mktemp("logs_two")
    result = run([*TINY, *data, "--grad_accum_steps=1", "--warmup_steps=2", "--profile_steps=1", f"--logs_dir={logs}",
                  "--run_id=two"], processes=2)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result, log_of(logs, "two")


@pytest.fixture(scope="module")
def one_process_run(data, tmp_path_factory):
    logs = tmp_path_factory.mktemp("logs_one")
    result = run([*TINY, *data, "--grad_accum_steps=2", "--warmup_steps=0", f"--logs_dir={logs}", "--run_id=one"])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result, log_of(logs, "one")


def test_two_processes_lower_the_val_loss(two_process_run):
    result, log = two_process_run
    assert "FutureWarning" not in result.stderr  # torch 2.13's renamed collectives warned once per process
    val = losses(log.decode(), "val_loss")
    assert [step for step, _ in val] == [0, 3, 6]
    assert val[0][1] == pytest.approx(math.log(50304), abs=2e-4)  # zero lm_head: uniform over the vocabulary
    assert val[-1][1] < val[0][1] - 0.5
    assert val[1][1] < val[0][1]
    train = losses(log.decode(), "train_loss")
    assert [step for step, _ in train] == [1, 2, 3, 4, 5, 6]
    assert all(math.isfinite(loss) for _, loss in train)
    assert train[0][1] == round(math.log(50304), 4)  # step 1's, the ranks' mean: as the val loss, to the print
    # rank 1 logs nothing: one copy of every line on the console
    assert result.stdout.count("log: ") == 1
    assert result.stdout.count("step:6/6 val_loss:") == 1
    assert "world_size: 2" in log.decode()
    assert "cublaslt: CUBLASLT_WORKSPACE_SIZE=0 TORCH_CUBLASLT_UNIFIED_WORKSPACE=0" in log.decode()  # main set them
    assert "command: torchrun --standalone --nproc_per_node=2 " in log.decode()


def test_one_process_with_accumulation_reaches_the_same_loss(two_process_run, one_process_run):
    """Same global batch (2 sequences per step) dealt to 2 ranks or accumulated by one; the 2-process run also
    did two warmup steps first (one profiled), which must have been undone."""
    two = losses(two_process_run[1].decode(), "val_loss")
    one = losses(one_process_run[1].decode(), "val_loss")
    assert [step for step, _ in one] == [step for step, _ in two] == [0, 3, 6]
    for (_, a), (_, b) in zip(one, two):
        assert abs(a - b) / b < 1e-4, (one, two)
    assert "world_size: 1" in one_process_run[1].decode()
    # step 1's loss is the mean over both micro-steps' tokens: log(padded vocabulary) to the printed precision
    assert losses(one_process_run[1].decode(), "train_loss")[0] == (1, round(math.log(50304), 4))
    # every step's: the 2 ranks' mean (rank 0's alone would pass step 1, where every loss is uniform)
    two_train, one_train = (losses(run[1].decode(), "train_loss") for run in (two_process_run, one_process_run))
    assert [step for step, _ in one_train] == [step for step, _ in two_train] == [1, 2, 3, 4, 5, 6]
    # (8e-5 apart at most here; rank 0's alone was 2e-3 to 8e-3 apart at steps 2-4 and 6)
    assert all(abs(a - b) / b < 5e-4 for (_, a), (_, b) in zip(one_train, two_train)), (one_train, two_train)
    # the FLOPs a step, which the MFU divides by, are the global batch's: the same 2 sequences either way
    flops = [re.search(r" matmul params, (\S+) FLOPs per step$", run[1].decode(), re.MULTILINE).group(1)
             for run in (one_process_run, two_process_run)]
    assert flops[0] == flops[1]
    assert "step:6/6 val_loss:" in one_process_run[0].stdout  # console lines too


@pytest.mark.parametrize("which", ["one", "two"])
def test_source_cut_from_the_log_is_the_script(which, one_process_run, two_process_run):
    log = (one_process_run if which == "one" else two_process_run)[1]
    source = SCRIPT.read_bytes()
    separator = f"{'=' * 20} end of source: train_gpt.py, {len(source)} bytes {'=' * 20}\n".encode()
    assert log.count(separator) == 1
    cut = log[:log.index(separator)]
    assert cut == (source if source.endswith(b"\n") else source + b"\n")
    assert log[log.index(separator) + len(separator):].startswith(f"run_id: {which}\n".encode())


def test_non_finite_loss_stops_the_run_at_that_step(data, tmp_path, monkeypatch):
    logs = tmp_path / "logs"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(tmp_path / "error.json"))  # as torchrun sets it
    result = run([*TINY, *data, "--num_iterations=10", "--val_loss_every=0", "--warmup_steps=0",
                  "--grad_accum_steps=1", "--adam_lr=1e30", f"--logs_dir={logs}", "--run_id=blowup"])
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    log = log_of(logs, "blowup").decode()
    train = losses(log, "train_loss")
    bad = [step for step, loss in train if not math.isfinite(loss)]
    assert bad, train
    assert bad[0] == train[-1][0] < 10  # the first non-finite step is the last one run, before the end
    assert all(math.isfinite(loss) for _, loss in train[:-1])
    stopped = f"stopped: non-finite train loss at step {bad[0]}; lower the learning rates or check the data"
    assert log.rstrip("\n").splitlines()[-2] == stopped  # then the time line, whose training counts every step run
    last_step_ms = int(re.findall(r"^step:\d+/10 train_loss:\S+ train_time:(\d+)ms", log, re.MULTILINE)[-1])
    training_s = float(re.search(r"^time: startup [\d.]+s, training ([\d.]+)s", log, re.MULTILINE).group(1))
    assert training_s >= last_step_ms / 1000 - 0.05
    assert stopped in result.stdout
    error_file = json.loads((tmp_path / "error.json").read_text())
    assert error_file["message"] == stopped and error_file["shown"] is True  # torchrun's summary shows it, rank 0 too
    assert losses(log, "val_loss") == []  # no final validation of a broken model


def test_profiled_warmup_step_writes_an_op_table_to_the_log_only(two_process_run):
    result, log = two_process_run
    text = log.decode().split(" end of source: ")[-1]
    table = text[text.index("profile of warmup steps 2-2:"):text.index("warmup: 2 steps")]
    assert "Self CPU" in table and "aten::mm" in table
    assert "profile of warmup" not in result.stdout
    # where the warmup's time went, part by part (nothing compiles here: --compile=false)
    parts = re.search(r"^warmup parts: (.*)$", text, re.MULTILINE)
    assert parts and "warmup parts" not in result.stdout
    assert re.fullmatch(r"step 1 [\d.]+s \(compiling 0\.0s\), steps 2-2 profiled [\d.]+s \(compiling 0\.0s\), "
                        r"validation [\d.]+s \(compiling 0\.0s\), state restored [\d.]+s \(compiling 0\.0s\)",
                        parts.group(1)), parts.group(1)


def test_a_global_batch_other_than_the_records_is_noted_on_the_console_and_in_the_log(one_process_run,
                                                                                     two_process_run):
    """Both runs step over 2 sequences, not the record's 8 (the 8-GPU batch: world size x micro-steps = 8)."""
    for (result, log), shape in [(one_process_run, "1 process(es) x 2 micro-step(s)"),
                                 (two_process_run, "2 process(es) x 1 micro-step(s)")]:
        note = (f"note: a global batch of {shape}, not the 8-GPU record's 8: its losses do not compare with the "
                "record's")
        assert note in result.stdout.splitlines() and note in log.decode().splitlines()


def test_log_stamps_the_first_timed_step_after_the_step_0_validation(one_process_run):
    """The benchmark's start-up time (process start to the first timed step) comes from the script itself."""
    text = one_process_run[1].decode().split(" end of source: ")[-1]
    first = re.search(r"^startup: first timed step at ([\d.]+)s$", text, re.MULTILINE)
    assert first, text[-2000:]
    assert text.index("step:0/6 val_loss") < first.start() < text.index("step:1/6 train_loss")
    warmup_end = float(re.search(r"training starts at ([\d.]+)s", text).group(1))
    assert float(first.group(1)) >= warmup_end
    ready = re.search(r"^startup: settings and data checked, log opened at ([\d.]+)s$", text,
                      re.MULTILINE)
    assert ready and float(ready.group(1)) <= warmup_end
    built = re.search(r"^startup: model and optimizers built at ([\d.]+)s; ([\d,]+) matmul params, ([\d.e+]+) FLOPs "
                      "per step$", text, re.MULTILINE)  # the sizes the MFU of the validation lines divides by
    assert built and float(ready.group(1)) <= float(built.group(1)) <= warmup_end
    assert int(built.group(2).replace(",", "")) > 0 and float(built.group(3)) > 0
    # the closing time line: the clock's training seconds are those of the last step line
    times = re.search(r"^time: startup ([\d.]+)s, training ([\d.]+)s, validation ([\d.]+)s, total ([\d.]+)s$", text,
                      re.MULTILINE)
    assert times, text[-2000:]
    startup, training, validation, total = map(float, times.groups())
    last_ms = int(re.findall(r"^step:6/6 val_loss:\S+ train_time:(\d+)ms", text, re.MULTILINE)[-1])
    assert startup == warmup_end and training == pytest.approx(last_ms / 1000, abs=0.051)
    # each printed to 0.1 s: the parts' three roundings and the total's can leave the sum up to 0.2 s above it
    assert validation > 0 and round(startup + training + validation - total, 6) <= 0.2


@pytest.mark.parametrize("script_name", ["train_gpt", "train_gpt_medium"])
def test_several_processes_without_a_meeting_point_is_one_line_from_each(data, tmp_path, script_name):
    """WORLD_SIZE exported by hand, without torchrun's MASTER_PORT: it used to pass the checks, then end in the
    process group's ValueError traceback (or wait for ranks that never come)."""
    env = {k: v for k, v in os.environ.items() if k not in ("LOCAL_RANK", "MASTER_PORT")}
    env.update(RANK="1", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1")
    result = subprocess.run([sys.executable, str(REPO_ROOT / f"{script_name}.py"), *TINY, *data,
                             f"--logs_dir={tmp_path}"], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                            timeout=600)
    assert (result.returncode, result.stderr) == (2, "error: WORLD_SIZE=2 without MASTER_PORT, which torchrun sets "
                                                     "for the processes to meet; launch with ./run.sh or torchrun, or "
                                                     "unset WORLD_SIZE for one process\n")


@pytest.mark.parametrize("script_name, blowup", [("train_gpt", "--adam_lr=1e30"),
                                                  ("train_gpt_medium", "--head_lr=1e38")])
def test_a_non_finite_validation_loss_stops_the_run_at_that_step(data, tmp_path, script_name, blowup):
    """It used to be logged and trained on (a NaN model validated at every step to the end, exit status 0)."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    result = subprocess.run([sys.executable, str(REPO_ROOT / f"{script_name}.py"), *TINY, *data, "--num_iterations=10",
                             "--val_loss_every=1", "--warmup_steps=0", "--grad_accum_steps=1", blowup,
                             f"--logs_dir={tmp_path}", "--run_id=nan_val"],
                            cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    log = (tmp_path / "nan_val.txt").read_text()
    validation, train = losses(log, "val_loss"), losses(log, "train_loss")
    step = validation[-1][0]
    assert result.returncode == 1 and not math.isfinite(validation[-1][1]) and step < 10, log[-2000:]
    assert all(math.isfinite(loss) for _, loss in validation[:-1] + train) and train[-1][0] == step
    stopped = f"stopped: non-finite validation loss at step {step}; lower the learning rates or check the data"
    assert log.splitlines()[-2] == stopped and log.splitlines()[-1].startswith("time: ")
    assert stopped in result.stdout and "Traceback" not in result.stderr


@pytest.mark.parametrize("script_name, signal_name", [("train_gpt", "SIGINT"), ("train_gpt", "SIGTERM"),
                                                      ("train_gpt_medium", "SIGTERM")])
def test_a_signal_stops_the_run_with_one_line_on_the_console_and_in_the_log(data, tmp_path, script_name,
                                                                              signal_name):
    """Ctrl-C (SIGINT) or SIGTERM (timeout, a scheduler) once the log is open: one line on the console and as the
    log's last line, exit status 128 + the signal, as a shell gives. Ctrl-C used to print a traceback and end the log
    with "error: KeyboardInterrupt: "; SIGTERM ended it with no line at all."""
    import signal

    signum = getattr(signal, signal_name)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    process = popen_that_takes_ctrl_c([sys.executable, str(REPO_ROOT / f"{script_name}.py"), *TINY, *data,
                                       "--num_iterations=400", "--grad_accum_steps=1", f"--logs_dir={tmp_path}",
                                       "--run_id=stopped"],
                                      cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in process.stdout:
        if line.startswith("log: "):
            break
    # A signal whose exception lands in an import's weakref callback (torch's lazy import of torch._dynamo while the
    # optimizers are built) is swallowed by CPython ("Exception ignored in ... cb"): as a user would, send it again.
    for _ in range(15):
        process.send_signal(signum)
        try:
            _, stderr = process.communicate(timeout=20)
            break
        except subprocess.TimeoutExpired:
            continue
    else:
        process.kill()
        pytest.fail(f"the run went on through 15 {signal_name}s, 20 s apart")
    assert process.returncode == 128 + signum
    assert [line for line in stderr.splitlines() if not line.startswith("Exception ignored")][-1:] == [
        f"error: stopped by {signal_name}"]
    assert "Traceback" not in stderr.split("Exception ignored")[0]
    assert (tmp_path / "stopped.txt").read_text().splitlines()[-1] == f"error: stopped by {signal_name}"


@pytest.mark.parametrize("script_name", ["train_gpt", "train_gpt_medium"])
def test_validation_gives_each_rank_its_own_sequences_and_together_every_token(script_name, monkeypatch):
    """4 sequences of 8 over 2 ranks: rank r reads sequences r and r + 2, each with its next token as the last
    target; together they read every token once, and each rank's mean is averaged across ranks."""
    sys.path.insert(0, str(REPO_ROOT))
    script = __import__(script_name)
    args = script.Hyperparameters(val_tokens=32, val_seq_len=8)
    val_tokens = torch.arange(33, dtype=torch.int32)
    reduced = []
    monkeypatch.setattr(script.dist, "all_reduce", lambda tensor, op: reduced.append(op))

    class FirstToken(torch.nn.Module):
        """A stand-in model whose loss is its sequence's first token; it records what it reads."""

        def __init__(self):
            super().__init__()
            self.read = []

        def forward(self, inputs, targets, window):
            assert torch.equal(targets, inputs + 1) and inputs.numel() == 8 and not self.training
            assert window is given  # the window evaluate was handed
            self.read.append(int(inputs[0]))
            return inputs[0].float()

    seen, given = [], torch.tensor(3)
    for rank in range(2):
        model = FirstToken()
        loss = script.evaluate(model, val_tokens, args, rank, 2, given)
        assert model.read == [8 * rank, 8 * (rank + 2)] and loss == sum(model.read) / 2 and model.training
        seen += model.read
    assert sorted(seen) == [0, 8, 16, 24] and reduced == [script.dist.ReduceOp.AVG] * 2
    model = FirstToken()  # the warmup's validation: one sequence a rank, to compile the path before the clock starts
    assert script.evaluate(model, val_tokens, args, 1, 2, given, max_steps=1) == 8 and model.read == [8]
    model = FirstToken()  # one process: every sequence, its own mean, no all-reduce (no process group to join)
    assert script.evaluate(model, val_tokens, args, 0, 1, given) == 12 and model.read == [0, 8, 16, 24]
    assert reduced == [script.dist.ReduceOp.AVG] * 3


@pytest.mark.parametrize("script_name", ["train_gpt", "train_gpt_medium"])
def test_validation_runs_the_model_without_autograd(script_name):
    """Validation builds no autograd graph: with one, the running total would hold every sequence's activations
    until the last (memory growing with --val_tokens, for a backward that never comes)."""
    sys.path.insert(0, str(REPO_ROOT))
    script = __import__(script_name)

    class ScaledMean(torch.nn.Module):
        """A stand-in model with a weight, whose loss is its weight times its sequence's mean token; it records
        whether autograd was on."""

        def __init__(self):
            super().__init__()
            self.weight, self.grad_enabled = torch.nn.Parameter(torch.ones(())), []

        def forward(self, inputs, targets, window):
            self.grad_enabled.append(torch.is_grad_enabled())
            return self.weight * inputs.float().mean()

    model, args = ScaledMean(), script.Hyperparameters(val_tokens=32, val_seq_len=8)
    assert script.evaluate(model, torch.arange(33, dtype=torch.int32), args, 0, 1, torch.tensor(1)) == 15.5  # 0-31
    assert model.grad_enabled == [False] * 4
