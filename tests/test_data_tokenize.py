"""Tests for data/fineweb.py on local inputs, run as the user runs it (subprocess; tiktoken's GPT-2 files from
../shared's cache where it exists, see conftest.py's gpt2_env)."""

import importlib
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "data"))
import fineweb  # noqa: E402
import shards  # noqa: E402
from shard_files import hand_made_shard  # noqa: E402
from stand_ins import deny_entry_below  # noqa: E402

SHARD_SIZE = 50_000
CORPUS_SHARDS = 7  # conftest.py's english_corpus holds 333,573 tokens: 1 val + 6 train shards of SHARD_SIZE


@pytest.fixture
def tokenizer_env(gpt2_env, monkeypatch):
    """os.environ where tiktoken loads the GPT-2 encoding, in this process too (fineweb.main, the encoder)."""
    if "TIKTOKEN_CACHE_DIR" in gpt2_env:
        monkeypatch.setenv("TIKTOKEN_CACHE_DIR", gpt2_env["TIKTOKEN_CACHE_DIR"])
    return dict(os.environ)


@pytest.fixture
def encoder(tokenizer_env):
    import tiktoken
    return tiktoken.get_encoding("gpt2")


@pytest.fixture
def sample_jsonl(english_corpus):
    return english_corpus.path


def tokenize(env, *args):
    """Run data/fineweb.py; return the CompletedProcess (text output)."""
    return subprocess.run([sys.executable, str(REPO_ROOT / "data" / "fineweb.py"), *map(str, args)],
                          env=env, capture_output=True, text=True, timeout=120)


def shard_paths(out_dir, name="fineweb"):
    return sorted(out_dir.glob(f"{name}_val_*.bin")) + sorted(out_dir.glob(f"{name}_train_*.bin"))


def token_stream(paths):
    return np.concatenate([shards.read_tokens(p) for p in paths])


def split_documents(stream):
    """Split a token stream at EOT tokens; each piece is one document's tokens without its EOT."""
    starts = np.flatnonzero(stream == shards.EOT)
    assert starts.size and starts[0] == 0, "the stream must start with EOT"
    return [stream[a + 1:b] for a, b in zip(starts, list(starts[1:]) + [stream.size])]


def test_jsonl_round_trip_split_and_determinism(tmp_path, tokenizer_env, encoder, english_corpus):
    sample_jsonl, documents = english_corpus
    out_a = tmp_path / "a"
    result = tokenize(tokenizer_env, sample_jsonl, "--out", out_a,
                      "--shard_size", SHARD_SIZE, "--workers", 2)
    assert result.returncode == 0, result.stderr
    paths = shard_paths(out_a)
    names = [p.name for p in paths]
    assert names[0] == "fineweb_val_000000.bin"
    assert names[1:] == [f"fineweb_train_{i:06d}.bin" for i in range(1, len(paths))]
    assert sorted(p.name for p in out_a.iterdir()) == sorted(names)  # no .tmp leftovers

    sizes = [shards.read_header(p) for p in paths]
    assert len(sizes) == CORPUS_SHARDS
    assert all(size == SHARD_SIZE for size in sizes[:-1]) and 0 < sizes[-1] <= SHARD_SIZE

    stream = token_stream(paths)
    expected = np.concatenate([[shards.EOT] + encoder.encode_ordinary(d) for d in documents])
    assert stream.tolist() == expected.tolist()  # EOT before every document, nothing else
    assert [encoder.decode(doc.tolist()) for doc in split_documents(stream)] == documents
    assert any(tokens[0] != shards.EOT for tokens in map(shards.read_tokens, paths[1:])), \
        "with shards filled exactly, some document should straddle a shard boundary"
    assert result.stdout.strip() == (f"{len(documents)} documents, {stream.size:,} tokens -> "
                                     f"{len(paths)} shards (1 val + {len(paths) - 1} train) in {out_a}/")

    out_b = tmp_path / "b"
    result = tokenize(tokenizer_env, sample_jsonl, "--out", out_b,
                      "--shard_size", SHARD_SIZE, "--workers", 1, "--chunksize", 3)
    assert result.returncode == 0, result.stderr
    assert [p.name for p in shard_paths(out_b)] == names
    for name in names:
        assert (out_a / name).read_bytes() == (out_b / name).read_bytes()


def test_txt_folder_one_document_per_file_in_sorted_order(tmp_path, tokenizer_env, encoder):
    corpus = tmp_path / "corpus"
    (corpus / "sub").mkdir(parents=True)
    texts = {"b.txt": "Second file.\n", "a.txt": "First file, with <|endoftext|> as plain text.",
             "sub/c.txt": "Third, in a subfolder.", "notes.md": "ignored: not .txt or .jsonl"}
    for relative, text in texts.items():
        (corpus / relative).write_text(text, encoding="utf-8")
    result = tokenize(tokenizer_env, corpus, "--out", tmp_path / "out", "--name", "mine",
                      "--workers", 2)
    assert result.returncode == 0, result.stderr
    paths = shard_paths(tmp_path / "out", "mine")
    assert [p.name for p in paths] == ["mine_val_000000.bin"]
    assert "no train shard" in result.stderr
    decoded = [encoder.decode(doc.tolist()) for doc in split_documents(token_stream(paths))]
    assert decoded == [texts["a.txt"], texts["b.txt"], texts["sub/c.txt"]]


