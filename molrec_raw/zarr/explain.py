"""What every byte of a Zarr value means (``molrec-raw explain``, the Zarr half).

An :class:`Explanation` is a tree of :class:`Section` s (a byte range, a title, its
:class:`~molrec_raw.zarr.parts.Part` s) and at most one :class:`Fault`: explaining stops at
the first thing a reader refuses, and names its byte offset when the parser knows it.
Three kinds of values are explained here, each by the parser the readers use:

- a ``zarr.json`` (:func:`explain_metadata`): every field, its value, meaning and rule,
  then the real parser (``parse_metadata`` and the codec pipeline) as the verdict;
- a chunk or shard (:func:`explain_chunk`): the shard index (entries, the empty-chunk
  sentinel, its checksum stored vs computed), unused gaps, and each
  chunk through ``CodecPipeline.trace`` down to its decoded shape and first values;
- a zip archive (:func:`explain_zip`): the records ``ZipStore`` parses, then each entry's
  local header.

Nothing is written.  The Zarr layer knows nothing of MolRec: a caller passes a function
that explains attributes (the record layer does, for record nodes).
"""
from __future__ import annotations

import itertools
import json
import math
import struct
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from molrec_raw.errors import ChecksumMismatchError, MolrecError
from molrec_raw.zarr import jsonio
from molrec_raw.zarr.codecs import ChunkSpec, CodecPipeline
from molrec_raw.zarr.codecs.sharding import EMPTY, ShardingCodec
from molrec_raw.zarr.metadata import ArrayMetadata, parse_metadata
from molrec_raw.zarr.parts import Part, Stage, ZipRecord
from molrec_raw.zarr.zipstore import ZipStore

__all__ = ["Explanation", "Section", "Fault", "AttributeExplainer", "explain_metadata", "explain_chunk",
           "explain_shard", "explain_zip", "trace_value", "coords_of", "fault_of", "first_values", "FORMAT_VERSION"]

FORMAT_VERSION = 1  # "molrec_raw_explain" in the JSON form (spec-notes/cli.md documents it)
_FIRST_VALUES = 8
_DETAILED_INNER_CHUNKS = 64
_VERIFY_ENTRY_BYTES = 64 << 20  # zip entries up to this size get their CRC-32 checked
_DECODE_ERRORS = (ValueError, TypeError, IndexError, OverflowError, struct.error)

# attribute explainer: (attributes) -> parts describing them
AttributeExplainer = Callable[[Dict[str, Any]], List[Part]]


@dataclass
class Fault:
    """The first thing a reader refuses: the error, its byte offset (None: not a byte range,
    e.g. a rule broken by a metadata value), its rule and the error class."""

    message: str
    offset: Optional[int]
    rule: Optional[str]
    error: str

    def to_json(self) -> Dict[str, Any]:
        return {"message": self.message, "offset": self.offset, "rule": self.rule, "error": self.error}


@dataclass
class Section:
    """A titled piece of the explained value: its byte range (None when not one), a note,
    its fields and sub-sections."""

    title: str
    offset: Optional[int] = None
    length: Optional[int] = None
    note: str = ""
    parts: List[Part] = field(default_factory=list)
    sections: List["Section"] = field(default_factory=list)

    def to_json(self) -> Dict[str, Any]:
        return {"title": self.title, "offset": self.offset, "length": self.length, "note": self.note,
                "parts": [_part_json(p) for p in self.parts], "sections": [s.to_json() for s in self.sections]}


@dataclass
class Explanation:
    """What ``molrec-raw explain`` prints: ``kind`` of value, ``target`` (a store key, a node
    or a frame), its ``size`` in bytes when it is one stored value, the sections, the fault."""

    path: str
    target: str
    kind: str
    size: Optional[int] = None
    sections: List[Section] = field(default_factory=list)
    fault: Optional[Fault] = None

    def to_json(self) -> Dict[str, Any]:
        """The documented JSON form (spec-notes/cli.md, "explain --json")."""
        return {"molrec_raw_explain": FORMAT_VERSION, "path": self.path, "target": self.target, "kind": self.kind,
                "size": self.size, "sections": [s.to_json() for s in self.sections],
                "fault": None if self.fault is None else self.fault.to_json()}

    def text(self) -> str:
        size = f" ({self.size} bytes)" if self.size is not None else ""
        lines = [f"{self.kind} {self.target} in {self.path}{size}"]
        for section in self.sections:
            _section_lines(section, "  ", lines)
        if self.fault is not None:
            at = f" at byte {self.fault.offset}" if self.fault.offset is not None else ""
            rule = f" [{self.fault.rule}]" if self.fault.rule else ""
            lines.append(f"FAULT{at}: {self.fault.message}{rule} — a reader refuses this; explained up to here")
        return "\n".join(lines)


