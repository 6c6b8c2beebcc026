"""``zstd``: one frame with the content size written (zarr-v3-subset#5.4).

Reading does not trust the header: frames without a content size, and several
concatenated frames, are decoded with a bounded streaming reader; a header that
claims more than the chunk can hold is refused before anything is allocated.
"""
from __future__ import annotations

import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np
import zstandard

from molrec_raw.errors import CorruptDataError
from molrec_raw.zarr.codecs.base import Buffer, BytesBytesCodec, ChunkSpec, check_config, is_int, register
from molrec_raw.zarr.parts import Part

_RULE = "zarr-v3-subset#5.4"

# Below this many bytes (in or out) a batch runs on one thread: the batch API starts its
# threads per call (~45 µs), and a single-threaded loop of plain calls is the faster way
# for a few small chunks (spec-notes/zarr.md, "Batch codec path").
THREADED_BATCH_BYTES = 1 << 20
SMALL_BATCH_BYTES = 256 * 1024
_STEP = 1 << 20  # bytes the careful path decompresses per read
# A frame whose window is larger than this is decoded by a decompressor of its own, freed
# after the call, so a hostile window is not kept alive (see ZstdCodec._stream_decompressor).
REUSED_WINDOW_BYTES = 4 << 20


@register
class ZstdCodec(BytesBytesCodec):
    name = "zstd"

    def __init__(self, level: int, checksum: bool) -> None:
        self.level = level
        self.checksum = checksum
        self._local = threading.local()  # compressor objects are not thread-safe

    @classmethod
    def from_config(cls, config: Mapping[str, Any], spec: ChunkSpec) -> "ZstdCodec":
        check_config(
            cls.name,
            config,
            {"level": lambda v: is_int(v) and -131072 <= v <= 22, "checksum": lambda v: isinstance(v, bool)},
        )
        return cls(config.get("level", 0), config.get("checksum", False))

    def to_json(self) -> Dict[str, Any]:
        return {"name": "zstd", "configuration": {"level": self.level, "checksum": self.checksum}}

    def _compressor(self) -> Any:
        compressor = getattr(self._local, "compressor", None)
        if compressor is None:
            compressor = self._local.compressor = zstandard.ZstdCompressor(
                level=self.level, write_checksum=self.checksum, write_content_size=True
            )
        return compressor

    def _reused_decompressor(self) -> Any:
        """This thread's decompressor (making one costs about a third of decoding an 80 KB
        chunk; zstandard resets its state at every call).  A one-shot ``decompress`` decodes
        into its output and keeps nothing; a streaming read goes through
        :meth:`_stream_decompressor`."""
        decompressor = getattr(self._local, "decompressor", None)
        if decompressor is None:
            decompressor = self._local.decompressor = zstandard.ZstdDecompressor()
        return decompressor

    def _stream_decompressor(self, data: Buffer) -> Any:
        """A decompressor to stream ``data`` with: the reused one when the frame's window is
        at most ``REUSED_WINDOW_BYTES``, else a fresh one.  A streaming decode keeps a
        window-sized buffer in the decompressor, and a hostile frame declares windows up to
        128 MiB: a reused decompressor would hold that for as long as the array is open
        (found by bench/fuzz.py's vlen_utf8 target: +136 MiB RSS)."""
        try:
            small = zstandard.get_frame_parameters(data).window_size <= REUSED_WINDOW_BYTES
        except zstandard.ZstdError:
            small = False
        return self._reused_decompressor() if small else zstandard.ZstdDecompressor()

    def encode(self, data: Buffer) -> Buffer:
        return self._compressor().compress(data)

    def compress_many(self, inputs: Sequence[Buffer], threads: int = 1) -> List[Buffer]:
        """``encode`` of every input, in order, through ``multi_compress_to_buffer`` (the
        same frames; one call, on up to ``threads`` threads when the batch is large)."""
        compressor = self._compressor()
        total = sum(memoryview(x).nbytes for x in inputs)
        if len(inputs) < 2 or total < SMALL_BATCH_BYTES or not all(memoryview(x).nbytes for x in inputs):
            return [compressor.compress(x) for x in inputs]
        try:
            result = compressor.multi_compress_to_buffer(
                list(inputs), threads=threads if threads > 1 and total >= THREADED_BATCH_BYTES else 0)
        except NotImplementedError:  # a backend without the batch API (cffi)
            return [compressor.compress(x) for x in inputs]
        return [result[i] for i in range(len(result))]

    def decode(self, data: Buffer, expected_size: Optional[int], limit: int) -> Buffer:
        bound = limit if expected_size is None else expected_size
        try:
            declared = _declared_size(data, bound)
            if declared >= 0 and (expected_size is None or declared == expected_size):
                try:
                    return self._reused_decompressor().decompress(data, allow_extra_data=False)
                except zstandard.ZstdError:
                    pass  # concatenated frames or a damaged frame: take the careful path
            # the careful path: at most _STEP bytes per read into one growing buffer (asking
            # for bound + 1 bytes at once allocates that much for any frame, however small)
            reader = self._stream_decompressor(data).stream_reader(data, read_across_frames=True)
            out = bytearray()
            while len(out) <= bound:
                more = reader.read(min(_STEP, bound + 1 - len(out)))
                if not more:
                    break
                out += more
        except zstandard.ZstdError as exc:
            raise CorruptDataError(f"zstd: {exc}", rule="zarr-v3-subset#5.4") from None
        if len(out) > bound:
            raise CorruptDataError(
                f"zstd: decompresses to more than the {bound} bytes the chunk can hold",
                rule="zarr-v3-subset#5.4",
            )
        if expected_size is not None and len(out) != expected_size:
            raise CorruptDataError(f"zstd: decompresses to {len(out)} bytes where the chunk needs {expected_size}",
                                   rule="zarr-v3-subset#5.4")
        return out

    def describe(self, data: Any) -> List[Part]:
        """The first frame's header (RFC 8878 §3.1.1): magic number, frame header descriptor,
        window size, content size and the checksum flag, as zstd itself reads them."""
        try:
            header = zstandard.frame_header_size(data)
            params = zstandard.get_frame_parameters(data)
            declared = zstandard.frame_content_size(data)
        except zstandard.ZstdError as exc:
            raise CorruptDataError(f"zstd: not a zstd frame header ({exc})", rule=_RULE) from None
        view = memoryview(data).cast("B")
        descriptor = view[4]
        return [
            Part("magic", f"0x{int.from_bytes(view[0:4], 'little'):08x}", "zstd frame magic number 0xfd2fb528",
                 0, 4, _RULE),
            Part("frame header descriptor", f"0x{descriptor:02x}",
                 f"single segment {bool(descriptor & 0x20)}, content checksum flag {bool(descriptor & 0x04)}, "
                 f"dictionary id field {descriptor & 0x03}, content size field {descriptor >> 6}", 4, 1, _RULE),
            Part("frame header", f"{header - 4} bytes", "descriptor, window descriptor, dictionary id, content size",
                 4, header - 4, _RULE),
            Part("window size", params.window_size, "bytes the decoder keeps in memory", rule=_RULE),
            Part("content size", declared if declared >= 0 else "absent",
                 "decompressed size declared in the header (checked before decompression)" if declared >= 0
                 else "not declared: decoded by a bounded streaming reader", rule=_RULE),
            Part("content checksum", params.has_checksum,
                 "frame ends with the low 32 bits of its XXH64 (verified by zstd)" if params.has_checksum
                 else "no frame checksum", rule=_RULE),
            Part("compressed blocks", f"{len(view) - header} bytes", "then the frame's blocks", header,
                 len(view) - header, _RULE),
        ]

    def decode_into(self, data: Buffer, target: memoryview) -> None:
        """Decompress into ``target``: one frame declaring exactly its size through the
        one-shot call (then one copy: faster than a streaming read for chunk-sized frames),
        anything else by a bounded streaming read straight into it."""
        size = len(target)
        try:
            declared = _declared_size(data, size)
            if declared == size and size > 0:
                try:
                    decoded = self._reused_decompressor().decompress(data, allow_extra_data=False)
                    if len(decoded) == size:  # numpy's copy releases the GIL (a memoryview's does not)
                        np.copyto(np.frombuffer(target, np.uint8), np.frombuffer(decoded, np.uint8))
                        return
                except (zstandard.ZstdError, ValueError):
                    pass  # concatenated frames or a damaged frame: the careful path says which
            reader = self._stream_decompressor(data).stream_reader(data, read_across_frames=True)
            filled = 0
            while filled < size:
                got = reader.readinto(target[filled:])
                if not got:
                    break
                filled += got
            extra = reader.read(1)
        except zstandard.ZstdError as exc:
            raise CorruptDataError(f"zstd: {exc}", rule="zarr-v3-subset#5.4") from None
        if filled != size or extra:
            raise CorruptDataError(
                f"zstd: decompressed size differs from the chunk's {size} bytes", rule="zarr-v3-subset#5.4"
            )


