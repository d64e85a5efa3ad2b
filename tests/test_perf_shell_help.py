"""perf/'s shell tools answer -h / --help with their header comment (their usage) and do nothing else; before, the
word was taken as their first argument (an output folder, a track, a branch, a job)."""
import itertools
import subprocess

import pytest

SHELL_TOOLS = ["ab", "branch_scripts", "fullbatch_ab", "multi_gpu", "pack", "pair", "power", "proxy", "startup_ab"]


def header_comment(path) -> str:
    """The comment lines after the shebang, without their '#' and one space."""
    comment = itertools.takewhile(lambda line: line.startswith("#"), path.read_text().splitlines()[1:])
    return "".join(line.removeprefix("#").removeprefix(" ") + "\n" for line in comment)


@pytest.mark.parametrize("flag", ["-h", "--help"])
@pytest.mark.parametrize("name", SHELL_TOOLS)
def test_a_shell_tool_prints_its_header_for_help_and_runs_nothing(repo_root, tmp_path, name, flag):
    before = sorted(p.name for p in (repo_root / "perf").iterdir())
    result = subprocess.run(["bash", str(repo_root / "perf" / f"{name}.sh"), flag], cwd=tmp_path, capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout == header_comment(repo_root / "perf" / f"{name}.sh") and "Usage" in result.stdout
    assert list(tmp_path.iterdir()) == [] and sorted(p.name for p in (repo_root / "perf").iterdir()) == before
