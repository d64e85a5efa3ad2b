"""Work with speedrun run logs: extract, re-run, diff and compare records.

Every track script (train_gpt.py, train_gpt_medium.py, ...) writes ``logs/<run_id>.txt``
that starts with the script's exact source, then one separator line naming the script,
then a header, the resolved hyperparameters and the step lines::

    <N bytes of source>[one "\\n" if the source did not end with one]
    ==================== end of source: train_gpt.py, N bytes ====================
    run_id: ...
    command: torchrun --standalone --nproc_per_node=8 train_gpt.py --lr=0.04
    argv: ["train_gpt.py", "--lr=0.04"]
    world_size: 8
    python: / torch: / cuda: / triton: / gpu: / ptxas: ...
    hyperparameters:
      name: value
    nvidia-smi:
      ...
    startup: ... / warmup: ...              (progress notes; ignored)
    step:0/20 val_loss:10.8258 train_time:0ms
    step:1/20 train_loss:10.8301 train_time:35ms step_avg:35.00ms
    step:20/20 val_loss:3.2790 train_time:700ms step_avg:35.00ms tokens/s:... mfu:...%
    time: startup 25.1s, training 0.7s, validation 0.4s, total 27.0s   (ignored)
    peak memory allocated: 33512 MiB reserved: 34000 MiB   (CUDA runs only)

Nothing here depends on which script wrote the log: the script's name comes from the
separator line, its arguments from ``argv`` and the launcher from ``command``/``world_size``
(compare's default target aside: the track's, from the script's docstring or name).

Subcommands (``python records/tool.py <cmd> --help`` for details):

    extract LOG [-o FILE] [--force]       write the script back, print the command that re-runs it
    rerun LOG [--dry-run] [-- ARGS...]    extract to a temp file and launch it (ARGS override; the recorded
                                          --run_id is dropped, so the re-run's log takes a fresh name)
    diff LOG_A LOG_B                      diff the two scripts, their setup (environment, world size, GPUs)
                                          and their hyperparameters
    compare LOG_OR_DIR... [--target T] [--png FILE]
                                          table of runs (a note for each without a result: stopped,
                                          error, cut short or non-finite), per-group mean/std/t-test vs
                                          the target (default: the logs' track's, 3.28 or 2.92)

Errors (missing file, not a run log, unwritable output, ...) are one ``error: ...`` line on stderr and exit 2.
"""

import argparse
import dataclasses
import difflib
import errno
import importlib.util
import json
import math
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

SEPARATOR_RE = re.compile(rb"^=+ end of source: (.+), (\d+) bytes =+$", re.MULTILINE)  # a name may hold spaces
STEP_RE = re.compile(r"^step:(\d+)/(\d+)((?:\s+\S+:\S+)*)\s*$")
PEAK_RE = re.compile(r"^peak memory allocated: (\d+) MiB reserved: (\d+) MiB")
HEADER_RE = re.compile(r"^([A-Za-z_][\w-]*):(?: (.*))?$")
NUMBER_RE = re.compile(r"^([-+]?(?:nan|inf|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?))(.*)$", re.IGNORECASE)
ENV_KEYS = ("python", "torch", "cuda", "triton", "gpu")
SPEEDRUN_P = 0.01
TRACK_TARGETS = {"1": 3.28, "2": 2.92}  # the FineWeb val loss a record of each track must reach
TRACK_RE = re.compile(rb'\A(?:\xef\xbb\xbf)?"""NanoGPT speedrun, track (\d+):')  # each track script's first words
TRACK_SCRIPTS = {"train_gpt.py": "1", "train_gpt_medium.py": "2"}
OS_ERROR_FIXES = {  # what mends an OSError, by its errno; others get OS_ERROR_FIX
    errno.ENOENT: "check the path, or create its folder",
    errno.EACCES: "check its permissions, or give another path",
    errno.EPERM: "check its permissions, or give another path",
    errno.EROFS: "give a path on a writable file system",
    errno.ENOSPC: "free some disk space, or give a path on another disk",
    errno.EISDIR: "give the path of a file, not a folder",
    errno.ENOTDIR: "a file stands where a folder of the path goes; give another path",
}
OS_ERROR_FIX = "check the path, its permissions and the free disk space"


class ToolError(Exception):
    """A user-facing failure: printed as one ``error:`` line, exit status 2."""