def test_suffixes_in_any_case_and_a_byte_order_mark_are_read(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "A.TXT").write_bytes("\ufeffhello".encode())  # a BOM, as some editors write
    (corpus / "b.JSONL").write_bytes('\ufeff{"text": "x"}\n{"text": "\ufeffy"}\n'.encode())
    (corpus / "c.md").write_text("not an input")
    files = fineweb.list_input_files([corpus])
    assert files == [corpus / "A.TXT", corpus / "b.JSONL"]
    assert fineweb.list_input_files([corpus / "A.TXT"]) == [corpus / "A.TXT"]
    assert list(fineweb.iter_local_documents(files, "text")) == ["hello", "x", "\ufeffy"]  # a file's first only


def test_a_byte_order_mark_after_the_first_line_is_the_invalid_json_error(tmp_path):
    """Only a file's start may hold a BOM (an editor's mark); one at the start of a later line (files concatenated
    with their marks) is that line's one-line invalid-JSON error, as the CLI prints for any bad line, and not read
    as if it were a file's start."""
    bad = tmp_path / "joined.jsonl"
    bad.write_bytes('\ufeff{"text": "x"}\n\ufeff{"text": "y"}\n'.encode())
    documents = fineweb.iter_local_documents([bad], "text")
    assert next(documents) == "x"
    with pytest.raises(fineweb.InputError) as error:
        next(documents)
    assert str(error.value) == (f"{bad}:2: invalid JSON (Unexpected UTF-8 BOM (decode using utf-8-sig)); fix or "
                                "remove that line")


def test_a_file_named_twice_is_one_error_line(tmp_path):
    """Its documents would be in the shards twice: in val and in train alike."""
    (tmp_path / "corpus").mkdir()
    doc = tmp_path / "corpus" / "a.jsonl"
    doc.write_text('{"text": "x"}\n')
    same = tmp_path / "corpus" / ".." / "corpus" / "a.jsonl"  # another spelling of the same file
    for paths, first in [([doc, doc], doc), ([tmp_path / "corpus", doc], tmp_path / "corpus"), ([same, doc], same)]:
        with pytest.raises(fineweb.InputError) as error:
            fineweb.list_input_files(paths)
        assert str(error.value) == f"{doc} is named twice, by {first} and by {doc}; give each input once"