def decompress_many(items: Sequence[Buffer], sizes: Sequence[int], threads: int = 1) -> List[Union[Buffer, Exception]]:
    """Each item decompressed to exactly ``sizes[k]`` bytes, or the error that refuses it
    (the careful path of :meth:`ZstdCodec.decode`).  Frames that declare their size go
    through ``multi_decompress_to_buffer`` in one call (on up to ``threads`` threads when the
    batch is large); anything it refuses is retried item by item, so an error is that
    item's own."""
    careful = ZstdCodec(0, False)
    out: List[Union[Buffer, Exception]] = [b""] * len(items)
    batch: List[int] = []
    for k, (item, size) in enumerate(zip(items, sizes)):
        try:
            declared = zstandard.frame_content_size(item)
        except zstandard.ZstdError:
            declared = -1
        # the batch API decodes the first frame only and ignores what follows it: anything but
        # one whole frame of the declared size takes the careful path (which refuses or reads on)
        if declared == size and size > 0 and frame_end(item) == memoryview(item).nbytes:
            batch.append(k)
        else:
            out[k] = _careful(careful, item, size)
    total = sum(sizes[k] for k in batch)
    if len(batch) < 2 or total < SMALL_BATCH_BYTES:
        decompressor = zstandard.ZstdDecompressor()
        for k in batch:
            try:
                result = decompressor.decompress(items[k], allow_extra_data=False)
            except zstandard.ZstdError:
                result = None
            out[k] = result if result is not None and len(result) == sizes[k] else _careful(careful, items[k], sizes[k])
        return out
    try:
        results = zstandard.ZstdDecompressor().multi_decompress_to_buffer(
            [items[k] for k in batch], threads=threads if threads > 1 and total >= THREADED_BATCH_BYTES else 0)
        decoded = [results[i] for i in range(len(results))]
        if len(decoded) != len(batch) or any(len(d) != sizes[k] for d, k in zip(decoded, batch)):
            raise zstandard.ZstdError("size mismatch")
    except (zstandard.ZstdError, NotImplementedError, ValueError):
        for k in batch:
            out[k] = _careful(careful, items[k], sizes[k])
        return out
    for k, d in zip(batch, decoded):
        out[k] = d
    return out


