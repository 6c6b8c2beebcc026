"""Looking into a ``*.mrec.lmdb`` file: what ``molrec-raw inspect``, ``validate`` and
``explain`` print for a collection.

- :func:`describe`: the ``meta`` value, the keys by kind (``lmdb#L2``), the index columns,
  the declaration's blocks, the file's size;
- :func:`validate_collection`: every violated rule, record by record — each record's meta,
  system and every trajectory frame resolved and joined with its system, as a reader does —
  plus keys outside the scheme or past the counts (a conforming writer leaves none);
- :func:`explain_key`: one value byte by byte (``MRF1`` frame bytes: the prefix, the header,
  the padding and every buffer at its payload and absolute offset; JSON values field by
  field), ending at the first thing a reader refuses.

Nothing is written; every read goes through the readers' own parsers.
"""
from __future__ import annotations

import os
import re
import struct
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np
import orjson

from molrec_raw.collection import binding
from molrec_raw.collection.binding import FF_KEY, FRAME, INDEX_KEY, META_KEY, RECORD_META, SYSTEM, key, key_name
from molrec_raw.collection.frame_bytes import ALIGN, MAGIC, decode_frame, header_of
from molrec_raw.collection.reader import CollectionReader
from molrec_raw.collection.records import _merged
from molrec_raw.errors import InvalidValueError, MolrecError
from molrec_raw.record.columns import COLUMN_NUMPY
from molrec_raw.record.model import Frame
from molrec_raw.record.violations import Violation
from molrec_raw.zarr.explain import Explanation, Section, fault_of, first_values
from molrec_raw.zarr.parts import Part

__all__ = ["describe", "describe_lines", "validate_collection", "explain_key", "raw_keys", "parse_key",
           "is_collection_path", "joined"]

_KEY_TEXT = re.compile(r"([rsf])(?:/|‖|:)?(\d+)")
_PREFIX = struct.Struct("<4sI")


def is_collection_path(path: Any) -> bool:
    """Whether ``path`` names a collection file (the ``.mrec.lmdb`` suffix, lmdb#L1)."""
    return isinstance(path, (str, os.PathLike)) and os.fspath(path).endswith(binding.SUFFIX)


@binding.lmdb_errors(os.fspath)  # py-lmdb's own errors as MolrecErrors naming the file (lmdb#L1)
def raw_keys(path: Any) -> Iterator[Tuple[bytes, int]]:
    """Every key of the file and the size of its value, in key order (one read
    transaction; opens the LMDB environment only, so a file without ``meta`` is listed too)."""
    handle = binding.acquire(Path(os.fspath(path)))
    try:
        env = handle.env
        with env.begin(buffers=True) as txn:
            for k, v in txn.cursor():
                yield bytes(k), len(v)
    finally:
        handle.release()


@binding.lmdb_errors(os.fspath)
def _get(path: Any, k: bytes) -> Optional[bytes]:
    handle = binding.acquire(Path(os.fspath(path)))
    try:
        with handle.env.begin() as txn:
            value = txn.get(k)
            return None if value is None else bytes(value)
    finally:
        handle.release()


def parse_key(text: str) -> bytes:
    """A key as a user writes it: ``meta``, ``index``, ``ff``, ``r/3`` (also ``r‖3``, ``r3``),
    ``s/3``, ``f/12`` (a global frame ordinal)."""
    text = text.strip()
    if text in ("meta", "index", "ff"):
        return text.encode()
    match = _KEY_TEXT.fullmatch(text)
    if match is None:
        raise InvalidValueError(f"{text!r} is not a key of a collection: meta, index, ff, r/N (record N's meta), "
                                "s/N (its system) or f/J (global frame ordinal J)", rule="lmdb#L2")
    return key(match[1].encode(), int(match[2]))