def test_folders_without_an_input_file_are_one_error_line(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("not an input")
    with pytest.raises(fineweb.InputError) as error:
        fineweb.list_input_files([tmp_path / "empty", tmp_path / "notes"])
    assert str(error.value) == (f"no .jsonl or .txt files in {tmp_path / 'empty'} {tmp_path / 'notes'}; check the "
                                "path, or save the text as .jsonl or .txt files")


def test_refuses_to_mix_with_existing_shards_unless_overwrite(tmp_path, tokenizer_env):
    corpus = tmp_path / "doc.txt"
    corpus.write_text("hello world")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    shards.write_shard(out_dir / "fineweb_train_000009.bin", [shards.EOT, 1])
    result = tokenize(tokenizer_env, corpus, "--out", out_dir, "--workers", 1)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {out_dir} already holds 1 fineweb shard; delete it or pass --overwrite")
    result = tokenize(tokenizer_env, corpus, "--out", out_dir, "--workers", 1, "--overwrite")
    assert result.returncode == 0, result.stderr
    assert [p.name for p in shard_paths(out_dir)] == ["fineweb_val_000000.bin"]


def test_bad_inputs_end_in_one_error_line(tmp_path, tokenizer_env):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n\n{"text": oops}\n')
    result = tokenize(tokenizer_env, bad, "--out", tmp_path / "out", "--workers", 1)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {bad}:3: invalid JSON (Expecting value); fix or remove that line")
    assert "Traceback" not in result.stderr

    result = tokenize(tokenizer_env, tmp_path / "missing", "--workers", 1)
    assert result.returncode == 1
    assert result.stderr.strip() == f"error: {tmp_path / 'missing'}: no such file or folder; check the path"


def test_an_input_behind_a_folder_this_user_cannot_enter_is_one_error_line(tmp_path, monkeypatch):
    """Python 3.11's Path.is_dir raises PermissionError where a folder on the way denies search permission: the run
    ended in the output folder's line ("check the free disk space") for an input. os.stat stands in for the
    permissions (the tests run as root, who enters any folder)."""
    locked = str(tmp_path / "locked")
    deny_entry_below(locked, monkeypatch)
    with pytest.raises(fineweb.InputError) as error:
        fineweb.list_input_files([f"{locked}/docs.jsonl"])
    assert str(error.value) == (f"{locked}/docs.jsonl: cannot reach it (Permission denied); check its folders' "
                                "permissions")


def test_a_run_that_fails_midway_leaves_the_output_folder_as_it_was(tmp_path, tokenizer_env, sample_jsonl):
    """A bad line after several shards' worth of documents: no new shard is left behind (they would pass
    check_shards and block the next run), and --overwrite keeps the old shards until the new ones are complete."""
    late = tmp_path / "late.jsonl"
    late.write_bytes(sample_jsonl.read_bytes() + b'{"text": oops}\n')
    out_dir = tmp_path / "out"
    result = tokenize(tokenizer_env, late, "--out", out_dir, "--workers", 1, "--chunksize", 1,
                      "--shard_size", SHARD_SIZE)
    assert result.returncode == 1 and "invalid JSON" in result.stderr.strip().splitlines()[-1]
    assert not out_dir.exists()  # the run made it and leaves nothing in it, so it goes too
    assert tokenize(tokenizer_env, sample_jsonl, "--out", out_dir, "--workers", 1, "--shard_size",
                    SHARD_SIZE).returncode == 0
    before = {path.name: path.read_bytes() for path in shard_paths(out_dir)}
    assert len(before) == CORPUS_SHARDS
    result = tokenize(tokenizer_env, late, "--out", out_dir, "--workers", 1, "--chunksize", 1,
                      "--shard_size", SHARD_SIZE, "--overwrite")
    assert result.returncode == 1
    assert {path.name: path.read_bytes() for path in out_dir.iterdir()} == before


def test_an_interrupted_runs_staging_folder_is_named_in_a_warning_and_kept(tmp_path, tokenizer_env):
    """A run killed outright (SIGKILL, out of memory) cannot remove its hidden staging folder; the next run into
    that folder says so, but deletes nothing: another run may be writing there."""
    corpus = tmp_path / "doc.txt"
    corpus.write_text("hello world")
    out_dir = tmp_path / "out"
    stale = out_dir / ".fineweb-partial-abc123"
    stale.mkdir(parents=True)
    (out_dir / ".other-partial-def456").mkdir()  # another name's staging: not this run's business
    result = tokenize(tokenizer_env, corpus, "--out", out_dir, "--workers", 1)
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "interrupted" in line]
    assert warnings == [f"warning: {stale} holds an interrupted run's unfinished shards; delete it once no other "
                        "run of fineweb.py writes there"]
    assert stale.is_dir() and sorted(p.name for p in out_dir.iterdir()) == [
        ".fineweb-partial-abc123", ".other-partial-def456", "fineweb_val_000000.bin"]


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def test_a_val_shard_shorter_than_the_tracks_validation_gets_a_warning(tmp_path, tokenizer_env, sample_jsonl):
    """The tracks read 10,485,761 val tokens by default: a smaller val shard fails their start-up check. (The
    sample's last shard holds only its last document's end: that shard's warning comes after.)"""
    result = tokenize(tokenizer_env, sample_jsonl, "--out", tmp_path / "out", "--shard_size", SHARD_SIZE,
                      "--workers", 1)
    assert result.returncode == 0
    assert result.stderr.strip().splitlines()[-2] == (
        "warning: the val shard holds 50,000 tokens, and the track scripts' default validation reads 10,485,761 "
        "(--val_tokens=10485760 and one more target); pass them a lower --val_tokens, or use a --shard_size of at "
        "least 10,485,761 on more text")


@pytest.mark.parametrize("n_val, warned", [(fineweb.TRACK_VAL_TOKENS - 1, True), (fineweb.TRACK_VAL_TOKENS, False)])
def test_a_val_shard_of_exactly_the_tracks_validation_gets_no_warning(tmp_path, capsys, n_val, warned):
    """10,485,761 tokens are what the tracks read, so enough; one fewer is not. (A sparse file: the header says
    how many tokens, and only the header and size are read.)"""
    val = tmp_path / "x_val_000000.bin"
    hand_made_shard(val, [shards.MAGIC, shards.VERSION, n_val], 2 * n_val)
    fineweb.warn_where_the_tracks_fall_short([val, tmp_path / "x_train_000001.bin"], n_val + 1, [])
    assert capsys.readouterr().err.startswith("warning: the val shard holds") == warned


