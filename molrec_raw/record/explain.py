"""``molrec-raw explain``: what every byte of a record means (the MolRec half).

:func:`explain` takes a record (``*.mrec``, ``*.mrec.zip``, a URL), optionally a node or
store key inside it, a chunk of an array, or a trajectory frame, and returns an
:class:`~molrec_raw.zarr.explain.Explanation`:

- a ``zarr.json``: every field with its value, meaning and Zarr rule, and every attribute
  with what MolRec makes of it (rule ids as the readers cite them);
- a chunk or shard: its anatomy (``molrec_raw.zarr.explain``);
- the zip container of a ``*.mrec.zip``;
- ``frame=I``: how frame I is resolved — the commit marker, step and time, each block's
  update (elision arithmetic or the ``step_index``/``offset`` lookups), the rows, the inner
  chunks of the shards holding them, the cell and the per-step meta — then the frame;
- molrec_raw's own extras: the commit manifest ``molrec_raw_commit`` and the transient
  checkpoint file (other readers ignore both), and a metrics WAL line by line.

Hostile or corrupt input is explained up to the first fault, named with its byte offset.
The record is opened read-only; nothing is ever written.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from molrec_raw.errors import (CorruptDataError, InvalidMetadataError, InvalidValueError, MolrecError,
                               NodeNotFoundError, UnsupportedFeatureError)
from molrec_raw.record import typed_json
from molrec_raw.record.doors import RecordSource, record_source
from molrec_raw.record.metrics.dense import WAL_NAME
from molrec_raw.record.metrics.wal import parse_wal
from molrec_raw.record.trajectory import MrecReader
from molrec_raw.record.trajectory.recovery import CHECKPOINT, MANIFEST
from molrec_raw.zarr import Array, Group, Store
from molrec_raw.zarr.codecs.crc32c_codec import crc32c_of
from molrec_raw.zarr.codecs.zstd_codec import ZstdCodec
from molrec_raw.zarr.explain import (Explanation, Fault, Section, coords_of, explain_chunk, explain_metadata,
                                     explain_zip, fault_of, first_values, locate_rows)
from molrec_raw.zarr.group import as_store
from molrec_raw.zarr.metadata import ArrayMetadata, GroupMetadata, parse_metadata
from molrec_raw.zarr.parts import Part
from molrec_raw.zarr.snapshot import Snapshot

__all__ = ["explain"]

_FT = "frame-and-types"
_DOCS = "documents"
_FRAME_SHAPED = ("frame", "system", "forcefield")
_WAL_LINES_SHOWN = 40


# -- attributes: what MolRec makes of them ------------------------------------------------------
def _doc_key(meanings: Dict[str, Tuple[str, str]]) -> Callable[[Dict[str, Any]], List[Part]]:
    def explain(attrs: Dict[str, Any]) -> List[Part]:
        parts = []
        for key, value in attrs.items():
            meaning, rule = meanings.get(key, ("a producer key: preserved verbatim", "root-layout#5"))
            parts.append(Part(key, value, meaning, rule=rule))
        return parts
    return explain


_META = {
    "molrec_version": ("the record generation: a JSON integer 1..2 (absent: a current store, as the newest "
                       "texts and molrs write it); "
                       "writers stamp 2", "README#decision-1"),
    "creator": ("who wrote the record: an object with a 'name'", f"{_FT}#14.21"),
    "author": ("an object with a 'name'", f"{_FT}#14.21"),
    "created_at": ("RFC 3339 date-time with an explicit offset", f"{_FT}#14.21"),
    "modules": ("declared modules (name -> {spec?})", f"{_FT}#14.21"),
}
_STATUS = {
    "state": ("required: where execution is (pending, running, succeeded, failed, ...)", f"{_DOCS}#9.5"),
    "stage": ("execution phase", f"{_DOCS}#2"),
    "epoch": ("a non-negative integer counter", f"{_DOCS}#9.6"),
    "global_step": ("a non-negative integer counter", f"{_DOCS}#9.6"),
    "progress": ("an object of named numbers", f"{_DOCS}#9.6"),
    "message": ("human text", f"{_DOCS}#2"),
    "started_at": ("RFC 3339 with an offset", f"{_DOCS}#9.7"),
    "updated_at": ("RFC 3339 with an offset", f"{_DOCS}#9.7"),
    "finished_at": ("RFC 3339 with an offset", f"{_DOCS}#9.7"),
    "error": ("an object with a string 'message'", f"{_DOCS}#9.8"),
}
_METHOD = {
    "type": ("required: classical, ml, electronic_structure, workflow or a declared module", f"{_DOCS}#9.9"),
    "description": ("required text", f"{_DOCS}#9.9"),
    "engine": ("required: an object with a string 'name'", f"{_DOCS}#9.9"),
    "order": ("workflow: stage ids in order", f"{_DOCS}#9.9"),
    "stages": ("workflow: stage id -> a method document", f"{_DOCS}#9.9"),
}
_BLOCK = {
    "count": ("required: the block's row count, a non-negative JSON integer; every column has this many rows",
              f"{_FT}#14.4"),
    "structural_shape": ("a volumetric block's shape; its product equals count", f"{_FT}#14.7"),
    "targets": ("row references: column -> '<block>' or '/<section>/<block>' (never /trajectory/)", f"{_FT}#14.13"),
}
_TRAJECTORY = {
    "sequence_schema": ("the pinned declaration: blocks, columns (dtype, trailing, nullable, precision, "
                        "targets), per-step meta keys with fills; fixed for the life of the trajectory", "trajectory#4"),
    "nstep": ("the commit marker: frames committed; written last in every commit; arrays longer than this hold "
              "an uncommitted tail", "trajectory#R3"),
    "step_progression": ("step[i] = start + i*stride (exact integers), while the steps are arithmetic",
                         "trajectory#3.1"),
    "time_progression": ("time[i] = start + float(i)*stride in binary64, while bit-exact", "trajectory#3.1"),
    MANIFEST: ("molrec_raw extra, ignored by other readers: the commit manifest — every group and array (with "
               "its committed rows) this commit relies on, and the end of the index of each shard landed in "
               "since the last durable point (index_ends), so a reader tells a marker that persisted without "
               "its data after a power cut (spec-notes/trajectory.md, power cuts); it applies only while its "
               "nstep is the marker's", "trajectory#10"),
}
_TRAJ_BLOCK = {
    "structural_shape": ("every update has prod(shape) rows", "trajectory#4"),
    "uniform_rows": ("elision marker: a regular block, every frame an update of this many rows — no "
                     "step_index/offset arrays; update j is rows [j*R, (j+1)*R)", "trajectory#R9"),
    "dense_updates": ("elision marker: true while the block changed at every frame", "trajectory#R9"),
}
_BOX = {
    "cell_defined": ("present only when false: an undefined cell (identity vectors, no periodic direction); "
                     "must be a JSON boolean", f"{_FT}#14.17"),
    "vectors": ("fixed cell (attribute form): 3x3, lattice vectors are the columns", "trajectory#R15"),
    "origin": ("fixed cell: 3 values (absent: 0, 0, 0)", "trajectory#R15"),
    "boundary": ("fixed cell: 3 periodic flags (absent: all true)", "trajectory#R15"),
}
_COLUMN = {
    "precision": ("declared absolute precision of an f64 column: values are stored on the 2^k grid "
                  "below it and returned exactly as stored", f"{_FT}#14.20"),
    "meta_dtype": ("the per-step meta tag (one of 16) this array holds", "trajectory#R10"),
}
_OBSERVABLE = {
    "kind": ("required: what the observable is (unknown kinds are preserved)", f"{_DOCS}#9.20"),
    "description": ("required text", f"{_DOCS}#9.20"),
    "time_dependent": ("required boolean; true needs a leading time axis", f"{_DOCS}#9.20"),
}
_METRICS = {
    "wal": ("the watermark {lines, bytes}: the dense series hold exactly that prefix of metrics.jsonl; "
            "later lines are a tail read on top", f"{_DOCS}#4.4"),
    "series": ("series key -> {type, count, latest_step, latest_timestamp}", f"{_DOCS}#4.4"),
}
_FORCEFIELD = {
    "name": ("required", f"{_DOCS}#9.23"),
    "units": ("required: a preset and/or quantities", f"{_DOCS}#9.23"),
    "styles": ("one entry per (category, style); each has a table block '<category>.<style %-encoded>'",
               f"{_DOCS}#9.26"),
    "source": ("where the parameters come from (needs 'format')", f"{_DOCS}#9.24"),
    "special_bonds": ("{lj, coul}: three finite numbers each", f"{_DOCS}#9.24"),
}


def _typed_meta(attrs: Dict[str, Any]) -> List[Part]:
    """A frame-shaped group's attributes = its typed meta document (frame-and-types §4)."""
    types = attrs.get(typed_json.META_TYPES_KEY)
    parts: List[Part] = []
    for key, raw in attrs.items():
        if key == typed_json.META_TYPES_KEY:
            parts.append(Part(key, raw, "reserved: the tag of every meta key (not itself a meta key)", rule=f"{_FT}#14.15"))
            continue
        tag = types.get(key) if isinstance(types, dict) else None
        if tag is None:
            try:
                tag = typed_json.infer_tag(raw)
                how = f"untagged: tag inferred as {tag}"
            except MolrecError:
                how = "untagged"
            parts.append(Part(key, raw, f"meta key; {how}", rule=f"{_FT}#14.26"))
        else:
            parts.append(Part(key, raw, f"meta key, tag {tag}: in that tag's typed JSON form", rule=f"{_FT}#14.16"))
    return parts