def _json_value(value: Any) -> Any:
    """Values as JSON: NaN/infinities as strings, numpy scalars as Python, tuples as lists."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, complex):
        return [_json_value(value.real), _json_value(value.imag)]
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    return value


def _part_json(part: Part) -> Dict[str, Any]:
    return {"name": part.name, "value": _json_value(part.value), "meaning": part.meaning, "offset": part.offset,
            "length": part.length, "rule": part.rule}


def _line(head: str, offset: Optional[int], length: Optional[int], *tails: str) -> str:
    """``head``, then ``@offset +length`` when it is a byte range, then the non-empty tails."""
    where = "" if offset is None else f"@{offset}" + (f" +{length}" if length is not None else "")
    return "  ".join([head, *(t for t in (where, *tails) if t)])


def _section_lines(section: Section, indent: str, lines: List[str]) -> None:
    lines.append(_line(f"{indent}{section.title}", section.offset, section.length,
                       f"— {section.note}" if section.note else ""))
    for part in section.parts:
        value = _json_value(part.value)
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        lines.append(_line(f"{indent}  {part.name} = {shown}", part.offset, part.length,
                           f"({part.meaning})" if part.meaning else "", f"[{part.rule}]" if part.rule else ""))
    for sub in section.sections:
        _section_lines(sub, indent + "  ", lines)


def fault_of(exc: BaseException, offset: Optional[int] = None) -> Fault:
    """A Fault from an error; ``offset`` when the caller knows it better than the error."""
    if isinstance(exc, MolrecError):
        at = offset if offset is not None else exc.offset
        return Fault(exc.message, at, exc.rule, type(exc).__name__)
    return Fault(f"cannot decode: {exc}", offset, None, "CorruptDataError")


def first_values(values: np.ndarray, count: int = _FIRST_VALUES) -> List[Any]:
    """The first ``count`` values of ``values`` in C order, as JSON-able Python values."""
    flat = np.asarray(values).reshape(-1)[:count]
    return [_json_value(v) for v in flat.tolist()]


# -- zarr.json ---------------------------------------------------------------------------------
_CODEC_MEANINGS = {
    "bytes": ("array -> bytes: elements in C order", "zarr-v3-subset#5.1"),
    "transpose": ("array -> array: permutes the chunk's axes", "zarr-v3-subset#5.2"),
    "gzip": ("bytes -> bytes: one RFC 1952 gzip member", "zarr-v3-subset#5.3"),
    "zstd": ("bytes -> bytes: one zstd frame", "zarr-v3-subset#5.4"),
    "crc32c": ("bytes -> bytes: appends a CRC-32C, verified on every read", "zarr-v3-subset#5.5"),
    "numcodecs.shuffle": ("bytes -> bytes: byte planes by element size (helps compression)", "zarr-v3-subset#5.6"),
    "vlen-utf8": ("array -> bytes: u32 count, then u32 length + UTF-8 bytes per string", "zarr-v3-subset#5.7"),
    "sharding_indexed": ("array -> bytes: many inner chunks in one stored value, with an index",
                         "zarr-v3-subset#7"),
}


def _codec_parts(codecs: Any, prefix: str) -> List[Part]:
    parts: List[Part] = []
    if not isinstance(codecs, list):
        return [Part(prefix, codecs, "must be a non-empty list of codecs", rule="zarr-v3-subset#5")]
    for i, entry in enumerate(codecs):
        name = entry if isinstance(entry, str) else entry.get("name") if isinstance(entry, dict) else None
        config = entry.get("configuration", {}) if isinstance(entry, dict) else {}
        meaning, rule = _CODEC_MEANINGS.get(str(name), ("not a codec of the subset", "zarr-v3-subset#5"))
        if isinstance(entry, str):
            meaning += " (short-hand name: accepted on read, never written)"
        label = f"{prefix}[{i}]"
        if name == "sharding_indexed" and isinstance(config, dict):
            shape = config.get("chunk_shape")
            parts.append(Part(label, "sharding_indexed", f"{meaning}; inner chunks {shape}, index at the "
                              f"{config.get('index_location', 'end')}", rule=rule))
            parts.extend(_codec_parts(config.get("codecs"), f"{label}.codecs"))
            parts.extend(_codec_parts(config.get("index_codecs", [{"name": "bytes"}, {"name": "crc32c"}]),
                                      f"{label}.index_codecs"))
        else:
            shown = {"name": name, **({"configuration": config} if config else {})}
            parts.append(Part(label, shown, meaning, rule=rule))
    return parts


def _array_fields(doc: Dict[str, Any]) -> List[Part]:
    shape, chunk_grid = doc.get("shape"), doc.get("chunk_grid")
    chunks = chunk_grid.get("configuration", {}).get("chunk_shape") if isinstance(chunk_grid, dict) else None
    grid = None
    if isinstance(shape, list) and isinstance(chunks, list) and len(shape) == len(chunks) and all(
            isinstance(c, int) and c > 0 for c in chunks) and all(isinstance(s, int) for s in shape):
        grid = [-(-s // c) for s, c in zip(shape, chunks)]
    meanings = {
        "zarr_format": ("Zarr V3 metadata", "zarr-v3-subset#2"),
        "node_type": ("this node is an array", "zarr-v3-subset#2.2"),
        "shape": ("the array's extent, one integer per dimension", "zarr-v3-subset#2.2"),
        "data_type": ("the element type (a bare name; big-endian data is a codec matter)", "zarr-v3-subset#8"),
        "chunk_grid": (f"regular grid: each stored value holds this many elements per dimension; "
                       f"{grid} chunk(s) per dimension" if grid is not None else "regular chunk grid",
                       "zarr-v3-subset#4"),
        "chunk_key_encoding": ("how grid coordinates name a stored value (default: c/i/j; v2: i.j)",
                               "zarr-v3-subset#4"),
        "fill_value": ("the value of elements never written: a missing chunk reads as all fill",
                       "zarr-v3-subset#3"),
        "attributes": ("user attributes (explained below)", "zarr-v3-subset#2.2"),
        "dimension_names": ("a name (or null) per dimension", "zarr-v3-subset#2.2"),
        "storage_transformers": ("must be empty: no transformer is supported", "zarr-v3-subset#2.2"),
    }
    parts = []
    for key, value in doc.items():
        if key == "codecs":
            parts.append(Part("codecs", f"{len(value) if isinstance(value, list) else '?'} codec(s)",
                              "applied in order when writing, in reverse when reading", rule="zarr-v3-subset#5"))
            parts.extend(_codec_parts(value, "codecs"))
        elif key == "attributes":
            continue
        else:
            meaning, rule = meanings.get(key, _extension_meaning(value))
            parts.append(Part(key, value, meaning, rule=rule))
    return parts


def _extension_meaning(value: Any) -> Tuple[str, str]:
    if isinstance(value, dict) and value.get("must_understand") is False:
        return "an extension marked must_understand: false — ignored, kept on rewrite", "zarr-v3-subset#2.3"
    return "an unknown required field: a reader refuses the node", "zarr-v3-subset#2.3"


def _group_fields(doc: Dict[str, Any]) -> List[Part]:
    meanings = {
        "zarr_format": ("Zarr V3 metadata", "zarr-v3-subset#2"),
        "node_type": ("this node is a group", "zarr-v3-subset#2.1"),
        "consolidated_metadata": ("ignored and dropped on rewrite: a stale copy would hide members",
                                  "zarr-v3-subset#2.1"),
    }
    parts = []
    for key, value in doc.items():
        if key != "attributes":
            meaning, rule = meanings.get(key, _extension_meaning(value))
            parts.append(Part(key, value, meaning, rule=rule))
    return parts


def _plain_attributes(attrs: Dict[str, Any]) -> List[Part]:
    return [Part(key, value, "user attribute") for key, value in attrs.items()]


def explain_metadata(raw: bytes, *, attributes: AttributeExplainer = _plain_attributes) -> Tuple[
        List[Section], Optional[Fault], Any]:
    """Sections for a ``zarr.json`` and the first fault (None when a reader opens it), plus
    the parsed metadata (None after a fault).  ``attributes`` explains the attribute map."""
    sections: List[Section] = []
    try:
        doc = jsonio.loads(raw)
    except MolrecError as exc:
        return sections, fault_of(exc), None
    if not isinstance(doc, dict):
        return sections, Fault("zarr.json must hold a JSON object", 0, "zarr-v3-subset#2", "InvalidMetadataError"), None
    is_array = doc.get("node_type") == "array"
    sections.append(Section("fields", 0, len(raw), "a JSON object (key order is not significant)",
                            _array_fields(doc) if is_array else _group_fields(doc)))
    attrs = doc.get("attributes")
    if isinstance(attrs, dict) and attrs:
        sections.append(Section("attributes", note=f"{len(attrs)} key(s)", parts=attributes(attrs)))
    try:
        metadata = parse_metadata(raw)
        if isinstance(metadata, ArrayMetadata):
            CodecPipeline(metadata.codecs, ChunkSpec(metadata.chunk_shape, metadata.dtype, metadata.fill_value))
    except MolrecError as exc:
        return sections, fault_of(exc), None
    return sections, None, metadata


# -- chunks and shards --------------------------------------------------------------------------
def _stage_section(stage: Stage, shift: int) -> Section:
    base = None if stage.base is None else shift + stage.base
    moved = [Part(p.name, p.value, p.meaning, None if p.offset is None or base is None else base + p.offset,
                  p.length if base is not None else None, p.rule) for p in stage.parts]
    where = "in the stored bytes" if base is not None else "in the output of the previous codec"
    out = f" -> {stage.output_size} bytes" if stage.output_size is not None else " (failed)"
    return Section(f"{stage.codec} ({stage.kind})", base, stage.input_size if base is not None else None,
                   f"{stage.input_size} bytes {where}{out}" if stage.input_size is not None else f"array{out}",
                   [Part("configuration", stage.configuration, "")] + moved if stage.configuration else moved)


def _stage_fault(exc: BaseException, stages: List[Stage], shift: int) -> Fault:
    """Where a failing decode stage lies in the stored value: the checksum field of a crc32c
    mismatch, the error's own offset inside the stage's input, or the start of the last
    stage that still reads stored bytes."""
    stage = stages[-1] if stages else None
    offset: Optional[int] = None
    if stage is not None:
        bases = [s.base for s in stages if s.base is not None]
        if stage.base is not None:
            inner = getattr(exc, "offset", None)
            if isinstance(exc, ChecksumMismatchError):
                inner = next((p.offset for p in stage.parts if p.name.endswith("stored")), inner)
            offset = shift + stage.base + (inner or 0)
        elif bases:
            offset = shift + bases[-1]
    return fault_of(exc, offset)


def trace_value(pipeline: CodecPipeline, data: bytes, shift: int, title: str) -> Tuple[Section, Optional[Fault]]:
    """One stored chunk value through its codec stages (``CodecPipeline.trace``), down to
    the decoded shape and first values; ``shift`` places it inside the file it lies in."""
    section = Section(title, shift, len(data))
    stages: List[Stage] = []
    try:
        decoded = pipeline.trace(data, stages)
    except (MolrecError, *_DECODE_ERRORS) as exc:
        section.sections = [_stage_section(s, shift) for s in stages]
        return section, _stage_fault(exc, stages, shift)
    section.sections = [_stage_section(s, shift) for s in stages]
    section.sections.append(Section("decoded", note="the chunk as readers see it (fill value past the array's edge)",
                                    parts=[Part("shape", list(decoded.shape), pipeline.spec.dtype.name),
                                           Part("first values", first_values(decoded), "C order")]))
    return section, None


def _entries_parts(index: np.ndarray, codec: ShardingCodec, start: int) -> List[Part]:
    """Index entries with their offsets; runs of empty entries are folded into one part."""
    coords = list(itertools.product(*(range(n) for n in codec.chunks_per_shard)))
    parts: List[Part] = []
    i = 0
    while i < len(coords):
        offset, nbytes = (int(v) for v in index[i])
        if offset == int(EMPTY):
            j = i
            while j + 1 < len(coords) and int(index[j + 1, 0]) == int(EMPTY):
                j += 1
            label = f"entry {list(coords[i])}" if j == i else f"entries {list(coords[i])}..{list(coords[j])}"
            parts.append(Part(label, "empty", "(2^64-1, 2^64-1): the inner chunk is all fill value, not stored"
                              + (f" ({j - i + 1} entries)" if j > i else ""), start + 16 * i, 16 * (j - i + 1),
                              "zarr-v3-subset#7"))
            i = j + 1
            continue
        parts.append(Part(f"entry {list(coords[i])}", {"offset": offset, "nbytes": nbytes},
                          f"inner chunk {list(coords[i])} lies at [{offset}, {offset + nbytes})", start + 16 * i, 16,
                          "zarr-v3-subset#7"))
        i += 1
    return parts


_UNUSED_NOTE = ("no index entry points here: superseded inner chunks (positional writes append, never rewrite), "
                "and the zero bytes with which a durable point ended the shard at a 4096-byte boundary (so that no "
                "later write shares a sector with durable bytes: power cuts without powersafe overwrite, "
                "spec-notes/zarr.md), or anything else a writer left outside every indexed range; readers skip them")


def _gaps(covered: List[Tuple[int, int]], size: int, data: bytes, page_end: Optional[int]) -> List[Section]:
    """The bytes no index entry covers: "unused bytes", and the zeros that give a positional
    shard's index page sectors of its own (``page_end``: where its chunk data may begin)."""
    out: List[Section] = []
    at = 0
    for lo, hi in sorted(covered) + [(size, size)]:
        if lo > at:
            if page_end is not None and at < page_end <= lo and not any(data[at:page_end]):
                out.append(Section("index page padding", at, page_end - at,
                                   "zero bytes up to a 4096-byte boundary: the index page owns its sectors, so "
                                   "rewriting it in place never touches chunk data (spec-notes/zarr.md)"))
                at = page_end
            if lo > at:
                out.append(Section("unused bytes", at, lo - at, _UNUSED_NOTE if lo < size else
                                   "past the last indexed chunk: " + _UNUSED_NOTE[len("no index entry points here: "):]))
        at = max(at, hi)
    return out


