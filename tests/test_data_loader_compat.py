"""The data tools and train_gpt.py agree: tokenizer output loads in its loader, same error texts."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "data"))
import shards  # noqa: E402
import train_gpt  # noqa: E402
from shard_files import hand_made_shard  # noqa: E402
from shards import EOT, MAGIC, VERSION  # noqa: E402

SHARD_SIZE = 50_000
SEQ_LEN = 1024


@pytest.fixture(scope="module")
def tokenized(tmp_path_factory, english_corpus, gpt2_env):
    """conftest.py's generated corpus tokenized by data/fineweb.py into small shards."""
    out_dir = tmp_path_factory.mktemp("tokenized")
    result = subprocess.run([sys.executable, str(REPO_ROOT / "data" / "fineweb.py"), str(english_corpus.path),
                             "--out", str(out_dir), "--shard_size", str(SHARD_SIZE), "--workers", "2"],
                            env=gpt2_env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return out_dir


def test_shards_read_identically(tokenized):
    paths = sorted(tokenized.glob("fineweb_*.bin"))
    assert len(paths) >= 3
    for path in paths:
        assert train_gpt.read_shard_header(str(path)) == shards.read_header(path)
        tokens = train_gpt.read_shard(str(path))
        assert tokens.dtype == torch.uint16
        assert np.array_equal(tokens.numpy(), shards.read_tokens(path))


def test_train_loader_yields_document_aligned_sequences(tokenized):
    files = train_gpt.find_shards("train_files", str(tokenized / "fineweb_train_*.bin"))
    assert [Path(f).name for f in files][:2] == ["fineweb_train_000001.bin", "fineweb_train_000002.bin"]
    batches = train_gpt.train_batches(files, SEQ_LEN, 0, 1, torch.device("cpu"))
    for _ in range(20):
        inputs, targets = next(batches)
        assert inputs.shape == targets.shape == (SEQ_LEN,)
        assert inputs[0].item() == EOT
        assert torch.equal(inputs[1:], targets[:-1])
        assert int(inputs.max()) < 50257


def test_val_tokens_are_the_start_of_the_val_shard(tokenized):
    val = str(tokenized / "fineweb_val_000000.bin")
    tokens = train_gpt.load_val_tokens(train_gpt.find_shards("val_files", val), 4096, torch.device("cpu"))
    assert tokens[0].item() == EOT
    assert np.array_equal(tokens.numpy(), shards.read_tokens(val)[:4097].astype(np.int32))


def bad_shards(tmp_path):
    """One file per ShardError case, in the order the checks run."""
    def raw(name, header_values, payload_bytes):
        return str(hand_made_shard(tmp_path / name, header_values, payload_bytes))

    short = tmp_path / "short.bin"
    short.write_bytes(b"\0" * 7)
    return [str(short),
            raw("magic.bin", [123, VERSION, 0], 0),
            raw("version.bin", [MAGIC, 3, 0], 0),
            raw("truncated.bin", [MAGIC, VERSION, 8], 10),
            raw("corrupt.bin", [MAGIC, VERSION, 8], 17)]


@pytest.mark.parametrize("reader", ["read_shard_header", "read_shard"])
def test_same_error_messages(tmp_path, reader):
    for path in bad_shards(tmp_path):
        with pytest.raises(shards.ShardError) as expected:
            shards.read_header(path)
        with pytest.raises(train_gpt.DataError) as actual:
            getattr(train_gpt, reader)(path)
        assert str(actual.value) == str(expected.value)
