"""Track 1's full-batch step times against the attention window each step ran at, and a least-squares line through
them: how much of the step grows with the window (attention) and how much does not.

Usage: python fullbatch_by_window.py LOG...   (track-1 logs of train_gpt.py; the window rule is its window_blocks)
"""

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # records/, for the log parser of records/tool.py
from tool import load_log, number  # noqa: E402

BLOCK_SIZE = 128


def window_blocks(step: int, start: int, end: int, steps: int) -> int:
    """train_gpt.py's rule: linear from start to end tokens over the run, rounded up to blocks, at least one."""
    return max(1, math.ceil((start + (end - start) * min(step / steps, 1.0)) / BLOCK_SIZE))


def step_durations(path: str) -> list[tuple[int, int]]:
    """(window in blocks, ms) for each training step; the log's step k is the loop's step k - 1."""
    log = load_log(path)
    start, end, steps = (int(log.hparams[name]) for name in ("window_start", "window_end", "num_iterations"))
    times = [(row["step"], int(number(row["train_time"]))) for row in log.steps if "train_loss" in row]
    ends = [0] + [ms for _, ms in times]
    return [(window_blocks(step - 1, start, end, steps), ends[i + 1] - ends[i]) for i, (step, _) in enumerate(times)]


def line_fit(points: list[tuple[int, int]]) -> tuple[float, float]:
    mean_w = sum(w for w, _ in points) / len(points)
    mean_ms = sum(ms for _, ms in points) / len(points)
    slope = (sum((w - mean_w) * (ms - mean_ms) for w, ms in points)
             / sum((w - mean_w) ** 2 for w, _ in points))
    return mean_ms - slope * mean_w, slope


def main(paths: list[str]):
    for path in paths:
        points = step_durations(path)
        mean_ms = sum(ms for _, ms in points) / len(points)
        if len({w for w, _ in points}) == 1:
            print(f"{path}: {len(points)} steps, all at {points[0][0]} blocks, mean {mean_ms:.1f} ms; "
                  f"steps {[ms for _, ms in points]}")
            continue
        intercept, slope = line_fit(points)
        mean_w = sum(w for w, _ in points) / len(points)
        print(f"{path}: {len(points)} steps, mean {mean_ms:.1f} ms")
        print("  window blocks: step ms  " + ", ".join(f"{w}: {ms}" for w, ms in points))
        print(f"  fit: {intercept:.1f} ms + {slope:.2f} ms per window block; at 1 block {intercept + slope:.1f} ms,"
              f" at the mean window ({mean_w:.2f} blocks) {intercept + slope * mean_w:.1f} ms,"
              f" at {points[-1][0]} blocks {intercept + slope * points[-1][0]:.1f} ms")


if __name__ == "__main__":
    main(sys.argv[1:])