def _attribute_explainer(path: str) -> Callable[[Dict[str, Any]], List[Part]]:
    """What the attributes of the node at ``path`` (store path, '' = root) mean in a record."""
    parts = path.split("/") if path else []
    head = parts[0] if parts else ""
    if not parts:
        return _doc_key({})
    if len(parts) == 1:
        return {"meta": _doc_key(_META), "status": _doc_key(_STATUS), "method": _doc_key(_METHOD),
                "frame": _typed_meta, "system": _typed_meta, "forcefield": _doc_key(_FORCEFIELD),
                "trajectory": _doc_key(_TRAJECTORY), "metrics": _doc_key(_METRICS)}.get(head, _doc_key({}))
    if head in _FRAME_SHAPED:
        if len(parts) == 2:
            return _doc_key(_BOX if parts[1] == "box" else _BLOCK)
        return _doc_key(_COLUMN)
    if head == "trajectory":
        if len(parts) == 2:
            return _doc_key(_BOX if parts[1] == "box" else _TRAJ_BLOCK if parts[1] != "meta" else {})
        return _doc_key(_COLUMN)
    if head == "observables" and len(parts) == 3 and parts[1] == "meta":
        return _doc_key(_OBSERVABLE)
    return _doc_key({})


def _role(path: str, is_array: bool) -> str:
    """What the node at ``path`` is in a record (for the explanation's first line)."""
    parts = path.split("/") if path else []
    if not parts:
        return "the record root (one Zarr V3 root per record, root-layout)"
    head, depth = parts[0], len(parts)
    if depth == 1:
        return {"meta": "the meta document (group attributes)", "status": "the status document",
                "method": "the method document", "frame": "a frame-shaped section: meta + blocks + box",
                "system": "a frame-shaped section: meta + blocks + box",
                "forcefield": "the force field: document + one table block per style",
                "trajectory": "the trajectory: pinned schema, commit marker, CSR blocks",
                "metrics": "metrics: catalog, dense series, the WAL", "observables": "observables: data + meta"
                }.get(head, "an unknown root section (preserved verbatim, root-layout#5)")
    if head in _FRAME_SHAPED:
        if parts[1] == "box":
            return "the cell" if depth == 2 else f"cell part {parts[-1]}"
        if depth == 2:
            return f"block {parts[1]} of the {head} section"
        if parts[2] == "_validity":
            return f"validity masks of block {parts[1]}" if depth == 3 else f"the mask of column {parts[3]}"
        return f"column {parts[2]} of block {parts[1]}" if is_array else "a sub-group of a block (not a column)"
    if head == "trajectory":
        if parts[1] == "meta":
            return "per-step meta arrays" if depth == 2 else f"per-step meta key {parts[2]}: one value per frame"
        if parts[1] == "box":
            return "the cell's updates" if depth == 2 else f"the cell's {parts[2]} per update"
        if depth == 2:
            return "steps (once no longer a progression)" if parts[1] in ("step", "time") and is_array \
                else f"trajectory block {parts[1]}"
        if parts[2] in ("step_index", "offset"):
            return {"step_index": "frame ordinal of each update (strictly increasing, trajectory#R7)",
                    "offset": "CSR row offsets, n_updates + 1 (starts at 0, non-decreasing, trajectory#R8)"}[parts[2]]
        if parts[2] == "_validity":
            return "validity masks (nullable columns)"
        return f"column {parts[2]}: the rows of every update of block {parts[1]}, concatenated"
    return "a node of the record"