# -- inspect -------------------------------------------------------------------------------------
def describe(path: Any) -> Dict[str, Any]:
    """The collection at a glance: its ``meta`` value, keys by kind (count and bytes), the
    index's columns, the declaration's blocks and per-step keys, the file's size."""
    kinds: Dict[str, List[int]] = {}
    for k, size in raw_keys(path):
        kind = k[:1].decode("ascii", "replace") + "‖u64" if len(k) == 9 and k[:1] in (RECORD_META, SYSTEM, FRAME) \
            else key_name(k)
        entry = kinds.setdefault(kind, [0, 0])
        entry[0] += 1
        entry[1] += size
    with CollectionReader(path) as c:
        schema = c.schema
        index = c.index
        stored = orjson.loads(_get(path, META_KEY) or b"{}")
        doc: Dict[str, Any] = {
            "path": os.fspath(path), "file_bytes": os.path.getsize(path), "layout": binding.LAYOUT,
            "layout_version": stored.get("layout_version"), "collection": c.meta, "n_records": len(c),
            "n_frames": c.n_frames,
            "keys": {kind: {"count": n, "bytes": b} for kind, (n, b) in kinds.items()},
            "index_columns": {name: str(values.dtype) + (str(list(values.shape[1:])) if values.ndim > 1 else "")
                              for name, values in index.columns.items()},
            "blocks": {name: sorted(schema.columns(name)) for name in schema.block_names()},
            "per_step_meta": dict(schema.meta_keys()),
            "forcefield": None if c.forcefield is None else c.forcefield.document.get("name", "(unnamed)"),
        }
        has = c.binding_index()
    doc["records_with_system"] = kinds.get("s‖u64", [0])[0]
    doc["records_with_trajectory"] = int(np.count_nonzero(has["has_trajectory"]))
    return doc


def describe_lines(doc: Dict[str, Any]) -> List[str]:
    """:func:`describe`'s document as the lines ``molrec-raw inspect`` prints."""
    coll = doc["collection"]
    layout = doc["layout"] if doc["layout_version"] is None else f"{doc['layout']} v{doc['layout_version']}"
    lines = [f"{doc['path']}: collection ({layout}, molrec_version "
             f"{coll.get('molrec_version', '-')}), {doc['file_bytes']} bytes",
             f"  records: {doc['n_records']} ({doc['records_with_system']} with a system, "
             f"{doc['records_with_trajectory']} with a trajectory); frames: {doc['n_frames']}",
             "  units: " + (", ".join(f"{q}={u}" for q, u in coll.get("units", {}).items()) or "-")]
    others = [k for k in coll if k not in ("molrec_version", "units")]
    if others:
        lines.append("  document keys: " + ", ".join(others))
    lines.append("  declaration: " + ("; ".join(f"{b} [{', '.join(cols)}]" for b, cols in doc["blocks"].items())
                                      or "no trajectory blocks"))
    if doc["per_step_meta"]:
        lines.append("  per-step meta: " + ", ".join(f"{k} ({t})" for k, t in doc["per_step_meta"].items()))
    lines.append("  index columns: " + (", ".join(f"{n} {t}" for n, t in doc["index_columns"].items()) or "-"))
    if doc["forcefield"] is not None:
        lines.append(f"  force field: {doc['forcefield']}")
    lines.append("  keys:")
    for kind, entry in doc["keys"].items():
        lines.append(f"    {kind:10} {entry['count']:>9} value(s)  {entry['bytes']:>12} bytes")
    return lines


def joined(system: Optional[Frame], frame: Frame, where: str, r: int) -> Frame:
    """Record ``r``'s trajectory frame joined with its system as ``rec.frame(k)`` joins them:
    blocks of one name as one (``collection#C9`` rows, ``#C10`` no column in both)."""
    return _merged(system, frame, where, r)


# -- validate ------------------------------------------------------------------------------------
def _violation(exc: MolrecError, node: str) -> Violation:
    return Violation(exc.rule or type(exc).__name__, exc.node or node, exc.message)


