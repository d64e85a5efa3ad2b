"""perf/trace_time.py on the CPU: it traces the tiny model's training forward with dynamo alone and names the
functions it inlined, with the overrides reaching the model."""

import collections
import re
import subprocess
import sys

import pytest


def inlined_calls(rows: list[str]) -> dict[tuple[str, str], set[int]]:
    """(file, function) -> the call counts of its lines, from the tool's per-function rows (each must parse)."""
    calls = collections.defaultdict(set)
    for row in rows:
        row_match = re.fullmatch(r" *([\d.]+) s +(\d+) x ([^:\s]+):(\S+):(\d+)", row)
        assert row_match, row
        calls[(row_match[3], row_match[4])].add(int(row_match[2]))
    return calls


def test_short_track_reports_its_blocks_with_the_overridden_layer_count(repo_root):
    result = subprocess.run([sys.executable, "perf/trace_time.py", "short", "--repeats=2", "--top=40",
                             "--num_layers=7"], cwd=repo_root, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    first, *rows = result.stdout.splitlines()
    match = re.fullmatch(r"short: tracing ([\d.]+) s \(min of ([\d.]+) ([\d.]+)\)", first)
    assert match, first
    assert float(match[1]) == min(float(match[2]), float(match[3])) > 0
    calls = inlined_calls(rows)
    assert 7 in calls[("train_gpt.py", "forward")]  # a block's forward, once per layer
    assert ("train_gpt.py", "backward") not in calls  # FP8MLP is one call (fp8_mlp): its backward is not traced


def test_a_bad_override_is_the_scripts_one_line_error(repo_root):
    result = subprocess.run([sys.executable, "perf/trace_time.py", "short", "--no_such_setting=1"], cwd=repo_root,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["error: unknown setting --no_such_setting (see --help for the list)"]


def test_medium_track_traces_its_sixteen_blocks_without_the_mlps_backward(repo_root):
    result = subprocess.run([sys.executable, "perf/trace_time.py", "medium", "--repeats=1", "--top=40"], cwd=repo_root,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    calls = inlined_calls(result.stdout.splitlines()[1:])
    assert 16 in calls[("train_gpt_medium.py", "forward")]  # a block's forward, once per layer
    assert ("train_gpt_medium.py", "backward") not in calls  # NormedReluSquareMLP is one call


@pytest.mark.parametrize("flag", ["--help", "--help=1"])  # --help=1 gave the script's help, not the tool's
def test_help_lists_the_tools_own_options_and_sends_the_rest_to_the_script(repo_root, flag):
    result = subprocess.run([sys.executable, "perf/trace_time.py", flag], cwd=repo_root, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: python perf/trace_time.py [short|medium] ")
    for option in ("--repeats=N", "--top=K", "--script=PATH", "--name=value"):
        assert f"\n  {option} " in result.stdout, option
    assert "--train_files" not in result.stdout  # not train_gpt.py's own list of settings


def test_an_unknown_track_is_named_in_one_line(repo_root):
    result = subprocess.run([sys.executable, "perf/trace_time.py", "bogus"], cwd=repo_root, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: unknown track 'bogus': the first argument is short or medium (see --help)"]


def test_a_repeat_count_that_is_not_a_positive_number_is_one_line(repo_root):
    result = subprocess.run([sys.executable, "perf/trace_time.py", "medium", "--repeats=0"], cwd=repo_root,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: --repeats takes a whole number of at least 1, e.g. --repeats=3; got '--repeats=0'"]