# -- entry point --------------------------------------------------------------------------------
def _open_store(path: RecordSource) -> Store:
    return as_store(record_source(path), "r")  # read-only; a missing path: "no such file or directory"


def _is_zip(path: RecordSource) -> bool:
    if isinstance(path, Store):
        return False
    text = str(os.fspath(path)) if isinstance(path, (str, os.PathLike)) else ""
    return text.lower().endswith(".zip") and "://" not in text and Path(text).is_file()


def explain(path: RecordSource, node: Optional[str] = None, *, chunk: Optional[str] = None,
            frame: Optional[int] = None) -> Explanation:
    """Explain ``node`` (a group or array path, a store key such as ``frame/atoms/x/c/0``
    or ``trajectory/__molrec_checkpoint``; default: the root, or the zip container of a
    ``*.mrec.zip``), one ``chunk`` of an array node (grid coordinates ``0.1`` or a key
    ``c/0/1``), or trajectory ``frame`` I.  Never writes; stops at the first fault."""
    label = str(os.fspath(path)) if isinstance(path, (str, os.PathLike)) else path.describe()
    rel = (node or "").strip("/")
    if node is None and chunk is None and frame is None and _is_zip(path):
        sections, fault = explain_zip(label)
        return Explanation(label, "(container)", "zip archive", os.path.getsize(label), sections, fault)
    try:
        store = _open_store(path)
    except MolrecError as exc:
        if _is_zip(path):  # a hostile archive does not open: its container is what to explain
            sections, fault = explain_zip(label)
            return Explanation(label, "(container)", "zip archive", os.path.getsize(label), sections,
                               fault or fault_of(exc))
        raise
    try:
        if frame is not None:
            return _explain_frame(label, store, frame)
        return _explain_node(label, store, rel, chunk)
    except (CorruptDataError, InvalidMetadataError, UnsupportedFeatureError) as exc:  # reading the value itself
        return Explanation(label, rel or "/", "unreadable value", None, [], fault_of(exc))
    finally:
        if not isinstance(path, Store):
            store.close()