def test_train_shards_without_an_eot_get_a_warning_naming_what_check_shards_calls_bad(tmp_path, tokenizer_env):
    """A document longer than a shard leaves shards holding only its inside: check_shards.py failed them while
    fineweb.py said nothing, and the fix that check names (re-tokenize) writes the same bytes again."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("One document of several tokens and then some more.")
    (tmp_path / "in" / "b.txt").write_text("Two")
    result = tokenize(tokenizer_env, tmp_path / "in", "--out", tmp_path / "out", "--shard_size", 4, "--workers", 1)
    assert result.returncode == 0, result.stderr
    stream = token_stream(shard_paths(tmp_path / "out"))
    inside = [path.name for path in shard_paths(tmp_path / "out") if shards.EOT not in shards.read_tokens(path)]
    assert len(inside) >= 1 and len(inside) < len(shard_paths(tmp_path / "out")) - 1  # some shards hold an EOT
    assert stream.tolist().count(shards.EOT) == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"warning: no EOT in {', '.join(inside)}: only the inside of one document, where training starts no "
        "sequence, and check_shards.py calls such a shard bad; tokenize again with another --shard_size")
    check = subprocess.run([sys.executable, str(REPO_ROOT / "data" / "check_shards.py"), str(tmp_path / "out")],
                           capture_output=True, text=True, timeout=60)
    flagged = [line.removeprefix("error: ").split(": ")[0] for line in check.stderr.splitlines()
               if "holds no EOT" in line]
    assert [Path(path).name for path in flagged] == inside


@pytest.mark.parametrize("script_name", ["train_gpt", "train_gpt_medium"])
def test_the_warnings_count_is_what_each_tracks_default_validation_reads(script_name, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO_ROOT))
    script = importlib.import_module(script_name)
    assert script.Hyperparameters().val_tokens + 1 == fineweb.TRACK_VAL_TOKENS


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_to_the_process_group_midway_ends_in_one_line_and_leaves_nothing(tmp_path, tokenizer_env,
                                                                                     sample_jsonl, signum):
    """Ctrl-C, and SIGTERM from kill, timeout or a job scheduler, reach every process of the group, the tokenizer
    processes too. multiprocessing.Pool hung in its shutdown where a worker died holding its queue's lock."""
    corpus = tmp_path / "big.jsonl"
    corpus.write_bytes(sample_jsonl.read_bytes() * 20)  # 6.7M tokens: seconds of work after the first shard
    out_dir = tmp_path / "out"
    run = subprocess.Popen([sys.executable, str(REPO_ROOT / "data" / "fineweb.py"), str(corpus), "--out",
                            str(out_dir), "--shard_size", str(SHARD_SIZE), "--workers", "2"], env=tokenizer_env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not list(out_dir.glob(".fineweb-partial-*/*.bin")) and run.poll() is None and \
                time.monotonic() < deadline:
            time.sleep(0.01)  # midway: the first shard is written
        os.killpg(run.pid, signum)
        _, stderr = run.communicate(timeout=60)
        assert run.returncode == 128 + signum, stderr
        assert stderr.strip().splitlines()[-1] == (f"error: stopped by {signal.Signals(signum).name}; shards are "
                                                   f"moved in only once all are complete (rerun to start over)")
        assert "Traceback" not in stderr and not out_dir.exists()  # the staging folder and the folder the run made
        deadline = time.monotonic() + 10
        while group_alive(run.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not group_alive(run.pid)  # no tokenizer process outlives the run
    finally:
        if group_alive(run.pid):  # a hung run (the failure this test looks for) ends with the test
            os.killpg(run.pid, signal.SIGKILL)


FEW_SHARDS = ["--shard_size", "8", "--workers", "1"]  # with few_shards_corpus: three shards or more


def few_shards_corpus(tmp_path) -> Path:
    corpus = tmp_path / "doc.txt"
    corpus.write_text("One document of several tokens, long enough to fill a few shards of eight tokens each.")
    return corpus


def on_each_move_in(monkeypatch, out_dir: Path, act):
    """fineweb's moves of finished shards into out_dir call act(n) before the n-th (1, 2, ...) takes place."""
    moves, real_replace = [], os.replace

    def replace(src, dst):
        if Path(dst).parent == out_dir:
            moves.append(dst)
            act(len(moves))
        return real_replace(src, dst)

    monkeypatch.setattr(fineweb.os, "replace", replace)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_while_the_shards_move_in_takes_effect_once_all_are_in(tmp_path, tokenizer_env, monkeypatch,
                                                                              capsys, signum):
    """Ctrl-C, or a job scheduler's SIGTERM, between two of the moves into the output folder left the val shard
    alone there: a set that reads as good, short of its train shards."""
    corpus = few_shards_corpus(tmp_path)
    assert fineweb.main([str(corpus), "--out", str(tmp_path / "whole"), *FEW_SHARDS]) == 0
    whole = {path.name: path.read_bytes() for path in shard_paths(tmp_path / "whole")}
    assert len(whole) >= 3
    out_dir = tmp_path / "out"
    on_each_move_in(monkeypatch, out_dir, lambda n: n == 2 and os.kill(os.getpid(), signum))
    capsys.readouterr()
    assert fineweb.main([str(corpus), "--out", str(out_dir), *FEW_SHARDS]) == 128 + signum
    assert capsys.readouterr().err.strip().splitlines()[-1] == (  # not "rerun to start over": the set is whole
        f"error: stopped by {signal.Signals(signum).name}; the stop waited until every shard was in "
        f"{fineweb.display_dir(out_dir)}: the set is complete")
    assert {path.name: path.read_bytes() for path in out_dir.iterdir()} == whole  # all in, no staging folder left


def test_an_error_in_the_shard_move_after_a_held_stop_is_reported_as_that_error(tmp_path, tokenizer_env, monkeypatch,
                                                                                capsys):
    """A stop held during the move must not turn a failed move into 'the set is complete': the move's error is what
    the user sees, with its exit code."""
    out_dir = tmp_path / "out"

    def stop_then_fail(n):
        if n == 1:
            os.kill(os.getpid(), signal.SIGTERM)
        if n == 2:
            raise OSError(28, "No space left on device", str(out_dir))

    on_each_move_in(monkeypatch, out_dir, stop_then_fail)
    assert fineweb.main([str(few_shards_corpus(tmp_path)), "--out", str(out_dir), *FEW_SHARDS]) == 1
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("error: ") and "No space left on device" in line and "complete" not in line


def test_of_two_stops_held_while_the_shards_move_in_the_first_is_the_one_reported(tmp_path, tokenizer_env,
                                                                                monkeypatch, capsys):
    """Ctrl-C, then a job scheduler's SIGTERM while the move still runs: the stop is the user's, exit code 130."""
    out_dir = tmp_path / "out"
    stops = {1: signal.SIGINT, 2: signal.SIGTERM}
    on_each_move_in(monkeypatch, out_dir, lambda n: n in stops and os.kill(os.getpid(), stops[n]))
    assert fineweb.main([str(few_shards_corpus(tmp_path)), "--out", str(out_dir), *FEW_SHARDS]) == 128 + signal.SIGINT
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("error: stopped by SIGINT; ")


def test_a_stop_while_the_tokenizer_processes_shut_down_waits_for_them_to_end(tmp_path, tokenizer_env, monkeypatch,
                                                                             capsys):
    """Ctrl-C pressed twice, or timeout's SIGINT (sent to the run, then to its group): the second stop cut the pool's
    shutdown short, and its processes (which ignore stop signals) outlived it, waiting for work: at the interpreter's
    exit the run hung after its stop line, or printed a traceback. Here the stop arrives as the shutdown starts, and
    the test holds the pool, so that only the shutdown can end its processes."""
    pools = []

    class StoppedPool(fineweb.ProcessPoolExecutor):
        def shutdown(self, *args, **kwargs):
            pools.append(self)
            os.kill(os.getpid(), signal.SIGINT)
            super().shutdown(*args, **kwargs)

    monkeypatch.setattr(fineweb, "ProcessPoolExecutor", StoppedPool)
    out_dir = tmp_path / "out"
    try:
        assert fineweb.main([str(few_shards_corpus(tmp_path)), "--out", str(out_dir), "--shard_size", "8",
                             "--workers", "2"]) == 128 + signal.SIGINT
        assert len(pools) == 1 and multiprocessing.active_children() == []  # every tokenizer process has ended
    finally:
        for pool in pools:  # what a cut-short shutdown left running
            super(StoppedPool, pool).shutdown()
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: stopped by SIGINT; shards are moved in only once all are complete (rerun to start over)")
    assert not out_dir.exists()


def test_a_tokenizer_process_leaves_stop_signals_to_the_main_process(tokenizer_env):
    """The group-wide signal above reaches the workers too; one that a signal ended could hang the pool."""
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        fineweb.start_worker()
        assert {signum: signal.getsignal(signum) for signum in handlers} == dict.fromkeys(handlers, signal.SIG_IGN)
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


def test_non_utf8_names_the_line_and_the_files_byte(tmp_path, tokenizer_env, sample_jsonl):
    raw = sample_jsonl.read_bytes()
    lines = raw.count(b"\n")
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(raw + b'{"text": "caf\xe9"}\n')
    result = tokenize(tokenizer_env, bad, "--out", tmp_path / "out", "--workers", 1)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {bad}:{lines + 1}: not UTF-8 text (invalid continuation byte at byte {len(raw) + 13} of the "
        "file); convert it to UTF-8")
    text = tmp_path / "bad.txt"
    text.write_bytes(b"fine words \xff")
    result = tokenize(tokenizer_env, text, "--out", tmp_path / "out", "--workers", 1)
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {text}: not UTF-8 text (invalid start byte at byte 11 of the file); convert it to UTF-8")


@pytest.mark.parametrize("args, message", [
    (["--shard_size", "100000000000"], "--shard_size must be at most 2,147,483,647"),
    (["--shard_size", str(2**31)], "--shard_size must be at most 2,147,483,647"),  # one past the int32 count
    (["--name", "sub/x"], "must be a file name prefix, without folders"),
])
def test_bad_options_are_usage_errors(tmp_path, args, message):
    corpus = tmp_path / "doc.txt"
    corpus.write_text("hello world")
    result = tokenize(dict(os.environ), corpus, "--out", tmp_path / "out", *args)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


def test_out_as_a_file_and_a_name_with_glob_characters(tmp_path, tokenizer_env):
    corpus = tmp_path / "doc.txt"
    corpus.write_text("hello world")
    result = tokenize(tokenizer_env, corpus, "--out", corpus)
    assert result.returncode == 1 and result.stderr.strip() == f"error: {corpus} is a file; give a folder as --out"
    out_dir = tmp_path / "out"
    assert tokenize(tokenizer_env, corpus, "--out", out_dir, "--name", "x[1]", "--workers", 1).returncode == 0
    result = tokenize(tokenizer_env, corpus, "--out", out_dir, "--name", "x[1]", "--workers", 1)
    assert result.returncode == 1 and "already holds 1 x[1] shard;" in result.stderr


def test_an_output_folder_that_cannot_be_made_is_one_error_line(tmp_path, tokenizer_env):
    corpus = tmp_path / "doc.txt"
    corpus.write_text("hello world")
    out_dir = tmp_path / "doc.txt" / "out"  # below a file: mkdir's OSError, not one of the tool's own checks
    result = tokenize(tokenizer_env, corpus, "--out", out_dir, "--workers", 1)
    assert result.returncode == 1
    assert result.stderr.strip() == (f"error: {out_dir}: Not a directory; a file stands where a folder of the path "
                                     "goes: move it away or pick another path")


def test_hf_input_streams_the_text_field(tmp_path, tokenizer_env, encoder, monkeypatch, capsys):
    """--hf goes through datasets.load_dataset(streaming=True); a stand-in module replaces it."""
    requests = []

    def load_dataset(path, name, split, streaming):
        requests.append((path, name, split, streaming))
        return iter([{"text": "First streamed document."}, {"text": "Second one."}])

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    out_dir = tmp_path / "out"
    code = fineweb.main(["--hf", "org/corpus", "--hf_name", "small", "--out", str(out_dir),
                         "--workers", "1"])
    assert code == 0, capsys.readouterr().err
    assert requests == [("org/corpus", "small", "train", True)]
    stream = token_stream(shard_paths(out_dir))
    assert [encoder.decode(d.tolist()) for d in split_documents(stream)] == [
        "First streamed document.", "Second one."]

    code = fineweb.main(["--hf", "org/corpus", "--text_field", "content", "--out", str(out_dir),
                         "--overwrite", "--workers", "1"])
    assert code == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        'error: org/corpus (config None, split train) has no field "content"; pass --text_field')


@pytest.mark.parametrize("text", [None, 5])
def test_an_hf_row_whose_text_field_is_no_text_is_one_error_line(tmp_path, tokenizer_env, monkeypatch, capsys, text):
    def load_dataset(path, name, split, streaming):
        return iter([{"text": "A fine document."}, {"text": text}])

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    code = fineweb.main(["--hf", "org/corpus", "--out", str(tmp_path / "out"), "--workers", "1"])
    assert code == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f'error: org/corpus (config None, split train), row 2: field "text" holds {type(text).__name__}, not text; '
        "pass --text_field")