def explain_shard(codec: ShardingCodec, data: bytes, title: str = "shard") -> Tuple[List[Section], Optional[Fault]]:
    """A shard: its index (location, entries, checksum), unused gaps, then each
    stored inner chunk through its codecs (zarr-v3-subset#7)."""
    size = len(data)
    sections: List[Section] = []
    if size < codec.index_size:
        return sections, Fault(f"shard of {size} bytes is shorter than its {codec.index_size}-byte index", 0,
                               "zarr-v3-subset#7", "CorruptDataError")
    start = codec.index_start(size)
    index_section = Section("index", start, codec.index_size,
                            f"index_location {codec.index_location}: {codec.n_chunks} (offset, nbytes) u64 pairs in "
                            f"C order of the {list(codec.chunks_per_shard)} inner chunks, then its index codecs")
    sections.append(index_section)
    raw = data[start:start + codec.index_size]
    stages: List[Stage] = []
    try:
        index = codec.index_pipeline.trace(raw, stages).reshape(codec.n_chunks, 2)
    except (MolrecError, *_DECODE_ERRORS) as exc:
        index_section.sections = [_stage_section(s, start) for s in stages]
        return sections, _stage_fault(exc, stages, start)
    index_section.sections = [_stage_section(s, start) for s in stages]
    index_section.parts = _entries_parts(index, codec, start)
    try:
        codec.check_index(index, size)
    except MolrecError as exc:
        return sections, fault_of(exc)
    present = [(i, int(o), int(n)) for i, (o, n) in enumerate(index.tolist()) if o != int(EMPTY)]
    covered = [(start, start + codec.index_size)] + [(o, o + n) for _, o, n in present]
    sections.extend(_gaps(covered, size, data, codec.first_chunk_offset() if codec.index_location == "start" else None))
    coords = list(itertools.product(*(range(n) for n in codec.chunks_per_shard)))
    for n, (i, offset, nbytes) in enumerate(present):
        if n == _DETAILED_INNER_CHUNKS:
            sections.append(Section(f"{len(present) - n} more inner chunks", note="not traced (explain shows the "
                                    f"first {_DETAILED_INNER_CHUNKS})"))
            break
        section, fault = trace_value(codec.inner, data[offset:offset + nbytes], offset,
                                     f"inner chunk {list(coords[i])}")
        sections.append(section)
        if fault is not None:
            return _by_offset(sections), fault
    return _by_offset(sections), None


