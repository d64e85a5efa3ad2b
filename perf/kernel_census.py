"""Where a track's GPU time goes, by kind of kernel and by phase: the profile's `kernel ... ms in N calls: NAME [from
LAUNCHERS]` log lines (the script lists its 30 longest kernels; run through this tool it lists all of them) summed per
profiled step into categories, so that the many short kernels the 30 leave out are counted too.

python perf/kernel_census.py short|medium --profile_steps=N --logs_dir=D --run_id=R [script args...]  ->  the run
    (the track script's own main, every kernel listed), then the tables from its log D/R.txt. With --script=PATH: a
    version of the track's script (a branch's copy, e.g. perf/base/B.py) runs instead, its kernels counted as own.
python perf/kernel_census.py --log=PATH --steps=N  ->  the tables from an existing log of N profiled steps.
python perf/kernel_census.py --log=A --steps=N --compare=B  ->  A's tables, then B's kernels against A's: ms a
    profiled step by kernel name (inductor's trailing build number dropped: it shifts between versions of a script),
    the largest changes first (both logs of N profiled steps, e.g. a branch's against main's).
Each table line: ms a profiled step, share of the listed kernels' time, calls a step, the group's longest kernels.
--help prints this.
"""
import os
import re
import sys
from pathlib import Path
from typing import NamedTuple

import triton

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import option_values, usage_or_error  # noqa: E402
from track_scripts import SCRIPTS, load_script  # noqa: E402

LAUNCHER_DEPTH = 12  # callers named per kernel (the script's 4 can stop short of the step's part that launched it)
KERNEL_LINE = re.compile(r"kernel ([\d.]+) ms in (\d+) calls: (.+?)(?: \[from (.*)\])?$")  # ATen's names hold spaces


def script_kernels(versions: tuple = ()) -> set[str]:
    """The Triton kernels both track scripts and the given versions of them (loaded modules) define (their
    @triton.jit functions' names; under TRITON_INTERPRET=1 those are the interpreter's functions, which share the
    launch interface)."""
    modules = (*map(load_script, SCRIPTS.values()), *versions)
    return {name for module in modules for name, value in vars(module).items()
            if isinstance(value, triton.runtime.jit.KernelInterface)}


class KernelLine(NamedTuple):
    """One `kernel ...` log line: the kernel's kind and phase (below), total ms and calls, name and launchers."""
    kind: str
    phase: str
    ms: float
    calls: int
    name: str
    launchers: str


def kind_of(name: str, launchers: str, own_kernels: set[str]) -> str:
    if "flex_attention" in name:
        return "FlexAttention"
    if "aten::_scaled_mm" in launchers:
        return "cuBLAS FP8 GEMMs"
    if re.search(r"aten::(mm|addmm|bmm|baddbmm)\b", launchers):
        return "cuBLAS bf16 GEMMs"
    if name in own_kernels:
        return "the script's Triton kernels"
    if name.startswith("triton_poi"):
        return "inductor pointwise"
    if name.startswith(("triton_per", "triton_red")):
        return "inductor reductions"
    if name.startswith("triton_"):
        return "inductor other"
    if "at::native" in name:
        return "ATen elementwise"
    return "other"


def phase_of(launchers: str) -> str:
    """The part of a step that launched a kernel, from its launchers' chain (the head's fused backward runs in the
    forward's custom op, so it counts there)."""
    if "Optimizer.step" in launchers:
        return "optimizer"
    if "AccumulateGrad" in launchers:
        return "gradient accumulation"
    if "CompiledFunctionBackward" in launchers:
        return "backward"
    if "CompiledFunction" in launchers:
        return "forward"
    return "other"


def census(log_text: str, own_kernels: set[str]) -> list[KernelLine]:
    rows = []
    for line in log_text.splitlines():
        match = KERNEL_LINE.match(line)
        if match:
            ms, calls, name, launchers = float(match[1]), int(match[2]), match[3], match[4] or ""
            rows.append(KernelLine(kind_of(name, launchers, own_kernels), phase_of(launchers), ms, calls, name,
                                   launchers))
    return rows