def test_a_tokenizer_process_that_dies_is_one_error_line(tmp_path, tokenizer_env):
    """A worker killed from outside (the out-of-memory killer) broke the pool: a traceback, and no shards."""
    fineweb.load_encoder()

    def documents():
        for n in range(3 * fineweb.BATCHES_PER_WORKER):
            if n == fineweb.BATCHES_PER_WORKER:  # the first batch is encoded: the workers are running
                for worker in multiprocessing.active_children():
                    os.kill(worker.pid, signal.SIGKILL)
            yield f"Document number {n}."

    writer = fineweb.ShardWriter(tmp_path, "w", 1000)
    with pytest.raises(fineweb.InputError) as error:
        fineweb.tokenize(documents(), writer, workers=1, chunksize=1)
    assert str(error.value) == ("a tokenizer process died (killed, or out of memory?); rerun, with fewer --workers "
                                "than 1 if memory ran short")


def test_a_folder_below_an_input_that_cannot_be_read_is_one_error_line(tmp_path, monkeypatch):
    """Path.rglob skipped it without a word (PermissionError swallowed), leaving its files out of the shards. The
    test runs as any user: the folder's listing fails by a stand-in for os.scandir (root reads a folder of mode 0)."""
    (tmp_path / "corpus" / "locked").mkdir(parents=True)
    (tmp_path / "corpus" / "a.txt").write_text("one")
    (tmp_path / "corpus" / "locked" / "b.txt").write_text("two")
    assert fineweb.list_input_files([tmp_path / "corpus"]) == [tmp_path / "corpus" / "a.txt",
                                                                tmp_path / "corpus" / "locked" / "b.txt"]
    real_scandir = os.scandir

    def scandir(path):
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.raises(fineweb.InputError) as error:
        fineweb.list_input_files([tmp_path / "corpus"])
    assert str(error.value) == (f"{tmp_path / 'corpus' / 'locked'}: cannot read the folder (Permission denied); "
                                "check its permissions, or name the inputs one by one")