def _explain_node(label: str, store: Store, rel: str, chunk: Optional[str]) -> Explanation:
    if rel.endswith("zarr.json"):
        rel = rel[:-len("zarr.json")].rstrip("/")
        if chunk is not None:
            raise InvalidValueError("--chunk needs an array node, not a zarr.json key")
    meta_key = f"{rel}/zarr.json" if rel else "zarr.json"
    raw = store.get(meta_key)
    if raw is not None and chunk is None:
        report = _explain_metadata(label, rel, meta_key, raw)
        if report.kind == "group metadata":
            files, children = store.list_dir(f"{rel}/" if rel else "")
            report.sections[0].parts.append(Part("members", children, "child directories (nodes have a zarr.json)"))
            others = [f for f in files if f != "zarr.json"]
            if others:
                report.sections[0].parts.append(Part("files", others, "other files beside zarr.json"))
        return report
    if raw is not None:
        return _explain_array_chunk(label, store, rel, raw, chunk or "")
    if chunk is not None:
        raise NodeNotFoundError(f"no array at {rel or '/'}", store=label, node=rel)
    if rel == CHECKPOINT:
        return _explain_checkpoint(label, store, rel)
    if rel.endswith(WAL_NAME):
        return _explain_wal(label, store, rel)
    # a stored value under an array: a chunk key
    parent = rel
    while "/" in parent:
        parent = parent.rsplit("/", 1)[0]
        parent_raw = store.get(f"{parent}/zarr.json")
        if parent_raw is not None:
            return _explain_array_chunk(label, store, parent, parent_raw, rel[len(parent) + 1:])
    raise NodeNotFoundError(f"nothing at {rel!r}: no node, chunk or known file", store=label, node=rel)


