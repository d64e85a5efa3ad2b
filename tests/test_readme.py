"""README.md: its relative links (and those of records/'s READMEs and perf/README.md) lead to files that exist, its
records tables list every record folder, and every record folder holds a README and whole run logs, whose line ends
git leaves as written."""
import functools
import itertools
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from stand_ins import records_tool

REPO = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def relative_links(markdown: Path) -> list[str]:
    """The link targets in markdown that are paths in the repository (no web address, no anchor of this page)."""
    targets = (target.split("#")[0] for target in LINK.findall(markdown.read_text(encoding="utf-8")))
    return [target for target in targets if target and "://" not in target and not target.startswith("mailto:")]


def test_relative_links_lead_to_files_that_exist():
    pages = [REPO / "README.md", REPO / "records" / "README.md", *REPO.glob("records/track_*/*/README.md"),
             REPO / "perf" / "README.md"]
    missing = [f"{page.relative_to(REPO)}: {target}" for page in pages for target in relative_links(page)
               if not (page.parent / target).exists()]
    assert missing == []


def record_table_links(track: str) -> set:
    """The paths linked from the rows of README.md's table of track's records (the one headed '| track N record')."""
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith(f"| track {track} record |"))
    rows = itertools.takewhile(lambda line: line.startswith("|"), lines[head + 1:])
    return {(REPO / target.split("#")[0]).resolve() for row in rows for target in LINK.findall(row)}


def test_the_records_tables_list_every_record_folder():
    """Each record folder has a row in its track's table (records/README.md's 'Submitting a record'): a link anywhere
    in the README passed, such as the multi-GPU table's to a track 1 record whose row was gone."""
    missing = []
    for track_folder in sorted(REPO.glob("records/track_*")):
        linked = record_table_links(track_folder.name.split("_")[1])
        missing += [str(folder.relative_to(REPO)) for folder in sorted(track_folder.iterdir())
                    if folder.is_dir() and folder.resolve() not in linked]
    assert missing == []


def test_every_record_folder_has_a_readme_and_whole_run_logs():
    """A record is a README and its logs (records/README.md): a folder without a README passed the link checks, and a
    log whose script was edited after the run (its separator's byte count no longer holds) is skipped by
    `records/tool.py compare` with a warning only, so its run would silently drop out of the record's statistics."""
    tool = records_tool()
    folders = [folder for folder in REPO.glob("records/track_*/*") if folder.is_dir()]
    assert [str(folder.relative_to(REPO)) for folder in folders if not (folder / "README.md").is_file()] == []
    broken = []
    for path in (path for folder in folders for path in folder.rglob("*") if path.is_file()):
        data = path.read_bytes()
        if tool.SEPARATOR_RE.search(data) and tool.restored_log(data)[0] is None:
            broken.append(str(path.relative_to(REPO)))
    assert broken == []


def test_git_leaves_the_record_logs_line_ends_as_written():
    """A checkout with core.autocrlf (git on Windows) rewrote each record log's line ends, and its source's byte count
    no longer held: .gitattributes keeps git from touching them, in every record folder of every track, and leaves
    every file outside records/ as git would treat it without it (one log checked passed a pattern for track 1's
    folders alone, and one for every .txt file, requirements.txt's too)."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    git = functools.partial(subprocess.run, cwd=REPO, capture_output=True, text=True, check=True)
    logs = [str(path.relative_to(REPO)) for path in sorted(REPO.glob("records/**/*.txt"))
            if b"end of source" in path.read_bytes()]
    others = [path for path in git(["git", "ls-files", "-z"]).stdout.split("\0") if path and
              not path.startswith("records/")]
    answer = git(["git", "check-attr", "-z", "--stdin", "text"], input="\0".join(logs + others)).stdout.split("\0")
    text = dict(zip(answer[0::3], answer[2::3]))  # path, attribute, value
    assert len(logs) > 1 and [log for log in logs if text[log] != "unset"] == []
    assert "requirements.txt" in others and [path for path in others if text[path] != "unspecified"] == []