def test_shard_writer_fills_exact_shards_and_writes_no_empty_one(tmp_path):
    writer = fineweb.ShardWriter(tmp_path, "w", 4)
    for piece in ([shards.EOT, 1, 2], [shards.EOT, 3, 4, 5, shards.EOT], [6, 7, 8, 9]):
        writer.add(np.array(piece, dtype=np.uint16))
    writer.close()  # 12 tokens: exactly 3 shards of 4, no 4th empty one
    assert [p.name for p in writer.paths] == ["w_val_000000.bin", "w_train_000001.bin", "w_train_000002.bin"]
    assert [shards.read_tokens(p).tolist() for p in writer.paths] == [
        [shards.EOT, 1, 2, shards.EOT], [3, 4, 5, shards.EOT], [6, 7, 8, 9]]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in writer.paths)


def test_a_jsonl_record_without_a_string_text_is_one_error_line(tmp_path):
    for record, text_field in [('{"text": 5}', "text"), ('{"body": "x"}', "text"), ('["text"]', "text")]:
        path = tmp_path / "in.jsonl"
        path.write_text('{"text": "fine"}\n' + record + "\n")
        documents = fineweb.iter_local_documents([path], text_field)
        assert next(documents) == "fine"
        with pytest.raises(fineweb.InputError) as error:
            next(documents)
        assert str(error.value) == f'{path}:2: no string field "{text_field}"; pass --text_field'