class NotALogError(ToolError):
    """A file that is no run log: the message names the fix, problem the cause alone (compare's warning as it skips
    such a file in a folder)."""

    def __init__(self, problem: str):
        super().__init__(f"{problem}; give a run log as a track script wrote it (logs/<run_id>.txt)")
        self.problem = problem


@dataclasses.dataclass
class RunLog:
    """Everything parsed out of one run log."""

    path: Path
    script_name: str
    source: bytes
    header: dict
    hparams: dict
    nvidia_smi: list
    steps: list  # one dict per step line: {"step": int, "total": int, <key>: <raw value>}
    end_line: str | None  # its first "stopped: ..." or "error: ..." line, whole
    peak_allocated_mib: int | None

    def last(self, key):
        """The raw value of ``key`` on the last step line that has it, else None."""
        for row in reversed(self.steps):
            if key in row:
                return row[key]
        return None


def number(text):
    """Parse a step-line value such as ``7.1234``, ``nan``, ``35.00ms`` or ``1.2%``; the unit is dropped (the
    scripts write times in ms)."""
    match = NUMBER_RE.match(text or "")
    return float(match.group(1)) if match else None


def find_separator(data):
    """Return (match, source_length) of the first separator line consistent with its offset."""
    for match in SEPARATOR_RE.finditer(data):
        n, offset = int(match.group(2)), match.start()
        source = data[:n]
        if offset == n and (n == 0 or source.endswith(b"\n")):
            return match, n
        if offset == n + 1 and data[n:n + 1] == b"\n" and not source.endswith(b"\n"):
            return match, n
    return None, None


UTF8_BOM = b"\xef\xbb\xbf"


def restored_log(data):
    """A log saved again after its run, as git on Windows (CRLF line ends) or an editor (a UTF-8 BOM in front) may
    have done, with those changes undone: (match, source_length, data) of the first form whose separator's byte
    count holds, else (None, None, data). The log as it is comes first, and a form that changed the script's bytes
    fails that count: a script that itself starts with a BOM or has CRLF lines keeps them."""
    unmarked = data[len(UTF8_BOM):] if data.startswith(UTF8_BOM) else data
    for form in (data, unmarked, data.replace(b"\r\n", b"\n"), unmarked.replace(b"\r\n", b"\n")):
        match, n = find_separator(form)
        if match is not None:
            return match, n, form
    return None, None, data


def parse_tail(lines):
    """Parse the lines after the separator into header, hyperparameters, nvidia-smi and steps."""
    header, hparams, smi, steps = {}, {}, [], []
    end_line, peak, block, header_open = None, None, None, True
    for line in lines:
        if block is not None and line.startswith("  "):
            if block is hparams:
                name, _, value = line[2:].partition(": ")
                hparams[name.rstrip(":")] = value
            else:
                smi.append(line[2:])
            continue
        block = None
        step = STEP_RE.match(line)
        if step:
            row = {"step": int(step.group(1)), "total": int(step.group(2))}
            for field in step.group(3).split():
                key, _, value = field.partition(":")
                row[key] = value
            steps.append(row)
        elif line.startswith(("stopped:", "error:")):  # a non-finite loss, or a crash after the log opened
            end_line = end_line or line  # the cause; a failure while stopping would follow it
        elif peak_match := PEAK_RE.match(line):
            peak = int(peak_match.group(1))
        elif HEADER_RE.match(line) and not steps:
            key, value = HEADER_RE.match(line).groups()
            if key == "hyperparameters" and not value:
                block, header_open = hparams, False
            elif key == "nvidia-smi" and not value:
                block = smi
            elif header_open:  # later "key: value" lines ("startup: ...") are progress notes
                header.setdefault(key, value or "")
    return header, hparams, smi, steps, end_line, peak


def load_log(path):
    """Read and parse a run log; raise NotALogError for a missing file or a file that is no log."""
    path = Path(path)
    if not path.exists():
        raise NotALogError(f"{path}: no such file")
    if not path.is_file():
        raise NotALogError(f"{path} is not a file")
    match, n, data = restored_log(path.read_bytes())
    if match is None:
        raise NotALogError(f'{path} is not a run log (no "end of source" separator line)')
    tail = data[match.end():].decode("utf-8", errors="replace").splitlines()
    header, hparams, smi, steps, end_line, peak = parse_tail(tail)
    return RunLog(path, match.group(1).decode("utf-8", errors="replace"), data[:n],
                  header, hparams, smi, steps, end_line, peak)