def _stray_keys(path: Any, n_records: int, n_frames: int) -> List[Violation]:
    """Keys a conforming writer leaves none of: outside the key scheme, or past the counts."""
    out: List[Violation] = []
    for k, _ in raw_keys(path):
        if k in (META_KEY, INDEX_KEY, FF_KEY):
            continue
        if len(k) == 9 and k[:1] in (RECORD_META, SYSTEM, FRAME):
            n = int.from_bytes(k[1:], "big")
            bound = n_frames if k[:1] == FRAME else n_records
            if n < bound:
                continue
            out.append(Violation("lmdb#L2", f"/{key_name(k)}", f"key {key_name(k)} lies past the collection's "
                                 f"{'n_frames' if k[:1] == FRAME else 'n_records'} ({bound}): not part of it"))
        else:
            out.append(Violation("lmdb#L2", f"/{key_name(k)}", f"key {key_name(k)!r} is not in the binding's key "
                                 "scheme (meta, index, ff, r/s/f + u64 big-endian)"))
    return out


def validate_collection(path: Any, *, progress: Optional[Callable[[int, int], None]] = None) -> List[Violation]:
    """Every violated rule of the collection at ``path``: what opening it refuses (then
    nothing further can be read), else each record's first refusal (its meta, its system,
    every trajectory frame carried forward and joined with the system), and stray keys.
    ``progress(done, total)`` follows the records.  A file that is no LMDB environment, or one
    cut short (lmdb#L18), raises; a damaged page (lmdb#L19) is a violation."""
    out: List[Violation] = []
    try:
        c = CollectionReader(path)
    except MolrecError as exc:
        if exc.rule in ("lmdb#L1", "lmdb#L18"):  # not there, not an LMDB file, cut short: nothing to validate
            raise
        return [_violation(exc, "/")]
    with c:
        total = len(c)
        for r in range(total):
            try:
                rec = c[r]
                rec.meta
                system = rec.system
                trajectory = rec.trajectory
                if trajectory is not None:
                    trajectory.step
                    trajectory.time
                    for frame in trajectory:
                        joined(system, frame, str(path), r)
            except MolrecError as exc:
                out.append(_violation(exc, f"/records/{r}"))
            if progress is not None:
                progress(r + 1, total)
        out.extend(_stray_keys(path, total, c.n_frames))
    return out


# -- explain -------------------------------------------------------------------------------------
def explain_key(path: Any, text: Optional[str] = None) -> Explanation:
    """Explain one key's value (``text`` as :func:`parse_key` reads it), or with no key the
    file's keys in order.  Stops at the first thing a reader refuses."""
    label = os.fspath(path)
    if text is None:
        return _explain_keys(label)
    k = parse_key(text)
    value = _get(path, k)
    name = key_name(k)
    if value is None:
        raise InvalidValueError(f"the collection has no key {name} ('molrec-raw explain {label}' lists its keys)",
                                store=label, key=name, rule="lmdb#L2")
    if k == META_KEY or (len(k) == 9 and k[:1] == RECORD_META):
        return _explain_json(label, k, value)
    return _explain_frame_bytes(label, k, value)


def _explain_keys(label: str) -> Explanation:
    meanings = {META_KEY: ("JSON", "layout, the collection document, sequence_schema, counts; written last"),
                INDEX_KEY: ("frame bytes", "one block 'records', one row per record"),
                FF_KEY: ("frame bytes", "the collection's force field")}
    prefixed = {RECORD_META: ("JSON", "record {n}'s meta document"), SYSTEM: ("frame bytes", "record {n}'s system"),
                FRAME: ("frame bytes", "the trajectory update at global frame ordinal {n}")}
    section = Section("keys in key order (byte order = numeric order: big-endian u64)")
    seen = set()
    for k, size in raw_keys(label):
        if len(k) == 9 and k[:1] in prefixed:
            kind, meaning = prefixed[k[:1]]
            meaning = meaning.format(n=int.from_bytes(k[1:], "big"))
        else:
            kind, meaning = meanings.get(k, ("?", "not a key of the binding"))
        section.parts.append(Part(key_name(k), f"{size} bytes", f"{kind}: {meaning}", None, None, "lmdb#L2"))
        seen.add(k)
    fault = None
    if META_KEY not in seen:
        fault = fault_of(MolrecError("no 'meta' key: not a collection (its writer writes meta last)",
                                     rule="lmdb#L3"))
    return Explanation(label, "(keys)", "LMDB collection", os.path.getsize(label), [section], fault)


