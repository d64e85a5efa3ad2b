"""train_gpt.py, sections "Data" and "Setup": BOS-aligned sequences, how ranks share them, and every bad-input
message (in-process, and as the one `error:` line the script prints)."""

import itertools
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "data"))
import train_gpt  # noqa: E402
import train_gpt_medium  # noqa: E402
from shard_files import hand_made_shard  # noqa: E402
from shards import write_shard  # noqa: E402
from train_gpt import DataError, Hyperparameters, SetupError  # noqa: E402

EOT = 50256
SEQ_LEN = 256
CPU = torch.device("cpu")


def documents(rng, ntokens, min_len=20, max_len=400):
    tokens = []
    while len(tokens) < ntokens:
        tokens.append(EOT)
        tokens.extend(rng.integers(0, EOT, size=int(rng.integers(min_len, max_len))).tolist())
    return np.array(tokens[:ntokens])


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    folder = tmp_path_factory.mktemp("loader_shards")
    rng = np.random.default_rng(0)
    for i, size in enumerate([20_000, 7_000, 15_000], start=1):  # uneven shards
        write_shard(folder / f"train_{i:06d}.bin", documents(rng, size))
    write_shard(folder / "val_000000.bin", documents(rng, 5_000))
    return folder


def train_files(shards):
    return train_gpt.find_shards("train_files", str(shards / "train_*.bin"))


def windows(files, seq_len, count):
    """(shard tokens, start) of the first count sequence windows."""
    result = []
    for tokens, start in train_gpt.sequence_windows(files, seq_len):
        result.append((tokens, start))
        if len(result) == count:
            break
    return result


def test_find_shards_sorts_and_requires_a_match(shards, tmp_path, monkeypatch):
    assert [Path(f).name for f in train_files(shards)] == ["train_000001.bin", "train_000002.bin",
                                                           "train_000003.bin"]
    pattern = str(tmp_path / "fineweb10B" / "fineweb_train_*.bin")
    with pytest.raises(DataError) as error:
        train_gpt.find_shards("train_files", pattern)
    assert str(error.value) == (f"--train_files={pattern} matches no files; download FineWeb with: python "
                                "data/cached_fineweb10B.py 9")
    (tmp_path / "fineweb10B").mkdir()
    (tmp_path / "fineweb10B" / "fineweb_val_000000.bin").write_bytes(b"")  # downloaded: the pattern is wrong
    pattern = str(tmp_path / "fineweb10B" / "fineweb_trian_*.bin")
    with pytest.raises(DataError) as error:
        train_gpt.find_shards("train_files", pattern)
    assert str(error.value) == (f"--train_files={pattern} matches no files; check the pattern (a glob of shard files, "
                                "e.g. 'data/<name>/<name>_train_*.bin')")
    pattern = str(tmp_path / "mine" / "nothing_*.bin")
    with pytest.raises(DataError) as error:
        train_gpt.find_shards("val_files", pattern)
    assert str(error.value) == (f"--val_files={pattern} matches no files; check the pattern (a glob of shard files, "
                                "e.g. 'data/<name>/<name>_val_*.bin')")
    monkeypatch.chdir(tmp_path)  # a relative pattern names the folder it was read from
    with pytest.raises(DataError) as error:
        train_gpt.find_shards("train_files", "data/fineweb10B/fineweb_train_*.bin")
    assert str(error.value) == (f"--train_files=data/fineweb10B/fineweb_train_*.bin matches no files (a relative "
                                f"pattern, read from {tmp_path}); download FineWeb with: python "
                                "data/cached_fineweb10B.py 9")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_a_folder_this_user_cannot_read_is_named_not_read_as_empty(script, shards, monkeypatch):
    """glob lists nothing in a folder without read or search permission, so its shards looked missing and the error
    sent the user to download them. os.access stands in for the permissions: the tests run as root, who reads any
    folder."""
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: path != str(shards) and real_access(path, mode))
    monkeypatch.setattr(script.glob, "glob", lambda pattern: [])  # what glob gives there
    pattern = str(shards / "fineweb_train_*.bin")
    with pytest.raises(script.DataError) as error:
        script.find_shards("train_files", pattern)
    assert str(error.value) == (f"--train_files={pattern} matches no files: this user cannot read the folder {shards}; "
                                f"make it readable (chmod a+rx {shards}) or copy the shards where it can")