def _by_offset(sections: List[Section]) -> List[Section]:
    return sorted(sections, key=lambda s: -1 if s.offset is None else s.offset)


def explain_chunk(metadata: ArrayMetadata, data: Optional[bytes], key: str) -> Tuple[List[Section], Optional[Fault]]:
    """The stored value ``key`` of an array with ``metadata`` (None: not stored — it reads as
    the fill value): a shard's anatomy when the array is sharded, else the chunk's codec
    stages."""
    pipeline = CodecPipeline(metadata.codecs, ChunkSpec(metadata.chunk_shape, metadata.dtype, metadata.fill_value))
    if data is None:
        return [Section("not stored", note=f"no value at {key}: every element reads as the fill value "
                        f"{_json_value(metadata.fill_value)!r} (zarr-v3-subset#6)")], None
    if pipeline.sharding is not None:
        return explain_shard(pipeline.sharding, data)
    section, fault = trace_value(pipeline, data, 0, "chunk")
    return [section], fault


# -- zip archives ------------------------------------------------------------------------------
def _record_section(record: ZipRecord) -> Section:
    title = record.kind if record.name is None else f"{record.kind}: {record.name}"
    return Section(title, record.offset, record.length, parts=list(record.parts))


def explain_zip(path: str) -> Tuple[List[Section], Optional[Fault]]:
    """A zip archive as ``ZipStore`` reads it: the end records (ZIP64 when present), every
    central directory header with its fields and offsets, then each entry's local header
    and (up to 64 MiB) its CRC-32 recomputed."""
    layout: List[ZipRecord] = []
    try:
        store = ZipStore(path, layout=layout)
    except MolrecError as exc:
        return _zip_sections(layout, []), fault_of(exc)
    locals_: List[ZipRecord] = []
    fault = None
    try:
        with store:
            for key in store.list():
                store.local_record(key, locals_, verify_up_to=_VERIFY_ENTRY_BYTES)
    except MolrecError as exc:
        fault = fault_of(exc)
    return _zip_sections(layout, locals_), fault


