"""What the perf benches share: a run's time, the --name=VALUE options they read from argv and training's cuBLASLt
settings (no track script imported but by cublaslt_as_training, so that a tool that only reads options, such as
perf/kernel_census.py, loads no model code)."""
import contextlib
import os
import sys
import time
from pathlib import Path


def timed_us(run, tiny: bool) -> float:
    """Microseconds of one run(): Triton's do_bench on the GPU; under --tiny, one wall-clock run after a first."""
    if not tiny:
        from triton.testing import do_bench
        return do_bench(run) * 1000
    run()
    start = time.perf_counter()
    run()
    return (time.perf_counter() - start) * 1e6


def cublaslt_as_training():
    """Track 1's cuBLASLt settings where the environment does not say otherwise, as its training run sets them
    (train_gpt.configure_cublaslt: CUBLASLT_SETTINGS, no workspace and none shared with cuBLAS), for a bench that
    times FP8 GEMMs (torch._scaled_mm): called at its import, before any CUDA work, since torch may read them only at
    the process's first cuBLASLt GEMM. With torch's default workspace the same GEMMs ran a memset before each call,
    and the full batch 1.2-2.2 ms a step slower (perf/NOTES.md, session 71). Loads train_gpt.py (track_scripts)."""
    from track_scripts import ROOT, load_script
    load_script(ROOT / "train_gpt.py").configure_cublaslt()


def option_values(argv: list[str], name: str) -> list[str]:
    """The value of each --name=VALUE in argv, in order."""
    prefix = f"--{name}="
    return [arg[len(prefix):] for arg in argv if arg.startswith(prefix)]


def option_list(argv: list[str], name: str) -> list[str]:
    """The items of every --name=A,B,... in argv, in order (empty without the option)."""
    return [item for value in option_values(argv, name) for item in value.split(",") if item]


def print_usage(text: str):
    """text on stdout; a reader that closed the pipe early (--help | head -0) ends it quietly, as the track scripts'
    --help does (it was a BrokenPipeError traceback)."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # else the exit's flush raises again


def asks_for_help(argv: list[str]) -> bool:
    """-h, --help, or --help with a value (--help=1), as the track scripts and run.sh read them."""
    return any(arg in ("-h", "--help") or arg.startswith("--help=") for arg in argv)


def printed_help(argv: list[str], doc: str) -> bool:
    """Whether argv asks for help (asks_for_help), after printing the usage (doc, the module's docstring) if it does."""
    if asks_for_help(argv):
        print_usage(doc.strip())
        return True
    return False


def usage_or_error(argv: list[str], doc: str, flags: tuple[str, ...], valued: tuple[str, ...] = ()) -> int | None:
    """A bench's answer to a command line it does not run: 0 after printing its usage (doc, the module's docstring)
    for -h or --help, 2 after one line naming the first argument that is neither among its flags nor one of its
    --name=VALUE options (valued: their names); None when it should run."""
    if printed_help(argv, doc):
        return 0
    prefixes = tuple(f"--{name}=" for name in valued)
    unknown = [arg for arg in argv if arg not in flags and not arg.startswith(prefixes)]
    if not unknown:
        return None
    options = [*flags, *(f"{prefix}..." for prefix in prefixes)]
    takes = f"its only options are {' '.join(options)}" if options else "it takes no arguments"
    print(f"error: unknown argument {unknown[0]!r}: {takes} (see --help)", file=sys.stderr)
    return 2


def unknown_track_error(args: list[str], tracks) -> int | None:
    """2 after one line naming the first of args that is not one of tracks' names; None when all are (or none is
    given: the benches then take every track)."""
    unknown = [arg for arg in args if arg not in tracks]
    if not unknown:
        return None
    print(f"error: unknown argument {unknown[0]!r}: name tracks among {', '.join(tracks)}, or none for all (see "
          "--help)", file=sys.stderr)
    return 2


TINY_CPU_HINT = " (--tiny runs small shapes on the CPU)"  # no_gpu_error's cpu_hint for the benches with --tiny


def no_gpu_error(tool: str, cpu_hint: str = "") -> int | None:
    """2 after one line saying that tool needs the NVIDIA GPU torch does not see (cpu_hint: what runs without one);
    None when torch sees one."""
    import torch
    if torch.cuda.is_available():
        return None
    print(f"error: {tool} runs on an NVIDIA GPU and torch sees none (torch.cuda.is_available() is False); run it on "
          f"the GPU machine{cpu_hint}", file=sys.stderr)
    return 2


def tiny_bench_refusal(argv: list[str], doc: str, tool: str) -> int | None:
    """A bench whose only option is --tiny (small shapes on the CPU): usage_or_error's answer, else, without --tiny,
    no_gpu_error's (pointing to --tiny); None when it should run."""
    if (answer := usage_or_error(argv, doc, ("--tiny",))) is not None:
        return answer
    return None if "--tiny" in argv else no_gpu_error(tool, TINY_CPU_HINT)


def hold_script_lock(held: contextlib.ExitStack, path, tool: str) -> int | None:
    """perf/proxy_common.sh's lock of a script (lock_track_script's): an exclusive flock on PATH.lock, which names
    its holder, kept until held closes, so that a tool copying or writing a script and a job staging versions over
    it (fullbatch_ab.sh, startup_ab.sh) do not swap the file under each other. 2 after one line naming the holder
    while another job holds it; None once held, or after a warning line where fcntl is missing (as without flock)."""
    try:
        import fcntl
    except ImportError:
        print(f"warning: fcntl is missing: nothing keeps another job from staging versions over {path}",
              file=sys.stderr)
        return None
    lock = Path(f"{path}.lock")
    handle = held.enter_context(open(lock, "a+"))  # closing it releases the lock
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "its name not written yet"
        print(f"error: {path} is staged by another job ({holder}); run this one after it", file=sys.stderr)
        return 2
    lock.write_text(f"{tool}, pid {os.getpid()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
    return None