def test_a_folder_or_an_unreadable_file_among_the_shards_is_one_data_error(shards, tmp_path):
    for setting, split in [("train_files", "train"), ("val_files", "val")]:
        with pytest.raises(DataError) as error:
            train_gpt.find_shards(setting, str(shards) + "/")
        assert str(error.value) == (f"--{setting}={shards}/ matches a folder, {shards}/; the pattern names shard "
                                    f"files, e.g. '{shards}/*_{split}_*.bin'")
    broken = tmp_path / "broken_000001.bin"
    broken.symlink_to(tmp_path / "gone.bin")
    with pytest.raises(DataError) as error:
        train_gpt.read_shard_header(str(broken))
    assert str(error.value) == f"{broken}: cannot read it (No such file or directory); fix the file or its pattern"


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_every_sequence_starts_at_bos_and_none_is_skipped(script, shards):
    files = train_files(shards)
    found = list(script.sequence_windows(files, SEQ_LEN))
    assert len(found) > 50
    per_shard = {}  # the windows keep their shard's tensor alive, so ids stay unique
    for tokens, start in found:
        assert tokens[start].item() == EOT
        assert start + SEQ_LEN + 1 <= len(tokens)  # a window never spans two shards
        per_shard.setdefault(id(tokens), (tokens, []))[1].append(start)
    assert len(per_shard) == 3
    for tokens, starts in per_shard.values():
        eot_positions = np.flatnonzero(tokens.numpy() == EOT)
        assert starts[0] == eot_positions[0] == 0
        # the next window opens at the first document start at or after the end of the previous inputs
        for a, b in zip(starts, starts[1:]):
            assert b == eot_positions[np.searchsorted(eot_positions, a + SEQ_LEN)]
        # and the shard ends where no further document has seq_len + 1 tokens left
        later = eot_positions[eot_positions >= starts[-1] + SEQ_LEN]
        assert later.size == 0 or later[0] + SEQ_LEN + 1 > len(tokens)
    largest = max(int(script.read_shard(path).numpy().max()) for path in files)
    assert script.survey_windows(files, SEQ_LEN, 10 ** 9) == (len(found), largest)
    first_shard = int(script.read_shard(files[0]).numpy().max())
    assert script.survey_windows(files, SEQ_LEN, 7) == (7, first_shard)  # only the shards the windows come from


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_windows_at_the_edges_of_the_rule(script, tmp_path):
    """seq_len 8, 39 tokens, documents starting at 0, 8, 9, 21 and 30: a document starting exactly where the previous
    inputs end opens the next window (its first token was the previous window's last target), one a token later is
    skipped, and a window that ends exactly at the shard's end is still read."""
    tokens = np.arange(39) % 100
    tokens[[0, 8, 9, 21, 30]] = EOT
    write_shard(tmp_path / "edge_train_000001.bin", tokens)
    found = [start for _, start in script.sequence_windows([str(tmp_path / "edge_train_000001.bin")], 8)]
    assert found == [0, 8, 21, 30]


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_a_document_with_its_inputs_but_not_its_last_target_left_in_the_shard_is_no_window(script, tmp_path):
    """seq_len 8, 40 tokens, documents starting at 0, 9 and 32: the one at 32 has the 8 inputs (32-39) but not the
    last target (40), so the shard ends after the window at 9. A rule that asked for seq_len tokens only dealt a short
    window at 32: 7 inputs and 7 targets, a batch of the wrong shape."""
    tokens = np.arange(40) % 100
    tokens[[0, 9, 32]] = EOT
    write_shard(tmp_path / "end_train_000001.bin", tokens)
    files = [str(tmp_path / "end_train_000001.bin")]
    starts = [start for _, start in script.sequence_windows(files, 8)]
    batches = script.train_batches(files, 8, 0, 1, CPU)
    assert all(inputs.shape == targets.shape == (8,) for inputs, targets in itertools.islice(batches, len(starts)))
    assert starts == [0, 9]


