"""Tests for data/shards.py: round trip, atomic writes, statistics and the exact error texts."""

import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
import shards  # noqa: E402
from shard_files import hand_made_shard  # noqa: E402
from shards import EOT, HEADER_BYTES, MAGIC, VERSION, ShardError  # noqa: E402


def raw_shard(path, header_values, n_token_bytes):
    """A hand-made header and n_token_bytes of zeros, as the str path read_tokens takes."""
    return str(hand_made_shard(path, header_values, n_token_bytes))


def test_constants():
    assert (MAGIC, VERSION, shards.HEADER_INTS, HEADER_BYTES, EOT) == (20240520, 1, 256, 1024, 50256)
    assert issubclass(ShardError, ValueError)


def test_round_trip_and_layout(tmp_path):
    tokens = np.array([EOT, 1, 2, 3, EOT, 50255, 7], dtype=np.uint16)
    path = tmp_path / "x.bin"
    shards.write_shard(path, tokens)
    raw = path.read_bytes()
    assert len(raw) == HEADER_BYTES + 2 * len(tokens)
    assert np.frombuffer(raw[:12], dtype="<i4").tolist() == [MAGIC, VERSION, len(tokens)]
    assert not any(raw[12:HEADER_BYTES])
    assert np.frombuffer(raw[HEADER_BYTES:], dtype="<u2").tolist() == tokens.tolist()
    assert shards.read_header(path) == len(tokens)
    read = shards.read_tokens(str(path))
    assert read.dtype == np.uint16 and read.tolist() == tokens.tolist()
    assert os.listdir(tmp_path) == ["x.bin"]  # the .tmp file is gone


def test_write_accepts_lists_and_empty(tmp_path):
    shards.write_shard(tmp_path / "a.bin", [EOT, 5])
    shards.write_shard(tmp_path / "b.bin", np.array([], dtype=np.int64))
    assert shards.read_tokens(tmp_path / "a.bin").tolist() == [EOT, 5]
    assert shards.read_header(tmp_path / "b.bin") == 0


def test_write_rejects_out_of_range_and_keeps_old_file(tmp_path):
    path = tmp_path / "x.bin"
    shards.write_shard(path, [EOT, 1])
    with pytest.raises(ValueError):
        shards.write_shard(path, [EOT, 70000])
    assert shards.read_tokens(path).tolist() == [EOT, 1]
    assert sorted(os.listdir(tmp_path)) == ["x.bin"]


@pytest.mark.parametrize("bad", [[EOT, 65536], [EOT, -1]])
def test_write_rejects_ids_just_outside_uint16(tmp_path, bad):
    """65536 and -1 would wrap to 0 and 65535 in a uint16 file: a silently different shard."""
    with pytest.raises(ValueError, match="uint16"):
        shards.write_shard(tmp_path / "x.bin", bad)
    assert os.listdir(tmp_path) == []
    shards.write_shard(tmp_path / "x.bin", [0, 65535])  # both ends of the range are fine
    assert shards.read_tokens(tmp_path / "x.bin").tolist() == [0, 65535]


def test_write_is_atomic(tmp_path, monkeypatch):
    """A failure mid-write leaves neither a partial final file nor a .tmp file."""
    path = tmp_path / "x.bin"

    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(shards.os, "replace", failing_replace)
    with pytest.raises(OSError):
        shards.write_shard(path, [EOT, 1, 2])
    assert os.listdir(tmp_path) == []


def test_write_syncs_the_new_bytes_before_the_rename(tmp_path, monkeypatch):
    """The rename makes the write atomic for readers; after a crash or power loss only bytes synced before it are
    sure to be under the new name, else a complete-looking shard may hold zeros."""
    events, real_fsync, real_replace = [], os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}") if os.path.exists("/proc/self/fd") else None))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", os.fspath(src)))
        real_replace(src, dst)

    monkeypatch.setattr(shards.os, "fsync", fsync)
    monkeypatch.setattr(shards.os, "replace", replace)
    shards.write_shard(tmp_path / "x.bin", [EOT, 1, 2])
    tmp = str(tmp_path / "x.bin.tmp")
    assert [kind for kind, _ in events] == ["fsync", "replace"] and events[1][1] == tmp
    assert events[0][1] in (tmp, None)  # the synced file is the one renamed (where /proc tells)


