"""Codec building blocks: the chunk spec, the three codec kinds, the registry.

A codec is bound once to the spec (shape, data type, fill value) of the data it
receives (zarr-v3-subset §5); ``array -> array`` codecs hand the next codec a
resolved spec.  Every decoder is told the size it must produce and refuses more.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Any, Callable, ClassVar, Dict, List, Mapping, Optional, Tuple, Type, Union

import numpy as np

from molrec_raw.errors import CorruptDataError, InvalidMetadataError, UnsupportedFeatureError, brief
from molrec_raw.zarr.dtypes import DataType
from molrec_raw.zarr.parts import Part

__all__ = [
    "ChunkSpec", "Codec", "ArrayArrayCodec", "ArrayBytesCodec", "BytesBytesCodec",
    "register", "codec_class", "registered_codecs", "parse_codec_json", "check_config",
    "Buffer", "Reader",
]

Buffer = Any  # bytes, memoryview or a 1-D uint8 ndarray: anything with the buffer protocol
# An encoded value, whole or in parts whose concatenation it is (crc32c appends its
# checksum as a part of its own, so the shard assembly copies each chunk once).
Item = Union[Buffer, Tuple[Buffer, ...]]


def join_item(item: Item) -> Buffer:
    """One buffer holding the item (its parts joined)."""
    if isinstance(item, tuple):
        return item[0] if len(item) == 1 else b"".join(item)
    return item


def item_size(item: Item) -> int:
    """The bytes of an item (its parts' sum)."""
    if isinstance(item, tuple):
        return sum(memoryview(part).nbytes for part in item)
    return memoryview(item).nbytes
Reader = Callable[[int, Optional[int]], Optional[Buffer]]  # (start, length) of one stored value


@dataclass(frozen=True)
class Limits:
    """Upper bounds that protect a reader from hostile sizes (bytes)."""

    max_chunk_bytes: int = 2 << 30
    max_read_bytes: int = 8 << 30


@dataclass(frozen=True)
class ChunkSpec:
    """What a codec receives: the decoded chunk's shape, data type and fill value."""

    shape: Tuple[int, ...]
    dtype: DataType
    fill_value: Any
    limits: Limits = Limits()

    @property
    def nbytes(self) -> Optional[int]:
        """Decoded byte size of a chunk, or None for variable-length strings."""
        itemsize = self.dtype.itemsize
        return None if itemsize is None else prod(self.shape) * itemsize

    def fill_chunk(self) -> np.ndarray:
        """A chunk of this spec holding only the fill value (what a missing chunk decodes to,
        zarr-v3-subset#6)."""
        return np.full(self.shape, self.fill_value, dtype=self.dtype.numpy)


class Codec:
    """One entry of a ``codecs`` list: its name, kind and JSON configuration."""

    name: ClassVar[str]
    kind: ClassVar[str]

    @classmethod
    def from_config(cls, config: Mapping[str, Any], spec: ChunkSpec) -> "Codec":
        raise NotImplementedError

    def to_json(self) -> Dict[str, Any]:
        raise NotImplementedError

    def describe(self, data: Any) -> List[Part]:
        """What this codec finds in its encoded input (``data``: the bytes its decoder gets,
        or the array for an array -> array codec) — header fields with their offsets inside
        ``data``, checksums stored and computed — without decoding (``molrec-raw explain``).
        Raises the decoder's error when the header itself is unreadable."""
        return []


class ArrayArrayCodec(Codec):
    kind = "array -> array"

    def output_spec(self) -> ChunkSpec:
        raise NotImplementedError

    def encode(self, chunk: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def decode(self, chunk: np.ndarray) -> np.ndarray:
        raise NotImplementedError


class ArrayBytesCodec(Codec):
    kind = "array -> bytes"

    def encoded_size(self) -> Optional[int]:
        """Encoded byte size when fixed (bytes codec), else None."""
        return None

    def encode(self, chunk: np.ndarray) -> Buffer:
        raise NotImplementedError

    def decode(self, data: Buffer) -> np.ndarray:
        raise NotImplementedError


class BytesBytesCodec(Codec):
    kind = "bytes -> bytes"

    def encoded_size(self, decoded_size: Optional[int]) -> Optional[int]:
        """Size after encoding ``decoded_size`` bytes, or None when data-dependent."""
        return None

    def encode(self, data: Buffer) -> Buffer:
        raise NotImplementedError

    def encode_many(self, items: Any) -> Any:
        """``encode`` of every item of a batch (a 2-D ``uint8`` array, a row per chunk, or a
        list of buffers, some in parts): the batch path (codecs/batch.py).  Codecs that can
        do a whole batch in one step override it."""
        return [self.encode(join_item(item)) for item in items]

    # True when ``decode`` returns a view of its input (no copy worth avoiding).
    decodes_to_view: ClassVar[bool] = False

    def decode(self, data: Buffer, expected_size: Optional[int], limit: int) -> Buffer:
        """Decode; the output must be ``expected_size`` bytes when known, else ≤ ``limit``."""
        raise NotImplementedError

    def decode_into(self, data: Buffer, target: memoryview) -> None:
        """Decode into ``target``, which the output must fill exactly (fixed-size chains)."""
        result = self.decode(data, len(target), len(target))
        size = memoryview(result).nbytes
        if size != len(target):
            raise CorruptDataError(f"{self.name}: decodes to {size} bytes where the chunk needs {len(target)}",
                                   rule="zarr-v3-subset#5")
        np.frombuffer(target, np.uint8)[:] = np.frombuffer(result, np.uint8)


_REGISTRY: Dict[str, Type[Codec]] = {}


def register(cls: Type[Codec]) -> Type[Codec]:
    """Class decorator: make a codec known by its ``name``."""
    _REGISTRY[cls.name] = cls
    return cls


def registered_codecs() -> Tuple[str, ...]:
    """The names of every codec this subset reads and writes, sorted (zarr-v3-subset#5)."""
    return tuple(sorted(_REGISTRY))


def codec_class(name: str) -> Type[Codec]:
    """The codec class registered under ``name``; an unknown codec is refused
    (UnsupportedFeatureError, zarr-v3-subset#5)."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnsupportedFeatureError(
            f"codec {name!r} is not supported (supported: {', '.join(registered_codecs())})",
            rule="zarr-v3-subset#5",
        ) from None


def parse_codec_json(entry: Any) -> Tuple[str, Dict[str, Any]]:
    """Normalise a codec entry (object or short-hand name) to (name, configuration)."""
    if isinstance(entry, str):
        return entry, {}
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise InvalidMetadataError(f"codec entry must be an object with a name, got {brief(entry)}")
    unknown = set(entry) - {"name", "configuration", "must_understand"}
    if unknown:
        raise InvalidMetadataError(f"codec {entry['name']!r} has unknown keys {sorted(unknown)}")
    config = entry.get("configuration", {})
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise InvalidMetadataError(f"codec {entry['name']!r} configuration must be an object")
    return entry["name"], config


def check_config(
    name: str,
    config: Mapping[str, Any],
    fields: Mapping[str, Callable[[Any], bool]],
    required: Tuple[str, ...] = (),
) -> None:
    """Refuse unknown or ill-typed configuration members (zarr-v3-subset#2.3)."""
    unknown = set(config) - set(fields)
    if unknown:
        raise InvalidMetadataError(f"codec {name!r}: unknown configuration keys {sorted(unknown)}")
    for key in required:
        if key not in config:
            raise InvalidMetadataError(f"codec {name!r}: configuration needs {key!r}")
    for key, value in config.items():
        if not fields[key](value):
            raise InvalidMetadataError(f"codec {name!r}: invalid {key} {brief(value)}")


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
