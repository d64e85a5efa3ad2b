"""perf/README.md, the contributor's index of perf/: its tables list every tool in perf/ (every file but NOTES.md and
the README itself; the ignored perf/base/ and perf/carry/ are scratch), once each, and no other; it names no perf/
file that does not exist; each table row's options are the tool's own; the repository README's Layout points to it."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PERF = REPO / "perf"
README = PERF / "README.md"
NOT_TOOLS = {"NOTES.md", "README.md"}
ROW = re.compile(r"^\| `([^`]+)` \|(.*)\|$")  # a tools table's row: | `NAME` | answers | usage |
PERF_PATH = re.compile(r"\bperf/([\w./-]+\.(?:py|sh|md))\b")  # a perf/ file named anywhere (branch names have no .py)
BARE_NAME = re.compile(r"`([\w-]+\.(?:py|sh))`")  # a code span that is one script's name, e.g. `kernel_census.py`


def perf_files() -> set[str]:
    """The files directly in perf/ that git tracks or would track (new ones not yet added count: a tool added without
    its row must fail), without the ignored scratch and caches; every file there when this is not a git checkout."""
    if shutil.which("git") and (REPO / ".git").exists():
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "perf"],
                                cwd=REPO, capture_output=True, text=True, check=True).stdout.split("\0")
        paths = [REPO / path for path in listed if path]
    else:
        paths = [path for path in PERF.iterdir() if not path.name.endswith((".pyc", ".lock"))]
    return {path.name for path in paths if path.parent == PERF and path.is_file()}


def table_rows() -> list[tuple[str, str]]:
    """(tool name, the row's other cells) of each row of perf/README.md's tools tables."""
    rows = (ROW.match(line) for line in README.read_text(encoding="utf-8").splitlines())
    return [(row[1], row[2]) for row in rows if row]


def test_the_tables_list_every_perf_tool_once_and_no_other():
    """A tool added to perf/ without a row, a row left for a tool removed or renamed, or a tool with two rows."""
    names = [name for name, _ in table_rows()]
    tools = perf_files() - NOT_TOOLS
    assert len(tools) > 20, "perf/ listed wrong: too few tools"
    assert sorted(tools - set(names)) == [], "perf/ tools without a row in perf/README.md"
    assert sorted(set(names) - tools) == [], "rows in perf/README.md for no file in perf/"
    assert sorted({name for name in names if names.count(name) > 1}) == [], "tools with two rows"


def test_every_perf_file_the_readme_names_exists():
    """perf/NAME.py anywhere in the text (scratch under perf/base/ and perf/carry/ aside) and a script named alone in
    a code span (`kernel_census.py`, `train_gpt.py`): in perf/ or the repository root."""
    text = README.read_text(encoding="utf-8")
    paths = {path for path in PERF_PATH.findall(text) if not path.startswith(("base/", "carry/"))}
    missing = sorted(f"perf/{path}" for path in paths if not (PERF / path).is_file())
    missing += sorted({name for name in BARE_NAME.findall(text) if not (PERF / name).is_file()
                       and not (REPO / name).is_file()})
    assert missing == []


def test_each_rows_options_are_the_tools_own():
    """The usage cell's --options are copied from the tool's help (its docstring or header comment), never invented:
    each must be in the tool's file."""
    invented = []
    for name, cells in table_rows():
        source = (PERF / name).read_text(encoding="utf-8") if (PERF / name).is_file() else ""
        usage = cells.split("|")[-1].replace("\\", "")  # the last cell; '\|' is a '|' inside a table's code span
        invented += [f"{name}: {option}" for option in re.findall(r"--[\w-]+", usage) if option not in source]
    assert invented == []


def test_the_readme_keeps_to_120_columns():
    assert [number for number, line in enumerate(README.read_text(encoding="utf-8").splitlines(), 1)
            if len(line) > 120] == []


def test_the_repository_readme_layout_points_to_it():
    layout = (REPO / "README.md").read_text(encoding="utf-8").split("## Layout", 1)[1]
    line = next((line for line in layout.splitlines() if line.startswith("perf/ ")), None)
    if line is None:
        pytest.fail("README.md's Layout has no perf/ line")
    assert "perf/README.md" in line
