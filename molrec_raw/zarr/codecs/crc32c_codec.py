"""``crc32c``: append a little-endian CRC-32C; verify it on every read (zarr-v3-subset#5.5)."""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

import crc32c as _crc32c

from molrec_raw.errors import ChecksumMismatchError, CorruptDataError
from molrec_raw.zarr.codecs.base import Buffer, BytesBytesCodec, ChunkSpec, check_config, register


def crc32c_of(data: Buffer) -> int:
    return _crc32c.crc32c(data)


@register
class Crc32cCodec(BytesBytesCodec):
    name = "crc32c"
    decodes_to_view = True

    @classmethod
    def from_config(cls, config: Mapping[str, Any], spec: ChunkSpec) -> "Crc32cCodec":
        check_config(cls.name, config, {})
        return cls()

    def to_json(self) -> Dict[str, Any]:
        return {"name": "crc32c"}

    def encoded_size(self, decoded_size: Optional[int]) -> Optional[int]:
        return None if decoded_size is None else decoded_size + 4

    def encode(self, data: Buffer) -> Buffer:
        view = memoryview(data).cast("B")
        return b"".join((view, crc32c_of(view).to_bytes(4, "little")))

    def encode_many(self, items: Any) -> Any:
        """Each item followed by its checksum, as two parts (joined once, by whoever lays
        the chunks out)."""
        from molrec_raw.zarr.codecs.batch import join_item

        out = []
        for item in items:
            body = join_item(item)
            out.append((body, crc32c_of(body).to_bytes(4, "little")))
        return out

    def decode(self, data: Buffer, expected_size: Optional[int], limit: int) -> Buffer:
        view = memoryview(data).cast("B")
        if len(view) < 4:
            raise CorruptDataError("crc32c: value shorter than its 4-byte checksum", rule="zarr-v3-subset#5.5")
        body, stored = view[:-4], int.from_bytes(view[-4:], "little")
        actual = crc32c_of(body)
        if actual != stored:
            raise ChecksumMismatchError(
                f"crc32c mismatch: stored {stored:#010x}, computed {actual:#010x}",
                rule="zarr-v3-subset#5.5",
            )
        return body