def _explain_metadata(label: str, rel: str, key: str, raw: bytes) -> Explanation:
    sections, fault, metadata = explain_metadata(raw, attributes=_attribute_explainer(rel))
    is_array = isinstance(metadata, ArrayMetadata) or b'"array"' in raw
    kind = "array metadata" if is_array else "group metadata"
    sections.insert(0, Section("node", note=_role(rel, is_array), parts=[Part("path", "/" + rel, "")]))
    return Explanation(label, key, kind, len(raw), sections, fault)


def _explain_array_chunk(label: str, store: Store, rel: str, raw: bytes, chunk: str) -> Explanation:
    try:
        metadata = parse_metadata(raw)
    except MolrecError as exc:
        sections, fault, _ = explain_metadata(raw)
        return Explanation(label, f"{rel}/zarr.json", "array metadata", len(raw), sections, fault or fault_of(exc))
    if not isinstance(metadata, ArrayMetadata):
        raise InvalidValueError(f"{rel or '/'} is a group: --chunk needs an array")
    coords = coords_of(chunk, metadata)
    key = (f"{rel}/" if rel else "") + metadata.chunk_key_encoding.encode(coords)
    data = store.get(key)
    try:
        sections, fault = explain_chunk(metadata, data, key)
    except MolrecError as exc:  # the array's codecs themselves are refused
        return Explanation(label, key, "chunk", None if data is None else len(data), [], fault_of(exc))
    kind = "shard" if sections and any(s.title == "index" for s in sections) else "chunk"
    grid = metadata.grid_shape
    note = f"grid coordinates {list(coords)} of {list(grid)} ({_role(rel, True)})"
    if any(c >= g for c, g in zip(coords, grid)):
        note += "; past the published shape: an uncommitted tail, which readers ignore"
    sections.insert(0, Section("value", note=note, parts=[Part("array", "/" + rel, f"{metadata.dtype.name} "
                                                              f"{list(metadata.shape)}")]))
    return Explanation(label, key, kind, None if data is None else len(data), sections, fault)


# -- molrec_raw's transient checkpoint and the metrics WAL --------------------------------------
def _explain_checkpoint(label: str, store: Store, key: str) -> Explanation:
    raw = store.get(key) or b""
    magic = b"MOLREC-RAW SNAPSHOT 1\n"
    note = ("molrec_raw extra, ignored by other readers (a '__' name is never a Zarr node): a durable copy of the "
            "committed state — zarr.json files and tail-shard index pages — written at each durable point of a "
            "live writer and removed by close(); readers use it when a power cut damaged the live state "
            "(spec-notes/trajectory.md, power cuts)")
    sections = [Section("checkpoint", 0, len(raw), note)]
    header = Section("header", 0, len(magic) + 4, parts=[
        Part("magic line", raw[:len(magic)].decode("latin-1"), "MOLREC-RAW SNAPSHOT 1 and a newline", 0, len(magic))])
    sections.append(header)
    fault: Optional[Fault] = None
    if len(raw) >= len(magic) + 4:
        stored = int.from_bytes(raw[len(magic):len(magic) + 4], "little")
        computed = crc32c_of(raw[len(magic) + 4:])
        header.parts.append(Part("crc32c stored", f"{stored:#010x}", "over the zstd frame after it", len(magic), 4))
        header.parts.append(Part("crc32c computed", f"{computed:#010x}", "matches" if stored == computed else "differs"))
        frame_at = len(magic) + 4
        try:
            zparts = ZstdCodec(3, False).describe(raw[frame_at:])
            sections.append(Section("zstd frame", frame_at, len(raw) - frame_at, "a JSON directory line, then the "
                                    "saved zarr.json files and index pages", [
                                        Part(p.name, p.value, p.meaning, None if p.offset is None else frame_at + p.offset,
                                             p.length, p.rule) for p in zparts]))
        except MolrecError as exc:
            fault = fault_of(exc, frame_at)
    try:
        snapshot = Snapshot.from_bytes(raw, key)
    except MolrecError as exc:
        return Explanation(label, key, "checkpoint", len(raw), sections, fault or fault_of(exc))
    sections.append(Section("saved zarr.json files", note=f"{len(snapshot.metadata)} node(s)", parts=[
        Part(k, f"{len(v)} bytes", "") for k, v in sorted(snapshot.metadata.items())]))
    sections.append(Section("saved tail shards", note="size and index page of the shard holding each array's last "
                            "rows", parts=[Part(k, {"size": size, "page": len(page)}, "") for k, (size, page)
                                           in sorted(snapshot.shards.items())]))
    return Explanation(label, key, "checkpoint", len(raw), sections, fault)


