"""``vlen-utf8``: u32 count, then per element a u32 length and UTF-8 bytes (zarr-v3-subset#5.7)."""
from __future__ import annotations

import struct
from math import prod
from typing import Any, Dict, Mapping

import numpy as np

from molrec_raw.errors import CorruptDataError, InvalidMetadataError, InvalidValueError
from molrec_raw.zarr.codecs.base import ArrayBytesCodec, Buffer, ChunkSpec, check_config, register

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
        parts = [_U32.pack(self.count)]
        pack = _U32.pack
        try:
            # C order over the full chunk shape, whatever the memory layout (zarr-python#3558).
            for value in np.asarray(chunk, dtype=object).ravel(order="C").tolist():
                encoded = value.encode("utf-8")
                parts.append(pack(len(encoded)))
                parts.append(encoded)
        except (AttributeError, UnicodeEncodeError) as exc:
            raise InvalidValueError(f"string arrays store str values only (valid UTF-8): {exc}") from None
        return b"".join(parts)

    def decode(self, data: Buffer) -> np.ndarray:
        raw = bytes(data)
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
        values = []
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
        return out.reshape(self.spec.shape)