def default_script_name(log):
    """The recorded script name (train_gpt.py, train_gpt_medium.py, ...), without any folders."""
    name = Path(log.script_name).name
    if name in ("", ".", ".."):
        raise ToolError(f"{log.path}: the separator line names no script; give -o FILE")
    return name


def write_script(log, out, force):
    """Write the embedded source to ``out``; refuse to clobber a different file unless forced, and the log itself
    always (--force would have replaced the record by its script)."""
    out = Path(out)
    if out.exists() and out.samefile(log.path):
        raise ToolError(f"{out} is the log itself: write the script to another file (-o)")
    if out.exists() and out.read_bytes() != log.source and not force:
        raise ToolError(f"{out} exists and differs from the script in {log.path} (use --force)")
    out.write_bytes(log.source)
    return out


def no_argv(log):
    """Why a log whose run stopped (or whose copy was cut) before its header cannot be re-run."""
    return (f"{log.path} has no argv line (the run stopped, or its log was cut, before its header): the arguments it "
            "ran with are unknown")


def reproduce_command(log, script_path):
    """The command (as an argv list) that re-runs ``log`` with the script at ``script_path``."""
    if "argv" not in log.header:
        raise ToolError(f"{no_argv(log)}; extract still writes its script")
    restore_argv = 'restore the line as the script wrote it, e.g. argv: ["train_gpt.py", "--seed=1"]'
    try:
        argv = json.loads(log.header["argv"])
    except ValueError:
        raise ToolError(f"{log.path}: argv line is not a JSON list; {restore_argv}") from None
    if not isinstance(argv, list):  # checked, not caught: from Python 3.12 a dict[1:] raises KeyError, not TypeError
        raise ToolError(f"{log.path}: argv line is not a JSON list; {restore_argv}")
    overrides = argv[1:]
    if not all(isinstance(arg, str) for arg in overrides):
        raise ToolError(f"{log.path}: argv line is not a JSON list of strings; {restore_argv}")
    # a re-run is a new run: its log takes a fresh name, so that it cannot overwrite the recorded one
    overrides = [arg for arg in overrides if not arg.startswith("--run_id=")]
    try:
        world_size = int(log.header.get("world_size") or 1)
        recorded = shlex.split(log.header.get("command", ""))
    except ValueError as err:
        raise ToolError(f"{log.path}: unreadable header ({err}); restore its world_size and command lines as the "
                        "script wrote them") from None
    if world_size < 1:
        raise ToolError(f"{log.path}: world_size {world_size} is not positive; restore the line as the script wrote "
                        "it, e.g. world_size: 8")
    # torchrun whenever the run had several processes or was itself launched by torchrun
    # (which sets RANK/WORLD_SIZE/... even for one process); plain python otherwise.
    by_torchrun = bool(recorded) and (Path(recorded[0]).name == "torchrun" or "torch.distributed.run" in recorded)
    if world_size == 1 and not by_torchrun:
        return ["python", str(script_path), *overrides]
    return ["torchrun", "--standalone", f"--nproc_per_node={world_size}", str(script_path), *overrides]


def torch_build():
    """torch/version.py executed on its own (it imports nothing of torch's): the installed torch's
    ``__version__``, ``cuda`` and ``hip`` without the seconds that ``import torch`` takes.
    None when torch is not installed or that file cannot be read."""
    try:
        spec = importlib.util.find_spec("torch")
        folders = list(spec.submodule_search_locations or []) if spec else []
        if not folders:
            return None
        path = Path(folders[0]) / "version.py"
        namespace = {}
        exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), namespace)
        return namespace if isinstance(namespace.get("__version__"), str) else None
    except Exception:  # any surprise: fall back to importing torch
        return None


