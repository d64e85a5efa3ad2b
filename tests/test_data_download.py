"""Tests for data/cached_fineweb10B.py with the Hub replaced by a local folder (offline)."""

import os
import shutil
import socket
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from huggingface_hub.errors import (EntryNotFoundError, HfHubHTTPError, LocalEntryNotFoundError,
                                    RepositoryNotFoundError)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
import cached_fineweb10B as downloader  # noqa: E402
import shards  # noqa: E402

REPO_ID = "kjj0/fineweb10B-gpt2"
HTTP_RESPONSE = types.SimpleNamespace(headers={}, request=None)  # what huggingface_hub's HTTP errors read


def shard_tokens(index):
    """Tiny distinct token streams: shard i holds i+3 tokens, the first one EOT."""
    return np.array([shards.EOT] + list(range(index, 2 * index + 2)), dtype=np.uint16)


@pytest.fixture
def hub(tmp_path):
    """A fake Hub folder holding the val shard and 3 train shards of kjj0/fineweb10B-gpt2."""
    repo_dir = tmp_path / "hub" / REPO_ID
    repo_dir.mkdir(parents=True)
    for index, name in enumerate(downloader.shard_filenames("fineweb", 3)):
        shards.write_shard(repo_dir / name, shard_tokens(index))
    return repo_dir


@pytest.fixture
def fake_download(hub, monkeypatch):
    """Replace download_file by a copy from the fake hub; returns the list of files fetched."""
    fetched = []

    def copy_from_hub(repo_id, filename, dest_dir):
        source = hub.parent.parent / repo_id / filename
        if not source.exists():
            raise EntryNotFoundError(f"404 Client Error. Entry Not Found for url: .../{filename}")
        dest_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, dest_dir / filename)
        fetched.append(filename)
        return dest_dir / filename

    monkeypatch.setattr(downloader, "download_file", copy_from_hub)
    return fetched


def run(capsys, *argv):
    """Run the script's main in-process; return (exit code, stdout lines, stderr lines)."""
    code = downloader.main(list(argv))
    out, err = capsys.readouterr()
    return code, out.strip().splitlines(), err.strip().splitlines()


def test_downloads_val_and_first_n_train_shards(tmp_path, fake_download, capsys):
    out_dir = tmp_path / "fineweb10B"
    code, out, err = run(capsys, "2", "--dir", str(out_dir))
    assert code == 0, err
    assert fake_download == ["fineweb_val_000000.bin", "fineweb_train_000001.bin",
                             "fineweb_train_000002.bin"]
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(fake_download)  # staging removed
    for index, name in enumerate(fake_download):
        assert shards.read_tokens(out_dir / name).tolist() == shard_tokens(index).tolist()
    total = sum(len(shard_tokens(i)) for i in range(3))
    assert out[-1] == f"3 files, {total} tokens in {out_dir}/ (3 downloaded, 0 already present)"


def test_skips_valid_files_and_replaces_invalid_ones(tmp_path, hub, fake_download, capsys):
    out_dir = tmp_path / "fineweb10B"
    out_dir.mkdir()
    shutil.copyfile(hub / "fineweb_val_000000.bin", out_dir / "fineweb_val_000000.bin")
    (out_dir / "fineweb_train_000001.bin").write_bytes(b"\0" * 10)  # a broken leftover
    code, out, err = run(capsys, "2", "--dir", str(out_dir))
    assert code == 0, err
    assert fake_download == ["fineweb_train_000001.bin", "fineweb_train_000002.bin"]
    assert any("fineweb_train_000001.bin: truncated" in line and "downloading it again" in line
               for line in err)
    assert out[-1].endswith("(2 downloaded, 1 already present)")
    code, out, err = run(capsys, "3", "--dir", str(out_dir))
    assert code == 0
    assert fake_download[2:] == ["fineweb_train_000003.bin"]
    assert out[-1].endswith("(1 downloaded, 3 already present)")


def test_default_is_all_train_shards_and_missing_file_is_one_error_line(tmp_path, fake_download,
                                                                       capsys):
    """The fake hub holds 3 of the 103 train shards, so the 4th is missing upstream."""
    out_dir = tmp_path / "fineweb10B"
    code, out, err = run(capsys, "--dir", str(out_dir))
    assert code == 1
    assert out == []
    assert err[-1] == ("error: fineweb_train_000004.bin is missing from the dataset repo "
                       "kjj0/fineweb10B-gpt2; check N and --dataset (see --help for the shard counts)")
    assert len(fake_download) == 4 and (out_dir / "fineweb_train_000003.bin").exists()


