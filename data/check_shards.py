"""Validate speedrun token shards and summarise them.

    python data/check_shards.py "data/fineweb10B/*.bin"
    python data/check_shards.py data/fineweb10B/            # every .bin in the folder

Prints one line per shard (tokens, documents = number of EOT tokens, max token id)
and a total line; a bad shard gets an "error: <file>: <problem>" line on stderr
instead, and the exit code is 1 if any file is bad or an argument matches nothing (2 for
malformed arguments; 128 + the signal, after one "error: stopped by ..." line, for Ctrl-C or SIGTERM).

A shard is bad when its header or size is wrong (the same messages as the training
scripts), when it holds no tokens, when a token id is >= 50257 (outside GPT-2's
vocabulary), or when it does not start with EOT (50256). Train shards are exempt from
the last rule: shards are filled to an exact size, so a train shard may begin with
the rest of a document from the previous shard (its line then says "starts
mid-document"); a val shard must start at a document. A train shard must still hold an
EOT somewhere: training starts each sequence at one.
"""

import argparse
import glob
import os
import signal
import sys
from pathlib import Path

import shards
from cli import Stopped, counted, stop_signals_raised, user_path

GPT2_VOCAB_SIZE = 50257


def unreadable_folder(folder: str) -> bool:
    """Whether folder exists but this user may not list or enter it (glob then finds nothing in it)."""
    return os.path.isdir(folder) and not os.access(folder, os.R_OK | os.X_OK)


def expand(patterns) -> tuple:
    """Expand file paths, folders (their *.bin files) and glob patterns: each argument's matches sorted, a file
    matched again (by a folder and a pattern, say) listed once.

    Returns (paths, problems) where problems name the arguments that matched nothing.
    """
    paths, problems, seen = [], [], set()
    for pattern in patterns:
        missing = "no shard matches; check the path or pattern"
        folder = None
        if os.path.isdir(pattern):  # False, not PermissionError, behind a folder this user cannot enter (3.11's Path)
            matches, folder = sorted(str(p) for p in Path(pattern).glob("*.bin")), pattern
            missing = "the folder holds no .bin shard; check the path or download the data"
        elif any(char in pattern for char in "*?[") and not os.path.exists(pattern):  # x[1]_val_000000.bin is a name
            matches, folder = sorted(glob.glob(pattern)), os.path.dirname(pattern) or "."
        else:
            matches = [pattern]
        if not matches and folder is not None and unreadable_folder(folder):  # glob reads it as empty
            missing = f"this user cannot read the folder {folder}; make it readable (chmod a+rx {folder})"
        if not matches:
            problems.append(f"{pattern}: {missing}")
        for match in matches:
            if (real := os.path.realpath(match)) not in seen:
                seen.add(real)
                paths.append(match)
    return paths, problems


def check(path: str) -> tuple:
    """Return (stats, problem): the shard's statistics, or None and one line naming the problem."""
    try:
        stats = shards.shard_stats(path)
    except shards.ShardError as e:
        return None, str(e)
    except OSError as e:
        return None, f"{path}: cannot read it ({e.strerror}); check the path"
    issues, fix = [], shards.FIX
    if stats["tokens"] == 0:
        issues.append("holds no tokens")
    else:
        if stats["max_token"] >= GPT2_VOCAB_SIZE:
            issues.append(f"max token id {stats['max_token']} is outside the GPT-2 vocabulary "
                          f"(ids < {GPT2_VOCAB_SIZE})")
        if stats["first_token"] != shards.EOT and not is_train_shard(path):
            issues.append(f"first token is {stats['first_token']}, not {shards.EOT} "
                          f"(every document starts with EOT)")
        elif stats["documents"] == 0:
            issues.append(f"holds no EOT ({shards.EOT}): training starts each sequence at one, so it reads nothing "
                          f"from this shard")
            fix = "tokenize the text again with another --shard_size (data/fineweb.py), so that a document starts in it"
    if issues:
        return None, f"{path}: {', '.join(issues)}; {fix}"
    return stats, None


def is_train_shard(path: str) -> bool:
    return "_train_" in Path(path).name


def describe(path: str, stats: dict) -> str:
    line = (f"{path}: {counted(stats['tokens'], 'token')}, {counted(stats['documents'], 'document')}, "
            f"max token {stats['max_token']}")
    if stats["first_token"] != shards.EOT:
        line += ", starts mid-document"
    return line


def report(patterns) -> int:
    """Print each shard's line (each problem's on stderr) and the total; return the exit code."""
    paths, problems = expand(patterns)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr, flush=True)
    n_good = total_tokens = total_documents = 0
    for path in paths:
        stats, problem = check(path)
        if problem:
            problems.append(problem)
            print(f"error: {problem}", file=sys.stderr, flush=True)
            continue
        n_good += 1
        total_tokens += stats["tokens"]
        total_documents += stats["documents"]
        print(describe(path, stats), flush=True)
    print(f"total: {counted(n_good, 'good shard')}, {counted(total_tokens, 'token')}, "
          f"{counted(total_documents, 'document')}; {counted(len(problems), 'problem')}")
    return 1 if problems else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("patterns", nargs="+", metavar="PATH_OR_GLOB", type=user_path,
                        help="shard files, folders or glob patterns (quote globs)")
    args = parser.parse_args(argv)
    # Checking the 104 FineWeb10B shards reads 21 GB: Ctrl-C midway was a KeyboardInterrupt traceback
    with stop_signals_raised():
        try:
            return report(args.patterns)
        except Stopped as e:
            print(f"error: stopped by {signal.Signals(e.signum).name}; rerun to check every shard", file=sys.stderr)
            return 128 + e.signum


if __name__ == "__main__":
    sys.exit(main())
