"""``bytes``: fixed-width elements in C order, little or big endian (zarr-v3-subset#5.1)."""
from __future__ import annotations

from typing import Any, Dict, List, Literal, Mapping, Optional

import numpy as np

from molrec_raw.errors import CorruptDataError, InvalidMetadataError
from molrec_raw.zarr.codecs.base import ArrayBytesCodec, Buffer, ChunkSpec, check_config, register
from molrec_raw.zarr.parts import Part


@register
class BytesCodec(ArrayBytesCodec):
    name = "bytes"

    def __init__(self, spec: ChunkSpec, endian: Optional[str]) -> None:
        self.spec = spec
        self.endian = endian
        order: Literal["<", ">"] = "<" if endian in (None, "little") else ">"
        self._stored = spec.dtype.numpy.newbyteorder(order) if spec.dtype.numpy.itemsize > 1 else spec.dtype.numpy

    @classmethod
    def from_config(cls, config: Mapping[str, Any], spec: ChunkSpec) -> "BytesCodec":
        check_config(cls.name, config, {"endian": lambda v: v in ("little", "big")})
        if spec.dtype.is_string:
            raise InvalidMetadataError("data type 'string' needs the vlen-utf8 codec, not bytes")
        endian = config.get("endian")
        if endian is None and spec.dtype.numpy.itemsize > 1:
            raise InvalidMetadataError(
                f"bytes codec needs 'endian' for multi-byte type {spec.dtype.name}",
                rule="zarr-v3-subset#5.1",
            )
        return cls(spec, endian)

    def to_json(self) -> Dict[str, Any]:
        # Writer rule: always state the endianness, even for 1-byte types.
        return {"name": "bytes", "configuration": {"endian": self.endian or "little"}}

    def encoded_size(self) -> Optional[int]:
        return self.spec.nbytes

    def describe(self, data: Any) -> List[Part]:
        size = memoryview(data).nbytes
        rule = "zarr-v3-subset#5.1"
        return [Part("endian", self.endian or "(none: 1-byte type)", "byte order of each element", rule=rule),
                Part("elements", f"{self.spec.dtype.name} x {list(self.spec.shape)} in C order",
                     f"{self.spec.nbytes} bytes expected, {size} present", 0, size, rule)]

    def encode(self, chunk: np.ndarray) -> Buffer:
        data = np.ascontiguousarray(chunk, dtype=self._stored)
        return data.reshape(-1).view(np.uint8)

    def decode(self, data: Buffer) -> np.ndarray:
        if len(data) != self.spec.nbytes:
            raise CorruptDataError(
                f"bytes codec: chunk has {len(data)} bytes, expected {self.spec.nbytes}",
                rule="zarr-v3-subset#5.1",
            )
        out = np.frombuffer(data, dtype=self._stored).reshape(self.spec.shape)
        if self._stored.byteorder == ">":
            out = out.astype(self.spec.dtype.numpy)
        return out