def test_train_batches_are_bos_aligned_shifted_pairs(shards):
    batches = train_gpt.train_batches(train_files(shards), SEQ_LEN, 0, 1, CPU)
    for (tokens, start), (inputs, targets) in zip(windows(train_files(shards), SEQ_LEN, 30), batches):
        assert inputs.dtype == targets.dtype == torch.int32
        assert inputs.shape == targets.shape == (SEQ_LEN,)
        assert inputs[0].item() == EOT
        assert torch.equal(inputs, tokens[start:start + SEQ_LEN].int())
        assert torch.equal(targets, tokens[start + 1:start + SEQ_LEN + 1].int())


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("world_size", [1, 2])
def test_train_batches_run_through_every_shard_with_each_shards_own_tokens(shards, script, world_size):
    """Past the first shard's end too: window i of the stream goes to rank i % world_size, cut from the shard it
    comes from."""
    files = train_files(shards)
    expected = list(script.sequence_windows(files, SEQ_LEN))
    assert len({id(tokens) for tokens, _ in expected}) == 3
    for rank in range(world_size):
        batches = script.train_batches(files, SEQ_LEN, rank, world_size, CPU)
        for tokens, start in expected[rank::world_size]:
            inputs, targets = next(batches)
            assert inputs.dtype == targets.dtype == torch.int32
            assert torch.equal(inputs, tokens[start:start + SEQ_LEN].int())
            assert torch.equal(targets, tokens[start + 1:start + SEQ_LEN + 1].int())


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("world_size", [2, 4, 8])
def test_ranks_split_exactly_what_one_process_reads_with_accumulation(script, shards, world_size):
    files = train_files(shards)
    steps, accum = 3, 8 // world_size
    single = script.train_batches(files, SEQ_LEN, 0, 1, CPU)
    one_process = [[next(single)[0] for _ in range(8)] for _ in range(steps)]
    ranks = [script.train_batches(files, SEQ_LEN, rank, world_size, CPU) for rank in range(world_size)]
    for step in range(steps):
        per_rank = [[next(ranks[rank])[0] for _ in range(accum)] for rank in range(world_size)]
        # micro-step j of rank r is sequence j * world_size + r of the step (the stream is dealt in turn)
        for rank in range(world_size):
            for j in range(accum):
                assert torch.equal(per_rank[rank][j], one_process[step][j * world_size + rank])
        seen = {tuple(seq.tolist()) for seqs in per_rank for seq in seqs}
        assert len(seen) == 8  # disjoint: 8 different sequences per step
        assert seen == {tuple(seq.tolist()) for seq in one_process[step]}


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_val_tokens_are_the_first_tokens_of_the_val_files(script, shards):
    files = script.find_shards("val_files", str(shards / "val_*.bin"))
    tokens = script.load_val_tokens(files, 1024, CPU)
    assert tokens.dtype == torch.int32 and tokens.numel() == 1025
    assert torch.equal(tokens, script.read_shard(files[0])[:1025].int())


# ----------------------------------------------------------------------------------------------
# Bad shards: each message names the file, the problem and the fix

def raw_file(path, header_values, payload_bytes):
    return str(hand_made_shard(path, header_values, payload_bytes))


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_shard_header_errors(tmp_path, script):
    short = tmp_path / "short.bin"
    short.write_bytes(b"\0" * 100)
    cases = [
        (str(short), f"{short}: truncated: 100 bytes is shorter than the 1024-byte header; "
                     "re-download or re-tokenize it"),
        (raw_file(tmp_path / "magic.bin", [1234, 1, 0], 0),
         f"{tmp_path / 'magic.bin'}: not a speedrun shard (magic 1234, expected 20240520); "
         "re-download or re-tokenize it"),
        (raw_file(tmp_path / "version.bin", [20240520, 7, 0], 0),
         f"{tmp_path / 'version.bin'}: unsupported shard version 7 (expected 1); re-download or re-tokenize it"),
        (raw_file(tmp_path / "truncated.bin", [20240520, 1, 100], 150),
         f"{tmp_path / 'truncated.bin'}: truncated: header promises 100 tokens (1224 bytes) but the file has "
         "1174 bytes; re-download or re-tokenize it"),
        (raw_file(tmp_path / "long.bin", [20240520, 1, 10], 30),
         f"{tmp_path / 'long.bin'}: corrupt: header promises 10 tokens (1044 bytes) but the file has 1054 bytes; "
         "re-download or re-tokenize it"),
        (raw_file(tmp_path / "negative.bin", [20240520, 1, -1], 0),
         f"{tmp_path / 'negative.bin'}: corrupt: the header's token count is negative (-1); re-download or "
         "re-tokenize it"),
        # a file that is no shard at all: its magic is the problem named, not the version its bytes happen to hold
        (raw_file(tmp_path / "other.bin", [1234, 7, -1], 0),
         f"{tmp_path / 'other.bin'}: not a speedrun shard (magic 1234, expected 20240520); re-download or "
         "re-tokenize it"),
    ]
    for path, message in cases:
        with pytest.raises(script.DataError) as error:
            script.read_shard_header(path)
        assert str(error.value) == message
    assert script.read_shard_header(raw_file(tmp_path / "good.bin", [20240520, 1, 10], 20)) == 10


