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


def is_tool_name(name: str) -> bool:
    """A name a new perf/ tool has: a script (.py or .sh), not hidden (an editor's .NAME.swp)."""
    return name.endswith((".py", ".sh")) and not name.startswith(".")


def perf_files(repo: Path = REPO) -> set[str]:
    """The files directly in repo's perf/ that git tracks, and the untracked tools there that it would track (a tool
    added without its row must fail, before git add), without the ignored scratch and caches, or an untracked scratch
    file that no tool is (a run's output, an editor's swap file); NOT_TOOLS and the tools when this is not a git
    checkout."""
    perf = repo / "perf"
    if shutil.which("git") and (repo / ".git").exists():
        def listed(*options: str) -> list[Path]:
            out = subprocess.run(["git", "ls-files", "-z", *options, "--", "perf"], cwd=repo, capture_output=True,
                                 text=True, check=True).stdout
            return [repo / path for path in out.split("\0") if path]
        paths = listed("--cached") + [path for path in listed("--others", "--exclude-standard")
                                      if is_tool_name(path.name)]
    else:
        paths = [path for path in perf.iterdir() if path.name in NOT_TOOLS or is_tool_name(path.name)]
    return {path.name for path in paths if path.parent == perf and path.is_file()}


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


def test_an_untracked_tool_counts_and_untracked_scratch_does_not(tmp_path):
    """(Every untracked file counted: a run's output or an editor's swap file left in perf/ failed the table test.)"""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("perf/base/\n")
    (tmp_path / "perf" / "base").mkdir(parents=True)
    for name in ["tracked.py", "tracked_notes.txt", "new_tool.sh", "run_output.txt", ".README.md.swp", "base/a.py"]:
        (tmp_path / "perf" / name).write_text("")
    subprocess.run(["git", "add", "perf/tracked.py", "perf/tracked_notes.txt"], cwd=tmp_path, check=True)
    assert perf_files(tmp_path) == {"tracked.py", "tracked_notes.txt", "new_tool.sh"}


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