def _zip_sections(layout: Sequence[ZipRecord], locals_: Sequence[ZipRecord]) -> List[Section]:
    central = Section("central directory", note=f"{sum(r.kind == 'central directory header' for r in layout)} "
                      "record(s); entry name = store key, the last record of a name wins (zarr-v3-subset#9.2)")
    ends = []
    for record in layout:
        if record.kind == "central directory header":
            central.sections.append(_record_section(record))
        else:
            ends.append(_record_section(record))
    if central.sections:
        central.offset = central.sections[0].offset
        last = central.sections[-1]
        if last.offset is not None and last.length is not None and central.offset is not None:
            central.length = last.offset + last.length - central.offset
    first = min((r.offset for r in locals_), default=None)
    entries = Section("entries", first, note="local header, then the STORED bytes (data offsets come from the local "
                      "header, whose extra field may differ from the central one)",
                      sections=[_record_section(r) for r in sorted(locals_, key=lambda r: r.offset)])
    out = ends + ([central] if central.sections else []) + ([entries] if locals_ else [])
    return _by_offset(out)


def coords_of(text: str, metadata: ArrayMetadata) -> Tuple[int, ...]:
    """Grid coordinates from ``0``, ``0.1`` or ``0,1`` or a chunk key (``c/0/1``, ``c.0.1``,
    ``0.1`` for v2), one per dimension (they may lie past the published shape: an
    uncommitted tail is stored there)."""
    from molrec_raw.errors import InvalidValueError

    encoding = metadata.chunk_key_encoding
    parts = text.strip().replace(",", ".").replace("/", ".").split(".") if text.strip() else []
    if parts and parts[0] == "c":
        parts = parts[1:]
    if not metadata.shape and parts in ([], ["0"]) and encoding.name == "v2":
        parts = []
    if not all(p.isdigit() for p in parts) or len(parts) != len(metadata.shape):
        raise InvalidValueError(f"chunk {text!r}: give {len(metadata.shape)} grid coordinate(s) like "
                                f"{'.'.join(['0'] * len(metadata.shape)) or 'c'} or a chunk key like "
                                f"{encoding.encode((0,) * len(metadata.shape))}")
    return tuple(int(p) for p in parts)