def test_truncated_download_is_detected_and_not_kept(tmp_path, hub, fake_download, capsys):
    data = (hub / "fineweb_train_000001.bin").read_bytes()
    (hub / "fineweb_train_000001.bin").write_bytes(data[:-2])
    out_dir = tmp_path / "fineweb10B"
    code, out, err = run(capsys, "1", "--dir", str(out_dir))
    assert code == 1
    staged = out_dir / ".partial" / "fineweb_train_000001.bin"
    assert err[-1] == (f"error: downloaded fineweb_train_000001.bin is invalid and was deleted: "
                       f"{staged}: truncated: header promises 4 tokens (1032 bytes) but the file "
                       f"has 1030 bytes; re-download or re-tokenize it")
    assert not (out_dir / "fineweb_train_000001.bin").exists()
    assert not staged.exists()
    assert (out_dir / "fineweb_val_000000.bin").exists()


def test_edu_dataset_uses_its_repo_and_prefix(tmp_path, monkeypatch, capsys):
    requested = []

    def record(repo_id, filename, dest_dir):
        requested.append((repo_id, filename))
        dest_dir.mkdir(parents=True, exist_ok=True)
        shards.write_shard(dest_dir / filename, [shards.EOT])
        return dest_dir / filename

    monkeypatch.setattr(downloader, "download_file", record)
    code, out, err = run(capsys, "1", "--dataset", "fineweb10B-edu", "--dir", str(tmp_path))
    assert code == 0, err
    assert requested == [("kjj0/finewebedu10B-gpt2", "finewebedu_val_000000.bin"),
                         ("kjj0/finewebedu10B-gpt2", "finewebedu_train_000001.bin")]


@pytest.mark.parametrize("exc, expected_start", [
    (LocalEntryNotFoundError("connection error"), "error: cannot reach the Hugging Face Hub"),
    (OSError(28, "No space left on device"), "error: cannot write fineweb_val_000000.bin into"),
    (RuntimeError("boom"), "error: downloading fineweb_val_000000.bin from kjj0/fineweb10B-gpt2 "
                           "failed (RuntimeError: boom)"),
    # huggingface_hub before 1.0 raised requests' errors, OSErrors without an errno: not the disk's fault
    (type("ConnectionError", (OSError,), {})("Connection aborted."),
     "error: downloading fineweb_val_000000.bin from kjj0/fineweb10B-gpt2 failed (ConnectionError: Connection "
     "aborted.); rerun to resume"),
    (RepositoryNotFoundError("404 Client Error. Repository Not Found", response=HTTP_RESPONSE),
     "error: dataset repo kjj0/fineweb10B-gpt2 not found on the Hugging Face Hub"),
    (HfHubHTTPError("503 Server Error: Service Unavailable", response=HTTP_RESPONSE),
     "error: the Hugging Face Hub refused fineweb_val_000000.bin from kjj0/fineweb10B-gpt2 (503 Server Error"),
])
def test_download_failures_end_in_one_error_line(tmp_path, monkeypatch, capsys, exc, expected_start):
    def fail(repo_id, filename, dest_dir):
        raise exc

    monkeypatch.setattr(downloader, "download_file", fail)
    code, out, err = run(capsys, "1", "--dir", str(tmp_path / "d"))
    assert code == 1
    assert err[-1].startswith(expected_start)
    assert sum(line.startswith("error:") for line in err) == 1
    assert "Traceback" not in "\n".join(err)
    assert not (tmp_path / "d").exists()  # nothing to resume, so no empty staging folder or new data folder is left


def test_a_failed_download_keeps_a_folder_that_was_there(tmp_path, monkeypatch, capsys):
    def fail(repo_id, filename, dest_dir):
        raise RuntimeError("boom")

    monkeypatch.setattr(downloader, "download_file", fail)
    (tmp_path / "d").mkdir()
    code, out, err = run(capsys, "1", "--dir", str(tmp_path / "d"))
    assert code == 1 and (tmp_path / "d").is_dir() and list((tmp_path / "d").iterdir()) == []


def test_an_os_error_outside_the_downloads_names_the_folder_and_says_to_rerun(tmp_path, monkeypatch, capsys):
    def fail(dataset, n_train, out_dir):
        raise OSError(28, "No space left on device")  # no file name: the folder stands in

    monkeypatch.setattr(downloader, "download", fail)
    code, out, err = run(capsys, "1", "--dir", str(tmp_path / "d"))
    assert (code, out) == (1, [])
    assert err == [f"error: {tmp_path / 'd'}: No space left on device; check free disk space and permissions of "
                   f"{tmp_path / 'd'}, then rerun to resume"]


def test_an_os_error_that_names_a_file_names_that_file(tmp_path, monkeypatch, capsys):
    def fail(dataset, n_train, out_dir):
        raise PermissionError(13, "Permission denied", str(out_dir / "fineweb_val_000000.bin"))

    monkeypatch.setattr(downloader, "download", fail)
    code, out, err = run(capsys, "1", "--dir", str(tmp_path / "d"))
    assert code == 1
    assert err == [f"error: {tmp_path / 'd' / 'fineweb_val_000000.bin'}: Permission denied; check free disk space "
                   f"and permissions of {tmp_path / 'd'}, then rerun to resume"]


