"""The codec pipeline: array->array*, one array->bytes, bytes->bytes* (zarr-v3-subset#5).

Built once per array (and per shard level) from the ``codecs`` JSON and the
chunk spec; encode walks the list forward, decode backward.  Each bytes->bytes
decoder is told the exact size it must produce when the chain is fixed-size,
otherwise the configured chunk limit.

``read_into``/``write`` take a *reader* — ``reader(start, length) -> bytes|None``
over one stored value — so a sharded pipeline can fetch only the byte ranges it
needs, at any nesting depth.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, List, Optional, Sequence, Tuple, cast

import numpy as np

from molrec_raw.errors import CorruptDataError, InvalidMetadataError
from molrec_raw.zarr.codecs.base import (
    ArrayArrayCodec, ArrayBytesCodec, Buffer, BytesBytesCodec, ChunkSpec, Reader, codec_class,
    parse_codec_json,
)
from molrec_raw.zarr.indexing import Local, covers
from molrec_raw.zarr.parts import Stage

if TYPE_CHECKING:  # (types only: the sharding codec builds pipelines, it imports this module)
    from molrec_raw.zarr.codecs.sharding import ShardingCodec

_UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def fill_rows(stack: np.ndarray, spec: ChunkSpec) -> np.ndarray:
    """``is_all_fill`` of each chunk of a stack (leading axis: chunks), bool per chunk; the
    first elements are compared for all chunks at once, the rest only where they match."""
    dtype = spec.dtype.numpy
    count = stack.shape[0]
    if dtype.kind in "Oc" or stack.dtype != dtype or stack.size == 0:
        return np.array([is_all_fill(stack[c], spec) for c in range(count)], dtype=bool)
    unsigned = _UINT_OF_SIZE[dtype.itemsize]
    fill_bits = np.asarray(spec.fill_value, dtype=dtype).view(unsigned)
    bits = stack.reshape(count, -1).view(unsigned)
    result: np.ndarray = bits[:, 0] == fill_bits
    for c in np.flatnonzero(result):
        result[c] = bool(np.all(bits[c] == fill_bits))
    return result


def is_all_fill(chunk: np.ndarray, spec: ChunkSpec) -> bool:
    """Bitwise comparison with the fill value (so -0.0 is kept when the fill is 0.0)."""
    if chunk.size == 0:
        return True
    dtype = spec.dtype.numpy
    if dtype.kind == "O":  # list.count compares in C, without a numpy object loop
        values = chunk.ravel().tolist()
        return values.count(spec.fill_value) == len(values)
    if dtype.kind == "c":
        dtype = np.dtype(f"<f{dtype.itemsize // 2}")
        chunk = np.ascontiguousarray(chunk).reshape(-1).view(dtype)
        fill = np.asarray([spec.fill_value.real, spec.fill_value.imag], dtype=dtype)
        bits = chunk.reshape(-1, 2).view(_UINT_OF_SIZE[dtype.itemsize])
        return bool(np.all(bits == fill.view(_UINT_OF_SIZE[dtype.itemsize])))
    unsigned = _UINT_OF_SIZE[dtype.itemsize]
    fill_bits = np.asarray(spec.fill_value, dtype=dtype).view(unsigned)
    chunk_bits = chunk.view(unsigned) if chunk.dtype == dtype else np.asarray(chunk, dtype).view(unsigned)
    if chunk_bits.flat[0] != fill_bits:
        return False
    return bool(np.all(chunk_bits == fill_bits))


class CodecPipeline:
    """An ordered codec list bound to one chunk spec."""

    def __init__(self, codecs_json: Sequence[Any], spec: ChunkSpec) -> None:
        if not isinstance(codecs_json, (list, tuple)) or not codecs_json:
            raise InvalidMetadataError("'codecs' must be a non-empty list", rule="zarr-v3-subset#5")
        self.spec = spec
        self.array_codecs: List[ArrayArrayCodec] = []
        self.bytes_codecs: List[BytesBytesCodec] = []
        array_bytes: Optional[ArrayBytesCodec] = None
        current = spec
        for entry in codecs_json:
            name, config = parse_codec_json(entry)
            cls = codec_class(name)
            codec = cls.from_config(config, current)
            if isinstance(codec, ArrayArrayCodec):
                if array_bytes is not None:
                    raise InvalidMetadataError(f"array->array codec {name!r} after the array->bytes codec")
                self.array_codecs.append(codec)
                current = codec.output_spec()
            elif isinstance(codec, ArrayBytesCodec):
                if array_bytes is not None:
                    raise InvalidMetadataError("more than one array->bytes codec", rule="zarr-v3-subset#5")
                array_bytes = codec
            else:
                if array_bytes is None:
                    raise InvalidMetadataError(f"bytes->bytes codec {name!r} before the array->bytes codec")
                assert isinstance(codec, BytesBytesCodec)  # the third and last codec kind
                self.bytes_codecs.append(codec)
        if array_bytes is None:
            raise InvalidMetadataError("codecs lack an array->bytes codec", rule="zarr-v3-subset#5")
        self.array_bytes = array_bytes
        # decoded size entering each bytes->bytes codec (None: data-dependent)
        self._sizes: List[Optional[int]] = [array_bytes.encoded_size()]
        for codec in self.bytes_codecs:
            self._sizes.append(codec.encoded_size(self._sizes[-1]))
        # decoded size leaving each bytes->bytes codec's decode (None: data-dependent)
        self.stage_sizes: Tuple[Optional[int], ...] = tuple(self._sizes[:-1])
        # the decode steps (codec, size it decodes to), last codec first, and a chunk's size
        self._steps = list(zip(reversed(self.bytes_codecs), reversed(self._sizes[:-1])))
        self.nbytes: Optional[int] = spec.nbytes
        # Fixed-size chains of plain little-endian bytes can decode straight into the result.
        self.direct = (
            not self.array_codecs and array_bytes.name == "bytes"
            and getattr(array_bytes, "_stored", None) == spec.dtype.numpy
        )
        self._scratch = threading.local()
        # Partial reads go through the sharding codec only when it stands alone (zarr-v3-subset#7).
        # (known by its name: the sharding codec builds pipelines of its own, so it sits above this module)
        alone = array_bytes.name == "sharding_indexed" and not self.array_codecs and not self.bytes_codecs
        self.sharding: Optional["ShardingCodec"] = cast("ShardingCodec", array_bytes) if alone else None

    def to_json(self) -> List[Any]:
        """The ``codecs`` list of a zarr.json for this pipeline, in encoding order."""
        return [c.to_json() for c in (*self.array_codecs, self.array_bytes, *self.bytes_codecs)]

    def encoded_size(self) -> Optional[int]:
        """The encoded size when every codec has a size rule (used for shard indexes)."""
        return self._sizes[-1]

    # -- whole chunks -----------------------------------------------------
    def encode(self, chunk: np.ndarray) -> Buffer:
        """One chunk's stored bytes: array-to-array codecs, the array-to-bytes codec, then the
        bytes-to-bytes codecs, in order (zarr-v3-subset#5)."""
        for array_codec in self.array_codecs:
            chunk = array_codec.encode(chunk)
        data = self.array_bytes.encode(chunk)
        for bytes_codec in self.bytes_codecs:
            data = bytes_codec.encode(data)
        return data

    def decode(self, data: Buffer) -> np.ndarray:
        """The chunk stored as ``data``, every codec applied in reverse order; bytes a codec
        refuses raise a MolrecError naming its rule (zarr-v3-subset#5)."""
        return self.decode_array(self.decode_bytes(data))

    def decode_bytes(self, data: Buffer) -> Buffer:
        """A stored value through every bytes->bytes codec (the array->bytes codec's input)."""
        limit = self.spec.limits.max_chunk_bytes
        for bytes_codec, size in zip(reversed(self.bytes_codecs), reversed(self.stage_sizes)):
            data = bytes_codec.decode(data, size, limit)
        return data

    def decode_array(self, data: Buffer) -> np.ndarray:
        """The array->bytes codec's input through it and every array->array codec: the chunk."""
        chunk = self.array_bytes.decode(data)
        for array_codec in reversed(self.array_codecs):
            chunk = array_codec.decode(chunk)
        return chunk

    def trace(self, data: Buffer, stages: List[Stage]) -> np.ndarray:
        """Decode one whole chunk as :meth:`decode` does, appending to ``stages`` each codec's
        step — what its ``describe`` finds in the bytes it gets, then its output size —
        before the next one runs (``molrec-raw explain``).  A codec that fails is the last
        stage recorded, and its error propagates: the chunk is explained up to that fault."""
        limit = self.spec.limits.max_chunk_bytes
        base: Optional[int] = 0
        for codec, size in zip(reversed(self.bytes_codecs), reversed(self._sizes[:-1])):
            stage = Stage(codec.name, codec.kind, codec.to_json().get("configuration", {}), len(memoryview(data)),
                          base)
            stages.append(stage)
            stage.parts.extend(codec.describe(data))
            data = codec.decode(data, size, limit)
            stage.output_size = len(memoryview(data))
            base = base if codec.decodes_to_view else None
        stage = Stage(self.array_bytes.name, self.array_bytes.kind,
                      self.array_bytes.to_json().get("configuration", {}), len(memoryview(data)), base)
        stages.append(stage)
        stage.parts.extend(self.array_bytes.describe(data))
        chunk = self.array_bytes.decode(data)
        stage.output_size = chunk.nbytes
        for array_codec in reversed(self.array_codecs):
            stage = Stage(array_codec.name, array_codec.kind, array_codec.to_json().get("configuration", {}), None, None)
            stages.append(stage)
            stage.parts.extend(array_codec.describe(chunk))
            chunk = array_codec.decode(chunk)
            stage.output_size = chunk.nbytes
        return chunk

    def decode_into(self, data: Buffer, out: np.ndarray) -> None:
        """Decode a whole chunk into ``out`` (C-contiguous, chunk shape, native dtype);
        intermediate steps reuse one per-thread scratch buffer instead of allocating."""
        self._decode_steps(data, memoryview(out.reshape(-1).view(np.uint8)), self._steps)

    def decode_shuffled_into(self, data: Buffer, row: memoryview) -> None:
        """Every step of :meth:`decode_into` but the last (a byte shuffle, which the caller
        applies to a run of chunks at once: batch.py ``decode_each``): the still-shuffled
        bytes into ``row``, of the chunk's size (zarr-v3-subset#5, #5.6)."""
        self._decode_steps(data, row, self._steps[:-1])

    def run_buffer(self, nbytes: int) -> np.ndarray:
        """This thread's reused ``uint8`` buffer of at least ``nbytes`` (batch.py's runs)."""
        buffer: Optional[np.ndarray] = getattr(self._scratch, "run", None)
        if buffer is None or buffer.size < nbytes:
            buffer = self._scratch.run = np.empty(nbytes, np.uint8)
        return buffer[:nbytes]

    def _decode_steps(self, data: Buffer, target: memoryview, steps: List[Tuple[Any, Optional[int]]]) -> None:
        last = len(steps) - 1
        for position, (codec, size) in enumerate(steps):
            if position == last:
                codec.decode_into(data, target)
                return
            if codec.decodes_to_view or size is None:  # size unknown: no scratch buffer to reuse
                data = codec.decode(data, size, self.spec.limits.max_chunk_bytes)
            else:
                scratch = getattr(self._scratch, "buffer", None)
                if scratch is None or len(scratch) != size:
                    scratch = self._scratch.buffer = memoryview(np.empty(size, np.uint8))
                codec.decode_into(data, scratch)
                data = scratch
        if len(data) != len(target):
            raise CorruptDataError(
                f"bytes codec: chunk has {len(data)} bytes, expected {len(target)}", rule="zarr-v3-subset#5.1"
            )
        target[:] = memoryview(data).cast("B")

    def decode_to(self, data: Buffer, out: np.ndarray) -> None:
        """Decode a whole chunk into ``out`` (chunk shape and dtype, any strides) with the
        per-thread scratch buffer for intermediate steps: the path for a few chunks, where a
        batch call costs more than it saves.  The last step writes into ``out`` directly when
        it is the byte shuffle (a strided target is filled plane by plane)."""
        from molrec_raw.zarr.codecs.shuffle import ShuffleCodec

        first = self.bytes_codecs[0] if self.bytes_codecs else None
        if out.flags.c_contiguous:
            self.decode_into(data, out)
        elif (self.direct and isinstance(first, ShuffleCodec) and first.elementsize == out.itemsize):
            steps = list(zip(reversed(self.bytes_codecs[1:]), reversed(self._sizes[1:-1])))
            for codec, size in steps:
                data = codec.decode(data, size, self.spec.limits.max_chunk_bytes)
            first.unshuffle_into(data, out)
        else:
            scratch = np.empty(self.spec.shape, self.spec.dtype.numpy)
            self.decode_into(data, scratch)
            out[...] = scratch

    # -- selections -------------------------------------------------------
    def read_into(self, reader: Reader, local: Tuple[Local, ...], out: np.ndarray, each: Any = map) -> None:
        """Fill ``out`` with ``chunk[local]``; a missing value reads as the fill value.
        ``each`` maps over a shard's inner chunks (pass a thread pool's ``map``)."""
        if self.sharding is not None:
            self.sharding.read_into(reader, local, out, each)
            return
        data = reader(0, None)
        if data is None:
            out[...] = self.spec.fill_value
        elif (self.direct and out.shape == self.spec.shape and out.flags.c_contiguous
              and out.dtype == self.spec.dtype.numpy and covers(local, self.spec.shape)):
            self.decode_into(data, out)
        else:
            out[...] = self.decode(data)[local]

    def write(
        self, reader: Reader, local: Tuple[Local, ...], value: np.ndarray, extent: Tuple[int, ...],
        each: Any = map, threads: int = 1,
    ) -> Optional[Buffer]:
        """New encoded bytes for a chunk after ``chunk[local] = value``; None when all fill.

        ``extent`` is the in-bounds part of the chunk: a selection covering it
        replaces the chunk without reading it (the overhang is reset to fill).
        """
        if self.sharding is not None:
            return self.sharding.write(reader, local, value, extent, each, threads=threads)
        chunk = self.updated_chunk(reader, local, value, extent)
        return None if chunk is None else self.encode(chunk)

    def updated_chunk(self, reader: Reader, local: Tuple[Local, ...], value: np.ndarray,
                      extent: Tuple[int, ...]) -> Optional[np.ndarray]:
        """The whole chunk after ``chunk[local] = value`` (the stored one read only when the
        selection does not cover ``extent``), or None when it is all fill: what ``write``
        encodes, for callers that encode many chunks in one batch."""
        if value.shape == self.spec.shape and covers(local, self.spec.shape):
            chunk = value  # the whole chunk: no fill buffer, no copy
            return None if is_all_fill(chunk, self.spec) else chunk
        chunk = self.spec.fill_chunk()
        if not covers(local, extent):
            data = reader(0, None)
            if data is not None:
                chunk[...] = self.decode(data)
        # a 0-d value is unwrapped: an object array would otherwise store the array itself
        chunk[local] = value[()] if value.ndim == 0 else value
        return None if is_all_fill(chunk, self.spec) else chunk

