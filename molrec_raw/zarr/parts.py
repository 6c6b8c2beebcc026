"""Named byte ranges: how a parser says what it found where (``molrec-raw explain``).

A :class:`Part` is one field of a stored value — a zip record's CRC-32, a shard index entry,
a zstd frame's window size — with its byte range inside the value (``offset``/``length``;
None when the field is not a byte range of its own, e.g. a size derived from a header),
what it means and the rule it follows.  The parsers the readers use produce them on
request (``Codec.describe``, ``CodecPipeline.trace``, ``ZipStore(..., layout=)``), so
explaining a file runs the very code that reads it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, Tuple

__all__ = ["Part", "Stage", "ZipRecord", "struct_parts"]


@dataclass(frozen=True)
class Part:
    """One field: ``name``, its decoded ``value``, ``meaning``, byte ``offset``/``length``
    inside the value being described (None: not a byte range), the spec ``rule``."""

    name: str
    value: Any
    meaning: str = ""
    offset: Optional[int] = None
    length: Optional[int] = None
    rule: Optional[str] = None


@dataclass
class Stage:
    """One codec's step while a chunk is decoded (``CodecPipeline.trace``): the codec, its
    kind and configuration, the bytes entering its decoder and what it found in them.
    ``base`` is where the stage's input starts inside the stored value (None when the input
    is the output of a codec that transforms, e.g. zstd): the parts' offsets are relative
    to the stage input.  ``output_size`` is set once the codec decoded without fault."""

    codec: str
    kind: str
    configuration: Any
    input_size: Optional[int]
    base: Optional[int]
    parts: List[Part] = field(default_factory=list)
    output_size: Optional[int] = None


@dataclass
class ZipRecord:
    """One record of a zip archive as ``ZipStore`` parsed it (``kind`` e.g. ``"central
    directory header"``), where it lies, its fields, and the entry name it belongs to."""

    kind: str
    offset: int
    length: int
    parts: List[Part] = field(default_factory=list)
    name: Optional[str] = None


def struct_parts(layout: Sequence[Tuple[str, int, str]], values: Sequence[Any], base: int,
                 rule: Optional[str] = None, hex_names: Sequence[str] = ("signature", "crc32", "flags")) -> List[Part]:
    """Parts of a packed record: ``layout`` lists (name, byte size, meaning) in order,
    ``values`` the unpacked fields, ``base`` the record's offset; fields named in
    ``hex_names`` are shown in hexadecimal."""
    parts, at = [], base
    for (name, size, meaning), value in zip(layout, values):
        shown = f"0x{value:0{2 * size}x}" if name in hex_names and isinstance(value, int) else value
        parts.append(Part(name, shown, meaning, at, size, rule))
        at += size
    return parts
