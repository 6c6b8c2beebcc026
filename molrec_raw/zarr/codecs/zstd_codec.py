"""``zstd``: one frame with the content size written (zarr-v3-subset#5.4).

Reading does not trust the header: frames without a content size, and several
concatenated frames, are decoded with a bounded streaming reader; a header that
claims more than the chunk can hold is refused before anything is allocated.
"""
from __future__ import annotations

import threading
from typing import Any, Dict, List, Mapping, Optional

import zstandard

from molrec_raw.errors import CorruptDataError
from molrec_raw.zarr.codecs.base import Buffer, BytesBytesCodec, ChunkSpec, check_config, is_int, register
from molrec_raw.zarr.parts import Part

_RULE = "zarr-v3-subset#5.4"


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

    def encode(self, data: Buffer) -> Buffer:
        compressor = getattr(self._local, "compressor", None)
        if compressor is None:
            compressor = self._local.compressor = zstandard.ZstdCompressor(
                level=self.level, write_checksum=self.checksum, write_content_size=True
            )
        return compressor.compress(data)

    def decode(self, data: Buffer, expected_size: Optional[int], limit: int) -> Buffer:
        bound = limit if expected_size is None else expected_size
        decompressor = zstandard.ZstdDecompressor()
        try:
            declared = _declared_size(data, bound)
            if declared >= 0 and (expected_size is None or declared == expected_size):
                try:
                    return decompressor.decompress(data, allow_extra_data=False)
                except zstandard.ZstdError:
                    pass  # concatenated frames or a damaged frame: take the careful path
            reader = decompressor.stream_reader(data, read_across_frames=True)
            out = reader.read(bound + 1)
            while len(out) <= bound:
                more = reader.read(bound + 1 - len(out))
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
        """Decompress straight into ``target`` (no intermediate buffer)."""
        size = len(target)
        try:
            _declared_size(data, size)
            reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
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