def _explain_json(label: str, k: bytes, value: bytes) -> Explanation:
    name = key_name(k)
    report = Explanation(label, name, "JSON value", len(value))
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        report.fault = fault_of(MolrecError(f"not UTF-8 JSON: {exc}", rule="lmdb#L3" if k == META_KEY else "lmdb#L2"))
        return report
    section = Section(f"the {name} document", 0, len(value))
    rules = {"layout": "lmdb#L4", "layout_version": "lmdb#L4", "collection": "collection#C1",
             "sequence_schema": "collection#C2", "n_records": "lmdb#L6", "n_frames": "lmdb#L6"}
    if isinstance(doc, dict):
        for field, v in doc.items():
            shown = v if not isinstance(v, (dict, list)) else orjson.dumps(v).decode()[:200]
            section.parts.append(Part(field, shown, "", None, None, rules.get(field) if k == META_KEY else None))
    report.sections.append(section)
    try:
        if k == META_KEY:
            binding.read_meta_value(value, label)
            CollectionReader(label).close()  # the collection document, the declaration, the index
        elif not isinstance(doc, dict):
            raise MolrecError(f"a record's meta is a JSON object, not {type(doc).__name__}",
                              rule="frame-and-types#11.1")
    except MolrecError as exc:
        report.fault = fault_of(exc)
    return report


def _explain_frame_bytes(label: str, k: bytes, value: bytes) -> Explanation:
    name = key_name(k)
    report = Explanation(label, name, "frame bytes (MRF1)", len(value))
    end = len(value)
    if end >= _PREFIX.size:
        magic, length = _PREFIX.unpack_from(value, 0)
        report.sections.append(Section("prefix", 0, _PREFIX.size, parts=[
            Part("magic", bytes(magic).decode("latin-1"), f"must be {MAGIC.decode()}", 0, 4, "lmdb#L9"),
            Part("header_length", length, "u32 little-endian: bytes of the JSON header", 4, 4, "lmdb#L9")]))
    try:
        header, payload = header_of(value, name)
    except MolrecError as exc:
        report.fault = fault_of(exc)
        return report
    length = _PREFIX.unpack_from(value, 0)[1]
    head = Section("header (UTF-8 JSON)", _PREFIX.size, length)
    for field in ("meta", "meta_types", "step", "time", "box"):
        if field in header:
            v = header[field]
            head.parts.append(Part(field, v if not isinstance(v, (dict, list)) else orjson.dumps(v).decode()[:200],
                                   "", None, None, "lmdb#L15" if field.startswith("meta") else "lmdb#L16"))
    buffers: List[Tuple[int, int, str]] = []
    blocks = header.get("blocks")
    for block_name, entry in (blocks.items() if isinstance(blocks, dict) else ()):
        sub = Section(f"block {block_name}")
        if not isinstance(entry, dict):
            head.sections.append(sub)
            continue
        for field in ("count", "structural_shape", "targets", "attributes"):
            if field in entry:
                sub.parts.append(Part(field, entry[field], "", None, None, "lmdb#L17"))
        columns = entry.get("columns")
        for column, spec in (columns.items() if isinstance(columns, dict) else ()):
            sub.sections.append(_column_section(block_name, column, spec, value, payload, buffers))
        head.sections.append(sub)
    report.sections.append(head)
    pad = payload - _PREFIX.size - length
    report.sections.append(Section("padding", _PREFIX.size + length, pad, note="zero bytes up to a multiple of 8"))
    body = Section("payload", payload, end - payload, note="offsets of the header are relative to its start")
    cursor = payload
    for start, size, what in sorted(buffers):
        if start > cursor:
            body.parts.append(Part("(gap)", f"{start - cursor} bytes", "alignment padding", cursor, start - cursor))
        body.parts.append(Part(what, f"{size} bytes", "", start, size, "lmdb#L10"))
        cursor = max(cursor, start + size)
    if cursor < end:
        body.parts.append(Part("(tail)", f"{end - cursor} bytes", "after the last buffer", cursor, end - cursor))
    report.sections.append(body)
    try:
        decode_frame(value, name)
        if k == INDEX_KEY or k == FF_KEY or k[:1] in (SYSTEM, FRAME):
            _check_in_collection(label, k)
    except MolrecError as exc:
        report.fault = fault_of(exc)
    return report


