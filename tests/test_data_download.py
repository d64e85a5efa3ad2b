"""Tests for data/cached_fineweb10B.py with the Hub replaced by a local folder (offline): download_file stood in
for, or the real one against a local HTTP stand-in of the Hub's file route."""

import glob
import hashlib
import http.server
import os
import shutil
import signal
import socket
import sys
import threading
import types
import warnings
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


@pytest.fixture(autouse=True)
def default_hub(monkeypatch):
    """The Hugging Face Hub itself, whatever HF_ENDPOINT the machine running the tests sets."""
    monkeypatch.delenv("HF_ENDPOINT", raising=False)


class HubRoute(http.server.BaseHTTPRequestHandler):
    """The Hub's file route, /datasets/<owner>/<name>/resolve/<revision>/<file>, served from the server's folder of
    repos: HEAD and GET with the headers huggingface_hub reads (X-Repo-Commit, ETag, Content-Length); a missing
    repo or file answers with the Hub's X-Error-Code. The server's `answer` makes it another kind of server:
    "no commit" (the files at the Hub's paths, without the Hub's headers), or an HTTP status for every request
    without a Hub's error code ("404": a web server that has none of the files, "501": a server error)."""

    def do_HEAD(self):
        self.answer()

    def do_GET(self):
        body = self.answer()
        if body is not None:
            self.wfile.write(body)

    def answer(self):
        """Send the status and headers for the requested path; the file's bytes where they follow."""
        self.server.requests.append((self.command, self.path))
        parts = self.path.split("/")
        repo = self.server.repos / "/".join(parts[2:4])
        file = repo / "/".join(parts[6:])
        if self.server.answer.isdigit():
            return self.send_bare(int(self.server.answer), {})
        if len(parts) < 7 or parts[1] != "datasets" or parts[4] != "resolve":
            return self.send_bare(404, {})
        if not repo.is_dir():
            return self.send_bare(401, {"X-Error-Code": "RepoNotFound"})
        if not file.is_file():
            return self.send_bare(404, {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": "0" * 40})
        body = file.read_bytes()
        hub_headers = {"X-Repo-Commit": "0" * 40, "ETag": f'"{hashlib.sha256(body).hexdigest()}"'}
        self.send_response(200)
        for name, value in (hub_headers if self.server.answer == "hub" else {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return body

    def send_bare(self, status: int, headers: dict):
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        """Quiet: the tests read the server's requests list instead."""


@pytest.fixture
def direct_network(monkeypatch):
    """No proxy and not huggingface_hub's offline mode, whatever the machine running the tests sets."""
    for name in ("https_proxy", "http_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)


@pytest.fixture
def hub_server(hub, direct_network, monkeypatch):
    """The fake hub's repos served by HubRoute on a local port, HF_ENDPOINT pointing at it; the server object has
    `requests` (method, path) and `answer` ("hub" unless a test changes it)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), HubRoute)
    server.repos, server.requests, server.answer = hub.parent.parent, [], "hub"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def file_requests(server) -> list:
    """The server's requests on the file route, as (method, file name)."""
    return [(method, path.rsplit("/", 1)[1]) for method, path in server.requests if "/resolve/" in path]


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
    assert out[0] == f"3 files, {total} tokens in {out_dir}/ (3 downloaded, 0 already present)"


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
    assert out[0].endswith("(2 downloaded, 1 already present)")
    code, out, err = run(capsys, "3", "--dir", str(out_dir))
    assert code == 0
    assert fake_download[2:] == ["fineweb_train_000003.bin"]
    assert out[0].endswith("(1 downloaded, 3 already present)")


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


def test_a_truncated_shard_in_place_is_named_as_removed_before_its_download_fails(tmp_path, hub, monkeypatch,
                                                                                capsys):
    """A valid header over fewer tokens than it counts (a copy cut off midway): one line says it was removed and
    why, then the download's own error follows."""
    out_dir = tmp_path / "fineweb10B"
    out_dir.mkdir()
    shards.write_shard(out_dir / "fineweb_val_000000.bin", shard_tokens(5))
    with open(out_dir / "fineweb_val_000000.bin", "r+b") as f:
        f.truncate(shards.HEADER_BYTES + 2 * 3)  # 3 of its 8 tokens

    def fail(repo_id, filename, dest_dir):
        raise RuntimeError("boom")

    monkeypatch.setattr(downloader, "download_file", fail)
    code, out, err = run(capsys, "0", "--dir", str(out_dir))
    assert code == 1 and not (out_dir / "fineweb_val_000000.bin").exists()
    messages = [part for line in err for part in line.split("\r") if part.strip() and "shards:" not in part]
    assert messages == [  # without the progress bar's redraws
        f"removed {out_dir}/fineweb_val_000000.bin: truncated: header promises 8 tokens (1040 bytes) but the file has "
        f"1030 bytes; downloading it again",
        "error: downloading fineweb_val_000000.bin from kjj0/fineweb10B-gpt2 failed (RuntimeError: boom); rerun, "
        "finished files are kept"]


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


def test_an_invalid_download_is_deleted_where_the_staging_folder_stays(tmp_path, hub, fake_download, capsys):
    """The error says the invalid file was deleted: so it is, also where the staging folder is kept for an earlier
    run's part of a file (huggingface_hub could take a file left there as downloaded, and fail on it each rerun)."""
    (hub / "fineweb_train_000001.bin").write_bytes((hub / "fineweb_train_000001.bin").read_bytes()[:-2])
    out_dir = tmp_path / "fineweb10B"
    partial = out_dir / ".partial" / ".cache" / "huggingface" / "download" / "fineweb_train_000002.bin.incomplete"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(b"part of a shard")
    code, out, err = run(capsys, "1", "--dir", str(out_dir))
    assert code == 1 and err[-1].startswith("error: downloaded fineweb_train_000001.bin is invalid and was deleted")
    assert partial.exists() and not (out_dir / ".partial" / "fineweb_train_000001.bin").exists()


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


def test_shards_outside_the_tracks_default_come_with_the_settings_that_find_them(tmp_path, monkeypatch, capsys):
    """The tracks read data/fineweb10B/fineweb_*.bin by default: edu's or 100B's shards, or any --dir, matched
    nothing, and the error's fix was the fineweb10B download."""
    def write_one(repo_id, filename, dest_dir):
        dest_dir.mkdir(parents=True, exist_ok=True)
        shards.write_shard(dest_dir / filename, [shards.EOT])
        return dest_dir / filename

    monkeypatch.setattr(downloader, "download_file", write_one)
    repo = tmp_path / "repo"
    monkeypatch.setattr(downloader, "DATA_DIR", repo / "data")
    code, out, err = run(capsys, "1")
    assert code == 0 and out == [f"2 files, 2 tokens in {repo / 'data' / 'fineweb10B'}/ (2 downloaded, 0 already "
                                 "present)"], err  # the default: nothing to add
    for argv, folder in [(["--dataset", "fineweb10B-edu"], "data/fineweb10B-edu"),
                         # the tracks' folder, but their fineweb_* patterns match no finewebedu_* file
                         (["--dataset", "fineweb10B-edu", "--dir", str(repo / "data" / "fineweb10B")],
                          "data/fineweb10B"),
                         (["--dir", str(repo / "data" / "mine")], "data/mine"),
                         (["--dir", str(tmp_path / "elsewhere")], str(tmp_path / "elsewhere"))]:
        code, out, err = run(capsys, "1", *argv)
        prefix = "finewebedu" if "fineweb10B-edu" in argv else "fineweb"
        assert code == 0 and out[1:] == [f"run on them with: ./run.sh --train_files='{folder}/{prefix}_train_*.bin' "
                                         f"--val_files='{folder}/{prefix}_val_*.bin'"], (out, err)
        for split in ("train", "val"):  # read from the repository, as run.sh reads them
            pattern = out[1].split(f"--{split}_files='")[1].split("'")[0]
            assert len(glob.glob(os.path.join(repo, pattern))) == 1, pattern


@pytest.mark.parametrize("exc, expected_start", [
    (LocalEntryNotFoundError("connection error"), "error: cannot reach the Hugging Face Hub"),
    (OSError(28, "No space left on device"), "error: cannot write fineweb_val_000000.bin into"),
    (RuntimeError("boom"), "error: downloading fineweb_val_000000.bin from kjj0/fineweb10B-gpt2 "
                           "failed (RuntimeError: boom)"),
    # huggingface_hub before 1.0 raised requests' errors, OSErrors without an errno: not the disk's fault
    (type("ConnectionError", (OSError,), {})("Connection aborted."),
     "error: downloading fineweb_val_000000.bin from kjj0/fineweb10B-gpt2 failed (ConnectionError: Connection "
     "aborted.); rerun, finished files are kept"),
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


def test_a_folder_that_cannot_be_written_is_enough_where_it_holds_every_shard(tmp_path, hub, fake_download,
                                                                            monkeypatch, capsys):
    """A shared read-only copy of the data: the check that every shard is there passes, where it failed on creating
    the staging folder; a shard still to download ends in one line naming the folder. Path.mkdir stands in for the
    permissions (the tests run as root, who writes anywhere)."""
    out_dir = tmp_path / "fineweb10B"
    out_dir.mkdir()
    for name in downloader.shard_filenames("fineweb", 1):
        shutil.copyfile(hub / name, out_dir / name)

    def read_only(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", read_only)
    code, out, err = run(capsys, "1", "--dir", str(out_dir))
    assert (code, fake_download) == (0, []), err
    assert out[0].endswith("(0 downloaded, 2 already present)")
    code, out, err = run(capsys, "2", "--dir", str(out_dir))
    assert (code, out, fake_download) == (1, [], [])
    assert err[-1] == f"error: cannot create {out_dir / '.partial'} (Permission denied); pick a writable --dir"
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(downloader.shard_filenames("fineweb", 1))


def test_an_os_error_outside_the_downloads_names_the_folder_and_says_to_rerun(tmp_path, monkeypatch, capsys):
    def fail(dataset, n_train, out_dir):
        raise OSError(28, "No space left on device")  # no file name: the folder stands in

    monkeypatch.setattr(downloader, "download", fail)
    code, out, err = run(capsys, "1", "--dir", str(tmp_path / "d"))
    assert (code, out) == (1, [])
    assert err == [f"error: {tmp_path / 'd'}: No space left on device; check free disk space and permissions of "
                   f"{tmp_path / 'd'}, then rerun to resume"]


@pytest.mark.parametrize("endpoint, problem", [("https://hub.test:99999", "Port out of range 0-65535"),
                                               ("https://hub.test:0", "port 0"),
                                               ("http://hub.test:port", "Port could not be cast to integer value as "
                                                                        "'port'")])
def test_an_hf_endpoint_with_an_unusable_port_is_one_line_before_any_request(tmp_path, monkeypatch, capsys, endpoint,
                                                                             problem):
    """It failed later as 'downloading ... failed (ValueError: ...); rerun', which no rerun mends."""
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setattr(downloader, "download_file", lambda *args: pytest.fail("no download without an address"))
    code, out, err = run(capsys, "1", "--dir", str(tmp_path / "d"))
    assert (code, out) == (1, [])
    assert err == [f"error: HF_ENDPOINT={endpoint} has no usable port ({problem}); give one from 1 to 65535, or none "
                   "(https://<host>)"]
    assert not (tmp_path / "d").exists()


def test_a_folder_where_a_shard_goes_is_one_line_saying_so(tmp_path, monkeypatch, capsys):
    """Not the disk-space advice of other OSErrors: the folder is in the way."""
    (tmp_path / "d" / "fineweb_val_000000.bin").mkdir(parents=True)
    monkeypatch.setattr(downloader, "download_file", lambda *args: pytest.fail("the folder is checked first"))
    code, out, err = run(capsys, "1", "--dir", str(tmp_path / "d"))
    assert (code, out) == (1, [])
    assert err[-1] == (f"error: {tmp_path / 'd' / 'fineweb_val_000000.bin'}: Is a directory; a folder stands where "
                       "a file goes: move it away or pick another path")
    assert sum(line.startswith("error:") for line in err) == 1


def test_an_os_error_that_names_a_file_names_that_file(tmp_path, monkeypatch, capsys):
    def fail(dataset, n_train, out_dir):
        raise PermissionError(13, "Permission denied", str(out_dir / "fineweb_val_000000.bin"))

    monkeypatch.setattr(downloader, "download", fail)
    code, out, err = run(capsys, "1", "--dir", str(tmp_path / "d"))
    assert code == 1
    assert err == [f"error: {tmp_path / 'd' / 'fineweb_val_000000.bin'}: Permission denied; check free disk space "
                   f"and permissions of {tmp_path / 'd'}, then rerun to resume"]


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
    assert err[-1] == ("error: cannot resolve the host of HF_ENDPOINT https://hub.example.org ([Errno -2] Name or "
                       "service not known) to download fineweb_val_000000.bin (no network?); check your connection "
                       "(or HF_ENDPOINT) and rerun, finished files are kept")


@pytest.mark.parametrize("endpoint, address", [("http://mirror.example.org", ("mirror.example.org", 80)),
                                               ("https://mirror.example.org/", ("mirror.example.org", 443)),
                                               ("http://mirror.example.org:8080/hf", ("mirror.example.org", 8080))])
def test_the_hubs_host_is_tried_on_the_endpoints_port(tmp_path, monkeypatch, capsys, direct_network, endpoint,
                                                      address):
    """A mirror on plain http without a port listens on 80: tried on 443 instead, it would be 'cannot connect'."""
    import huggingface_hub
    tried, downloads = [], []

    def connect(host_and_port, timeout):
        tried.append(host_and_port)
        return socket.socket()  # closed at once, unconnected

    def hf_hub_download(repo_id, filename, repo_type, local_dir, endpoint):
        downloads.append((repo_id, filename, repo_type, endpoint))
        shards.write_shard(local_dir / filename, shard_tokens(0))
        return str(local_dir / filename)

    monkeypatch.setattr(socket, "create_connection", connect)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    code, out, err = run(capsys, "0", "--dir", str(tmp_path / "d"))
    assert code == 0, err
    assert tried == [address]
    assert downloads == [(REPO_ID, "fineweb_val_000000.bin", "dataset", endpoint.rstrip("/"))]


@pytest.mark.parametrize("setting", [("HTTPS_PROXY", "http://proxy.example.org:3128"), ("HF_HUB_OFFLINE", "1"),
                                     ("HF_HUB_OFFLINE", "true"), ("TRANSFORMERS_OFFLINE", "YES"),
                                     ("ALL_PROXY", "socks5://proxy.example.org:1080"),
                                     ("HF_ENDPOINT", "https://")])
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
    hub = "HF_ENDPOINT https:" if setting[0] == "HF_ENDPOINT" else "the Hugging Face Hub"
    assert err[-1].startswith(f"error: cannot reach {hub} to download fineweb_val_000000.bin (no network?)")


@pytest.mark.parametrize("n", ["104", "-1"])
def test_out_of_range_n_is_one_error_line(tmp_path, fake_download, capsys, n):
    code, out, err = run(capsys, n, "--dir", str(tmp_path))
    assert code == 1
    assert err == [f"error: N={n} is out of range: fineweb10B has 103 train shards; "
                   "pick N between 0 and 103"]
    assert fake_download == []


@pytest.mark.parametrize("folder", ["", " "])
def test_an_empty_dir_is_a_usage_error(tmp_path, fake_download, monkeypatch, capsys, folder):
    """An unset shell variable (--dir "$DATA"): as a path, "" is the working directory, which got every shard; a
    space alone made a folder named ' ' there."""
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    with pytest.raises(SystemExit) as exit_:
        downloader.main(["1", "--dir", folder])
    assert exit_.value.code == 2 and fake_download == [] and list((tmp_path / "cwd").iterdir()) == []
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        ": error: argument --dir: an empty path (an unset shell variable?) names no file or folder; give one")


def test_n_zero_fetches_the_val_shard_only(tmp_path, fake_download, capsys):
    code, out, err = run(capsys, "0", "--dir", str(tmp_path / "d"))
    assert code == 0, err
    assert fake_download == ["fineweb_val_000000.bin"]
    assert out[0] == f"1 file, 3 tokens in {tmp_path / 'd'}/ (1 downloaded, 0 already present)"


def test_the_summary_names_a_folder_below_the_working_directory_relatively(tmp_path, fake_download, capsys,
                                                                          monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "0", "--dir", str(tmp_path / "data" / "d"))
    assert code == 0, err
    assert out[0] == f"1 file, 3 tokens in data{os.sep}d{os.sep} (1 downloaded, 0 already present)"
    code, out, err = run(capsys, "0", "--dir", str(tmp_path / "..data"))  # below it too, despite the name
    assert code == 0, err
    assert out[0] == f"1 file, 3 tokens in ..data{os.sep} (1 downloaded, 0 already present)"
    monkeypatch.chdir(tmp_path / "data")
    code, out, err = run(capsys, "0", "--dir", str(tmp_path / "..data"))  # outside it: the full path
    assert code == 0, err
    assert out[0] == f"1 file, 3 tokens in {tmp_path / '..data'}{os.sep} (0 downloaded, 1 already present)"


def test_a_leading_tilde_in_dir_is_the_home_folder(tmp_path, fake_download, monkeypatch, capsys):
    """The shell leaves --dir=~/... as typed: the shards went to a folder named ~ below the working directory, and
    the summary's --train_files, read by the tracks as the home folder's, matched none of them."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "0", "--dir=~/fw")
    assert code == 0, err
    assert fake_download == ["fineweb_val_000000.bin"] and not (tmp_path / "~").exists()
    assert (tmp_path / "home" / "fw" / "fineweb_val_000000.bin").is_file()
    assert out == [f"1 file, 3 tokens in home{os.sep}fw{os.sep} (1 downloaded, 0 already present)",
                   f"run on them with: ./run.sh --train_files='{tmp_path}/home/fw/fineweb_train_*.bin' "
                   f"--val_files='{tmp_path}/home/fw/fineweb_val_*.bin'"]


def test_an_invalid_file_found_in_place_is_removed_in_one_line_saying_why(tmp_path, capsys):
    path = tmp_path / "fineweb_val_000000.bin"
    path.write_bytes(b"\0" * 10)
    assert downloader.present_token_count(path) is None
    assert not path.exists()
    assert capsys.readouterr().err.splitlines() == [
        f"removed {path}: truncated: 10 bytes is shorter than the 1024-byte header; downloading it again"]
    shards.write_shard(path, [shards.EOT, 1])
    assert downloader.present_token_count(path) == 2


def test_a_shard_in_place_of_another_size_than_the_hubs_is_kept_with_a_one_line_warning(tmp_path, fake_download,
                                                                                      monkeypatch, capsys):
    """The Hub's shards hold SHARD_TOKENS each (here 8): a 3-token val shard in place is named, the 8-token train
    shard is not; neither is downloaded again."""
    monkeypatch.setattr(downloader, "SHARD_TOKENS", 8)
    out_dir = tmp_path / "fineweb10B"
    out_dir.mkdir()
    shards.write_shard(out_dir / "fineweb_val_000000.bin", shard_tokens(0))
    shards.write_shard(out_dir / "fineweb_train_000001.bin", shard_tokens(5))
    code, out, err = run(capsys, "1", "--dir", str(out_dir))
    assert code == 0 and fake_download == []
    assert out[0] == f"2 files, 11 tokens in {out_dir}/ (0 downloaded, 2 already present)"
    messages = [part for line in err for part in line.split("\r") if part.strip() and "shards:" not in part]
    assert messages == [f"warning: {out_dir}/fineweb_val_000000.bin holds 3 tokens where fineweb10B's holds 8, so it "
                        f"is not the Hub's shard; kept as present: delete it and rerun to download the Hub's"]


@pytest.mark.parametrize("n_tokens, warned", [(7, True), (8, False), (9, True)])
def test_a_shard_in_place_with_more_tokens_than_the_hubs_is_named_too(tmp_path, monkeypatch, capsys, n_tokens, warned):
    """Fewer tokens than the Hub's shard or more: either way it is not the Hub's shard."""
    monkeypatch.setattr(downloader, "SHARD_TOKENS", 8)
    path = tmp_path / "fineweb_train_000001.bin"
    downloader.warn_if_not_the_hubs(path, n_tokens, "fineweb10B")
    assert capsys.readouterr().err.splitlines() == ([
        f"warning: {path} holds {n_tokens} tokens where fineweb10B's holds 8, so it is not the Hub's shard; kept as "
        f"present: delete it and rerun to download the Hub's"] if warned else [])


def test_every_shard_but_a_datasets_last_train_shard_is_expected_to_hold_shard_tokens():
    spec = downloader.DATASETS["fineweb10B"]
    assert downloader.expected_tokens(spec, "fineweb_val_000000.bin") == downloader.SHARD_TOKENS == 100_000_000
    assert downloader.expected_tokens(spec, "fineweb_train_000102.bin") == downloader.SHARD_TOKENS
    assert downloader.expected_tokens(spec, "fineweb_train_000103.bin") is None  # the rest of the tokens
    assert downloader.expected_tokens(downloader.DATASETS["fineweb10B-edu"], "finewebedu_train_000099.bin") is None


def test_default_dir_is_next_to_the_script():
    assert downloader.DATA_DIR == Path(__file__).resolve().parents[1] / "data"


def test_the_real_download_fetches_each_shard_from_a_stand_in_of_the_hub(tmp_path, hub, hub_server, capsys):
    out_dir = tmp_path / "fineweb10B"
    code, out, err = run(capsys, "2", "--dir", str(out_dir))
    assert code == 0, err
    names = downloader.shard_filenames("fineweb", 2)
    assert file_requests(hub_server) == [(method, name) for name in names for method in ("HEAD", "GET")]
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(names)  # the staging folder and its .cache gone
    assert all((out_dir / name).read_bytes() == (hub / name).read_bytes() for name in names)
    assert out[0] == f"3 files, {sum(len(shard_tokens(i)) for i in range(3))} tokens in {out_dir}/ " \
                      f"(3 downloaded, 0 already present)"


def test_the_hubs_answers_for_a_missing_shard_or_repo_are_one_line_each(tmp_path, hub_server, capsys):
    code, out, err = run(capsys, "4", "--dir", str(tmp_path / "d"))  # the stand-in holds 3 train shards
    assert code == 1 and (tmp_path / "d" / "fineweb_train_000003.bin").is_file()
    assert err[-1] == ("error: fineweb_train_000004.bin is missing from the dataset repo kjj0/fineweb10B-gpt2; "
                       "check N and --dataset (see --help for the shard counts)")
    code, out, err = run(capsys, "1", "--dataset", "fineweb10B-edu", "--dir", str(tmp_path / "edu"))
    assert code == 1 and not (tmp_path / "edu").exists()
    assert err[-1] == (f"error: dataset repo kjj0/finewebedu10B-gpt2 not found on HF_ENDPOINT "
                       f"{os.environ['HF_ENDPOINT']} (or it is private or gated); check --dataset, or run "
                       f"`hf auth login` if it needs access")
    assert sum(line.startswith("error:") for line in err) == 1


@pytest.mark.parametrize("answer, expected", [
    ("404", "error: HF_ENDPOINT {endpoint} answered HTTP 404 for fineweb_val_000000.bin from kjj0/fineweb10B-gpt2; "
            "point HF_ENDPOINT at a Hugging Face Hub or a mirror of one"),
    # a server error: huggingface_hub retries 500 and 502-504 for 23 s, 501 at once
    ("501", "error: HF_ENDPOINT {endpoint} answered HTTP 501 for fineweb_val_000000.bin from kjj0/fineweb10B-gpt2; "
            "rerun later, finished files are kept"),
    ("no commit", "error: cannot reach HF_ENDPOINT {endpoint} to download fineweb_val_000000.bin (FileMetadataError: "
                  "Response from {endpoint}/datasets/kjj0/fineweb10B-gpt2/resolve/main/fineweb_val_000000.bin is "
                  "missing the 'X-Repo-Commit' header"),
])
def test_an_hf_endpoint_that_is_not_a_hub_is_one_line_and_leaves_no_folder(tmp_path, hub_server, capsys, answer,
                                                                          expected):
    hub_server.answer = answer
    code, out, err = run(capsys, "1", "--dir", str(tmp_path / "d"))
    assert code == 1 and out == []
    assert err[-1].startswith(expected.format(endpoint=os.environ["HF_ENDPOINT"]))
    assert sum(line.startswith("error:") for line in err) == 1
    assert not (tmp_path / "d").exists()  # huggingface_hub's lock files went with the staging folder


def failed_head_request(status: int, chained: str) -> LocalEntryNotFoundError:
    """huggingface_hub's error for a HEAD request that a server answered with status: the HTTP error under it as
    its cause (raise ... from), or only as its context (raised while handling it)."""
    http_error = HfHubHTTPError(f"{status} Error", response=types.SimpleNamespace(status_code=status, **vars(
        HTTP_RESPONSE)))
    error = LocalEntryNotFoundError("An error happened while trying to locate the file on the Hub")
    setattr(error, "__cause__" if chained == "cause" else "__context__", http_error)
    return error


@pytest.mark.parametrize("chained", ["cause", "context"])
@pytest.mark.parametrize("status, fix", [(404, "point HF_ENDPOINT at a Hugging Face Hub or a mirror of one"),
                                         (499, "point HF_ENDPOINT at a Hugging Face Hub or a mirror of one"),
                                         (500, "rerun later, finished files are kept"),
                                         (503, "rerun later, finished files are kept")])
def test_a_mirrors_http_status_is_found_under_the_error_and_a_server_error_says_rerun_later(tmp_path, monkeypatch,
                                                                                          chained, status, fix):
    """A status below 500 from HF_ENDPOINT is a server that is not a Hub; 500 and up is a server error, which a rerun
    may not meet (huggingface_hub retries 500 for 23 s, so the stand-in above answers 501)."""
    monkeypatch.setenv("HF_ENDPOINT", "https://mirror.example.org")
    assert downloader.http_status(failed_head_request(status, chained)) == status
    line = downloader.explain_download_failure(failed_head_request(status, chained), REPO_ID,
                                               "fineweb_val_000000.bin", tmp_path)
    assert line == (f"HF_ENDPOINT https://mirror.example.org answered HTTP {status} for fineweb_val_000000.bin from "
                    f"{REPO_ID}; {fix}")


def test_an_hf_endpoint_that_refuses_connections_is_one_line_without_the_hubs_retries(tmp_path, direct_network,
                                                                                     monkeypatch, capsys):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{closed.getsockname()[1]}"
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    code, out, err = run(capsys, "1", "--dir", str(tmp_path / "d"))
    assert code == 1
    assert err[-1] == (f"error: cannot connect to HF_ENDPOINT {endpoint} (Connection refused) to download "
                       f"fineweb_val_000000.bin; check your connection (or HF_ENDPOINT) and rerun, finished files "
                       f"are kept")
    assert not any("Retrying" in line for line in err) and not (tmp_path / "d").exists()


@pytest.mark.parametrize("partial_bytes", [b"", b"part of a shard"])
def test_a_failed_run_keeps_the_staging_folder_only_with_part_of_a_file_in_it(tmp_path, monkeypatch, capsys,
                                                                            partial_bytes):
    """huggingface_hub releases before mid-2026 resume a file from its .incomplete part; later ones leave only lock
    and metadata files behind (and an .incomplete file only where a run was killed)."""
    def fail_midway(repo_id, filename, dest_dir):
        downloads = dest_dir / ".cache" / "huggingface" / "download"
        downloads.mkdir(parents=True)
        (downloads / f"{filename}.lock").touch()
        (downloads / f"{filename}.etag.incomplete").write_bytes(partial_bytes)
        raise RuntimeError("connection lost")

    monkeypatch.setattr(downloader, "download_file", fail_midway)
    code, out, err = run(capsys, "1", "--dir", str(tmp_path / "d"))
    assert code == 1 and err[-1].endswith("(RuntimeError: connection lost); rerun, finished files are kept")
    assert (tmp_path / "d" / ".partial").exists() == bool(partial_bytes)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_midway_keeps_finished_shards_and_ends_in_one_line(tmp_path, fake_download, monkeypatch,
                                                                       capsys, signum):
    """Ctrl-C or SIGTERM during the second shard: the first stays, the staging folder goes, no traceback; the
    signals' handlers are the caller's again afterwards."""
    fetch = downloader.download_file

    def stopped_on_the_second(repo_id, filename, dest_dir):
        if fake_download:
            os.kill(os.getpid(), signum)
        return fetch(repo_id, filename, dest_dir)

    monkeypatch.setattr(downloader, "download_file", stopped_on_the_second)
    def callers_handler(signum, frame):
        """The caller's handler, set here: one that an earlier run failed to restore would be the same before and
        after."""

    handlers = {stop: signal.signal(stop, callers_handler) for stop in (signal.SIGINT, signal.SIGTERM)}
    try:
        code, out, err = run(capsys, "2", "--dir", str(tmp_path / "d"))
        assert [signal.getsignal(stop) for stop in handlers] == [callers_handler, callers_handler]
    finally:
        for stop, handler in handlers.items():
            signal.signal(stop, handler)
    assert code == 128 + signum and out == []
    assert err[-1] == f"error: stopped by {signal.Signals(signum).name}; rerun to resume, finished files are kept"
    assert sum(line.startswith("error:") for line in err) == 1
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["fineweb_val_000000.bin"]


def test_an_hf_endpoint_without_a_scheme_is_one_line_before_any_request(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_ENDPOINT", "127.0.0.1:8080")
    monkeypatch.setattr(downloader, "download_file", lambda *args: pytest.fail("no download without an address"))
    code, out, err = run(capsys, "1", "--dir", str(tmp_path / "d"))
    assert (code, out) == (1, [])
    assert err == ["error: HF_ENDPOINT=127.0.0.1:8080 is not an http:// or https:// address; write it as "
                   "https://<host>"]
    assert not (tmp_path / "d").exists()


def test_the_hubs_disk_space_warning_is_left_to_the_error_line(tmp_path, hub_server, monkeypatch, capsys):
    """huggingface_hub warns where a folder's free space is short of the file (two lines for each of two folders,
    one its source line `warnings.warn(`) before the write fails; the error line that follows names the cause and
    the fix. Here the space is short only as disk_usage tells it, so the download goes through."""
    monkeypatch.setattr(shutil, "disk_usage", lambda path: types.SimpleNamespace(free=0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, out, err = run(capsys, "0", "--dir", str(tmp_path / "out"))
    assert code == 0, err
    assert [str(warning.message) for warning in caught] == []
