"""``gzip``: one RFC 1952 member, deterministic header (zarr-v3-subset#5.3).

We build the 10-byte header ourselves (mtime 0, OS 3 as zlib writes on Unix)
so output is byte-identical on every platform and Python version; the body is
raw deflate from zlib.  Reading accepts several members and zlib-wrapped data.
"""
from __future__ import annotations

import zlib
from typing import Any, Dict, List, Mapping, Optional

from molrec_raw.errors import CorruptDataError
from molrec_raw.zarr.codecs.base import Buffer, BytesBytesCodec, ChunkSpec, check_config, is_int, register
from molrec_raw.zarr.parts import Part

_RULE = "zarr-v3-subset#5.3"
_OS = {0: "FAT", 3: "Unix", 7: "Macintosh", 11: "NTFS", 255: "unknown"}


def gzip_header(data: Buffer) -> List[Part]:
    """The fields of a gzip member's header (RFC 1952 §2.3) and of its 8-byte trailer, with
    their offsets; a zlib-wrapped stream (which the decoder also accepts) gives its 2-byte
    header.  Refuses data that is neither."""
    raw = bytes(memoryview(data).cast("B")[:4096])
    size = memoryview(data).nbytes
    if len(raw) >= 2 and raw[0] == 0x1F and raw[1] == 0x8B:
        if len(raw) < 10:
            raise CorruptDataError("gzip: header shorter than 10 bytes", rule=_RULE, offset=len(raw))
        flags = raw[3]
        parts = [
            Part("magic", "1f 8b", "gzip member (RFC 1952)", 0, 2, _RULE),
            Part("compression method", raw[2], "8 = deflate" if raw[2] == 8 else "not deflate", 2, 1, _RULE),
            Part("flags", f"0x{flags:02x}", "FTEXT 1, FHCRC 2, FEXTRA 4, FNAME 8, FCOMMENT 16", 3, 1, _RULE),
            Part("mtime", int.from_bytes(raw[4:8], "little"), "0 = no timestamp (a deterministic writer)", 4, 4, _RULE),
            Part("extra flags", raw[8], "2 = best compression, 4 = fastest", 8, 1, _RULE),
            Part("operating system", raw[9], _OS.get(raw[9], "other"), 9, 1, _RULE),
        ]
        at = 10
        if flags & 0x04:
            length = int.from_bytes(raw[at:at + 2], "little")
            parts.append(Part("extra field", f"{length} bytes", "FEXTRA", at, 2 + length, _RULE))
            at += 2 + length
        for flag, name in ((0x08, "file name"), (0x10, "comment")):
            if flags & flag:
                end = raw.find(b"\0", at)
                if end < 0:
                    raise CorruptDataError(f"gzip: unterminated {name}", rule=_RULE, offset=at)
                parts.append(Part(name, raw[at:end].decode("latin-1"), "zero-terminated", at, end + 1 - at, _RULE))
                at = end + 1
        if flags & 0x02:
            parts.append(Part("header crc16", raw[at:at + 2].hex(), "FHCRC", at, 2, _RULE))
            at += 2
        parts.append(Part("deflate stream", f"{size - at - 8} bytes", "raw deflate (RFC 1951)", at, size - at - 8, _RULE))
        whole = bytes(data)
        parts.append(Part("crc32", f"0x{int.from_bytes(whole[-8:-4], 'little'):08x}",
                          "CRC-32 of the decompressed bytes (last member)", size - 8, 4, _RULE))
        parts.append(Part("isize", int.from_bytes(whole[-4:], "little"), "decompressed size mod 2^32", size - 4, 4, _RULE))
        return parts
    if len(raw) >= 2 and (raw[0] & 0x0F) == 8 and ((raw[0] << 8) | raw[1]) % 31 == 0:
        return [Part("zlib header", raw[:2].hex(), "a zlib stream (RFC 1950), accepted on read; writers emit gzip",
                     0, 2, _RULE)]
    raise CorruptDataError("gzip: neither a gzip member nor a zlib stream", rule=_RULE, offset=0)


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

    def describe(self, data: Any) -> List[Part]:
        return gzip_header(data)

    def decode(self, data: Buffer, expected_size: Optional[int], limit: int) -> Buffer:
        bound = limit if expected_size is None else expected_size
        pieces = []
        produced = 0
        rest = bytes(data)
        try:
            while rest:
                member = zlib.decompressobj(47)  # gzip or zlib header, auto-detected
                pieces.append(member.decompress(rest, bound - produced + 1))
                produced += len(pieces[-1])
                if produced > bound or member.unconsumed_tail:
                    raise CorruptDataError(
                        f"gzip: decompresses to more than the {bound} bytes the chunk can hold",
                        rule="zarr-v3-subset#5.3",
                    )
                if not member.eof:
                    raise CorruptDataError("gzip: truncated stream", rule="zarr-v3-subset#5.3")
                rest = member.unused_data
        except zlib.error as exc:
            raise CorruptDataError(f"gzip: {exc}", rule="zarr-v3-subset#5.3") from None
        return b"".join(pieces)
