"""README.md: its relative links lead to files that exist, its records tables list every record folder, and every
record folder holds a README and whole run logs, whose line ends git leaves as written."""
import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def relative_links(markdown: Path) -> list[str]:
    """The link targets in markdown that are paths in the repository (no web address, no anchor of this page)."""
    targets = (target.split("#")[0] for target in LINK.findall(markdown.read_text(encoding="utf-8")))
    return [target for target in targets if target and "://" not in target and not target.startswith("mailto:")]


def test_relative_links_lead_to_files_that_exist():
    pages = [REPO / "README.md", REPO / "records" / "README.md", *REPO.glob("records/track_*/*/README.md")]
    missing = [f"{page.relative_to(REPO)}: {target}" for page in pages for target in relative_links(page)
               if not (page.parent / target).exists()]
    assert missing == []


def test_the_records_tables_list_every_record_folder():
    linked = {(REPO / target).resolve() for target in relative_links(REPO / "README.md")}
    folders = {folder.resolve() for folder in REPO.glob("records/track_*/*") if folder.is_dir()}
    assert sorted(str(folder.relative_to(REPO)) for folder in folders - linked) == []


def test_every_record_folder_has_a_readme_and_whole_run_logs():
    """A record is a README and its logs (records/README.md): a folder without a README passed the link checks, and a
    log whose script was edited after the run (its separator's byte count no longer holds) is skipped by
    `records/tool.py compare` with a warning only, so its run would silently drop out of the record's statistics."""
    spec = importlib.util.spec_from_file_location("records_tool", REPO / "records" / "tool.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
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
    no longer held: .gitattributes keeps git from touching them."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    log = next(path for path in sorted(REPO.glob("records/track_*/*/*.txt")) if b"end of source" in path.read_bytes())
    answer = subprocess.run(["git", "check-attr", "text", "--", str(log.relative_to(REPO))], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout
    assert answer.strip().endswith("text: unset"), answer
