"""Shard files written byte by byte, for the tests of the code that must reject bad ones. The format is written out
here, not taken from data/shards.py, so a change there cannot change what the tests feed it: a header of 256
little-endian int32 (magic, version, token count, then zeros), then the tokens as uint16."""

from pathlib import Path

import numpy as np

HEADER_INTS, HEADER_BYTES = 256, 1024


def hand_made_shard(path: Path, header_values, payload: bytes | int = b"") -> Path:
    """Write a header whose first ints are header_values, then payload: these bytes, or that many zero bytes
    left as a hole (a sparse file), so a shard of the tracks' full size costs no disk."""
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[:len(header_values)] = header_values
    with open(path, "wb") as f:
        f.write(header.tobytes())
        if isinstance(payload, bytes):
            f.write(payload)
        else:
            f.truncate(HEADER_BYTES + payload)
    return path
