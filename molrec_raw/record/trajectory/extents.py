"""Reference extents, codecs and flush cadence of the trajectory writer (trajectory §12–§14).

Choices, not rules: readers accept any chunking.  Integer arithmetic follows the reference
implementation (README decision 3): ``floor_rows = max(1, floor(16384 / min_row_bytes))``;
``R = ceil(max(frame_rows, floor_rows) / frame_rows) * frame_rows`` (``floor_rows`` when the
representative row count is 0); ``chunks_per_shard = clamp(floor(2^28 / (R * row_bytes)), 1,
4096)``; dense arrays 1024-row inner chunks × 256 per shard; auto-flush
``K = ceil(base / coarsest) * coarsest`` with ``base = clamp(floor(4 MiB / frame_bytes), 1,
4096)`` and ``coarsest`` the largest frames-per-chunk over blocks with rows.
"""
from __future__ import annotations

from math import prod
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from molrec_raw.errors import InvalidValueError

__all__ = [
    "ITEM_BYTES", "FLOOR_CHUNK_BYTES", "SHARD_TARGET_BYTES", "MAX_CHUNKS_PER_SHARD",
    "DENSE_ROWS", "DENSE_CHUNKS_PER_SHARD", "INDEX_PAGE_CHUNKS", "safe_chunks_per_shard", "FLUSH_TARGET_BYTES", "MAX_BASE_FLUSH",
    "row_bytes", "block_rows_per_chunk", "chunks_per_shard", "flush_cadence",
    "parse_compression", "column_codecs", "dense_codecs",
]

ITEM_BYTES: Dict[str, int] = {
    "f64": 8, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "u8": 1, "u16": 2, "u32": 4, "u64": 8,
    "bool": 1, "string": 16, "c64": 8, "c128": 16,
}
FLOOR_CHUNK_BYTES = 16384
SHARD_TARGET_BYTES = 268435456
MAX_CHUNKS_PER_SHARD = 4096
DENSE_ROWS = 1024
REFERENCE_DENSE_CHUNKS_PER_SHARD = 256  # the reference's choice (§12)
# Crash safety (a deviation from the reference, recorded in the report): the shard index
# (16 B per inner chunk + a 4 B crc32c) is rewritten in place at every positional append.
# The kernel may stop a multi-page write between pages when the process is killed, leaving
# an index whose crc no longer matches, which makes committed rows unreadable.  At most 255
# inner chunks per shard keep the index (4084 B) inside the first 4 KiB page, and a write
# within one page is not torn by a kill.
INDEX_PAGE_CHUNKS = 255
DENSE_CHUNKS_PER_SHARD = INDEX_PAGE_CHUNKS
FLUSH_TARGET_BYTES = 4 * 1024 * 1024
MAX_BASE_FLUSH = 4096


def row_bytes(dtype: str, trailing: Sequence[int] = ()) -> int:
    """Bytes of one row: item size × prod(trailing) (strings count 16 B)."""
    return ITEM_BYTES[dtype] * prod(trailing)


def block_rows_per_chunk(frame_rows: int, row_sizes: Iterable[int]) -> int:
    """One inner-chunk row count ``R`` per block, from its narrowest column (§12).
    A block without columns uses its frame rows (1 when unknown)."""
    sizes = [s for s in row_sizes if s > 0]
    if not sizes:
        return max(1, frame_rows)
    floor_rows = max(1, FLOOR_CHUNK_BYTES // min(sizes))
    if frame_rows <= 0:
        return floor_rows
    return -(-max(frame_rows, floor_rows) // frame_rows) * frame_rows


def chunks_per_shard(rows_per_chunk: int, row_size: int) -> int:
    """The reference's ``clamp(floor(2^28 / (R * row_bytes)), 1, 4096)`` (§12)."""
    return max(1, min(MAX_CHUNKS_PER_SHARD, SHARD_TARGET_BYTES // max(1, rows_per_chunk * row_size)))


def safe_chunks_per_shard(rows_per_chunk: int, row_size: int) -> int:
    """What the writer uses: the reference number capped at ``INDEX_PAGE_CHUNKS``."""
    return min(INDEX_PAGE_CHUNKS, chunks_per_shard(rows_per_chunk, row_size))


def flush_cadence(blocks: Iterable[Tuple[int, Sequence[int], int]]) -> int:
    """Automatic flush cadence K (§14) from ``(frame_rows, column row sizes, R)`` per block."""
    frame_bytes, coarsest = 0, 1
    for frame_rows, sizes, rows_per_chunk in blocks:
        frame_bytes += sum(sizes) * frame_rows
        if frame_rows > 0:
            coarsest = max(coarsest, max(1, rows_per_chunk // frame_rows))
    base = max(1, min(MAX_BASE_FLUSH, FLUSH_TARGET_BYTES // max(frame_bytes, 1)))
    return -(-base // coarsest) * coarsest


_BYTES = {"name": "bytes", "configuration": {"endian": "little"}}
_VLEN = {"name": "vlen-utf8", "configuration": {}}
_SHUFFLE8 = {"name": "numcodecs.shuffle", "configuration": {"elementsize": 8}}
_CRC = {"name": "crc32c"}


def _gzip(level: int) -> Dict[str, Any]:
    return {"name": "gzip", "configuration": {"level": level}}


def _zstd(level: int) -> Dict[str, Any]:
    return {"name": "zstd", "configuration": {"level": level, "checksum": False}}


def parse_compression(spec: Any) -> Optional[Dict[str, Any]]:
    """``None``/``"none"`` → no compressor; ``"gzip"`` (level 1), ``"gzip:N"``, ``"zstd"``
    (level 3), ``"zstd:N"``; anything else is refused (message mentions compression)."""
    if spec is None:
        return None
    if not isinstance(spec, str):
        raise InvalidValueError(f"compression must be a string such as 'gzip:3', got {spec!r}")
    name, _, level = spec.partition(":")
    name = name.strip().lower()
    if name == "none" and not level:
        return {"name": "none"}
    if name not in ("gzip", "zstd"):
        raise InvalidValueError(f"unknown compression {spec!r} (none, gzip[:N], zstd[:N])")
    if not level:
        value = 1 if name == "gzip" else 3
    else:
        try:
            value = int(level)
        except ValueError:
            raise InvalidValueError(f"compression {spec!r}: level {level!r} is not an integer") from None
        bounds = (0, 9) if name == "gzip" else (-131072, 22)
        if not bounds[0] <= value <= bounds[1]:
            raise InvalidValueError(f"compression {spec!r}: level out of range {bounds}")
    return _gzip(value) if name == "gzip" else _zstd(value)


def column_codecs(dtype: str, has_precision: bool, compression: Optional[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Inner codecs of a block column (§13); ``compression`` acts on float columns only."""
    if dtype == "string":
        return [_VLEN, _gzip(1), _CRC]
    if dtype in ("f64", "c64", "c128"):
        extra: List[Dict[str, Any]]
        if has_precision:
            chosen = _zstd(3) if compression is None else compression
            extra = [_SHUFFLE8] + ([] if chosen["name"] == "none" else [chosen])
        else:
            extra = [] if compression is None or compression["name"] == "none" else [compression]
        return [_BYTES, *extra, _CRC]
    return [_BYTES, _gzip(1), _CRC]


def dense_codecs(dtype: str) -> List[Dict[str, Any]]:
    """Dense arrays (step, time, meta, offset, step_index, box, masks): gzip 1."""
    return [_VLEN if dtype == "string" else _BYTES, _gzip(1), _CRC]
