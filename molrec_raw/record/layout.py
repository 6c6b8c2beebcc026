"""Every number and codec choice of the reference writer for fixed-size sections, in one place.

frame-and-types §6 and trajectory §12 ("Fixed-size sections"), §13 (codecs). These are
choices, not rules: readers accept any chunking and any must-decode codec.
"""
from __future__ import annotations

from math import prod
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

__all__ = ["FIXED_CHUNK_BYTES", "MAX_PLAIN_CHUNKS", "STRING_ROW_BYTES", "fixed_extents", "column_codecs"]

FIXED_CHUNK_BYTES = 512 * 1024  # leading-axis cut of fixed-size sections
MAX_PLAIN_CHUNKS = 4  # more chunks than this are packed into one shard
STRING_ROW_BYTES = 16  # how a string element is counted in row sizes

_BYTES = {"name": "bytes", "configuration": {"endian": "little"}}
_VLEN = {"name": "vlen-utf8", "configuration": {}}
_GZIP1 = {"name": "gzip", "configuration": {"level": 1}}
_SHUFFLE8 = {"name": "numcodecs.shuffle", "configuration": {"elementsize": 8}}
_ZSTD3 = {"name": "zstd", "configuration": {"level": 3, "checksum": False}}
_CRC = {"name": "crc32c"}


def row_bytes(dtype: np.dtype, trailing: Tuple[int, ...]) -> int:
    item = STRING_ROW_BYTES if dtype.kind in "OUT" else dtype.itemsize
    return item * prod(trailing)


def fixed_extents(shape: Tuple[int, ...], dtype: np.dtype) -> Tuple[Tuple[int, ...], Optional[Tuple[int, ...]]]:
    """(chunks, shards) for a fixed-size section's array: rows = min(N, max(1,
    floor(512 KiB / row_bytes))); ≤ 4 chunks stay plain, more go into one shard spanning
    the array (index at the end); strings, empty leading axes and 0-d arrays are one chunk."""
    if not shape:
        return (), None
    whole = tuple(max(1, s) for s in shape)
    n, trailing = shape[0], shape[1:]
    if n == 0 or dtype.kind in "OUT" or row_bytes(dtype, trailing) == 0:
        return whole, None
    rows = min(n, max(1, FIXED_CHUNK_BYTES // row_bytes(dtype, trailing)))
    chunks = (rows,) + tuple(max(1, t) for t in trailing)
    nchunks = -(-n // rows)
    if nchunks <= MAX_PLAIN_CHUNKS:
        return chunks, None
    return chunks, (nchunks * rows,) + chunks[1:]


def column_codecs(dtype: np.dtype, has_precision: bool) -> List[Dict[str, Any]]:
    """Inner codecs: f64 with precision → shuffle + zstd 3; other floats/complex → none;
    everything else (ints, bool, strings, masks) → gzip 1; crc32c closes every pipeline."""
    if dtype.kind in "OUT":
        return [_VLEN, _GZIP1, _CRC]
    if has_precision:
        return [_BYTES, _SHUFFLE8, _ZSTD3, _CRC]
    if dtype.kind in "fc":
        return [_BYTES, _CRC]
    return [_BYTES, _GZIP1, _CRC]