def frame_end(data: Buffer) -> int:
    """Where the first zstd frame of ``data`` ends (its header, blocks and checksum walked as
    RFC 8878 §3.1.1 lays them out), or -1 when that cannot be told: a value whose frame does
    not end exactly at its end holds more (or less) than one frame."""
    view = memoryview(data).cast("B")
    try:
        at = zstandard.frame_header_size(view)
    except zstandard.ZstdError:
        return -1
    if len(view) < 5:
        return -1
    checksum = 4 if view[4] & 0x04 else 0
    while at + 3 <= len(view):
        header = view[at] | view[at + 1] << 8 | view[at + 2] << 16
        kind, size = (header >> 1) & 3, header >> 3
        if kind == 3:
            return -1
        at += 3 + (1 if kind == 1 else size)
        if header & 1:
            return at + checksum
    return -1


def _careful(codec: ZstdCodec, item: Buffer, size: int) -> Union[Buffer, Exception]:
    """``ZstdCodec.decode`` to exactly ``size`` bytes (a truncated frame is refused here, as
    ``decode_into`` refuses it), or its error."""
    try:
        out = codec.decode(item, size, size)
    except CorruptDataError as exc:
        return exc
    if len(out) != size:
        return CorruptDataError(f"zstd: decompressed size differs from the chunk's {size} bytes",
                                rule="zarr-v3-subset#5.4")
    return out


def _declared_size(data: Buffer, bound: int) -> int:
    """The frame header's content size (-1 when absent); refused when above ``bound``,
    before anything is allocated for it."""
    declared = zstandard.frame_content_size(data)
    if declared > bound:
        raise CorruptDataError(
            f"zstd frame declares {declared} bytes, more than the {bound} the chunk can hold",
            rule="zarr-v3-subset#5.4",
        )
    return declared
