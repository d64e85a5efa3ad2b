"""Seconds dynamo spends tracing a track's training forward (and its autograd.Functions' backwards), with the
"eager" backend so that neither AOTAutograd nor inductor runs: the `bytecode_tracing` share of every start, warm
ones too. Tracing is host work, so the CPU and a tiny model show where it goes.

python perf/trace_time.py [short|medium] [--repeats=N] [--top=K] [--script=PATH] [overrides...]  ->  the seconds of
each repeat (a fresh trace each, in one process) and their minimum, then the K functions dynamo spent longest
inlining (inclusive seconds, calls, name:line) in the last repeat. --script times another copy of the track's
script (e.g. a variant under test) with the same model settings. --help lists the options.
"""
import collections
import sys
import time
from pathlib import Path

import torch
from torch._dynamo import symbolic_convert

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import printed_help  # noqa: E402
from track_scripts import SCRIPTS, load_script  # noqa: E402

TINY = ["--device=cpu", "--model_dim=64", "--num_heads=2", "--head_dim=32", "--train_seq_len=256",
        "--val_seq_len=256"]
USAGE = f"""usage: python perf/trace_time.py [short|medium] [--repeats=N] [--top=K] [--script=PATH] [--name=value ...]
  short|medium   the track: short (train_gpt.py, the default) or medium (train_gpt_medium.py)
  --repeats=N    fresh traces to time in one process (default 3); the minimum is the result
  --top=K        the K functions dynamo spent longest inlining in the last repeat (default 10)
  --script=PATH  trace another copy of the track's script (e.g. a variant under test) with the same settings
  --name=value   any other setting goes to the track's script, over the tiny CPU model's
                 ({' '.join(TINY)});
                 `python train_gpt.py --help` (or train_gpt_medium.py) lists them"""


class InlineTimer:
    """Inclusive seconds and calls per function that dynamo inlines, while installed."""

    def __init__(self):
        self.seconds, self.calls = collections.Counter(), collections.Counter()
        self.original = symbolic_convert.InliningInstructionTranslator.inline_call_

    def __enter__(self):
        original, seconds, calls = self.original, self.seconds, self.calls

        def timed(translator, *args, **kwargs):
            code = translator.f_code
            name = f"{Path(code.co_filename).name}:{code.co_name}:{code.co_firstlineno}"
            start = time.perf_counter()
            try:
                return original(translator, *args, **kwargs)
            finally:
                seconds[name] += time.perf_counter() - start
                calls[name] += 1

        symbolic_convert.InliningInstructionTranslator.inline_call_ = timed
        return self

    def __exit__(self, *exc):
        symbolic_convert.InliningInstructionTranslator.inline_call_ = self.original


def trace_seconds(script, overrides: list[str], repeats: int) -> tuple[list[float], InlineTimer]:
    """Each repeat resets dynamo and traces the tiny model's training forward once (its first call)."""
    args = script.parse_args(TINY + overrides)
    torch.manual_seed(0)
    model = script.GPT(args)
    tokens = torch.randint(0, script.EOT_TOKEN, (args.train_seq_len + 1,))
    tokens[::50] = script.EOT_TOKEN  # a few documents
    window = torch.tensor(script.window_blocks_at(0, args), dtype=torch.int32)
    seconds = []
    for _ in range(repeats):
        torch._dynamo.reset()
        if hasattr(script, "trace_autograd_functions_as_one_call"):  # what the script does before torch.compile
            script.trace_autograd_functions_as_one_call()
        compiled = torch.compile(model, backend="eager", dynamic=False)
        with InlineTimer() as timer:
            start = time.perf_counter()
            compiled(tokens[:-1], tokens[1:], window)
            seconds.append(time.perf_counter() - start)
    return seconds, timer


class UsageError(ValueError):
    """A bad argument of the tool's own; the message names it and the fix."""


def parse_arguments(argv: list[str]) -> tuple[str, dict[str, str], list[str]]:
    """(track, the tool's options, the overrides for the track's script) from the command line."""
    track = "short"
    if argv and not argv[0].startswith("-"):
        track, *argv = argv
        if track not in SCRIPTS:
            raise UsageError(f"unknown track {track!r}: the first argument is {' or '.join(SCRIPTS)} (see --help)")
    options = {"repeats": "3", "top": "10", "script": str(SCRIPTS[track])}
    overrides = []
    for arg in argv:
        name, _, value = arg.removeprefix("--").partition("=")
        if not arg.startswith("--") or name not in options:
            overrides.append(arg)
        elif name in ("repeats", "top") and not (value.isdigit() and int(value) > 0):
            raise UsageError(f"--{name} takes a whole number of at least 1, e.g. --{name}={options[name]}; got {arg!r}")
        elif name == "script" and not Path(value).is_file():
            raise UsageError(f"--script={value}: no such file; give the path of a copy of the track's script")
        else:
            options[name] = value
    return track, options, overrides


def main(argv: list[str]) -> int:
    if printed_help(argv, USAGE):
        return 0
    try:
        track, options, overrides = parse_arguments(argv)
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    script = load_script(Path(options["script"]))
    try:
        seconds, timer = trace_seconds(script, overrides, int(options["repeats"]))
    except script.SetupError as error:  # a bad override: the script's own one-line message
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{track}: tracing {min(seconds):.2f} s (min of {' '.join(f'{s:.2f}' for s in seconds)})")
    for name, spent in timer.seconds.most_common(int(options["top"])):
        print(f"{spent:8.2f} s {timer.calls[name]:5d} x {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
