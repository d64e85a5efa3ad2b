"""README.md: its relative links lead to files that exist, and its records tables list every record folder."""
import re
from pathlib import Path

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