def test_an_input_file_that_cannot_be_read_is_one_error_line_naming_it(tmp_path):
    """Not the output folder's disk advice that finish gives other OSErrors."""
    for name in ["gone.txt", "gone.jsonl"]:
        with pytest.raises(fineweb.InputError) as error:
            next(fineweb.iter_local_documents([tmp_path / name], "text"))
        assert str(error.value) == (f"{tmp_path / name}: cannot read it (No such file or directory); check the file "
                                    "and its permissions")


def test_a_write_error_without_a_file_name_names_the_default_output_folder(tmp_path, tokenizer_env, monkeypatch,
                                                                            capsys):
    """A full disk's OSError names no file: the message names the folder, data/<name>/ without --out."""
    corpus = tmp_path / "doc.txt"
    corpus.write_text("hello world")

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fineweb, "DATA_DIR", tmp_path / "data")
    monkeypatch.setattr(fineweb, "tokenize", full_disk)
    assert fineweb.main([str(corpus), "--name", "mine", "--workers", "1"]) == 1
    assert capsys.readouterr().err.strip() == (f"error: {tmp_path / 'data' / 'mine'}: No space left on device; check "
                                               "free disk space and permissions of the output folder")


def test_an_input_without_documents_is_an_error_and_writes_nothing(tmp_path, tokenizer_env, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n  \n")  # blank lines only
    out_dir = tmp_path / "out"
    assert fineweb.main([str(empty), "--out", str(out_dir), "--workers", "1"]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        'error: the input holds no documents: its .jsonl files hold blank lines only; give them one {"text": ...} a '
        "line (or pass .txt files, one document each)")
    assert not out_dir.exists()
    out_dir.mkdir()  # a folder that was there stays
    assert fineweb.main([str(empty), "--out", str(out_dir), "--workers", "1"]) == 1
    assert list(out_dir.iterdir()) == []


@pytest.mark.parametrize("config, named", [([], ""), (["--hf_name", "sample-10BT"], "config sample-10BT, ")],
                         ids=["the dataset's default config", "a config"])
def test_an_hf_split_without_rows_is_one_error_line_naming_the_split(tmp_path, tokenizer_env, monkeypatch, capsys,
                                                                     config, named):
    """Without --hf_name the line said 'config None', Python's word for the setting left out."""
    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=lambda *args, **kwargs: iter([])))
    assert fineweb.main(["--hf", "org/corpus", *config, "--hf_split", "test", "--out", str(tmp_path / "out"),
                         "--workers", "1"]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: the input holds no documents: org/corpus ({named}split test) streamed no rows; check --hf, "
        "--hf_name and --hf_split")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args, message", [
    (["doc.txt", "--shard_size", "0"], "--shard_size must be at least 1"),
    (["doc.txt", "--workers", "0"], "--workers must be at least 1"),
    (["doc.txt", "--chunksize", "0"], "--chunksize must be at least 1"),
    (["doc.txt", "--hf", "org/corpus"], "exactly one of them"),
    ([], "exactly one of them"),
    (["doc.txt", "--name", ".."], "must be a file name prefix"),
    # an unset shell variable: as a path, "" is the working directory, whose text files (the records' logs) were read
    ([""], "argument PATH: an empty path (an unset shell variable?) names no file or folder; give one"),
    (["doc.txt", "--out="], "argument --out: an empty path (an unset shell variable?) names no file or folder"),
])
def test_option_checks_are_usage_errors(capsys, args, message):
    with pytest.raises(SystemExit) as exit_:
        fineweb.parse_args(args)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_a_leading_tilde_in_a_path_is_the_home_folder(tmp_path, monkeypatch):
    """The shell leaves it as typed in quotes ('~/my corpus') and after an = (--out=~/shards): the corpus was not
    found, or the shards went to a folder named ~ below the working directory."""
    monkeypatch.setenv("HOME", str(tmp_path))
    args = fineweb.parse_args(["~/my corpus", "--out=~/shards"])
    assert (args.inputs, args.out) == ([str(tmp_path / "my corpus")], str(tmp_path / "shards"))