def _column_section(block: str, column: str, spec: Any, value: bytes, payload: int,
                    buffers: List[Tuple[int, int, str]]) -> Section:
    sub = Section(f"column {column}")
    if not isinstance(spec, dict):
        sub.parts.append(Part("(entry)", spec, "not a JSON object", None, None, "lmdb#L17"))
        return sub
    dtype, shape, offset = spec.get("dtype"), spec.get("shape"), spec.get("offset")
    sub.parts.append(Part("dtype", dtype, "", None, None, "lmdb#L11"))
    sub.parts.append(Part("shape", shape, "", None, None, "lmdb#L17"))
    numpy = COLUMN_NUMPY.get(dtype) if isinstance(dtype, str) else None
    count = int(np.prod(shape)) if isinstance(shape, list) and all(type(s) is int and s >= 0 for s in shape) else None
    if dtype == "string":
        values = spec.get("values")
        sub.parts.append(Part("values", values[:8] if isinstance(values, list) else values,
                              "the strings, in the header (first 8)", None, None, "lmdb#L12"))
    elif type(offset) is int:
        nbytes = None if numpy is None or count is None else count * np.dtype(numpy).itemsize
        sub.parts.append(Part("offset", offset, f"payload offset (absolute byte {payload + offset}); "
                              f"{nbytes if nbytes is not None else '?'} bytes", payload + offset, nbytes, "lmdb#L10"))
        if nbytes is not None and numpy is not None and count is not None:
            buffers.append((payload + offset, nbytes, f"{block}/{column}"))
            if offset % ALIGN == 0 and payload + offset + nbytes <= len(value):
                array = np.frombuffer(value, dtype=numpy, count=count, offset=payload + offset)
                sub.parts.append(Part("first values", first_values(array), "", None, None))
    for field, rule in (("validity", "lmdb#L13"), ("precision", "lmdb#L14")):
        if field in spec:
            v = spec[field]
            sub.parts.append(Part(field, v, "payload offset of shape[0] bytes 0/1" if field == "validity" else "",
                                  payload + v if field == "validity" and type(v) is int else None,
                                  shape[0] if field == "validity" and count is not None and shape else None, rule))
            if field == "validity" and type(v) is int and isinstance(shape, list) and shape and type(shape[0]) is int:
                buffers.append((payload + v, shape[0], f"{block}/{column} validity"))
    return sub


def _check_in_collection(label: str, k: bytes) -> None:
    """The reader's checks of one value in its place (the declaration, the record's system)."""
    with CollectionReader(label) as c:  # opening checks index and ff
        if k[:1] == SYSTEM and len(k) == 9:
            r = int.from_bytes(k[1:], "big")
            if r < len(c):
                c[r].system
        elif k[:1] == FRAME and len(k) == 9:
            j = int.from_bytes(k[1:], "big")
            first = c.binding_index()["first_frame"].astype(np.int64)
            r = int(np.searchsorted(first, j, side="right")) - 1
            if 0 <= r < len(c) and c[r].n_frames and j - int(first[r]) < c[r].n_frames:
                trajectory = c[r].trajectory
                assert trajectory is not None
                trajectory[j - int(first[r])]