def _explain_wal(label: str, store: Store, key: str) -> Explanation:
    raw = store.get(key) or b""
    catalog: Dict[str, Any] = {}
    group_raw = store.get(key.rsplit("/", 1)[0] + "/zarr.json") if "/" in key else None
    if group_raw is not None:
        try:
            meta = parse_metadata(group_raw)
            catalog = dict(meta.attributes) if isinstance(meta, GroupMetadata) else {}
        except MolrecError:
            catalog = {}
    wal = catalog.get("wal") if isinstance(catalog.get("wal"), dict) else None
    mark = wal.get("bytes") if wal is not None else None
    note = ("the metrics WAL: one JSON event per line (t, k, s, w, v, tags); " +
            (f"the watermark says the first {mark} bytes ({wal.get('lines')} lines) are densified"
             if wal is not None else "no watermark: the WAL is read whole unless dense series stand alone"))
    section = Section("lines", 0, len(raw), note)
    fault: Optional[Fault] = None
    at, number = 0, 0
    while at < len(raw):
        end = raw.find(b"\n", at)
        number += 1
        if end < 0:
            section.parts.append(Part(f"line {number}", raw[at:at + 80].decode("utf-8", "replace"),
                                      "a torn last fragment (no newline): readers ignore it, a reopening writer "
                                      "truncates it", at, len(raw) - at, "README#decision-9"))
            break
        line = raw[at:end + 1]
        where = "densified (before the watermark)" if isinstance(mark, int) and end < mark else "tail"
        if number <= _WAL_LINES_SHOWN:
            section.parts.append(Part(f"line {number}", line[:-1].decode("utf-8", "replace")[:200], where, at, len(line)))
        try:
            parse_wal(line, source=key, first_line=number, first_offset=at)
        except MolrecError as exc:
            fault = fault_of(exc, at)
            break
        at = end + 1
    if number > _WAL_LINES_SHOWN:
        section.note += f"; {number} lines, the first {_WAL_LINES_SHOWN} shown"
    return Explanation(label, key, "metrics WAL", len(raw), [section], fault)


# -- a trajectory frame -------------------------------------------------------------------------
def _explain_frame(label: str, store: Store, i: int) -> Explanation:
    target = f"trajectory frame {i}"
    out = Explanation(label, target, "frame resolution")
    try:
        reader = MrecReader(store)
    except MolrecError as exc:  # the trajectory does not open: explain the value it stopped at
        out.fault = fault_of(exc)
        if exc.key:
            try:
                inner = _explain_node(label, store, exc.key, None)
            except MolrecError:
                return out
            out.sections.append(Section(f"{inner.kind} {inner.target}", note="the trajectory does not open: the "
                                        "reader stopped in this value", sections=inner.sections))
            if inner.fault is not None:
                out.fault = inner.fault
        return out
    with reader:
        tgroup = reader.root.get("trajectory")
        attrs = dict(tgroup.attrs) if isinstance(tgroup, Group) else {}
        n = len(reader)
        marker = Section("commit marker", note="trajectory/zarr.json: nstep is written last in every commit; "
                         "frames at or past it do not exist for a reader", parts=[
                             Part("nstep", attrs.get("nstep"), "committed frames", rule="trajectory#R3"),
                             Part("source", reader.source, "live: the store as it stands; checkpoint: the trajectory's "
                                  "durable copy, because " + (reader.recovery_reason or "the live state is older"))
                             if reader.source != "live" else
                             Part("source", "live", "the store as it stands (no checkpoint, or the live state proves "
                                  "its commit)", rule="trajectory#10")])
        manifest = attrs.get(MANIFEST)
        if isinstance(manifest, dict):
            marker.parts.append(Part(MANIFEST, {"nstep": manifest.get("nstep"),
                                                "arrays": len(manifest.get("arrays") or {})},
                                     "molrec_raw's commit manifest (other readers ignore it)", rule="trajectory#10"))
        out.sections.append(marker)
        if not isinstance(i, int) or not -n <= i < n:
            out.fault = Fault(f"frame {i} does not exist: {n} committed frame(s)", None, "trajectory#R3", "IndexError")
            return out
        j = i % n
        if j != i:
            marker.parts.append(Part("frame", j, f"{i} counts from the end"))
        try:
            _trace_series(out, reader, attrs, j)
            _trace_blocks(out, reader, j)
            _trace_cell(out, reader, j)
            _trace_meta(out, reader, j)
            _resolved(out, reader, j)
        except _Faulted as stop:
            out.fault = stop.fault
        except MolrecError as exc:
            out.fault = fault_of(exc)
    return out