def current_environment():
    """This machine's values for the environment keys that a log records (as the track scripts write them)."""
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = "none"
    build = torch_build()
    if build is not None and not build.get("cuda") and not build.get("hip"):
        # a CPU-only build: torch.cuda.is_available() is False, so there is no GPU to name
        return {"python": platform.python_version(), "torch": build["__version__"], "cuda": "none",
                "triton": triton_version, "gpu": "none"}
    try:
        import torch  # imported lazily: only rerun needs it, and only on GPU builds
    except ImportError:
        return {"python": platform.python_version(), "torch": "none", "cuda": "none",
                "triton": triton_version, "gpu": "none"}
    gpu = "none"
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        gpu = f"{names[0]} x{len(names)}"  # the first GPU's name, as the track scripts write it
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "none",
        "triton": triton_version,
        "gpu": gpu,
    }


def environment_warnings(log, env):
    """One warning line per recorded environment key whose value differs from ``env``."""
    return [f"warning: {key} differs: log has {log.header[key]}, this machine has {env[key]}"
            for key in ENV_KEYS if key in log.header and log.header[key] != env[key]]


def launch_argv(command):
    """Turn a printed command into what to execute, using this interpreter for python/torchrun."""
    if command[0] == "python":
        return [sys.executable, *command[1:]]
    return [sys.executable, "-m", "torch.distributed.run", *command[1:]]


RUN_SH = Path(__file__).resolve().parent.parent / "run.sh"
LAUNCHER_START, LAUNCHER_END = "exec \"$python\" -c '", "' --standalone"  # around run.sh's launcher code


def run_sh_launcher() -> str:
    """run.sh's torchrun launcher code (one copy, run.sh's): a rank that fails has printed its own error, and the
    launcher's 30-40-line traceback after it becomes one line naming the rank, with the rank's status."""
    _, start, rest = (RUN_SH.read_text() if RUN_SH.is_file() else "").partition(LAUNCHER_START)
    code, end, _ = rest.partition(LAUNCHER_END)
    if not (start and end):
        raise ToolError(f"{RUN_SH} is missing or holds no launcher (exec \"$python\" -c '...' --standalone); "
                        "restore it from the repository (git checkout run.sh)")
    return code


def executed_argv(argv):
    """What rerun executes for a launch_argv: torchrun's launcher through run.sh's code, the same arguments."""
    if argv[1:3] == ["-m", "torch.distributed.run"]:
        return [argv[0], "-c", run_sh_launcher(), *argv[3:]]
    return argv


