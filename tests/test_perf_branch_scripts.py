"""perf/branch_scripts.sh: each named branch's changed track scripts copied into perf/base/, run here in a small git
repository of its own."""

import subprocess

import pytest


def git(repo, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                          capture_output=True, text=True, timeout=60).stdout


@pytest.fixture
def repo(tmp_path):
    """main with both track scripts; feat/x changes train_gpt.py and has no train_gpt_medium.py (a branch from before
    track 2)."""
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "train_gpt.py").write_text("# main\n")
    (tmp_path / "train_gpt_medium.py").write_text("# main, track 2\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "main")
    git(tmp_path, "checkout", "-q", "-b", "feat/x")
    (tmp_path / "train_gpt.py").write_text("# feat/x\n")
    git(tmp_path, "rm", "-q", "train_gpt_medium.py")
    git(tmp_path, "commit", "-q", "-am", "feat/x")
    git(tmp_path, "checkout", "-q", "main")
    return tmp_path


def branch_scripts(repo, repo_root, *branches: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(repo_root / "perf" / "branch_scripts.sh"), *branches], cwd=repo,
                          capture_output=True, text=True, timeout=60)


def test_a_branch_that_does_not_exist_is_one_error_line_and_writes_nothing(repo, repo_root):
    """(It left perf/base/no-such_train_gpt.py, empty, which ab.sh then ran as a variant.)"""
    result = branch_scripts(repo, repo_root, "feat/x", "no/such")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == "error: no branch or commit 'no/such' here (git branch -a lists them)\n"
    assert not (repo / "perf").exists()


def test_only_the_scripts_a_branch_has_and_changes_are_copied(repo, repo_root):
    """feat/x has no train_gpt_medium.py: no empty copy of it (git show failed after the file was opened)."""
    result = branch_scripts(repo, repo_root, "feat/x")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "perf/base/feat-x_train_gpt.py\n"
    assert [p.name for p in (repo / "perf" / "base").iterdir()] == ["feat-x_train_gpt.py"]
    assert (repo / "perf" / "base" / "feat-x_train_gpt.py").read_text() == "# feat/x\n"


def test_a_branch_that_changes_neither_script_says_so(repo, repo_root):
    """(main itself, or a branch of data tools only, copied nothing and said nothing.)"""
    result = branch_scripts(repo, repo_root, "main", "feat/x")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "perf/base/feat-x_train_gpt.py\n"
    assert result.stderr == "note: main changes neither track script against main: nothing copied\n"
