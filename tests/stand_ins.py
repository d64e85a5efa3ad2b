"""Stand-ins for a model and optimizers that record what a training step hands them, and the check of a track's
train_step built on them (both tracks' tests); stand-in shard tokens; a run started to be stopped by Ctrl-C; a
folder this user cannot enter; records/tool.py loaded as a module."""

import importlib.util
import itertools
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
from shards import EOT  # noqa: E402


def documents(n: int) -> np.ndarray:
    """n random GPT-2 token ids in documents of 300 tokens (an end of text at 0, 300, 600, ...), the same every call."""
    tokens = np.random.default_rng(0).integers(0, 50000, n)
    tokens[::300] = EOT
    return tokens


class ScheduleRecorder(torch.optim.Optimizer):
    """A stand-in optimizer: each step() records every group's (lr, momentum), momentum None where the group has
    none (as ShardedAdam's groups), and the gradient of each parameter it holds; it changes nothing."""

    def __init__(self, groups):
        super().__init__(groups, {})
        self.seen, self.grads = [], []
        for group in self.param_groups:
            group["initial_lr"] = group["lr"]

    def step(self):
        self.seen.append([(group["lr"], group.get("momentum")) for group in self.param_groups])
        self.grads.append([p.grad.item() for group in self.param_groups for p in group["params"]])


class WindowRecorder(torch.nn.Module):
    """A stand-in model, loss (a + b + c) x sum(inputs), that records the window tensor of each micro-step."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = (torch.nn.Parameter(torch.ones(())) for _ in range(3))
        self.windows, self.casts = [], []

    def forward(self, inputs, targets, window, *casts):
        self.windows.append(window)
        self.casts.extend(casts)
        return (self.a + self.b + self.c) * inputs.float().sum()

    def take_table_grads(self):
        """GPT's hand-over of its embedding tables' summed gradients: this model has no tables."""


def check_train_step_applies_the_schedules_of_its_own_step(script, adam_lrs: tuple, muon_lr: float,
                                                          takes_casts: bool = False):
    """Runs script's train_step over a 6-step schedule's steps 0-6 (cooldown over the last half, momentum warmup
    over 4 steps, 2 micro-steps of 128 tokens) with the stand-ins: every step sets each group's lr to initial_lr x
    lr_multiplier(step) and Muon's momentum to muon_momentum(step) before the optimizers step, and feeds each
    micro-step the window tensor of window_blocks_at(step). The optimizers see the mean of the micro-steps'
    gradients, the gradient of the whole batch's mean loss (a sum would scale every Adam step's lr with the count).
    takes_casts (track 1): train_step makes the weights' casts once a step, after the previous step's optimizer
    steps and before its own micro-steps, and gives both micro-steps those casts."""
    args = script.Hyperparameters(num_iterations=6, cooldown_frac=0.5, muon_momentum_warmup_steps=4,
                                  grad_accum_steps=2, train_seq_len=128)
    model = WindowRecorder()
    adam = ScheduleRecorder([dict(params=[model.a], lr=adam_lrs[0]), dict(params=[model.b], lr=adam_lrs[1])])
    muon = ScheduleRecorder([dict(params=[model.c], lr=muon_lr, momentum=0.95)])
    windows = script.window_tensors(args, torch.device("cpu"))
    batches = itertools.cycle([(torch.full((128,), value, dtype=torch.int32), torch.zeros(128, dtype=torch.int32))
                               for value in (1, 2)])  # the two micro-steps' losses differ
    steps = range(7)
    made_at = []  # (micro-steps run, optimizer steps taken) when each step's casts were made
    casts = [lambda: made_at.append((len(model.windows), len(muon.seen))) or len(made_at)] if takes_casts else []
    for step in steps:
        loss = script.train_step(model, [adam, muon], batches, step, args, windows, *casts)
        assert loss.item() == pytest.approx(4.5)  # per token: 3 x 128 and 3 x 256, over 2 x 128 tokens
        assert all(p.grad is None for p in model.parameters())
    assert adam.grads == [[192.0, 192.0]] * 7 and muon.grads == [[192.0]] * 7  # (128 + 256) / 2 each
    lr = [script.lr_multiplier(step, args) for step in steps]
    momentum = [script.muon_momentum(step, args) for step in steps]
    window = [script.window_blocks_at(step, args) for step in steps]
    # the window (and the momentum) tell every step apart; the lr changes over the cooldown only
    assert len(set(lr)) == 4 and len(set(momentum)) == 5 and len(set(window)) == 7
    assert adam.seen == [[(adam_lrs[0] * m, None), (adam_lrs[1] * m, None)] for m in lr]
    assert muon.seen == [[(muon_lr * m, mu)] for m, mu in zip(lr, momentum)]
    assert [int(got) for got in model.windows] == [w for w in window for _ in range(2)]  # both micro-steps
    if takes_casts:
        assert made_at == [(2 * step, step) for step in steps]
        assert model.casts == [step + 1 for step in steps for _ in range(2)]
    assert all(got is windows[int(got)] for got in model.windows)  # the prebuilt tensors, no copies


def popen_that_takes_ctrl_c(command: list[str], **kwargs) -> subprocess.Popen:
    """subprocess.Popen(command, **kwargs) with SIGINT at its default in the child. pytest started as a shell's
    background job (cmd &) has SIGINT ignored, and the run would inherit that (and keep it, as Python does); a
    handler set here is reset to the default in the child."""
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(command, **kwargs)
    finally:
        signal.signal(signal.SIGINT, inherited)


def deny_access(path, mode: int, monkeypatch):
    """os.access answers False for path where the mode asked holds any bit of mode, as for a user without that
    permission (the tests run as root, whom os.access grants everything)."""
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda asked, asked_mode: not (Path(asked) == Path(path) and asked_mode & mode)
                        and real_access(asked, asked_mode))


def deny_entry_below(folder: str, monkeypatch):
    """os.stat of any path below folder raises PermissionError, as where a folder on the way denies search permission
    (the tests run as root, who enters any folder). Returns the stand-in os.stat."""
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        if str(path).startswith(folder):
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    return stat


def records_tool():
    """records/tool.py (a script, not a package module) loaded afresh as the module records_tool."""
    spec = importlib.util.spec_from_file_location("records_tool", Path(__file__).resolve().parents[1] / "records" /
                                                  "tool.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