def table(rows: list[KernelLine], field: str, steps: int) -> list[str]:
    """One line per value of field (kind or phase), the longest total first."""
    total = sum(row.ms for row in rows)
    groups = {}
    for row in rows:
        groups.setdefault(getattr(row, field), []).append(row)
    lines = [f"== by {field}: ms a profiled step (of {total / steps:.1f} ms of listed kernels), share, calls a step, "
             "longest kernels"]
    for group, members in sorted(groups.items(), key=lambda item: -sum(row.ms for row in item[1])):
        ms, calls = sum(row.ms for row in members), sum(row.calls for row in members)
        longest = ", ".join(f"{row.name[:48]} {row.ms / steps:.2f}" for row in sorted(members, key=lambda r: -r.ms)[:3])
        lines.append(f"{group:28s} {ms / steps:8.2f} ms {ms / total:6.1%} {calls / steps:7.0f}  {longest}")
    return lines


def profiled_ms(log_text: str) -> float | None:
    """The profile table's 'Self CUDA time total', in ms (the profiler writes it in us, ms or s)."""
    match = re.search(r"Self CUDA time total: ([\d.]+)(us|ms|s)\b", log_text)
    return None if match is None else float(match[1]) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[match[2]]


def report(log_text: str, steps: int, own_kernels: set[str]) -> list[str]:
    rows = census(log_text, own_kernels)
    if not rows:
        raise SystemExit("error: the log has no 'kernel ... ms in N calls' lines; run with --profile_steps")
    listed, total = sum(row.ms for row in rows), profiled_ms(log_text)
    coverage = [] if total is None else [f"listed kernels: {listed / steps:.1f} ms of the profile's "
                                         f"{total / steps:.1f} ms of GPU time a step ({len(rows)} kernels)"]
    return coverage + table(rows, "kind", steps) + table(rows, "phase", steps)


def by_kernel(rows: list[KernelLine], steps: int) -> dict[str, tuple[float, float]]:
    """ms and calls a step by kernel name, without inductor's trailing build number (the same kernel is `..._12` in
    one version of a script and `..._13` in another)."""
    totals = {}
    for row in rows:
        name = re.sub(r"_\d+$", "", row.name)
        ms, calls = totals.get(name, (0.0, 0))
        totals[name] = (ms + row.ms, calls + row.calls)
    return {name: (ms / steps, calls / steps) for name, (ms, calls) in totals.items()}


def comparison(rows_a: list[KernelLine], rows_b: list[KernelLine], steps: int, count: int = 20) -> list[str]:
    """B's kernels against A's, the count largest changes of ms a step first."""
    a, b = by_kernel(rows_a, steps), by_kernel(rows_b, steps)
    change = {name: b.get(name, (0.0, 0))[0] - a.get(name, (0.0, 0))[0] for name in a.keys() | b.keys()}
    total = sum(ms for ms, _ in b.values()) - sum(ms for ms, _ in a.values())
    lines = [f"== B - A by kernel: ms a profiled step ({total:+.2f} ms in all), A's and B's ms / calls a step, the "
             f"{count} largest changes"]
    for name in sorted(change, key=lambda n: (-abs(change[n]), n))[:count]:
        (ms_a, calls_a), (ms_b, calls_b) = a.get(name, (0.0, 0)), b.get(name, (0.0, 0))
        lines.append(f"{change[name]:+8.2f}  A {ms_a:7.2f} / {calls_a:5.0f}  B {ms_b:7.2f} / {calls_b:5.0f}  "
                     f"{name[:120]}")
    return lines


RUN_OPTIONS = ("profile_steps", "logs_dir", "run_id")  # a track run's options this tool reads the log by