def _trajectory_group(reader: MrecReader) -> Group:
    group = reader.root.get("trajectory")
    assert isinstance(group, Group), "a frame is traced only where a trajectory group exists"
    return group


def _trace_series(out: Explanation, reader: MrecReader, attrs: Dict[str, Any], i: int) -> None:
    section = Section("step and time", note="trajectory §3: a progression attribute while arithmetic, else an array")
    tgroup = _trajectory_group(reader)
    for name, value in (("step", reader.step[i]), ("time", None if reader.time is None else reader.time[i])):
        prog = attrs.get(f"{name}_progression")
        if isinstance(prog, dict):
            start, stride = prog.get("start"), prog.get("stride", 0)
            how = f"{start} + {i} * {stride}" if name == "step" else f"{start!r} + float({i}) * {stride!r} (binary64)"
            section.parts.append(Part(name, value, f"{name}_progression: {how}", rule="trajectory#3.1"))
        elif isinstance(tgroup.get(name), Array):
            where, fault = locate_rows(tgroup[name], i, i + 1)
            section.parts.append(Part(name, value, f"row {i} of trajectory/{name}", rule="trajectory#R6"))
            section.parts.extend(where)
            if fault is not None:
                out.sections.append(section)
                raise _Faulted(fault)
        elif name == "step":
            section.parts.append(Part(name, value, "no progression and no array: steps are the ordinals"))
        else:
            section.parts.append(Part(name, None, "the run has no times"))
    out.sections.append(section)


class _Faulted(Exception):
    """Ends a frame trace at the first fault (carried as ``fault``)."""

    def __init__(self, fault: Fault) -> None:
        super().__init__(fault.message)
        self.fault = fault


def _trace_blocks(out: Explanation, reader: MrecReader, i: int) -> None:
    tgroup = _trajectory_group(reader)
    for name in reader.block_names():
        info = reader.block_info(name)
        section = Section(f"block {name}", note=f"layout {info.kind}")
        out.sections.append(section)
        j = reader.block_update_at(name, i)
        group = tgroup.get(name)
        if info.kind == "regular" and isinstance(group, Group):
            rows = int(group.attrs.get("uniform_rows") or 0)
            n_upd = len(info.ordinals)
            section.parts.append(Part("elision", {"uniform_rows": rows, "dense_updates": True, "updates": n_upd},
                                      f"regular block: the shortest column holds {n_upd} updates of {rows} rows; update "
                                      f"j = min(frame, updates - 1) = {j}, rows [j*{rows}, (j+1)*{rows})",
                                      rule="trajectory#R9"))
        elif info.kind == "indexed":
            found = "none" if j is None else f"update {j} (step_index[{j}] = {int(info.ordinals[j])})"
            section.parts.append(Part("step_index", first_values(info.ordinals, 12),
                                      f"ordinals of its {len(info.ordinals)} updates; the last one at or before "
                                      f"frame {i} (binary search): {found}", rule="trajectory#R7"))
            section.parts.append(Part("offset", first_values(info.offsets, 13),
                                      "CSR row offsets: update j is rows [offset[j], offset[j+1])", rule="trajectory#R8"))
        if j is None:
            section.note += f"; absent at frame {i}: no update at or before it (the frame carries no {name!r})"
            continue
        lo, hi = int(info.offsets[j]), int(info.offsets[j + 1])
        carried = int(info.ordinals[j]) != i
        section.parts.append(Part("rows", [lo, hi], f"{hi - lo} row(s) of update {j}" +
                                  (f", carried forward from frame {int(info.ordinals[j])} (unchanged since)" if carried
                                   else "") + ("; a zero-row update: present and empty" if hi == lo else "")))
        if not isinstance(group, Group):
            continue
        for column, cinfo in info.columns.items():
            arr = group.get(column)
            if isinstance(arr, Array):
                where, fault = locate_rows(arr, lo, hi)
                section.sections.append(Section(f"column {column}", note=f"{cinfo.dtype} trailing "
                                                f"{list(cinfo.trailing)}", parts=where))
                if fault is not None:
                    raise _Faulted(fault)
            mask = group.get("_validity")
            marr = mask.get(column) if isinstance(mask, Group) else None
            if isinstance(marr, Array):
                where, fault = locate_rows(marr, lo, hi)
                section.sections.append(Section(f"mask of {column}", note="bool per row (false = null)", parts=where))
                if fault is not None:
                    raise _Faulted(fault)