def test_the_default_workers_are_the_cores_this_process_may_use(monkeypatch, tmp_path):
    """A job scheduler's share of a 64-core machine (2 cores here): os.cpu_count() started 64 tokenizer processes.
    Where the system tells neither (os.cpu_count() is None), 1: None failed the option check with a traceback."""
    monkeypatch.setattr(fineweb, "CGROUP", tmp_path)  # no CPU quota, whatever this machine's container sets
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 5}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert fineweb.parse_args(["doc.txt"]).workers == 2
    monkeypatch.delattr(os, "sched_getaffinity")  # macOS and Windows have none
    assert fineweb.parse_args(["doc.txt"]).workers == 64
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert fineweb.parse_args(["doc.txt"]).workers == 1


def cgroup_files(folder: Path, files: dict) -> Path:
    """A fake cgroup folder: each name's text, or its bytes."""
    for name, content in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    return folder


@pytest.mark.parametrize("files, cores", [
    ({"cpu.max": "200000 100000\n"}, 2), ({"cpu.max": "150000 100000\n"}, 2), ({"cpu.max": "50000 100000"}, 1),
    ({"cpu.max": "max 100000\n"}, 8), ({"cpu.max": "900000 100000\n"}, 8),  # the affinity is the smaller
    ({"cpu/cpu.cfs_quota_us": "300000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 3),
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, 8),
    ({}, 8), ({"cpu/cpu.cfs_quota_us": "300000\n"}, 8),  # missing files
    ({"cpu.max": "garbage"}, 8), ({"cpu.max": b"\xff\xfe 100000"}, 8), ({"cpu.max": ""}, 8),
    ({"cpu.max": "0 100000"}, 8), ({"cpu.max": "200000 0"}, 8), ({"cpu.max": "2.5 1"}, 8),
    ({"cpu.max": "200000 100000 7"}, 8), ({"cpu.max/oops": "a folder where the file was"}, 8),
    ({"cpu/cpu.cfs_quota_us": "abc", "cpu/cpu.cfs_period_us": "100000"}, 8),
    ({"cpu.max": "max 100000", "cpu/cpu.cfs_quota_us": "100000", "cpu/cpu.cfs_period_us": "100000"}, 8),  # v2 wins
    # a cpu.max that is not two fields is no v2 quota: v1's pair is read instead
    ({"cpu.max": "garbage", "cpu/cpu.cfs_quota_us": "300000", "cpu/cpu.cfs_period_us": "100000"}, 3),
    ({"cpu.max": "1 100000"}, 1), ({"cpu.max": "3 1"}, 3),  # the smallest quota and period that set one
])
def test_the_default_workers_stay_within_a_containers_cpu_quota(monkeypatch, tmp_path, files, cores):
    """A container limited to 2 cores' time (docker --cpus=2) on 8 it may run on: os.sched_getaffinity counts the
    8, and 8 tokenizer processes shared 2 cores' time, each with its batch of documents in memory. A quota that
    is not there, or that cannot be read as one, leaves the affinity's count."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert fineweb.usable_cores(cgroup_files(tmp_path, files)) == cores


def test_the_workers_option_defaults_to_the_quota_from_the_cgroup_folder(monkeypatch, tmp_path):
    assert fineweb.CGROUP == Path("/sys/fs/cgroup")  # where Linux mounts a container's cgroup files
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.setattr(fineweb, "CGROUP", cgroup_files(tmp_path, {"cpu.max": "200000 100000\n"}))
    assert fineweb.parse_args(["doc.txt"]).workers == 2
    assert fineweb.parse_args(["doc.txt", "--workers=5"]).workers == 5  # what the user asks for stands


def test_the_largest_shard_size_an_int32_header_holds_is_accepted():
    assert fineweb.parse_args(["doc.txt", "--shard_size", str(2**31 - 1)]).shard_size == 2**31 - 1