def script_of(track: str, argv: list[str]) -> Path:
    """The script a track-mode run runs: --script=PATH's version, else the repository's track script."""
    return Path(option_values(argv, "script")[-1]) if option_values(argv, "script") else SCRIPTS[track]


def run_track(module, argv: list[str]) -> tuple[Path, int]:
    """Runs the loaded script's main (script_of's) with every kernel listed; returns its log's path and its count of
    profiled steps."""
    needed = {name: option_values(argv, name)[-1:] for name in RUN_OPTIONS}
    module.longest_kernels.__defaults__ = (sys.maxsize,)
    module.kernel_launchers.__defaults__ = (LAUNCHER_DEPTH,)
    script_args = [arg for arg in argv if not arg.startswith("--script=")]
    sys.argv = [os.path.relpath(module.__file__), *script_args]  # the log's command line, as a plain run would write it
    module.main()
    return Path(needed["logs_dir"][0]) / f"{needed['run_id'][0]}.txt", int(needed["profile_steps"][0])


def log_mode_error(argv: list[str]) -> int | None:
    """For --log=PATH --steps=N [--compare=PATH]: 2 after one line naming an unknown argument, a missing option, a
    log that is no file or steps that are not a positive integer; None when all are fine."""
    if (answer := usage_or_error(argv, __doc__, (), ("log", "steps", "compare"))) is not None:
        return answer
    steps = option_values(argv, "steps")
    if not option_values(argv, "log") or not steps:
        print("error: give --log=PATH and --steps=N together, or a track and its run's options (see --help)",
              file=sys.stderr)
        return 2
    if missing := [path for name in ("log", "compare") for path in option_values(argv, name)
                   if not Path(path).is_file()]:
        print(f"error: {missing[0]}: no such file; give a log the track script wrote with --profile_steps (see --help)",
              file=sys.stderr)
        return 2
    if not steps[-1].isdecimal() or int(steps[-1]) < 1:
        print(f"error: --steps={steps[-1]}: give the log's number of profiled steps, a positive integer (see --help)",
              file=sys.stderr)
        return 2
    return None


def track_mode_error(argv: list[str]) -> int | None:
    """For TRACK [script args...]: 2 after one line naming an unknown track, a missing option that the log is read
    by or a --script that is no file (the track script checks the rest); None when all are fine."""
    if argv[0] not in SCRIPTS:
        print(f"error: unknown argument {argv[0]!r}: name a track ({' or '.join(SCRIPTS)}) or give --log=PATH "
              "--steps=N (see --help)", file=sys.stderr)
        return 2
    if missing := [f"--{name}" for name in RUN_OPTIONS if not option_values(argv, name)]:
        print(f"error: give {', '.join(missing)}: the run's log is read after, from --logs_dir/--run_id.txt, over "
              "--profile_steps steps (see --help)", file=sys.stderr)
        return 2
    if not (script := script_of(argv[0], argv)).is_file():
        print(f"error: --script={script}: no such file; give a version of the {argv[0]} track's script (see --help)",
              file=sys.stderr)
        return 2
    return None


def main(argv: list[str]) -> int:
    versions = ()  # the script a track-mode run ran (--script's or the track's), loaded once: its kernels own
    if argv and not argv[0].startswith("-"):
        if (answer := track_mode_error(argv)) is not None:
            return answer
        versions = (load_script(script_of(argv[0], argv)),)
        log, steps = run_track(versions[0], argv[1:])
    else:
        if (answer := log_mode_error(argv)) is not None:
            return answer
        log, steps = Path(option_values(argv, "log")[-1]), int(option_values(argv, "steps")[-1])
    own_kernels = script_kernels(versions)
    print("\n".join(report(log.read_text(), steps, own_kernels)))
    if other := option_values(argv, "compare"):
        rows = [census(path.read_text(), own_kernels) for path in (log, Path(other[-1]))]
        print("\n".join(comparison(*rows, steps)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