def _trace_cell(out: Explanation, reader: MrecReader, i: int) -> None:
    tgroup = _trajectory_group(reader)
    box = tgroup.get("box")
    section = Section("cell", note="trajectory §7")
    out.sections.append(section)
    ordinals = reader.cell_updates()
    if not isinstance(box, Group) or not ordinals.size:
        section.note += ": no cell"
        return
    if not isinstance(box.get("vectors"), Array):
        section.parts.append(Part("form", "attributes", "one fixed cell from frame 0: box/ attributes vectors "
                                  "(origin, boundary off their defaults)", rule="trajectory#R15"))
    else:
        k = int((ordinals <= i).sum()) - 1
        section.parts.append(Part("form", "arrays", f"{ordinals.size} cell update(s) at frames "
                                  f"{first_values(ordinals, 12)}; the last at or before frame {i}: update {k}",
                                  rule="trajectory#7"))
        if k >= 0:
            for name in ("vectors", "origin", "boundary"):
                arr = box.get(name)
                if isinstance(arr, Array):
                    where, fault = locate_rows(arr, k, k + 1)
                    section.sections.append(Section(f"box/{name}", parts=where))
                    if fault is not None:
                        raise _Faulted(fault)
    cell = reader.box_at(i)
    if cell is not None:
        section.parts.append(Part("vectors", cell.vectors.tolist(), "columns are the lattice vectors"))
        section.parts.append(Part("origin", cell.origin.tolist(), ""))
        section.parts.append(Part("boundary", list(cell.boundary), "periodic flags"))
        section.parts.append(Part("defined", cell.defined, ""))


def _trace_meta(out: Explanation, reader: MrecReader, i: int) -> None:
    keys = reader.schema.meta_keys()
    if not keys:
        return
    section = Section("per-step meta", note="trajectory/meta/<key>: row i is frame i (fills included)")
    out.sections.append(section)
    mgroup = _trajectory_group(reader).get("meta")
    for key, tag in keys:
        arr = mgroup.get(key) if isinstance(mgroup, Group) else None
        if isinstance(arr, Array):
            where, fault = locate_rows(arr, i, i + 1)
            section.sections.append(Section(f"{key} ({tag})", parts=where))
            if fault is not None:
                raise _Faulted(fault)


def _resolved(out: Explanation, reader: MrecReader, i: int) -> None:
    frame = reader[i]
    section = Section("resolved frame", note="what a reader hands back (MrecReader[i])")
    for name, block in frame.blocks.items():
        columns = {c: first_values(v, 6) for c, v in block.columns.items()}
        section.parts.append(Part(f"block {name}", {"rows": block.nrows, "first values": columns,
                                                    "masked": sorted(block.masks)}, ""))
    for key, value in frame.meta.items():
        section.parts.append(Part(f"meta {key}", getattr(value, "value", value), ""))
    out.sections.append(section)
