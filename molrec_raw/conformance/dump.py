"""``molrec-raw dump``: a record's decoded content in the canonical JSON form.

The reference dumper of the conformance kit: it reads a record with the public readers
(``read_mrec`` and the trajectory reader), so it refuses exactly what they refuse, and
writes what they hand back — documents, frame-shaped sections (typed meta, blocks,
columns, masks, precision, targets, the cell), the force field, observables, metrics
(dense series plus the WAL tail), the trajectory frame by frame, and unknown sections as
plain Zarr trees.  ``molrec_raw/conformance/README.md`` documents the document's shape.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from molrec_raw.conformance.canonical import FORMAT, encode_float, json_document, values_of
from molrec_raw.record import typed_json
from molrec_raw.record.columns import column_dtype_of
from molrec_raw.record.doors import RecordSource, record_source
from molrec_raw.record.model import Block, Box, Frame, MetaValue
from molrec_raw.record.molrec import RawSection, read_mrec
from molrec_raw.record.trajectory import MrecReader
from molrec_raw.zarr import Array, Group, Store, open_group
from molrec_raw.zarr.group import as_store

__all__ = ["dump_record", "dump_collection", "dump_path"]

_INTERPRETED = ("trajectory", "metrics")


def _meta_value(tag: Optional[str], value: Any) -> Dict[str, Any]:
    """A meta value with its tag, the value in that tag's typed JSON form."""
    if isinstance(value, MetaValue):
        tag, value = tag or value.tag, value.value
    elif tag is None:
        tag = typed_json.infer_tag(value)
    return {"tag": tag, "value": typed_json.encode_value(tag, value)}


def _column(values: np.ndarray, mask: Optional[np.ndarray], precision: Optional[float],
            attrs: Mapping[str, Any]) -> Dict[str, Any]:
    array = np.asarray(values)
    return {"dtype": column_dtype_of(array), "shape": list(array.shape), "values": values_of(array),
            "mask": None if mask is None else [bool(v) for v in np.asarray(mask).reshape(-1).tolist()],
            "precision": None if precision is None else encode_float(precision),
            "attrs": json_document(dict(attrs))}


def _block(block: Block) -> Dict[str, Any]:
    return {"count": int(block.nrows),
            "structural_shape": None if block.structural_shape is None else [int(s) for s in block.structural_shape],
            "targets": dict(block.targets), "attrs": json_document(dict(block.attrs)),
            "columns": {name: _column(values, block.masks.get(name), block.precision.get(name),
                                      block.column_attrs.get(name, {}))
                        for name, values in block.columns.items()}}


def _box(box: Optional[Box]) -> Optional[Dict[str, Any]]:
    if box is None:
        return None
    vectors = np.asarray(box.vectors, dtype=np.float64)
    return {"vectors": [values_of(row) for row in vectors], "origin": values_of(np.asarray(box.origin, np.float64)),
            "boundary": [bool(b) for b in box.boundary], "defined": bool(box.defined)}


