"""``numcodecs.shuffle``: byte transposition by element size (zarr-v3-subset#5.6)."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from molrec_raw.errors import CorruptDataError, InvalidValueError
from molrec_raw.zarr.codecs.base import Buffer, BytesBytesCodec, ChunkSpec, check_config, is_int, register
from molrec_raw.zarr.parts import Part


@register
class ShuffleCodec(BytesBytesCodec):
    name = "numcodecs.shuffle"

    def __init__(self, elementsize: int) -> None:
        self.elementsize = elementsize

    @classmethod
    def from_config(cls, config: Mapping[str, Any], spec: ChunkSpec) -> "ShuffleCodec":
        check_config(cls.name, config, {"elementsize": lambda v: is_int(v) and v >= 1})
        return cls(config.get("elementsize", spec.dtype.itemsize or 1))

    def to_json(self) -> Dict[str, Any]:
        return {"name": self.name, "configuration": {"elementsize": self.elementsize}}

    def encoded_size(self, decoded_size: Optional[int]) -> Optional[int]:
        return decoded_size

    def _check(self, data: Buffer, error: type) -> np.ndarray:
        raw = np.frombuffer(data, dtype=np.uint8)
        if raw.size % self.elementsize:
            raise error(
                f"numcodecs.shuffle: {raw.size} bytes is not a multiple of elementsize {self.elementsize}",
                rule="zarr-v3-subset#5.6",
            )
        return raw

    def describe(self, data: Any) -> List[Part]:
        size = memoryview(data).nbytes
        planes = self.elementsize
        return [Part("element size", planes, f"{planes} byte planes of {size // planes if planes else 0} bytes: "
                     "plane j holds byte j of every element", rule="zarr-v3-subset#5.6")]

    def encode(self, data: Buffer) -> Buffer:
        raw = self._check(data, InvalidValueError)
        if self.elementsize == 1:
            return raw
        return np.ascontiguousarray(raw.reshape(-1, self.elementsize).T).reshape(-1)

    def encode_many(self, items: Any, out: Optional[np.ndarray] = None) -> Any:
        """A stacked batch (a row per chunk) in one transposed copy: each row as ``encode``
        would give it; into ``out`` (a C-contiguous ``uint8`` buffer of at least the batch's
        bytes, reused by the caller from batch to batch) when given."""
        e = self.elementsize
        if isinstance(items, np.ndarray) and items.ndim == 2 and e > 1 and items.shape[1] % e == 0:
            rows = items.shape[0]
            planes = items.reshape(rows, -1, e).transpose(0, 2, 1)
            if out is None or out.size < items.size:
                return np.ascontiguousarray(planes).reshape(rows, -1)
            target = out[:items.size].reshape(planes.shape)
            np.copyto(target, planes)
            return target.reshape(rows, -1)
        return super().encode_many(items)

    def unshuffle_into(self, data: Buffer, target: np.ndarray) -> None:
        """Decode into ``target`` — a chunk-shaped array of ``elementsize``-byte elements,
        any strides (a column of an interleaved array): byte plane j becomes byte j of every
        element, written in place, with no intermediate buffer."""
        raw = self._check(data, CorruptDataError)
        e = self.elementsize
        if raw.size != target.size * e:
            raise CorruptDataError(
                f"numcodecs.shuffle: {raw.size} bytes where the chunk needs {target.size * e}", rule="zarr-v3-subset#5.6"
            )
        if target.flags.c_contiguous:
            self.decode_into(raw, memoryview(target.reshape(-1).view(np.uint8)))
            return
        planes = raw.reshape((e,) + target.shape)
        dest = target[..., None].view(np.uint8)  # (..., e): the bytes of each element
        for j in range(e):
            dest[..., j] = planes[j]

    def decode(self, data: Buffer, expected_size: Optional[int], limit: int) -> Buffer:
        out = np.empty(memoryview(data).nbytes, dtype=np.uint8)
        self.decode_into(data, memoryview(out))
        return out

    def decode_into(self, data: Buffer, target: memoryview) -> None:
        raw = self._check(data, CorruptDataError)
        out = np.frombuffer(target, np.uint8)
        if raw.size != out.size:
            raise CorruptDataError(
                f"numcodecs.shuffle: {raw.size} bytes where the chunk needs {out.size}", rule="zarr-v3-subset#5.6"
            )
        if self.elementsize == 1:
            out[:] = raw
            return
        self.unshuffle_rows(raw.reshape(1, -1), out)

    def unshuffle_rows(self, rows: np.ndarray, out: np.ndarray) -> None:
        """Undo the shuffle of each row of ``rows`` (``uint8``, one shuffled chunk a row, all
        of one size) into ``out`` (``uint8``, contiguous, the chunks' bytes one after another):
        one strided copy per byte plane for all the rows — about twice as fast as a transposed
        copy, and a thread takes the GIL once per plane, not once per plane of every chunk
        (batch.py ``decode_each``)."""
        e = self.elementsize
        n, size = rows.shape
        dest = out.reshape(n, size // e, e)
        planes = rows.reshape(n, e, size // e)
        for j in range(e):
            dest[:, :, j] = planes[:, j, :]
