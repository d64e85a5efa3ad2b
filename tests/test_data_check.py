"""Tests for data/check_shards.py, run as a subprocess: exit code and the lines it prints."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "data"))
import shards  # noqa: E402
from shard_files import hand_made_shard  # noqa: E402
from stand_ins import deny_entry_below  # noqa: E402
from shards import EOT, MAGIC  # noqa: E402

FIX = "re-download or re-tokenize it"


def check(*args):
    """Run the checker; return (exit code, stdout lines, stderr lines)."""
    result = subprocess.run([sys.executable, str(REPO_ROOT / "data" / "check_shards.py"),
                             *map(str, args)], capture_output=True, text=True, timeout=60)
    return result.returncode, result.stdout.splitlines(), result.stderr.splitlines()


@pytest.fixture
def good(tmp_path):
    """A val and a train shard; the train shard starts mid-document, as exact-size shards may."""
    shards.write_shard(tmp_path / "x_val_000000.bin", [EOT, 10, 20, EOT, 30])
    shards.write_shard(tmp_path / "x_train_000001.bin", [40, EOT, 50256, 7])
    return tmp_path


def test_good_shards(good):
    code, out, err = check(good / "x_val_000000.bin", good / "x_train_000001.bin")
    assert (code, err) == (0, [])
    assert out == [f"{good}/x_val_000000.bin: 5 tokens, 2 documents, max token 50256",
                   f"{good}/x_train_000001.bin: 4 tokens, 2 documents, max token 50256, "
                   f"starts mid-document",
                   "total: 2 good shards, 9 tokens, 4 documents; 0 problems"]


def test_glob_and_folder_arguments(good):
    for argument in (f"{good}/x_*.bin", good):
        code, out, err = check(argument)
        assert code == 0, err
        assert out[-1] == "total: 2 good shards, 9 tokens, 4 documents; 0 problems"
        assert out[0].startswith(f"{good}/x_train_000001.bin:")  # sorted order


def test_a_path_that_exists_is_a_name_even_with_glob_characters(tmp_path):
    """fineweb.py --name 'x[1]' writes x[1]_val_000000.bin; as a pattern it would match x1_val_000000.bin only."""
    shards.write_shard(tmp_path / "x[1]_val_000000.bin", [EOT, 10])
    shards.write_shard(tmp_path / "x1_val_000000.bin", [EOT, 10, 20])
    code, out, err = check(tmp_path / "x[1]_val_000000.bin")
    assert (code, err) == (0, [])
    assert out[0] == f"{tmp_path}/x[1]_val_000000.bin: 2 tokens, 1 document, max token 50256"
    code, out, err = check(f"{tmp_path}/x[1]_val_*.bin")  # not a path: a pattern
    assert out[0].startswith(f"{tmp_path}/x1_val_000000.bin: 3 tokens")


def test_a_shard_matched_by_two_arguments_is_checked_and_counted_once(good):
    code, out, err = check(good, f"{good}/*val*", good / "x_val_000000.bin", f"{good}/./x_train_000001.bin")
    assert code == 0, err
    assert [line.split(":")[0] for line in out[:-1]] == [f"{good}/x_train_000001.bin", f"{good}/x_val_000000.bin"]
    assert out[-1] == "total: 2 good shards, 9 tokens, 4 documents; 0 problems"


def test_a_shard_reached_through_a_link_is_checked_and_counted_once(good, tmp_path_factory):
    """A folder of links to the shards (a run's own view of a shared copy), named with the shards' folder."""
    links = tmp_path_factory.mktemp("links")
    (links / "x_val_000000.bin").symlink_to(good / "x_val_000000.bin")
    code, out, err = check(good, links)
    assert code == 0, err
    assert out[-1] == "total: 2 good shards, 9 tokens, 4 documents; 0 problems"


def test_truncated_shard(good):
    path = good / "x_val_000000.bin"
    path.write_bytes(path.read_bytes()[:-1])
    code, out, err = check(path, good / "x_train_000001.bin")
    assert code == 1
    assert err == [f"error: {path}: truncated: header promises 5 tokens (1034 bytes) but the "
                   f"file has 1033 bytes; {FIX}"]
    assert out[-1] == "total: 1 good shard, 4 tokens, 2 documents; 1 problem"


def test_shorter_than_header(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(b"abc")
    code, out, err = check(path)
    assert code == 1
    assert err == [f"error: {path}: truncated: 3 bytes is shorter than the 1024-byte header; {FIX}"]


def test_wrong_magic(tmp_path):
    path = hand_made_shard(tmp_path / "x.bin", [42, 1, 0])
    code, out, err = check(path)
    assert code == 1
    assert err == [f"error: {path}: not a speedrun shard (magic 42, expected {MAGIC}); {FIX}"]


def test_wrong_version(tmp_path):
    path = hand_made_shard(tmp_path / "x.bin", [MAGIC, 2, 1], b"\0\0")
    code, out, err = check(path)
    assert code == 1
    assert err == [f"error: {path}: unsupported shard version 2 (expected 1); {FIX}"]


def test_bad_token_ids_and_first_token(tmp_path):
    path = tmp_path / "x_val_000000.bin"
    shards.write_shard(path, [5, EOT, 50257])
    code, out, err = check(path)
    assert code == 1
    assert err == [f"error: {path}: max token id 50257 is outside the GPT-2 vocabulary "
                   f"(ids < 50257), first token is 5, not 50256 (every document starts with EOT); "
                   f"{FIX}"]


def test_empty_shard_and_unmatched_pattern(tmp_path):
    path = tmp_path / "x_val_000000.bin"
    shards.write_shard(path, [])
    code, out, err = check(path, tmp_path / "nothing_*.bin")
    assert code == 1
    assert err == [f"error: {tmp_path}/nothing_*.bin: no shard matches; check the path or pattern",
                   f"error: {path}: holds no tokens; {FIX}"]
    assert out == ["total: 0 good shards, 0 tokens, 0 documents; 2 problems"]


def test_a_folder_without_shards_is_named_as_a_folder(tmp_path):
    (tmp_path / "notes.txt").write_text("not a shard")
    code, out, err = check(tmp_path)
    assert code == 1
    assert err == [f"error: {tmp_path}: the folder holds no .bin shard; check the path or download the data"]
    assert out == ["total: 0 good shards, 0 tokens, 0 documents; 1 problem"]


def test_a_folder_this_user_cannot_read_is_named_not_called_empty(tmp_path, monkeypatch):
    """glob finds nothing in a folder without read or search permission, so its shards looked missing. os.access
    stands in for the permissions, and the globs answer as they would there: the tests run as root, who reads any
    folder."""
    import check_shards
    shards.write_shard(tmp_path / "x_val_000000.bin", [EOT, 1])
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: str(path) != str(tmp_path) and real_access(path, mode))
    monkeypatch.setattr(check_shards.glob, "glob", lambda pattern: [])
    monkeypatch.setattr(Path, "glob", lambda self, pattern: iter([]))
    paths, problems = check_shards.expand([str(tmp_path), str(tmp_path / "x_*.bin")])
    unreadable = f"this user cannot read the folder {tmp_path}; make it readable (chmod a+rx {tmp_path})"
    assert paths == [] and problems == [f"{tmp_path}: {unreadable}", f"{tmp_path}/x_*.bin: {unreadable}"]


def test_a_leading_tilde_is_the_home_folder(good, monkeypatch, capsys):
    """A quoted glob, as the README writes them, keeps its ~ from the shell: '~/data/*.bin' matched nothing."""
    import check_shards
    monkeypatch.setenv("HOME", str(good))
    for argument in ("~/x_*.bin", "~", "~/x_val_000000.bin"):
        assert check_shards.main([argument]) == 0, capsys.readouterr().err
        out = capsys.readouterr().out.splitlines()
        assert out[0].startswith(f"{good}/x_") and out[-1].startswith("total: ")
        assert out[-1].endswith("; 0 problems")


@pytest.mark.parametrize("argument", ["", "  "])
def test_an_empty_argument_is_a_usage_error(good, monkeypatch, argument):
    """An unset shell variable: as a path, "" was the working directory, and its shards were checked instead. Spaces
    alone are empty too, as in the tracks' settings."""
    monkeypatch.chdir(good)
    code, out, err = check(argument)
    assert (code, out) == (2, [])
    assert err[-1] == ("check_shards.py: error: argument PATH_OR_GLOB: an empty path (an unset shell variable?) names "
                       "no file or folder; give one")


def test_a_missing_file_is_one_error_line(tmp_path):
    path = tmp_path / "x_val_000000.bin"
    code, out, err = check(path)
    assert code == 1
    assert err == [f"error: {path}: cannot read it (No such file or directory); check the path"]
    assert out == ["total: 0 good shards, 0 tokens, 0 documents; 1 problem"]


def test_only_the_file_name_makes_a_train_shard(tmp_path):
    """A val shard that starts mid-document is bad even inside a folder whose name holds _train_."""
    folder = tmp_path / "my_train_data"
    folder.mkdir()
    path = folder / "x_val_000000.bin"
    shards.write_shard(path, [40, EOT, 50])
    code, out, err = check(path)
    assert code == 1
    assert err == [f"error: {path}: first token is 40, not 50256 (every document starts with EOT); {FIX}"]


def test_a_train_shard_without_any_eot_is_bad(tmp_path):
    """Training starts each sequence at an EOT, so it reads nothing from such a shard (its own check then says to
    check the shards here); one EOT anywhere, even not first, makes it good."""
    path = tmp_path / "x_train_000001.bin"
    shards.write_shard(path, [40, 41, 42])
    code, out, err = check(path)
    assert code == 1
    assert err == [f"error: {path}: holds no EOT (50256): training starts each sequence at one, so it reads nothing "
                   "from this shard; tokenize the text again with another --shard_size (data/fineweb.py), so that a "
                   "document starts in it"]  # the whole text: re-downloading a shard cut so would not help
    shards.write_shard(path, [40, 41, EOT, 42])
    assert check(path)[0] == 0


STOPPED_AT_ITS_SECOND_SHARD = """
import os, sys
sys.path.insert(0, sys.argv[1])
import check_shards
checked, real_check = [], check_shards.check

def check(path):
    checked.append(path)
    if len(checked) == 2:
        os.kill(os.getpid(), int(sys.argv[2]))
    return real_check(path)

check_shards.check = check
sys.exit(check_shards.main(sys.argv[3:]))
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_midway_is_one_line_and_its_exit_code(good, signum):
    """Checking FineWeb10B's 104 shards reads 21 GB, minutes from a cold disk: Ctrl-C midway ended in a
    KeyboardInterrupt traceback, SIGTERM (kill, a job scheduler) without a word. Here the signal comes as the
    second shard's check starts."""
    result = subprocess.run([sys.executable, "-c", STOPPED_AT_ITS_SECOND_SHARD, str(REPO_ROOT / "data"),
                             str(int(signum)), str(good)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 128 + signum
    assert result.stdout.splitlines() == [f"{good}/x_train_000001.bin: 4 tokens, 2 documents, max token 50256, "
                                          "starts mid-document"]
    assert result.stderr.splitlines() == [f"error: stopped by {signal.Signals(signum).name}; rerun to check every "
                                          "shard"]


def test_a_shard_behind_a_folder_this_user_cannot_enter_is_one_error_line(good, monkeypatch, capsys):
    """Python 3.11's Path.is_dir raises PermissionError where a folder on the way denies search permission: the
    check ended in a traceback. os.stat stands in for the permissions (the tests run as root, who enters any folder)."""
    import check_shards
    locked = str(good / "locked")
    stat = deny_entry_below(locked, monkeypatch)
    monkeypatch.setattr(shards, "shard_stats", lambda path: stat(path))  # its open() would not go through os.stat
    assert check_shards.main([f"{locked}/x_val_000000.bin"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"error: {locked}/x_val_000000.bin: cannot read it (Permission denied); check the path"]
