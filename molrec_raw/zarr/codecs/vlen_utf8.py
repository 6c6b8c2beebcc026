"""``vlen-utf8``: u32 count, then per element a u32 length and UTF-8 bytes (zarr-v3-subset#5.7)."""
from __future__ import annotations

import struct
from math import prod
from typing import Any, Dict, List, Mapping, Union

import numpy as np

from molrec_raw.errors import CorruptDataError, InvalidMetadataError, InvalidValueError
from molrec_raw.zarr.codecs.base import ArrayBytesCodec, Buffer, ChunkSpec, check_config, register
from molrec_raw.zarr.parts import Part

_U32 = struct.Struct("<I")


@register
class VlenUtf8Codec(ArrayBytesCodec):
    name = "vlen-utf8"

    def __init__(self, spec: ChunkSpec) -> None:
        self.spec = spec
        self.count = prod(spec.shape)

    @classmethod
    def from_config(cls, config: Mapping[str, Any], spec: ChunkSpec) -> "VlenUtf8Codec":
        check_config(cls.name, config, {})
        if not spec.dtype.is_string:
            raise InvalidMetadataError(f"vlen-utf8 needs data type 'string', not {spec.dtype.name}")
        return cls(spec)

    def to_json(self) -> Dict[str, Any]:
        return {"name": "vlen-utf8", "configuration": {}}

    def encode(self, chunk: np.ndarray) -> Buffer:
        # C order over the full chunk shape, whatever the memory layout (zarr-developers/zarr-python#3558).
        values = np.asarray(chunk, dtype=object).ravel(order="C").tolist()
        try:
            text = "".join(values)  # also proves every element is a str
            blob = text.encode("utf-8")
        except (TypeError, UnicodeEncodeError) as exc:
            raise InvalidValueError(f"string arrays store str values only (valid UTF-8): {exc}") from None
        if text.isascii():  # one byte per character: lengths without encoding each value
            lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        else:
            lengths = np.fromiter((len(v.encode("utf-8")) for v in values), dtype=np.int64, count=len(values))
        return _interleave(blob, lengths)

    def describe(self, data: Any) -> List[Part]:
        raw = bytes(data)
        rule = "zarr-v3-subset#5.7"
        if len(raw) < 4:
            raise CorruptDataError("vlen-utf8: value shorter than its 4-byte count", rule=rule)
        parts = [Part("count", _U32.unpack_from(raw, 0)[0], f"elements (the chunk holds {self.count})", 0, 4, rule)]
        at = 4
        for i in range(min(self.count, 3)):  # the first elements' length fields
            if at + 4 > len(raw):
                break
            (length,) = _U32.unpack_from(raw, at)
            parts.append(Part(f"element {i}", f"{length} bytes of UTF-8", "u32 length, then the bytes", at,
                              4 + length, rule))
            at += 4 + length
        return parts

    def decode(self, data: Buffer) -> np.ndarray:
        raw = data if isinstance(data, (bytes, bytearray)) else bytes(data)  # no copy of a large blob
        end = len(raw)
        if end < 4:
            raise CorruptDataError("vlen-utf8: value shorter than its 4-byte count", rule="zarr-v3-subset#5.7")
        (count,) = _U32.unpack_from(raw, 0)
        if count != self.count:
            raise CorruptDataError(
                f"vlen-utf8: count {count} differs from the chunk's {self.count} elements",
                rule="zarr-v3-subset#5.7",
            )
        if count * 4 > end - 4:
            raise CorruptDataError("vlen-utf8: count larger than the data can hold", rule="zarr-v3-subset#5.7")
        out = _decode_uniform(raw, count)
        if out is None:
            out = _decode_each(raw, count)
        return out.reshape(self.spec.shape)


def _interleave(blob: bytes, lengths: np.ndarray) -> Buffer:
    """``count, (len, bytes)*`` built with numpy scatters instead of a per-element loop."""
    n = lengths.size
    out = np.empty(4 + 4 * n + len(blob), dtype=np.uint8)
    out[:4] = np.frombuffer(_U32.pack(n), np.uint8)
    if n == 0:
        return out
    if lengths.min() == lengths.max():  # equal lengths: two strided copies
        rows = out[4:].reshape(n, 4 + int(lengths[0]))
        rows[:, :4] = np.frombuffer(_U32.pack(int(lengths[0])), np.uint8)
        rows[:, 4:] = np.frombuffer(blob, np.uint8).reshape(n, int(lengths[0]))
        return out
    before = np.cumsum(lengths) - lengths  # blob offset of each value
    headers = 4 + 4 * np.arange(n, dtype=np.int64) + before
    out[headers[:, None] + np.arange(4)] = lengths.astype("<u4").view(np.uint8).reshape(n, 4)
    if blob:
        owner = np.repeat(np.arange(n, dtype=np.int64), lengths)
        out[np.arange(len(blob), dtype=np.int64) + 8 + 4 * owner] = np.frombuffer(blob, np.uint8)
    return out


def _decode_uniform(raw: Union[bytes, bytearray], count: int) -> "np.ndarray | None":
    """Fast path: every value has the same byte length and is ASCII without a trailing NUL
    (numpy's fixed-width bytes would drop it).  None when the chunk is not like that."""
    if count == 0:
        return np.empty(0, dtype=object)
    (length,) = _U32.unpack_from(raw, 4)
    if len(raw) != 4 + count * (4 + length):
        return None
    rows = np.frombuffer(raw, np.uint8, offset=4).reshape(count, 4 + length)
    if not np.array_equal(rows[:, :4], np.broadcast_to(rows[0, :4], (count, 4))):
        return None
    if length == 0:
        out = np.empty(count, dtype=object)
        out[:] = ""
        return out
    body = rows[:, 4:]
    if body.max() >= 0x80 or not body[:, -1].all():
        return None
    if length <= 2:  # short codes (element symbols): decode each distinct value once
        codes = np.ascontiguousarray(body).view(f"<u{length}").ravel()
        table = np.empty(256 ** length, dtype=object)
        for code in np.flatnonzero(np.bincount(codes, minlength=256 ** length)):
            table[code] = int(code).to_bytes(length, "little").decode("ascii")
        decoded: np.ndarray = table[codes]  # fancy indexing with a dtype chosen at run time is typed Any
        return decoded
    return np.ascontiguousarray(body).view(f"S{length}").ravel().astype(f"U{length}").astype(object)


def _decode_each(raw: Union[bytes, bytearray], count: int) -> np.ndarray:
    """General path: walk the interleaved lengths, bounds-checked at every step."""
    end = len(raw)
    values: List[str] = []
    append = values.append
    unpack = _U32.unpack_from
    pos = 4
    try:
        for _ in range(count):
            if pos + 4 > end:
                raise CorruptDataError("vlen-utf8: truncated length field", rule="zarr-v3-subset#5.7")
            (length,) = unpack(raw, pos)
            pos += 4
            if pos + length > end:
                raise CorruptDataError(
                    f"vlen-utf8: element length {length} runs past the end of the chunk",
                    rule="zarr-v3-subset#5.7",
                )
            append(raw[pos:pos + length].decode("utf-8"))
            pos += length
    except UnicodeDecodeError as exc:
        raise CorruptDataError(f"vlen-utf8: invalid UTF-8: {exc}", rule="zarr-v3-subset#5.7") from None
    if pos != end:
        raise CorruptDataError(f"vlen-utf8: {end - pos} trailing bytes", rule="zarr-v3-subset#5.7")
    out = np.empty(count, dtype=object)
    out[:] = values
    return out