def _frame(frame: Frame, tags: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    return {"meta": {key: _meta_value(None if tags is None else tags.get(key), value)
                     for key, value in frame.meta.items()},
            "blocks": {name: _block(block) for name, block in frame.blocks.items()},
            "box": _box(frame.box)}


def _trajectory(reader: MrecReader) -> Dict[str, Any]:
    tags = dict(reader.schema.meta_keys())
    times = reader.time
    return {"nstep": len(reader), "step": values_of(np.asarray(reader.step, dtype=np.int64)),
            "time": None if times is None else values_of(np.asarray(times, dtype=np.float64)),
            "frames": [_frame(frame, tags) for frame in reader]}


def _metrics(series: Mapping[str, Any]) -> Dict[str, Any]:
    out = {}
    for key, s in series.items():
        walls = s.wall_time
        out[key] = {"type": s.type, "values": values_of(np.asarray(s.values, dtype=np.float64)),
                    "steps": None if s.steps is None else values_of(np.asarray(s.steps, dtype=np.int64)),
                    "wall_time": None if walls is None else [None if w is None else str(w) for w in walls.tolist()]}
    return out


def _zarr_node(node: Any) -> Dict[str, Any]:
    if isinstance(node, Array):
        return {"node": "array", "data_type": node.metadata.dtype.name, "shape": list(node.shape),
                "values": values_of(np.asarray(node[...])), "attributes": json_document(dict(node.attrs))}
    return {"node": "group", "attributes": json_document(dict(node.attrs)),
            "members": {name: _zarr_node(child) for name, child in node.members()}}


def _unknown_section(root: Group, name: str) -> Dict[str, Any]:
    """A section this reader does not interpret: its Zarr tree, and the plain files in it
    (neither ``zarr.json`` nor under an array) as hex."""
    group = root[name]
    assert isinstance(group, Group)  # raw sections are groups (read_mrec keeps only those)
    tree = _zarr_node(group)
    store = root.store
    arrays = [f"{name}/{path}/" for path in _array_paths(group)]
    files = {}
    for key in sorted(store.list(f"{name}/")):
        if key.endswith("zarr.json") or any(key.startswith(prefix) for prefix in arrays):
            continue
        value = store.get(key)
        if value is not None:
            files[key[len(name) + 1:]] = value.hex()
    tree["files"] = files
    return tree


def _array_paths(group: Group, prefix: str = "") -> List[str]:
    out = []
    for name, child in group.members():
        if isinstance(child, Array):
            out.append(prefix + name)
        else:
            out.extend(_array_paths(child, f"{prefix}{name}/"))
    return out


def dump_record(path: RecordSource) -> Dict[str, Any]:
    """The decoded content of the record at ``path`` (a ``*.mrec`` directory, a
    ``*.mrec.zip``, a URL or an open store) in the canonical form; raises the reader's
    error (a ``MolrecError`` naming the rule) for a record a reader must refuse."""
    store = path if isinstance(path, Store) else as_store(record_source(path), "r")
    try:
        rec = read_mrec(store)  # one store for every section, closed below
    except BaseException:
        if not isinstance(path, Store):
            store.close()
        raise
    root = open_group(store, mode="r")
    try:
        doc: Dict[str, Any] = {"molrec_dump": FORMAT,
                               "sections": sorted(name for name, node in root.members() if isinstance(node, Group)),
                               "meta": json_document(rec.meta)}
        for name in ("status", "method"):
            value = getattr(rec, name)
            if value is not None:
                doc[name] = json_document(value)
        for name in ("system", "frame"):
            section = getattr(rec, name)
            if section is not None:
                doc[name] = _frame(section)
        if rec.forcefield is not None:
            doc["forcefield"] = {"document": json_document(rec.forcefield.document),
                                 "tables": {n: _block(b) for n, b in rec.forcefield.tables.items()}}
        if rec.observables is not None:
            doc["observables"] = {n: {"meta": json_document(o.meta), "data": _column(o.data, None, None, {})}
                                  for n, o in rec.observables.items()}
        if rec.metrics is not None:
            doc["metrics"] = _metrics(rec.metrics)
        if isinstance(rec.trajectory, MrecReader):  # read_mrec's view of the section
            doc["trajectory"] = _trajectory(rec.trajectory)
        unknown = {name: _unknown_section(root, name) for name, value in sorted(rec.raw_sections.items())
                   if name not in _INTERPRETED and isinstance(value, RawSection)}
        if unknown:
            doc["unknown"] = unknown
        return doc
    finally:
        if isinstance(rec.trajectory, MrecReader):
            rec.trajectory.close()
        if not isinstance(path, Store):
            store.close()


def dump_collection(path: Any) -> Dict[str, Any]:
    """The decoded content of the collection at ``path`` (a ``*.mrec.lmdb`` file) in the
    canonical form (``molrec_raw/conformance/README.md``, "Collections"): the collection
    document, the declaration, the collection's own index columns, the force field, and
    every record's meta, system and trajectory frame by frame (carry-forward resolved, the
    trajectory's own blocks).  Raises the reader's error for a collection a reader refuses."""
    from molrec_raw.collection import CollectionReader
    from molrec_raw.collection.inspection import joined

    with CollectionReader(path) as c:
        schema = c.schema
        tags = dict(schema.meta_keys())
        doc: Dict[str, Any] = {"molrec_dump": FORMAT, "collection": json_document(c.meta),
                               "sequence_schema": json_document(schema.to_json()),
                               "index": _block(c.index), "records": []}
        if c.forcefield is not None:
            doc["forcefield"] = {"document": json_document(c.forcefield.document),
                                 "tables": {n: _block(b) for n, b in c.forcefield.tables.items()}}
        for rec in c:
            system = rec.system
            trajectory = rec.trajectory
            entry: Dict[str, Any] = {"meta": json_document(rec.meta),
                                     "system": None if system is None else _frame(system)}
            if trajectory is None:
                entry["trajectory"] = None
            else:
                times = trajectory.time
                frames = []
                for frame in trajectory:
                    joined(system, frame, str(path), rec.number)  # refused as the reader's view refuses it
                    frames.append(_frame(frame, tags))
                entry["trajectory"] = {
                    "nstep": len(trajectory), "step": values_of(np.asarray(trajectory.step, dtype=np.int64)),
                    "time": None if times is None else values_of(np.asarray(times, dtype=np.float64)),
                    "frames": frames}
            doc["records"].append(entry)
    return doc


def dump_path(path: Any) -> Dict[str, Any]:
    """``molrec-raw dump``: :func:`dump_collection` for a ``*.mrec.lmdb``, else :func:`dump_record`."""
    from molrec_raw.collection.inspection import is_collection_path

    return dump_collection(path) if is_collection_path(path) else dump_record(path)