@pytest.fixture
def direct_network(monkeypatch):
    """No proxy and not huggingface_hub's offline mode, whatever the machine running the tests sets."""
    for name in ("https_proxy", "http_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)


@pytest.mark.parametrize("offline", [None, "0", "false"])  # the Hub reads only 1 / on / yes / true as offline
def test_an_unresolvable_hub_is_one_error_line_without_the_hubs_retries(tmp_path, monkeypatch, capsys,
                                                                      direct_network, offline):
    """The real download_file resolves the Hub's host first: offline, huggingface_hub retried 5 times (23 s)."""
    import huggingface_hub
    resolved, hub_calls = [], []

    def no_network(host, port, *args, **kwargs):
        resolved.append(host)
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", lambda *a, **k: hub_calls.append(a))
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.example.org")
    if offline is not None:
        monkeypatch.setenv("HF_HUB_OFFLINE", offline)
    code, out, err = run(capsys, "1", "--dir", str(tmp_path / "d"))
    assert code == 1 and resolved == ["hub.example.org"] and hub_calls == []
    assert err[-1] == ("error: cannot resolve the Hugging Face Hub's host ([Errno -2] Name or service not known) to "
                       "download fineweb_val_000000.bin (no network?); check your connection (or HF_ENDPOINT) and "
                       "rerun, finished files are kept")


@pytest.mark.parametrize("setting", [("HTTPS_PROXY", "http://proxy.example.org:3128"), ("HF_HUB_OFFLINE", "1"),
                                     ("HF_HUB_OFFLINE", "true"), ("TRANSFORMERS_OFFLINE", "YES"),
                                     ("ALL_PROXY", "socks5://proxy.example.org:1080"),
                                     ("HF_ENDPOINT", "hub-without-scheme")])
def test_the_host_is_left_to_huggingface_hub_behind_a_proxy_offline_or_without_a_host(tmp_path, monkeypatch, capsys,
                                                                                      direct_network, setting):
    """A proxy resolves names itself (a machine behind one may resolve none), offline mode is the Hub's own answer,
    and an endpoint without a scheme has no host to resolve: huggingface_hub decides."""
    import huggingface_hub
    resolved, hub_calls = [], []

    def hub_unreachable(repo_id, filename, **kwargs):
        hub_calls.append(filename)
        raise LocalEntryNotFoundError("connection error")

    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *a, **k: resolved.append(host))
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hub_unreachable)
    monkeypatch.setenv(*setting)
    code, out, err = run(capsys, "1", "--dir", str(tmp_path / "d"))
    assert code == 1 and resolved == [] and hub_calls == ["fineweb_val_000000.bin"]
    assert err[-1].startswith("error: cannot reach the Hugging Face Hub to download fineweb_val_000000.bin")


@pytest.mark.parametrize("n", ["104", "-1"])
def test_out_of_range_n_is_one_error_line(tmp_path, fake_download, capsys, n):
    code, out, err = run(capsys, n, "--dir", str(tmp_path))
    assert code == 1
    assert err == [f"error: N={n} is out of range: fineweb10B has 103 train shards; "
                   "pick N between 0 and 103"]
    assert fake_download == []


def test_n_zero_fetches_the_val_shard_only(tmp_path, fake_download, capsys):
    code, out, err = run(capsys, "0", "--dir", str(tmp_path / "d"))
    assert code == 0, err
    assert fake_download == ["fineweb_val_000000.bin"]
    assert out[-1] == f"1 files, 3 tokens in {tmp_path / 'd'}/ (1 downloaded, 0 already present)"


def test_the_summary_names_a_folder_below_the_working_directory_relatively(tmp_path, fake_download, capsys,
                                                                          monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "0", "--dir", str(tmp_path / "data" / "d"))
    assert code == 0, err
    assert out[-1] == f"1 files, 3 tokens in data{os.sep}d{os.sep} (1 downloaded, 0 already present)"
    code, out, err = run(capsys, "0", "--dir", str(tmp_path / "..data"))  # below it too, despite the name
    assert code == 0, err
    assert out[-1] == f"1 files, 3 tokens in ..data{os.sep} (1 downloaded, 0 already present)"
    monkeypatch.chdir(tmp_path / "data")
    code, out, err = run(capsys, "0", "--dir", str(tmp_path / "..data"))  # outside it: the full path
    assert code == 0, err
    assert out[-1] == f"1 files, 3 tokens in {tmp_path / '..data'}{os.sep} (0 downloaded, 1 already present)"


def test_an_invalid_file_found_in_place_is_deleted(tmp_path, capsys):
    path = tmp_path / "fineweb_val_000000.bin"
    path.write_bytes(b"\0" * 10)
    assert downloader.present_token_count(path) is None
    assert not path.exists()
    assert "deleting it and downloading it again" in capsys.readouterr().err
    shards.write_shard(path, [shards.EOT, 1])
    assert downloader.present_token_count(path) == 2


def test_default_dir_is_next_to_the_script():
    assert downloader.DATA_DIR == Path(__file__).resolve().parents[1] / "data"
