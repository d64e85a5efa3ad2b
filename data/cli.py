"""What the data tools' command lines share: how a path argument reads, how a summary counts and names a folder, and
how a run ends (its summary, or one "error: ..." line on stderr with exit code 1, or 128 + the signal where Ctrl-C or
SIGTERM stopped it; never a traceback). Malformed arguments are argparse's (exit code 2)."""

import argparse
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Callable

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # Ctrl-C, and what kill, timeout and job schedulers send


class Stopped(BaseException):
    """A stop signal, raised in the main thread so that every cleanup (finally, except BaseException) runs."""

    def __init__(self, signum: int, done: str | None = None):
        super().__init__(signum)
        self.signum, self.done = signum, done  # done: what a held stop let finish, said in place of what is left


_held_signals = None  # while stop_signals_held() runs: the stop signals that arrived, else None


def raise_stopped(signum, frame):
    if _held_signals is not None:
        _held_signals.append(signum)
        return
    raise Stopped(signum)


@contextlib.contextmanager
def stop_signals_raised():
    """Within the block a stop signal raises Stopped in the main thread; the handlers from before come back after."""
    handlers = {signum: signal.signal(signum, raise_stopped) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def stop_signals_held(done: str | None = None):
    """A step that must not stop halfway (moving a set of shards in, ending the tokenizer processes): a stop signal
    that arrives during it takes effect once it is done, and the stop's line says done (what the step finished),
    where given. Python runs signal handlers in the main thread, so this holds whatever thread the signal reached."""
    global _held_signals
    _held_signals = []
    try:
        yield
    finally:
        held, _held_signals = _held_signals, None
    if held:  # the step finished (an error inside it goes on as that error: the stop's line would claim done)
        raise Stopped(held[0], done)


def counted(n: int, noun: str) -> str:
    """n with thousands separators and noun, plural unless n is 1."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def user_path(text: str) -> str:
    """A path argument with a leading ~ read as the home folder, as the tracks read their path settings: the shell
    leaves it as typed in quotes (a glob, a path with spaces) and after an = (--dir=~/data). An empty one (most often
    an unset shell variable; as a path, the working directory) or spaces alone is a usage error."""
    if not text.strip():  # spaces alone too: the tracks strip a setting's spaces, which leaves it empty
        raise argparse.ArgumentTypeError("an empty path (an unset shell variable?) names no file or folder; give one")
    return os.path.expanduser(text)


def display_dir(path: Path) -> str:
    """path relative to the working directory when it lies below it, with a trailing slash."""
    rel = os.path.relpath(path)
    outside = rel == os.pardir or rel.startswith(os.pardir + os.sep)  # "..data" is a folder below it
    return (str(path) if outside else rel) + os.sep


@contextlib.contextmanager
def removed_if_left_empty(folder: Path):
    """On any failure inside the block, remove folder where it did not exist before and is empty now."""
    made = not folder.exists()
    try:
        yield
    except BaseException:
        if made:
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


PATH_IN_THE_WAY = {IsADirectoryError: "a folder stands where a file goes",  # OSErrors no disk space or permission
                   NotADirectoryError: "a file stands where a folder of the path goes"}  # would mend


def finish(work: Callable[[], str], explained: type[Exception], out_dir, disk_fix: str, after_stop: str) -> int:
    """Run work and print the summary it returns (exit code 0). Its own errors (explained) already say the cause
    and the fix; an OSError names the file (out_dir when it names none) and gets disk_fix, unless a file or folder
    is in the path's way; a stop signal says what after_stop says is left."""
    with stop_signals_raised():
        try:
            summary = work()
        except explained as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        except OSError as e:
            fix = (f"{PATH_IN_THE_WAY[type(e)]}: move it away or pick another path" if type(e) in PATH_IN_THE_WAY
                   else f"check free disk space and {disk_fix}")
            print(f"error: {e.filename or out_dir}: {e.strerror or e}; {fix}", file=sys.stderr)
            return 1
        except Stopped as e:
            print(f"error: stopped by {signal.Signals(e.signum).name}; {e.done or after_stop}", file=sys.stderr)
            return 128 + e.signum
    print(summary)
    return 0
