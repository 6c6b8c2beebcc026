"""One whole inner chunk decoded in the fewest Python steps (zarr-v3-subset §5): the read of
a frame's few chunks, where the general paths' bookkeeping (a job per chunk, the batch
stages, scratch buffers) costs more than the decoding.

:class:`QuickDecoder` serves a fixed-size chain of plain native bytes (no array->array
codec) and decodes a stored value the way the general path decodes a well-formed one:
the crc32c checked (zarr-v3-subset#5.5), zstd as one frame declaring exactly the chunk's
size (#5.4), the byte shuffle's planes written straight into the new chunk (#5.6), any
other codec through its own ``decode``.  Anything else — a checksum that differs, a frame
declaring another size or followed by more bytes, a size that does not match — raises
:class:`QuickRefused` (or the codec's error): the caller then decodes the same bytes by the
general path, which accepts what it accepts (concatenated zstd frames) and refuses what it
refuses with its own error.  The quick path never accepts a value the general one refuses,
and gives the same chunk for every value both accept.
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

import numpy as np
import zstandard

from molrec_raw.zarr.codecs.base import Buffer
from molrec_raw.zarr.codecs.crc32c_codec import Crc32cCodec, crc32c_of
from molrec_raw.zarr.codecs.shuffle import ShuffleCodec
from molrec_raw.zarr.codecs.zstd_codec import ZstdCodec

__all__ = ["Planes", "QuickDecoder", "QuickRefused", "quick_decoder"]

_CRC, _ZSTD, _SHUFFLE, _OTHER = range(4)
# Up to this many bytes a chunk is unshuffled by one transposed copy (its per-byte cost is
# higher, but one call instead of one per byte plane: faster for 16 KiB, slower for 80 KB)
_ONE_COPY_BYTES = 32 * 1024


class QuickRefused(Exception):
    """The value is not one the quick path decodes: read it through the general path."""


class Planes:
    """A chunk decoded but for its byte shuffle (zarr-v3-subset#5.6): ``planes[j]`` holds
    byte j of every element.  :meth:`rows` unshuffles only the rows asked for (one frame of
    a 32-frame chunk: a thirty-second of the bytes), :meth:`chunk` the whole chunk."""

    __slots__ = ("planes", "shape", "dtype", "nbytes")

    def __init__(self, planes: np.ndarray, shape: Tuple[int, ...], dtype: np.dtype) -> None:
        self.planes, self.shape, self.dtype = planes, shape, dtype
        self.nbytes: int = planes.size

    def rows(self, lo: int, hi: int) -> np.ndarray:
        """Rows ``lo:hi`` along the first axis, a new array."""
        per = 1
        for extent in self.shape[1:]:
            per *= extent
        out = np.empty((hi - lo,) + self.shape[1:], self.dtype)
        out.reshape(-1).view(np.uint8).reshape(-1, self.dtype.itemsize)[...] = self.planes[:, lo * per:hi * per].T
        return out

    def chunk(self) -> np.ndarray:
        """The whole chunk, a new array."""
        out = np.empty(self.shape, self.dtype)
        _unshuffle(self.planes, out)
        return out


def _unshuffle(planes: np.ndarray, out: np.ndarray) -> None:
    """Byte plane j of ``planes`` (e, elements) into byte j of every element of ``out``."""
    e = planes.shape[0]
    flat = out.reshape(-1).view(np.uint8)
    if flat.size <= _ONE_COPY_BYTES:
        flat.reshape(-1, e)[...] = planes.T
    else:  # a strided copy per plane: faster than one transposed copy of a large chunk
        for j, plane in enumerate(planes):
            flat[j::e] = plane


class QuickDecoder:
    """Decodes whole chunks of one pipeline (see the module docstring): ``decoder(data)`` is
    the chunk, a new writable C-contiguous array of the pipeline's chunk shape."""

    __slots__ = ("steps", "dtype", "shape", "nbytes", "limit")

    def __init__(self, pipeline: Any) -> None:
        spec = pipeline.spec
        self.dtype, self.shape = spec.dtype.numpy, tuple(spec.shape)
        self.nbytes: int = pipeline.nbytes
        self.limit = spec.limits.max_chunk_bytes
        steps: List[Tuple[int, Any, int]] = []
        codecs = pipeline.bytes_codecs
        for stage in range(len(codecs) - 1, -1, -1):  # decoding order: the last codec first
            codec, size = codecs[stage], pipeline.stage_sizes[stage]
            if isinstance(codec, Crc32cCodec):
                kind = _CRC
            elif isinstance(codec, ZstdCodec) and size is not None:
                kind = _ZSTD
            elif (isinstance(codec, ShuffleCodec) and stage == 0 and codec.elementsize > 1
                  and codec.elementsize == self.dtype.itemsize):
                kind = _SHUFFLE
            else:
                kind = _OTHER
            steps.append((kind, codec, size))
        self.steps = steps

    def __call__(self, data: Buffer, planes: bool = False) -> Any:
        """The chunk; with ``planes``, a :class:`Planes` when the chain ends in the byte
        shuffle (every check made: only the last transposition is left)."""
        for kind, codec, size in self.steps:
            if kind == _CRC:
                view = memoryview(data)
                if view.format != "B" or view.ndim != 1:
                    view = view.cast("B")
                end = view.nbytes - 4
                if end < 0 or crc32c_of(view[:end]) != int.from_bytes(view[end:], "little"):
                    raise QuickRefused("crc32c")
                data = view[:end]
            elif kind == _ZSTD:
                if zstandard.frame_content_size(data) != size or size <= 0:
                    raise QuickRefused("zstd frame size")
                data = codec._reused_decompressor().decompress(data, allow_extra_data=False)
                if len(data) != size:
                    raise QuickRefused("zstd size")
            elif kind == _SHUFFLE:  # the last step: byte plane j becomes byte j of every element
                raw = np.frombuffer(data, np.uint8)
                if raw.size != self.nbytes:
                    raise QuickRefused("shuffle size")
                byte_planes = raw.reshape(self.dtype.itemsize, -1)
                if planes:
                    return Planes(byte_planes, self.shape, self.dtype)
                out = np.empty(self.shape, self.dtype)
                _unshuffle(byte_planes, out)
                return out
            else:
                data = codec.decode(data, size, self.limit)
        if memoryview(data).nbytes != self.nbytes:
            raise QuickRefused("bytes size")
        chunk = np.frombuffer(data, self.dtype).reshape(self.shape)
        return chunk if chunk.flags.writeable else chunk.copy()


def quick_decoder(pipeline: Any) -> Optional[QuickDecoder]:
    """The quick decoder of ``pipeline``, None when it does not serve it (array->array
    codecs, a byte order or dtype that is not plain)."""
    if not pipeline.direct or pipeline.nbytes is None or pipeline.spec.dtype.numpy.kind == "O":
        return None
    return QuickDecoder(pipeline)