def launch_env(command):
    """This environment, with one CPU thread a process for several processes unless it says otherwise: torchrun's
    default, which it would announce in four lines of warning (run.sh does the same)."""
    several = any(arg.startswith("--nproc_per_node=") and arg != "--nproc_per_node=1" for arg in command)
    return {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")} if several else None


def cmd_extract(args):
    log = load_log(args.log)
    out = Path(args.output or default_script_name(log))
    if "argv" not in log.header:  # the script before the separator is whole all the same: its byte count holds
        write_script(log, out, args.force)
        raise ToolError(f"{no_argv(log)}; its script is written to {out} ({len(log.source)} bytes): run it with "
                        "settings of your own")
    command = reproduce_command(log, out)  # a bad header is reported before anything is written
    write_script(log, out, args.force)
    print(f"wrote {out} ({len(log.source)} bytes)", file=sys.stderr)
    print(shlex.join(command))
    return 0


def print_dry_run(log, args):
    """The command rerun would launch, naming the script where extract would write it; writes nothing."""
    out = Path(args.output or default_script_name(log))
    print(shlex.join(launch_argv(reproduce_command(log, out)) + args.extra))
    extract = f"python records/tool.py extract {shlex.quote(str(log.path))} -o {shlex.quote(str(out))}"
    if not out.exists():
        print(f"note: dry run, {out} not written; {extract} writes it", file=sys.stderr)
    elif out.read_bytes() != log.source:
        print(f"note: dry run, {out} is not the logged script; {extract} --force replaces it", file=sys.stderr)
    return 0


def last_setting(args, name):
    """The value of the last ``--name=value`` in ``args`` (a later one wins, as in the scripts), else None."""
    values = [arg.partition("=")[2] for arg in args if arg.startswith(f"--{name}=")]
    return values[-1] if values else None


def check_rerun_keeps_the_log(log, command):
    """A --run_id given after -- names the re-run's log, which the script writes over any file of that name: refuse
    the one that would land on the log being re-run (its --logs_dir the last given, else the recorded one). A leading
    ~ in it is the home folder to today's scripts, but a folder named ~ to the older ones that most record logs hold
    (and that lack their own check for an existing log): either reading counts."""
    run_id = last_setting(command, "run_id")
    if not run_id:
        return
    logs_dir = last_setting(command, "logs_dir") or log.hparams.get("logs_dir") or "logs"
    for folder in (logs_dir, os.path.expanduser(logs_dir)):
        path = Path(folder) / f"{run_id}.txt"
        if path.exists() and path.samefile(log.path):
            raise ToolError(f"--run_id={run_id} would write the re-run's log over {log.path}: give another --run_id")


def cmd_rerun(args):
    log = load_log(args.log)
    check_rerun_keeps_the_log(log, reproduce_command(log, "SCRIPT") + args.extra)  # before the warnings
    for line in environment_warnings(log, current_environment()):
        print(line, file=sys.stderr)
    if args.dry_run:
        return print_dry_run(log, args)
    with tempfile.TemporaryDirectory(prefix="rerun-") as tmp:
        out = Path(args.output or Path(tmp) / default_script_name(log))
        command = launch_argv(reproduce_command(log, out)) + args.extra
        executed = executed_argv(command)  # before the script is written: run.sh's launcher may be missing
        write_script(log, out, args.force)
        print(shlex.join(command), flush=True)
        try:
            return subprocess.run(executed, env=launch_env(command)).returncode
        except KeyboardInterrupt:  # the child got the same Ctrl-C; subprocess.run has reaped it
            return 130


RUN_IDENTITY = ("run_id", "date", "command", "argv")  # header lines that differ between any two runs
LOG_NAME = ("run_id",)  # the hyperparameter that names the log only; rerun leaves out the recorded one


def field_changes(a, b):
    """``- name: old`` / ``+ name: new`` lines for changed, removed and added fields."""
    lines = []
    for name in list(a) + [k for k in b if k not in a]:
        if a.get(name) == b.get(name):
            continue
        if name in a:
            lines.append(f"- {name}: {a[name]}")
        if name in b:
            lines.append(f"+ {name}: {b[name]}")
    return lines


def cmd_diff(args):
    a, b = load_log(args.log_a), load_log(args.log_b)
    source_a = a.source.decode("utf-8", errors="replace").splitlines(keepends=True)
    source_b = b.source.decode("utf-8", errors="replace").splitlines(keepends=True)
    script_diff = list(difflib.unified_diff(source_a, source_b, f"{a.path}: {a.script_name}",
                                            f"{b.path}: {b.script_name}"))
    if script_diff:
        for line in script_diff:
            sys.stdout.write(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    else:
        print(f"scripts are identical ({a.script_name}, {len(a.source)} bytes)")
    setup_a, setup_b = ({k: v for k, v in log.header.items() if k not in RUN_IDENTITY} for log in (a, b))
    hparams_a, hparams_b = ({k: v for k, v in log.hparams.items() if k not in LOG_NAME} for log in (a, b))
    for title, same, fields_a, fields_b in [("setup", "setup is identical", setup_a, setup_b),
                                            ("hyperparameters", "hyperparameters are identical", hparams_a, hparams_b)]:
        changes = field_changes(fields_a, fields_b)
        print(f"{title}:" if changes else same)
        for line in changes:
            print(line)
    return 0


def collect_groups(paths):
    """Map group name -> list of logs: one group per folder, one for all loose files; a file named twice counts
    once."""
    groups, seen = {}, set()
    for name in paths:
        path = Path(name)
        folder = path.is_dir()
        logs, repeats = [], 0
        for file in sorted(path.glob("*.txt")) if folder else [path]:
            if file.exists() and file.resolve() in seen:
                print(f"warning: {file} is named twice; counted once", file=sys.stderr)
                repeats += 1
                continue
            try:
                logs.append(load_log(file))
            except NotALogError as err:
                if not folder:
                    raise
                print(f"warning: skipping {err.problem}", file=sys.stderr)
            seen.add(file.resolve())
        if folder and not logs and not repeats:
            if not os.access(path, os.R_OK | os.X_OK):  # its glob found nothing: not an empty folder
                raise ToolError(f"this user cannot read the folder {path}; make it readable (chmod a+rx {path})")
            raise ToolError(f"{path} holds no run logs; check the path (compare reads a folder's *.txt files)")
        if logs:
            groups.setdefault(str(path) if folder else "(files)", []).extend(logs)
    return groups


def student_t_cdf(t, df):
    """CDF of Student's t with integer ``df`` (closed form, Abramowitz & Stegun 26.7.3-4)."""
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    theta = math.atan(t / math.sqrt(df))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2 == 1:
        total, term = 0.0, s * math.cos(theta)
        for k in range(1, (df - 1) // 2 + 1):
            total += term
            term *= c2 * (2 * k) / (2 * k + 1)
        a = 2 / math.pi * (theta + total)
    else:
        total, term = 0.0, s
        for k in range(1, df // 2 + 1):
            total += term
            term *= c2 * (2 * k - 1) / (2 * k)
        a = total
    return 0.5 + 0.5 * a


def t_cdf(t, df):
    """Student-t CDF: scipy's when it imports, else the closed form above."""
    try:
        from scipy import stats
    except ImportError:
        return student_t_cdf(t, df)
    return float(stats.t.cdf(t, df))


def group_stats(losses, target):
    """(n, mean, std, t, p) of final val losses; p for H1: mean < target (None when n < 2 or the losses are all
    equal: no spread, no test)."""
    n = len(losses)
    mean = sum(losses) / n if n else math.nan
    if n < 2:
        return n, mean, math.nan, None, None
    std = math.sqrt(sum((x - mean) ** 2 for x in losses) / (n - 1))
    if std == 0:
        return n, mean, std, None, None
    t = (mean - target) / (std / math.sqrt(n))
    return n, mean, std, t, t_cdf(t, n - 1)


def target_crossing(log, target):
    """Where the validations first reach target: ((step, seconds) of the first val loss <= target, (step, seconds)
    linearly interpolated between it and the validation before it), or None when none reaches it."""
    previous = None
    for row in log.steps:
        loss, ms = number(row.get("val_loss")), number(row.get("train_time"))
        if loss is None or ms is None or not math.isfinite(loss):
            continue
        if loss <= target:
            if previous is None:
                return (row["step"], ms / 1000), (row["step"], ms / 1000)
            step0, ms0, loss0 = previous
            share = (loss0 - target) / (loss0 - loss)
            return (row["step"], ms / 1000), (step0 + share * (row["step"] - step0), (ms0 + share * (ms - ms0)) / 1000)
        previous = (row["step"], ms, loss)
    return None


def run_row(log, target):
    """The table cells for one log."""
    val = log.last("val_loss")
    train_ms = number(log.last("train_time"))
    step_avg = number(log.last("step_avg"))
    last = log.steps[-1] if log.steps else None
    return [
        str(log.path),
        val if val is not None else "n/a",
        f"{train_ms / 1000:.3f}" if train_ms is not None else "n/a",
        f"{step_avg:.2f}" if step_avg is not None else "n/a",
        f"{last['step']}/{last['total']}" if last else "n/a",
        str(log.peak_allocated_mib) if log.peak_allocated_mib is not None else "n/a",
        *([f"{reached[0][0]}/{reached[0][1]:.2f}s", f"{reached[1][0]:.1f}/{reached[1][1]:.2f}s"]
          if (reached := target_crossing(log, target)) else ["n/a", "n/a"]),
        status(log),
    ]


def print_table(rows):
    """Left-aligned columns separated by two spaces."""
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip())


ERROR_AFTER_END = "error after final val"  # status's note for a run that failed after its result: it counts


def finished(log):
    """Whether the run reached its last step and validated there without stopping: its loss is a result (also where
    it failed afterwards, at its teardown: that changed no number of it; compare warns)."""
    return status(log) in ("", ERROR_AFTER_END)


def final_val_loss(log):
    """The loss of the validation at the run's last step (its last step line is step N/N), else None."""
    last = log.steps[-1] if log.steps else None
    return number(last.get("val_loss")) if last and last["step"] == last["total"] else None


def status(log):
    """The table's note: "stopped" (a non-finite train or validation loss stopped it: its `stopped:` line), "error"
    (it failed after its log opened, e.g. a signal or a crash: its `error:` line), "cut short" (its log ends before
    the last step's validation without either line: killed outright), "non-finite" (that validation's loss is not
    finite, in a log from before such runs stopped), ERROR_AFTER_END (its `error:` line follows a finite last
    validation: it failed in its teardown, e.g. a signal or a lost rank while leaving the process group), or ""
    (finished: its loss is a result)."""
    loss = final_val_loss(log)
    result = loss is not None and math.isfinite(loss)
    if log.end_line is not None:
        if result and log.end_line.startswith("error:"):  # the scripts write it last: after that validation
            return ERROR_AFTER_END
        return log.end_line.partition(":")[0]
    if loss is None:
        return "cut short"
    return "" if result else "non-finite"


def group_warnings(name, done, unfinished):
    """Warnings about what a group's statistics (over done, its finished logs) mix: unfinished runs (left out),
    scripts, run lengths, seeds."""
    lines = [f"warning: {name}: {log.path} counted: it failed after its last validation, whose loss and time are "
             f"its result ({log.end_line})" for log in done if status(log) == ERROR_AFTER_END]
    if unfinished:
        paths = ", ".join(f"{log.path} ({log.end_line or status(log)})" for log in unfinished)  # each one's why
        lines.append(f"warning: {name}: {len(unfinished)} log(s) without a finite val loss at their last step "
                     f"(stopped, error, cut short or non-finite: the note column says which) left out of the "
                     f"statistics: {paths}")
    for what, key in [("scripts", lambda log: log.script_name),
                      ("run lengths (num_iterations)", lambda log: log.steps[-1]["total"])]:
        values = sorted({key(log) for log in done})  # names or step counts, each sorted as what it is
        if len(values) > 1:
            lines.append(f"warning: {name}: mixes {what} {', '.join(map(str, values))}; compare like runs")
    seeds = [log.hparams["seed"] for log in done if "seed" in log.hparams]
    repeated = sorted({seed for seed in seeds if seeds.count(seed) > 1})
    if repeated:
        lines.append(f"warning: {name}: seed {', '.join(repeated)} appears more than once; repeated seeds are "
                     "not independent samples")
    return lines


def group_summary(name, logs, target):
    """One line of statistics for a group of logs (its warnings on stderr)."""
    done, unfinished = [], []
    for log in logs:
        (done if finished(log) else unfinished).append(log)
    for line in group_warnings(name, done, unfinished):
        print(line, file=sys.stderr)
    n, mean, std, t, p = group_stats([number(log.steps[-1]["val_loss"]) for log in done], target)
    if p is None:
        spread = "std=0 (identical losses: no test)" if n > 1 else "std=n/a"
        return f"group {name}: n={n} mean={mean:.4f} {spread} t=n/a p=n/a"
    verdict = f"p < {SPEEDRUN_P}" if p < SPEEDRUN_P else f"p >= {SPEEDRUN_P}"
    return (f"group {name}: n={n} mean={mean:.6f} std={std:.6f} t={t:.4f} p={p:.6g} "
            f"(H1: mean < {target}; {verdict})")


def plot_curves(logs, png):
    """Two panels: val loss vs training time and val loss vs step, one line per log."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_time, by_step) = plt.subplots(1, 2, figsize=(12, 4.5))
    for log in logs:
        rows = [r for r in log.steps if "val_loss" in r and "train_time" in r]
        losses = [number(r["val_loss"]) for r in rows]
        by_time.plot([number(r["train_time"]) / 1000 for r in rows], losses, marker=".", label=str(log.path))
        by_step.plot([r["step"] for r in rows], losses, marker=".", label=str(log.path))
    by_time.set(xlabel="training time (s)", ylabel="val loss", title="val loss vs training time")
    by_step.set(xlabel="step", ylabel="val loss", title="val loss vs step")
    for ax in (by_time, by_step):
        ax.grid(alpha=0.3)
    by_step.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def check_png(png):
    """--png: a .png name and matplotlib to draw it, checked before the table."""
    if Path(png).suffix.lower() != ".png":
        raise ToolError(f"--png {png}: give a file name ending in .png")
    if importlib.util.find_spec("matplotlib") is None:
        raise ToolError("--png needs matplotlib: pip install matplotlib (or leave --png out)")


def log_track(log):
    """The track of a log's script ("1", "2", ...): from its docstring's first words, which a copy or variant keeps,
    else from its name; None when neither tells."""
    match = TRACK_RE.match(log.source)
    return match.group(1).decode() if match else TRACK_SCRIPTS.get(Path(log.script_name).name)


def track_target(logs):
    """compare's target without --target: the record target of the one track all the logs are of."""
    tracks = {}
    for log in logs:
        tracks.setdefault(log_track(log), log)
    if None in tracks:
        raise ToolError(f"{tracks[None].path}: its script ({tracks[None].script_name}) is no track script, so its "
                        "target is unknown: give --target")
    if len(tracks) > 1:
        names = " and ".join(f"{track} ({tracks[track].path})" for track in sorted(tracks))
        raise ToolError(f"the logs are of tracks {names}, whose targets differ: compare one track at a time, or "
                        "give --target")
    (track,) = tracks
    if track not in TRACK_TARGETS:
        raise ToolError(f"{tracks[track].path}: track {track} has no known target: give --target")
    return TRACK_TARGETS[track]


def cmd_compare(args):
    if args.png:
        check_png(args.png)
    groups = collect_groups(args.logs)
    if args.target is None:
        args.target = track_target([log for logs in groups.values() for log in logs])
    rows = [["log", "val_loss", "train_time_s", "step_avg_ms", "steps", "peak_mem_MiB", "target_reached",
             "interpolated", "note"]]
    for logs in groups.values():
        rows += [run_row(log, args.target) for log in logs]
    print_table(rows)
    for name, logs in groups.items():
        print(group_summary(name, logs, args.target))
    if args.png:
        plot_curves([log for logs in groups.values() for log in logs], args.png)
        print(f"wrote {args.png}", file=sys.stderr)
    return 0


def val_loss_target(text):
    """--target's value: a finite positive loss (nan compared false with every loss: no run would reach it)."""
    try:
        target = float(text)
    except ValueError:
        target = math.nan
    if not math.isfinite(target) or target <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a val loss: give a finite positive number, e.g. 3.28")
    return target


def build_parser():
    parser = argparse.ArgumentParser(prog="records/tool.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    extract = commands.add_parser("extract", help="write the logged script back and print its command")
    extract.add_argument("log", metavar="LOG", help="a run log (logs/<run_id>.txt)")
    extract.add_argument("-o", "--output", help="where to write the script (default: its recorded name here)")
    extract.add_argument("--force", action="store_true", help="overwrite an existing different file")
    extract.set_defaults(func=cmd_extract)

    rerun = commands.add_parser("rerun", help="extract and launch a logged run; arguments after -- override",
                                usage="%(prog)s [-h] [-o OUTPUT] [--force] [--dry-run] LOG [-- ARGS...]")
    rerun.add_argument("log", metavar="LOG", help="a run log (logs/<run_id>.txt)")
    rerun.add_argument("-o", "--output", help="where to write the script (default: a temporary folder)")
    rerun.add_argument("--force", action="store_true", help="overwrite an existing different file")
    rerun.add_argument("--dry-run", action="store_true", help="print warnings and the command only")
    rerun.set_defaults(func=cmd_rerun)

    diff = commands.add_parser("diff", help="diff two logs' scripts, setup and hyperparameters")
    diff.add_argument("log_a", metavar="LOG_A", help="the run log shown as -")
    diff.add_argument("log_b", metavar="LOG_B", help="the run log shown as +")
    diff.set_defaults(func=cmd_diff)

    compare = commands.add_parser("compare", help="table and statistics of runs; a folder is a group")
    compare.add_argument("logs", nargs="+", metavar="LOG_OR_DIR",
                         help="run logs (together one group) and folders (one group each)")
    compare.add_argument("--target", type=val_loss_target,
                         help="val loss target (default: the logs' track's, 3.28 for track 1 and 2.92 for track 2)")
    compare.add_argument("--png", help="also plot val loss curves to this PNG")
    compare.set_defaults(func=cmd_compare)
    return parser


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if "--" in argv:
        split = argv.index("--")
        argv, extra = argv[:split], argv[split + 1:]
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        hint = "; the script's settings go after --: rerun LOG -- --name=value" if args.command == "rerun" else ""
        parser.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")
    if extra and args.command != "rerun":
        parser.error("arguments after -- are only accepted by rerun")
    args.extra = extra
    try:
        return args.func(args)
    except ToolError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # e.g. an output folder that does not exist, a full disk
        where = f"{err.filename}: " if err.filename else ""
        fix = OS_ERROR_FIXES.get(err.errno, OS_ERROR_FIX)
        print(f"error: {where}{err.strerror or err}; {fix}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