def test_a_failed_write_keeps_the_previous_shard_intact(tmp_path, monkeypatch):
    """The new bytes go to a separate file: the shard under `path` is never truncated before the rename."""
    path = tmp_path / "x.bin"
    shards.write_shard(path, [EOT, 1, 2])

    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(shards.os, "replace", failing_replace)
    with pytest.raises(OSError):
        shards.write_shard(path, [EOT, 7, 8, 9])
    assert os.listdir(tmp_path) == ["x.bin"]
    assert shards.read_tokens(path).tolist() == [EOT, 1, 2]


def test_stats(tmp_path):
    path = tmp_path / "x.bin"
    shards.write_shard(path, [EOT, 10, 20, EOT, 30, EOT])
    assert shards.shard_stats(path) == dict(tokens=6, documents=3, max_token=EOT, first_token=EOT)
    shards.write_shard(path, [])
    assert shards.shard_stats(path) == dict(tokens=0, documents=0, max_token=None, first_token=None)
    # documents counts EOT itself, not every id from EOT up: ids past GPT-2's vocabulary start no document
    shards.write_shard(path, [7, EOT + 1, EOT, 65535])
    assert shards.shard_stats(path) == dict(tokens=4, documents=1, max_token=65535, first_token=7)


def test_error_shorter_than_header(tmp_path):
    path = tmp_path / "short.bin"
    path.write_bytes(b"\0" * 100)
    with pytest.raises(ShardError) as e:
        shards.read_header(str(path))
    assert str(e.value) == (f"{path}: truncated: 100 bytes is shorter than the 1024-byte header; "
                            f"re-download or re-tokenize it")


def test_error_wrong_magic(tmp_path):
    path = raw_shard(tmp_path / "m.bin", [1234, 1, 0], 0)
    with pytest.raises(ShardError) as e:
        shards.read_tokens(path)
    assert str(e.value) == (f"{path}: not a speedrun shard (magic 1234, expected 20240520); "
                            f"re-download or re-tokenize it")


def test_error_wrong_version(tmp_path):
    path = raw_shard(tmp_path / "v.bin", [MAGIC, 7, 0], 0)
    with pytest.raises(ShardError) as e:
        shards.read_header(path)
    assert str(e.value) == (f"{path}: unsupported shard version 7 (expected 1); "
                            f"re-download or re-tokenize it")


def test_error_fewer_bytes_than_promised(tmp_path):
    path = raw_shard(tmp_path / "t.bin", [MAGIC, VERSION, 10], 18)
    with pytest.raises(ShardError) as e:
        shards.read_header(path)
    assert str(e.value) == (f"{path}: truncated: header promises 10 tokens (1044 bytes) "
                            f"but the file has 1042 bytes; re-download or re-tokenize it")


def test_error_more_bytes_than_promised(tmp_path):
    path = raw_shard(tmp_path / "c.bin", [MAGIC, VERSION, 10], 21)
    with pytest.raises(ShardError) as e:
        shards.shard_stats(path)
    assert str(e.value) == (f"{path}: corrupt: header promises 10 tokens (1044 bytes) "
                            f"but the file has 1045 bytes; re-download or re-tokenize it")


@pytest.mark.parametrize("count", [-2, -1])
def test_error_negative_token_count(tmp_path, count):
    """-1 too: its 1022 expected bytes are fewer than the header's 1024, which the size checks would call corrupt
    for a different reason."""
    path = raw_shard(tmp_path / "n.bin", [MAGIC, VERSION, count], 0)
    with pytest.raises(ShardError) as e:
        shards.read_header(path)
    assert str(e.value) == (f"{path}: corrupt: the header's token count is negative ({count}); "
                            f"re-download or re-tokenize it")


def test_checks_run_in_order(tmp_path):
    """Wrong magic is reported before wrong version and size problems."""
    path = raw_shard(tmp_path / "all.bin", [1, 2, 99], 3)
    with pytest.raises(ShardError, match="not a speedrun shard"):
        shards.read_header(path)
    path = raw_shard(tmp_path / "ver.bin", [MAGIC, 2, 99], 3)
    with pytest.raises(ShardError, match="unsupported shard version 2"):
        shards.read_header(path)


def test_missing_file_is_oserror(tmp_path):
    with pytest.raises(FileNotFoundError):
        shards.read_header(tmp_path / "nope.bin")