def data_args(shards, script=train_gpt, **overrides):
    settings = dict(train_files=str(shards / "train_*.bin"), val_files=str(shards / "val_*.bin"),
                    train_seq_len=SEQ_LEN, val_seq_len=256, val_tokens=1024, num_iterations=2, device="cpu")
    return script.Hyperparameters(**{**settings, **overrides})


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_check_data_accepts_enough_data(script, shards):
    train, val = script.check_data(data_args(shards, script), 2, 4)
    assert len(train) == 3 and len(val) == 1


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_check_data_reports_too_few_training_sequences(script, shards):
    available, _ = script.survey_windows(train_files(shards), SEQ_LEN, 10 ** 9)
    steps = available // 8 + 1
    with pytest.raises(script.DataError) as error:
        script.check_data(data_args(shards, script, num_iterations=steps), 2, 4)
    assert str(error.value) == (
        f"train files {shards / 'train_*.bin'} hold {available} sequences of {SEQ_LEN + 1} tokens starting at a "
        f"document start, the run needs {steps * 8} ({steps} steps x 2 process(es) x 4 micro-step(s)); add train "
        "shards (~4 like these in all) or lower "
        "--num_iterations")  # 3 shards, a few sequences short
    script.check_data(data_args(shards, script, num_iterations=available // 8), 2, 4)  # exactly enough is fine


@pytest.mark.parametrize("pattern, shards, available, needed, hint", [
    ("data/fineweb10B/fineweb_train_*.bin", 2, 1000, 4100, " (~9 in all: python data/cached_fineweb10B.py 9)"),
    ("data/mine/mine_train_*.bin", 3, 100, 8000, " (~240 like these in all)"),
    ("data/mine/mine_train_*.bin", 1, 0, 8, "")])  # no whole sequence anywhere: no rate to scale
def test_the_shards_a_run_wants_scale_the_ones_found(pattern, shards, available, needed, hint):
    assert train_gpt.shards_wanted(pattern, shards, available, needed) == hint


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_check_data_reports_too_few_validation_tokens(script, shards):
    with pytest.raises(script.DataError) as error:
        script.check_data(data_args(shards, script, val_tokens=5_000), 1, 8)
    assert str(error.value) == (f"val files {shards / 'val_*.bin'} hold 5000 tokens but --val_tokens=5000 needs "
                                "5001; lower --val_tokens or add validation data")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_check_data_counts_the_validation_tokens_of_every_val_file(shards, tmp_path, script):
    """load_val_tokens reads on into the next val file, so check_data counts them all: 600 + 700 tokens hold
    --val_tokens=1024 (1,025 read), which neither file holds alone."""
    rng = np.random.default_rng(4)
    for i, size in enumerate([600, 700]):
        write_shard(tmp_path / f"val_{i:06d}.bin", documents(rng, size))
    args = data_args(shards, script, val_files=str(tmp_path / "val_*.bin"))
    script.check_data(args, 1, 1)
    with pytest.raises(script.DataError) as error:
        script.check_data(data_args(shards, script, val_files=args.val_files, val_tokens=1_536), 1, 1)
    assert str(error.value) == (f"val files {tmp_path / 'val_*.bin'} hold 1300 tokens but --val_tokens=1536 needs "
                                "1537; lower --val_tokens or add validation data")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_check_data_checks_every_header_first(shards, tmp_path, script):
    for path in shards.glob("train_*.bin"):
        (tmp_path / path.name).write_bytes(path.read_bytes())
    raw_file(tmp_path / "train_000009.bin", [20240520, 2, 0], 0)
    with pytest.raises(script.DataError, match=r"train_000009.bin: unsupported shard version 2"):
        script.check_data(data_args(shards, script, train_files=str(tmp_path / "train_*.bin")), 1, 8)


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("world_size", [3, 5, 6, 16])
def test_world_size_must_divide_8(script, world_size):
    with pytest.raises(script.SetupError) as error:
        script.check_settings(script.Hyperparameters(device="cpu"), world_size)
    assert str(error.value) == (f"world size {world_size} does not divide 8; launch 1, 2, 4 or 8 processes "
                                "(./run.sh picks the GPU count)")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_val_tokens_must_split_evenly_over_the_ranks(script):
    args = script.Hyperparameters(device="cpu", val_tokens=2 * 262_144)  # two validation steps of one process
    script.check_settings(args, 2)
    with pytest.raises(script.SetupError) as error:
        script.check_settings(args, 4)
    assert str(error.value) == ("--val_tokens=524288 is not a multiple of world_size x val_seq_len = 1048576; change "
                                "--val_tokens or --val_seq_len")


@pytest.mark.parametrize("name", ["train_seq_len", "val_seq_len"])
def test_sequence_lengths_must_be_multiples_of_128(name):
    args = Hyperparameters(device="cpu", val_tokens=1000 * 8, **{name: 1000})
    with pytest.raises(SetupError) as error:
        train_gpt.check_settings(args, 1)
    assert str(error.value) == f"--{name}=1000 is not a multiple of 128 (the attention block size); round it to one"


@pytest.mark.parametrize("overrides, message", [
    (dict(num_iterations=0), "--num_iterations=0 must be positive"),
    (dict(val_loss_every=-1), "--val_loss_every=-1 must be >= 0"),
    (dict(head_dim=30), "--head_dim=30 must be a multiple of 4 (half-truncated rotary)"),
    (dict(num_layers=5, window_pattern="LSSSL"), "--num_layers=5: at least 6 blocks"),
    (dict(window_pattern="LSSSLSSLSSS"), "--window_pattern=LSSSLSSLSSS needs one L or S per block (12 letters)"),
    (dict(window_pattern="LSSSLSSLSSSX"), "--window_pattern=LSSSLSSLSSSX needs one L or S per block"),
    (dict(backout_layer=12), "--backout_layer=12: use -1 (off) or a block count from 1 to 11"),
    (dict(backout_layer=0), "--backout_layer=0: use -1 (off) or a block count from 1 to 11"),
    (dict(val_tokens=1000), "--val_tokens=1000 is not a multiple of world_size x val_seq_len = 262144"),
    (dict(device="tpu"), "--device=tpu: use cuda or cpu"),
])
def test_other_setting_errors(overrides, message):
    with pytest.raises(SetupError) as error:
        train_gpt.check_settings(Hyperparameters(**{"device": "cpu", **overrides}), 1)
    assert str(error.value).startswith(message)


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_default_settings_pass_for_every_world_size(script):
    for world_size in (1, 2, 4, 8):
        script.check_settings(script.Hyperparameters(device="cpu"), world_size)


# ----------------------------------------------------------------------------------------------
# The script itself: one `error:` line on stderr, exit code 2, no traceback

def run_script(*args, env_extra=None):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, str(REPO_ROOT / "train_gpt.py"), *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def assert_one_error_line(result, message):
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [f"error: {message}"]
    assert result.stdout == ""


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine without CUDA")
def test_script_without_cuda_says_how_to_run_on_cpu(shards):
    result = run_script("--device=cuda", f"--train_files={shards}/train_*.bin", f"--val_files={shards}/val_*.bin")
    assert_one_error_line(result, "CUDA is not available; run on a GPU machine, or pass --device=cpu for a tiny "
                                  "CPU run")


def test_script_data_and_argument_errors_are_one_line(shards, tmp_path):
    missing = tmp_path / "fineweb_*.bin"
    result = run_script("--device=cpu", f"--train_files={missing}", "--check_only=true")
    assert_one_error_line(result, f"--train_files={missing} matches no files; download FineWeb with: "
                                  "python data/cached_fineweb10B.py 9")
    result = run_script("--device=cpu", "--num_layers=seven")
    assert_one_error_line(result, "--num_layers=seven is not an integer")


def test_script_check_only_passes_on_good_data(shards):
    result = run_script("--device=cpu", "--check_only=true", f"--train_files={shards}/train_*.bin",
                        f"--val_files={shards}/val_*.bin", "--train_seq_len=256", "--val_seq_len=256",
                        "--val_tokens=1024", "--num_iterations=2")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok: settings, data and device checked for world size 1"


def test_script_with_an_unreadable_compile_cache_says_how_to_recover(shards, tmp_path):
    cache = tmp_path / "artifacts.bin"
    cache.write_bytes(b"truncated download")
    result = run_script("--device=cpu", "--compile=false", f"--train_files={shards}/train_*.bin",
                        f"--val_files={shards}/val_*.bin", "--train_seq_len=256", "--val_seq_len=256",
                        "--val_tokens=1024", "--num_iterations=2", f"--compile_cache={cache}")
    assert_one_error_line(result, f"--compile_cache={cache} could not be loaded (corrupt, or not torch.compile "
                                  "artifacts); delete it to compile from scratch and write a new one")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_check_data_counts_the_warmups_sequences_too(script, shards):
    """The warmup reads the stream from its start: with more warmup steps than training steps it needs more."""
    available, _ = script.survey_windows(train_files(shards), SEQ_LEN, 10 ** 9)
    steps = available // 8 + 1
    script.check_data(data_args(shards, script, num_iterations=1, warmup_steps=available // 8), 2, 4)
    with pytest.raises(script.DataError) as error:
        script.check_data(data_args(shards, script, num_iterations=1, warmup_steps=steps), 2, 4)
    assert str(error.value).endswith(f"the run needs {steps * 8} ({steps} steps x 2 process(es) x 4 micro-step(s)); "
                                     "add train shards (~4 like these in all) or lower --warmup_steps")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_too_little_train_data_names_the_fix_that_would_work(shards, tmp_path, script):
    """'Add train shards or lower --num_iterations' was the fix for every shortfall, also where neither works: a
    sequence longer than any shard (sequences stay in their shard), shards without a document start."""
    longest = max(script.read_shard_header(path) for path in train_files(shards))
    with pytest.raises(script.DataError) as error:
        script.check_data(data_args(shards, script, train_seq_len=longest // 128 * 128 + 128), 1, 1)
    assert str(error.value).endswith("(10 steps x 1 process(es) x 1 micro-step(s)); no shard is that long (a sequence "
                                     "stays in its shard); lower --train_seq_len")
    exact = tmp_path / "exact"  # a shard of exactly seq_len tokens: one short of a sequence's inputs and last target
    exact.mkdir()
    write_shard(exact / "train_000001.bin", documents(np.random.default_rng(2), SEQ_LEN))
    with pytest.raises(script.DataError) as error:
        script.check_data(data_args(shards, script, train_files=str(exact / "train_*.bin")), 1, 1)
    assert str(error.value).endswith("no shard is that long (a sequence stays in its shard); lower --train_seq_len")
    write_shard(tmp_path / "train_000001.bin", np.arange(5_000) % 1000)  # no end-of-text token
    with pytest.raises(script.DataError) as error:
        script.check_data(data_args(shards, script, train_files=str(tmp_path / "train_*.bin")), 1, 1)
    assert str(error.value).endswith("hold 0 sequences of 257 tokens starting at a document start, the run needs 10 "
                                     "(10 steps x 1 process(es) x 1 micro-step(s)); check the shards' end-of-text "
                                     "tokens with python data/check_shards.py, or lower --train_seq_len")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_too_few_sequences_with_as_many_warmup_as_training_steps_asks_to_lower_both(script, shards):
    """The warmup and the training each read the stream from its start, so the run needs the longer of the two: where
    they are equal, lowering one alone leaves the need as it was (the line named --num_iterations alone)."""
    available, _ = script.survey_windows(train_files(shards), SEQ_LEN, 10 ** 9)
    steps = available // 8 + 1
    with pytest.raises(script.DataError) as error:
        script.check_data(data_args(shards, script, num_iterations=steps, warmup_steps=steps), 2, 4)
    assert str(error.value).endswith("add train shards (~4 like these in all) or lower --num_iterations and "
                                     "--warmup_steps")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_one_shard_shorter_than_a_sequence_among_longer_ones_still_asks_for_more_shards(tmp_path, script):
    """'No shard is that long' is for a sequence longer than every shard: a short shard beside long ones (a small
    last shard) holds no sequence, but more shards like the others would, so the fix is still to add shards."""
    rng = np.random.default_rng(3)
    write_shard(tmp_path / "train_000001.bin", documents(rng, 6_000))
    write_shard(tmp_path / "train_000002.bin", documents(rng, 100))  # shorter than one sequence
    write_shard(tmp_path / "val_000000.bin", documents(rng, 2_000))
    available, _ = script.survey_windows(train_files(tmp_path), SEQ_LEN, 10 ** 9)
    assert available > 0
    with pytest.raises(script.DataError) as error:
        script.check_data(data_args(tmp_path, script, num_iterations=available + 1, warmup_steps=0), 1, 1)
    assert str(error.value).endswith(f"the run needs {available + 1} ({available + 1} steps x 1 process(es) x 1 "
                                     f"micro-step(s)); add train shards (~{math.ceil(2 * (available + 1) / available)}"
                                     " like these in all) or lower --num_iterations")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("train_pattern, val_pattern", [("*.bin", "val_*.bin"), ("train_*.bin", "*_00000[01].bin")])
def test_a_shard_matched_as_train_and_as_val_is_an_error(shards, script, train_pattern, val_pattern):
    """A broad pattern used to train on the validation shard (or validate on a train shard) without a word."""
    with pytest.raises(script.DataError) as error:
        script.check_data(data_args(shards, script, train_files=str(shards / train_pattern),
                                    val_files=str(shards / val_pattern)), 1, 1)
    shared = "val_000000.bin" if train_pattern == "*.bin" else "train_000001.bin"
    assert str(error.value) == (
        f"{os.path.realpath(shards / shared)} matches both --train_files={shards / train_pattern} and "
        f"--val_files={shards / val_pattern}; narrow the patterns (a model trained on its validation data has a "
        "meaningless val loss)")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_a_val_shard_linked_into_the_train_folder_is_matched_as_both(shards, tmp_path, script):
    """Patterns in two folders match no path twice, but a symlink (a train folder assembled from links) can name the
    validation shard's file among the train shards: compared by the paths as matched, the run would train on it
    silently."""
    train = tmp_path / "train"
    train.mkdir()
    for path in sorted(shards.glob("train_*.bin")):
        (train / path.name).symlink_to(path)
    (train / "train_000004.bin").symlink_to(shards / "val_000000.bin")
    with pytest.raises(script.DataError) as error:
        script.check_data(data_args(shards, script, train_files=str(train / "train_*.bin")), 1, 1)
    assert str(error.value) == (
        f"{os.path.realpath(shards / 'val_000000.bin')} matches both --train_files={train / 'train_*.bin'} and "
        f"--val_files={shards / 'val_*.bin'}; narrow the patterns (a model trained on its validation data has a "
        "meaningless val loss)")
    (train / "train_000004.bin").unlink()
    script.check_data(data_args(shards, script, train_files=str(train / "train_*.bin")), 1, 1)  # links alone pass


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_exactly_enough_train_sequences_and_val_tokens_pass(tmp_path, script):
    tokens = np.random.default_rng(0).integers(0, 50000, 6_000)
    tokens[::300] = EOT  # documents of 300 tokens: one 257-token window each (at 0, 300, ..., 5700)
    write_shard(tmp_path / "train_000001.bin", tokens)
    write_shard(tmp_path / "val_000000.bin", tokens[:1_025])  # the 1,024 inputs and the last target
    available, _ = script.survey_windows(train_files(tmp_path), SEQ_LEN, 10 ** 9)
    assert available == 20
    script.check_data(data_args(tmp_path, script, num_iterations=available, warmup_steps=0), 1, 1)
    with pytest.raises(script.DataError, match=f"hold {available} sequences .* the run needs {available + 1} "):
        script.check_data(data_args(tmp_path, script, num_iterations=available + 1, warmup_steps=0), 1, 1)
    # the warmup reads the stream from its start as well: more warmup steps than sequences is short too
    with pytest.raises(script.DataError, match=f"the run needs {available + 1} "):
        script.check_data(data_args(tmp_path, script, num_iterations=1, warmup_steps=available + 1), 1, 1)
    with pytest.raises(script.DataError, match="hold 1025 tokens but --val_tokens=1025 needs 1026;"):
        script.check_data(data_args(tmp_path, script, val_tokens=1025, warmup_steps=0), 1, 1)


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_a_shard_of_only_a_header_holds_no_tokens(tmp_path, script):
    empty = raw_file(tmp_path / "empty.bin", [20240520, 1, 0], 0)
    assert script.read_shard_header(empty) == 0
    assert script.read_shard(empty).numel() == 0


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("which", ["train", "val"])
def test_token_ids_past_the_vocabulary_are_a_data_error(tmp_path, script, which):
    rng = np.random.default_rng(0)
    for name in ["train_000001.bin", "val_000000.bin"]:
        tokens = documents(rng, 6_000)
        if name.startswith(which):
            tokens[500] = 60_000
        write_shard(tmp_path / name, tokens)
    with pytest.raises(script.DataError) as error:
        script.check_data(data_args(tmp_path, script), 1, 1)
    assert str(error.value) == (f"{tmp_path / (which + '_*.bin')} hold token id 60000, outside --vocab_size=50257; "
                                "check them with python data/check_shards.py (GPT-2 tokens are below 50257)")
    script.check_data(data_args(tmp_path, script, vocab_size=60_001), 1, 1)
    with pytest.raises(script.DataError, match="hold token id 60000, outside --vocab_size=60000;"):
        script.check_data(data_args(tmp_path, script, vocab_size=60_000), 1, 1)  # ids run from 0 to vocab_size - 1


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("bad_shard", [0, 1], ids=["first", "second"])
def test_a_token_id_past_the_vocabulary_in_any_train_shard_the_run_reads_is_found(tmp_path, script, bad_shard):
    """The largest id over every shard the run reads, not only the last one's, nor only the first one's (a survey
    that took the first shard's largest id and kept it passed the first case)."""
    rng = np.random.default_rng(0)
    parts = [documents(rng, 1_000), documents(rng, 6_000)]  # a few sequences: the run reads on into the second shard
    parts[bad_shard][100] = 60_000
    for i, tokens in enumerate(parts, start=1):
        write_shard(tmp_path / f"train_{i:06d}.bin", tokens)
    write_shard(tmp_path / "val_000000.bin", documents(rng, 6_000))
    files = train_files(tmp_path)
    assert script.survey_windows(files, SEQ_LEN, 10 ** 9)[1] == 60_000
    with pytest.raises(script.DataError) as error:
        script.check_data(data_args(tmp_path, script), 1, 1)
    assert str(error.value).startswith(f"{tmp_path / 'train_*.bin'} hold token id 60000, outside --vocab_size=50257;")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_val_tokens_run_on_into_the_next_file_and_stop_there(tmp_path, script):
    rng = np.random.default_rng(1)
    parts = [documents(rng, 600), documents(rng, 700), documents(rng, 50)]
    for i, tokens in enumerate(parts):
        write_shard(tmp_path / f"val_{i:06d}.bin", tokens)
    tokens = script.load_val_tokens(script.find_shards("val_files", str(tmp_path / "val_*.bin")), 1_000, CPU)
    assert torch.equal(tokens, torch.from_numpy(np.concatenate(parts)[:1_001].astype(np.int32)))


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_only_the_validation_tokens_the_run_reads_are_checked_and_read(tmp_path, monkeypatch, script):
    """--val_tokens=1024 reads the val shards' first 1,025 tokens: an id past the vocabulary after them is no error,
    and no shard is read further (FineWeb's val shard holds 100M tokens; the run reads 10.5M)."""
    rng = np.random.default_rng(0)
    write_shard(tmp_path / "train_000001.bin", documents(rng, 6_000))
    tokens = documents(rng, 6_000)
    tokens[1_025] = 60_000
    write_shard(tmp_path / "val_000000.bin", tokens)
    limits, read_shard = [], script.read_shard
    monkeypatch.setattr(script, "read_shard",
                        lambda path, limit=None: limits.append((Path(path).name, limit)) or read_shard(path, limit))
    args = data_args(tmp_path, script)
    script.check_data(args, 1, 1)
    assert ("val_000000.bin", 1_025) in limits and ("val_000000.bin", None) not in limits
    tokens[1_000] = 60_000
    write_shard(tmp_path / "val_000000.bin", tokens)
    with pytest.raises(script.DataError, match="hold token id 60000"):
        script.check_data(args, 1, 1)
