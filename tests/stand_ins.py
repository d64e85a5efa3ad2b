"""Stand-ins for a model and optimizers that record what a training step hands them (both tracks' tests)."""

import torch


class ScheduleRecorder(torch.optim.Optimizer):
    """A stand-in optimizer: each step() records every group's (lr, momentum), momentum None where the group has
    none (as ShardedAdam's groups), and changes nothing."""

    def __init__(self, groups):
        super().__init__(groups, {})
        self.seen = []
        for group in self.param_groups:
            group["initial_lr"] = group["lr"]

    def step(self):
        self.seen.append([(group["lr"], group.get("momentum")) for group in self.param_groups])


class WindowRecorder(torch.nn.Module):
    """A stand-in model, loss (a + b + c) x sum(inputs), that records the window tensor of each micro-step."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = (torch.nn.Parameter(torch.ones(())) for _ in range(3))
        self.windows = []

    def forward(self, inputs, targets, window):
        self.windows.append(window)
        return (self.a + self.b + self.c) * inputs.float().sum()
