"""``gzip``: one RFC 1952 member, deterministic header (zarr-v3-subset#5.3).

We build the 10-byte header ourselves (mtime 0, OS 3 as zlib writes on Unix)
so output is byte-identical on every platform and Python version; the body is
raw deflate from zlib.  Reading accepts several members and zlib-wrapped data.
"""
from __future__ import annotations

import zlib
from typing import Any, Dict, Mapping, Optional

from molrec_raw.errors import CorruptDataError
from molrec_raw.zarr.codecs.base import Buffer, BytesBytesCodec, ChunkSpec, check_config, is_int, register

_STEP = 1 << 20  # bytes inflated per zlib call


@register
class GzipCodec(BytesBytesCodec):
    name = "gzip"

    def __init__(self, level: int) -> None:
        self.level = level
        # XFL as zlib sets it: 2 = best compression, 4 = fastest, else 0.
        xfl = 2 if level == 9 else 4 if level < 2 else 0
        self._header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00" + bytes((xfl, 3))

    @classmethod
    def from_config(cls, config: Mapping[str, Any], spec: ChunkSpec) -> "GzipCodec":
        check_config(cls.name, config, {"level": lambda v: is_int(v) and 0 <= v <= 9})
        return cls(config.get("level", 5))

    def to_json(self) -> Dict[str, Any]:
        return {"name": "gzip", "configuration": {"level": self.level}}

    def encode(self, data: Buffer) -> Buffer:
        deflate = zlib.compressobj(self.level, zlib.DEFLATED, -15)
        body = deflate.compress(data) + deflate.flush()
        size = memoryview(data).nbytes
        trailer = (zlib.crc32(data) & 0xFFFFFFFF).to_bytes(4, "little") + (size & 0xFFFFFFFF).to_bytes(4, "little")
        return b"".join((self._header, body, trailer))

    def decode(self, data: Buffer, expected_size: Optional[int], limit: int) -> Buffer:
        """Inflate into one growing buffer, at most ``_STEP`` bytes per zlib call, so that a
        bomb is refused after ``bound`` bytes having cost about that much memory (zlib asked
        for the whole bound at once keeps its blocks and their joined copy: twice the bound)."""
        bound = limit if expected_size is None else expected_size
        out = bytearray()
        rest = bytes(data)
        try:
            while rest:
                member = zlib.decompressobj(47)  # gzip or zlib header, auto-detected
                pending = rest
                while not member.eof:
                    piece = member.decompress(pending, min(_STEP, bound + 1 - len(out)))
                    out += piece
                    if len(out) > bound:
                        raise CorruptDataError(
                            f"gzip: decompresses to more than the {bound} bytes the chunk can hold",
                            rule="zarr-v3-subset#5.3",
                        )
                    pending = member.unconsumed_tail
                    if not piece and not pending:
                        raise CorruptDataError("gzip: truncated stream", rule="zarr-v3-subset#5.3")
                rest = member.unused_data
        except zlib.error as exc:
            raise CorruptDataError(f"gzip: {exc}", rule="zarr-v3-subset#5.3") from None
        if expected_size is not None and len(out) != expected_size:
            raise CorruptDataError(f"gzip: decompresses to {len(out)} bytes where the chunk needs {expected_size}",
                                   rule="zarr-v3-subset#5.3")
        return out