def locate_rows(array: Any, lo: int, hi: int) -> Tuple[List[Part], Optional[Fault]]:
    """Where rows ``[lo, hi)`` of an :class:`~molrec_raw.zarr.Array`'s leading axis are
    stored: each stored value (chunk or shard) they touch, by key, and — in a shard — each
    inner chunk's coordinates and byte range, read from the shard's index with the reader's
    index parser (a ranged read of the index only)."""
    metadata = array.metadata
    parts: List[Part] = []
    if hi <= lo or not metadata.shape:
        return parts, None
    outer = metadata.chunk_shape[0]
    sharding = array.pipeline.sharding
    rest = [range(g) for g in metadata.grid_shape[1:]]
    for k in range(lo // outer, (hi - 1) // outer + 1):
        a, b = max(lo, k * outer), min(hi, (k + 1) * outer)
        for coords in itertools.product([k], *rest):
            key = array.chunk_key(coords)
            size = array.store.size(key)
            if sharding is None:
                parts.append(Part(f"rows {a}:{b}", {"key": key, "bytes": size},
                                  f"chunk {list(coords)}, rows {a - k * outer}:{b - k * outer} of it"
                                  + ("" if size is not None else " — not stored: fill value")))
                continue
            if size is None:
                parts.append(Part(f"rows {a}:{b}", {"key": key}, f"shard {list(coords)} is not stored: fill value"))
                continue
            start = sharding.index_start(size)
            try:
                raw = array.store.get_range(key, start, sharding.index_size)
                index = sharding.index_pipeline.decode(raw).reshape(sharding.n_chunks, 2)
                sharding.check_index(index, size)
            except ChecksumMismatchError as exc:  # the index's crc32c: its stored value ends the index
                return parts, fault_of(exc.add_context(key=key), start + sharding.index_size - 4)
            except MolrecError as exc:
                return parts, fault_of(exc.add_context(key=key))
            inner = sharding.chunk_shape[0]
            inner_rest = [range(n) for n in sharding.chunks_per_shard[1:]]
            for c in range((a - k * outer) // inner, (b - 1 - k * outer) // inner + 1):
                for inner_coords in itertools.product([c], *inner_rest):
                    flat = int(np.ravel_multi_index(inner_coords, sharding.chunks_per_shard))
                    offset, nbytes = (int(v) for v in index[flat])
                    r0, r1 = max(a, k * outer + c * inner), min(b, k * outer + (c + 1) * inner)
                    where = {"key": key, "inner chunk": list(inner_coords)}
                    if offset == int(EMPTY):
                        parts.append(Part(f"rows {r0}:{r1}", where, "inner chunk empty in the index: fill value"))
                    else:
                        where["bytes"] = [offset, nbytes]
                        parts.append(Part(f"rows {r0}:{r1}", where, f"shard {list(coords)}, inner chunk "
                                          f"{list(inner_coords)}: {nbytes} bytes at {offset} (from the shard index)"))
    return parts, None
