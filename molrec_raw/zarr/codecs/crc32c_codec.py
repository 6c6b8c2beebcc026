"""``crc32c``: append a little-endian CRC-32C; verify it on every read (zarr-v3-subset#5.5)."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

import crc32c as _crc32c

from molrec_raw.errors import ChecksumMismatchError, CorruptDataError
from molrec_raw.zarr.codecs.base import Buffer, BytesBytesCodec, ChunkSpec, check_config, join_item, register
from molrec_raw.zarr.parts import Part

_RULE = "zarr-v3-subset#5.5"


def crc32c_of(data: Buffer) -> int:
    return _crc32c.crc32c(data)


def split_checksum(data: Buffer) -> Tuple[memoryview, int, int]:
    """(body, stored checksum, checksum computed over the body) of a crc32c-encoded value."""
    view = memoryview(data).cast("B")
    if len(view) < 4:
        raise CorruptDataError("crc32c: value shorter than its 4-byte checksum", rule=_RULE)
    body = view[:-4]
    return body, int.from_bytes(view[-4:], "little"), crc32c_of(body)


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
        out = []
        for item in items:
            body = join_item(item)
            out.append((body, crc32c_of(body).to_bytes(4, "little")))
        return out

    def decode(self, data: Buffer, expected_size: Optional[int], limit: int) -> Buffer:
        body, stored, actual = split_checksum(data)
        if actual != stored:
            raise ChecksumMismatchError(f"crc32c mismatch: stored {stored:#010x}, computed {actual:#010x}", rule=_RULE)
        return body

    def describe(self, data: Any) -> List[Part]:
        body, stored, actual = split_checksum(data)
        verdict = "matches" if stored == actual else "MISMATCH: the bytes are not what was written"
        return [Part("body", f"{len(body)} bytes", "what the next codec decodes", 0, len(body), _RULE),
                Part("crc32c stored", f"{stored:#010x}", "CRC-32C of the body, little-endian", len(body), 4, _RULE),
                Part("crc32c computed", f"{actual:#010x}", f"over bytes [0, {len(body)}): {verdict}", rule=_RULE)]
