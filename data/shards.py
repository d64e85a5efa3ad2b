"""Read, write and validate speedrun token shards (numpy + stdlib only).

A shard is a header of 256 little-endian int32 -- [0] = MAGIC, [1] = VERSION,
[2] = number of tokens -- followed by that many little-endian uint16 GPT-2 token
ids. Every document starts with the end-of-text token EOT.

The ShardError messages are part of the interface: the training scripts print
the very same text (prefixed by "error: ") and a test compares them.
"""

import os

import numpy as np

MAGIC = 20240520
VERSION = 1
HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4  # 1024
EOT = 50256  # GPT-2 <|endoftext|>; starts every document
TOKEN_DTYPE = np.dtype("<u2")
HEADER_DTYPE = np.dtype("<i4")


FIX = "re-download or re-tokenize it"  # what every shard problem calls for


class ShardError(ValueError):
    """A file is not a valid shard; the message names the file, the problem and the fix."""

    def __init__(self, path, problem: str):
        super().__init__(f"{path}: {problem}; {FIX}")
        self.problem = problem


def read_header(path) -> int:
    """Validate the header and the file size of a shard; return its token count.

    Reads only the header. Raises ShardError (or OSError if the file cannot be read).
    """
    size = os.path.getsize(path)
    if size < HEADER_BYTES:
        raise ShardError(path, f"truncated: {size} bytes is shorter than the {HEADER_BYTES}-byte header")
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(HEADER_BYTES), dtype=HEADER_DTYPE)
    magic, version, n = (int(v) for v in header[:3])
    if magic != MAGIC:
        raise ShardError(path, f"not a speedrun shard (magic {magic}, expected {MAGIC})")
    if version != VERSION:
        raise ShardError(path, f"unsupported shard version {version} (expected {VERSION})")
    if n < 0:
        raise ShardError(path, f"corrupt: the header's token count is negative ({n})")
    expected = HEADER_BYTES + 2 * n
    if size < expected:
        raise ShardError(path, f"truncated: header promises {n} tokens ({expected} bytes) but the file has "
                               f"{size} bytes")
    if size > expected:
        raise ShardError(path, f"corrupt: header promises {n} tokens ({expected} bytes) but the file has "
                               f"{size} bytes")
    return n


def read_tokens(path) -> np.ndarray:
    """Return all tokens of a validated shard as a uint16 array."""
    n = read_header(path)
    with open(path, "rb") as f:
        f.seek(HEADER_BYTES)
        tokens = np.fromfile(f, dtype=TOKEN_DTYPE, count=n)
    return tokens.astype(np.uint16, copy=False)


def write_shard(path, tokens) -> None:
    """Write tokens as a shard, atomically: a partial file never sits under `path`.

    The data goes to `path + ".tmp"` first and is renamed over `path` once complete.
    """
    tokens = np.asarray(tokens)
    if tokens.ndim != 1:
        raise ValueError(f"tokens must be 1-D, got shape {tokens.shape}")
    if tokens.size and (tokens.min() < 0 or tokens.max() >= 2**16):
        raise ValueError("token ids must fit in uint16 (0..65535)")
    header = np.zeros(HEADER_INTS, dtype=HEADER_DTYPE)
    header[:3] = (MAGIC, VERSION, tokens.size)
    tmp_path = os.fspath(path) + ".tmp"
    try:
        with open(tmp_path, "wb") as f:
            f.write(header.tobytes())
            f.write(tokens.astype(TOKEN_DTYPE, copy=False).tobytes())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
        raise


def shard_stats(path) -> dict:
    """Validate a shard and summarise it.

    Returns dict(tokens=, documents=, max_token=, first_token=); documents is the
    number of EOT tokens; max_token and first_token are None for an empty shard.
    """
    tokens = read_tokens(path)
    return dict(
        tokens=int(tokens.size),
        documents=int(np.count_nonzero(tokens == EOT)),
        max_token=int(tokens.max()) if tokens.size else None,
        first_token=int(tokens[0]) if tokens.size else None,
    )
