"""What the data tools' command lines share: how a summary counts and names a folder, and how a failure ends them (one
"error: ..." line on stderr, exit code 1; never a traceback). Malformed arguments are argparse's (exit code 2)."""

import os
import sys
from pathlib import Path
from typing import Callable


def counted(n: int, noun: str) -> str:
    """n with thousands separators and noun, plural unless n is 1."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def display_dir(path: Path) -> str:
    """path relative to the working directory when it lies below it, with a trailing slash."""
    rel = os.path.relpath(path)
    outside = rel == os.pardir or rel.startswith(os.pardir + os.sep)  # "..data" is a folder below it
    return (str(path) if outside else rel) + os.sep


def finish(work: Callable[[], str], explained: type[Exception], out_dir, disk_fix: str) -> int:
    """Run work and print the summary it returns (exit code 0). Its own errors (explained) already say the cause
    and the fix; an OSError names the file (out_dir when it names none) and gets disk_fix."""
    try:
        summary = work()
    except explained as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"error: {e.filename or out_dir}: {e.strerror or e}; check free disk space and {disk_fix}",
              file=sys.stderr)
        return 1
    print(summary)
    return 0
