"""Shared helpers of the differential tests against the reference implementations.

molrs (``molcrafts-molrs``, the Rust implementation the spec was written with) and molpy
(``molcrafts-molpy``, which ships its own native MolRec core) read and write records here
beside molrec_raw.  Each test module imports its peer with ``pytest.importorskip`` first
(they install on CPython >= 3.12 only), then uses these helpers, which take the peer as
an argument and never import it themselves.

Comparison is by the conformance kit's canonical form (``molrec_raw.conformance``): a
record read by either side becomes the same JSON document, compared value by value with
floats as binary64 bit patterns (``-0.0`` is not ``0.0``) — "bit for bit" for every value
the canonical form carries (NaN payloads excepted: both sides hand NaN back, the form
spells it ``"NaN"``).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, Iterable, Optional

import numpy as np

from molrec_raw.conformance.canonical import FORMAT, first_difference, json_document, values_of
from molrec_raw.conformance.dump import _block, _column, _frame, _metrics, dump_path
from molrec_raw.record.doors import opened_record
from molrec_raw.record.metrics import dense
from molrec_raw.record.forcefield import ForceFieldSection
from molrec_raw.record.model import Block, Box, Frame, MetaValue

# What a peer cannot express, removed from our dump before comparing (each with its reason;
# spec-notes/conformance.md "molrs and molpy read the corpus" lists them).
PEER_BLIND = {
    "attrs": "the peers hand back no producer attributes of blocks or columns (root-layout rule 5 "
             "keeps them on disk; neither Block carries them)",
    "unknown": "the peers expose no API for a section they do not interpret (they keep it on disk)",
    "metrics tail": "molpy's MrecFile.metrics() hands back the stored pieces — the dense arrays and the WAL "
                    "text — not a merged series: its dense part is compared with our dense part, its WAL "
                    "text with the stored bytes (documents#9.13 merging is the caller's there)",
}


def ours_dense_metrics(path: Path) -> Dict[str, Any]:
    """The dense part of a record's metrics (no WAL tail), read by molrec_raw, canonical form."""
    with opened_record(Path(path)) as root:
        group = root["metrics"]
        return _metrics(dense.read_dense(group, dense.read_catalog(group.attrs.asdict(), node=group.name)))


# A value of every typed-meta tag (frame-and-types §4.1), extremes included.
EVERY_TAG: Dict[str, Any] = {
    "bool": True, "i32": -2**31, "i64": -2**63, "u32": 2**32 - 1, "u64": 2**64 - 1, "f64": 5e-324,
    "string": "é", "bool3": (True, False, True), "i32x3": (-2**31, 0, 2**31 - 1),
    "i64x3": (-2**63, 1, 2**63 - 1), "u32x3": (0, 1, 2**32 - 1), "u64x3": (1, 2**53 + 1, 2**64 - 1),
    "f64x3": (0.1, -0.0, 1.7976931348623157e308), "f64x6": (1.0, 2.0, 3.0, 0.25, -0.5, 1e-300),
    "f64x9": tuple(float(i) / 7 for i in range(9)), "json": {"a": [1, None, "x", 2.5], "b": {"c": True}},
}


@dataclass(frozen=True)
class Peer:
    """One reference implementation: its core types, its ``write_mrec`` and its mrec module."""

    name: str
    core: ModuleType  # Frame, Block, Box, Cell, MetaValue, Trajectory
    io: ModuleType  # write_mrec
    mrec: ModuleType  # MrecFile, MrecReader, MrecWriter, SequenceSchema, ForceFieldSection, pack_mrec_zip
    documents: bool  # reads and writes status, method, metrics and observables (molpy)


def molrs_peer(molrs: ModuleType) -> Peer:
    import molrs.core
    import molrs.io
    import molrs.io.mrec
    return Peer("molrs", molrs.core, molrs.io, molrs.io.mrec, documents=False)


def molpy_peer(molpy: ModuleType) -> Peer:
    import molpy.io
    import molpy.io.mrec
    return Peer("molpy", molpy._core, molpy.io, molpy.io.mrec, documents=True)


# -- in-memory conversions ---------------------------------------------------------------

def _column_values(values: np.ndarray) -> np.ndarray:
    array = np.asarray(values)
    if array.dtype.kind in "UT":  # the peers hand strings back as a fixed-width numpy array
        out = np.empty(array.shape, dtype=object)
        out[...] = array.tolist() if array.ndim else array.item()
        return out
    return array


def from_peer_block(block: Any) -> Block:
    """A peer's Block as ours: columns, masks, precision, targets, structural shape, rows."""
    columns: Dict[str, np.ndarray] = {}
    masks: Dict[str, np.ndarray] = {}
    precision: Dict[str, float] = {}
    for key in block.keys():
        columns[key] = _column_values(block[key])
        mask = block.validity(key)
        if mask is not None:
            masks[key] = np.asarray(mask, dtype=bool)
        p = block.precision(key)
        if p is not None:
            precision[key] = float(p)
    shape = block.structural_shape
    return Block(columns=columns, masks=masks, precision=precision, targets=dict(block.targets()),
                 structural_shape=None if shape is None else tuple(int(s) for s in shape),
                 count=int(block.n_rows))


def from_peer_box(box: Any) -> Optional[Box]:
    if box is None:
        return None
    return Box(vectors=np.asarray(box.matrix, dtype=np.float64), origin=np.asarray(box.origin, dtype=np.float64),
               boundary=tuple(bool(b) for b in box.pbc), defined=bool(box.is_cell_defined))


def from_peer_meta_value(value: Any) -> MetaValue:
    payload = value.value
    if isinstance(payload, tuple):
        payload = tuple(payload)
    return MetaValue(value.dtype, payload)


def from_peer_frame(frame: Any) -> Frame:
    """A peer's Frame as ours (typed meta with its tags, blocks, box)."""
    meta = {key: from_peer_meta_value(v) for key, v in frame.meta.typed().items()}
    return Frame(meta=meta, blocks={name: from_peer_block(frame[name]) for name in frame.keys()},
                 box=from_peer_box(frame.box))


def _peer_meta_value(peer: Peer, value: Any) -> Any:
    if isinstance(value, MetaValue):
        payload = value.value
        if isinstance(payload, np.ndarray):
            payload = tuple(payload.tolist())
        return peer.core.MetaValue(value.tag, payload)
    return value


def to_peer_block(peer: Peer, block: Block) -> Any:
    out = peer.core.Block()
    for key, values in block.columns.items():
        array = np.asarray(values)
        data: Any = [str(v) for v in array.tolist()] if array.dtype.kind in "OUT" else array
        out.insert(key, data, block.masks.get(key))
    if not block.columns and block.nrows:
        out.resize(block.nrows)
    for key, p in block.precision.items():
        out.set_precision(key, p)
    for key, target in block.targets.items():
        out.set_target(key, target)
    if block.structural_shape is not None:
        out.set_shape(list(block.structural_shape))
    return out


def to_peer_box(peer: Peer, box: Optional[Box]) -> Any:
    if box is None:
        return None
    cell = np.asarray(box.vectors, dtype=np.float64) if box.defined else peer.core.Cell.undefined()
    return peer.core.Box(cell, origin=np.asarray(box.origin, dtype=np.float64),
                         pbc=np.asarray(box.boundary, dtype=bool))


def to_peer_frame(peer: Peer, frame: Frame) -> Any:
    """Our Frame as a peer's (typed meta keeps its tags through the peer's MetaValue)."""
    out = peer.core.Frame()
    for name, block in frame.blocks.items():
        out[name] = to_peer_block(peer, block)
    for key, value in frame.meta.items():
        out.meta[key] = _peer_meta_value(peer, value)
    box = to_peer_box(peer, frame.box)
    if box is not None:
        out.box = box
    return out


def to_peer_forcefield(peer: Peer, section: ForceFieldSection) -> Any:
    return peer.mrec.ForceFieldSection(copy.deepcopy(section.document),
                                       {name: to_peer_block(peer, b) for name, b in section.tables.items()})


# -- the canonical form of what a peer reads -----------------------------------------------

def _peer_forcefield_doc(section: Any) -> Dict[str, Any]:
    return {"document": json_document(section.document),
            "tables": {name: _block(from_peer_block(b)) for name, b in section.tables.items()}}


def peer_trajectory_doc(peer: Peer, source: Any) -> Optional[Dict[str, Any]]:
    """The trajectory as the peer's reader hands it back, in the canonical form."""
    with peer.mrec.MrecReader(source) as reader:
        times = reader.time
        frames = [_frame(from_peer_frame(reader[i])) for i in range(len(reader))]
        return {"nstep": len(reader), "step": values_of(np.asarray(reader.step, dtype=np.int64)),
                "time": None if times is None else values_of(np.asarray(times, dtype=np.float64)),
                "frames": frames}


def _peer_metrics_doc(metrics: Dict[str, Any]) -> Dict[str, Any]:
    out = {}
    steps = metrics.get("steps") or {}
    walls = metrics.get("wall_time") or {}
    for key, values in (metrics.get("series") or {}).items():
        s, w = steps.get(key), walls.get(key)
        out[key] = {"type": "scalar", "values": values_of(np.asarray(values, dtype=np.float64)),
                    "steps": None if s is None else values_of(np.asarray(s, dtype=np.int64)),
                    "wall_time": None if w is None else [None if v is None else str(v) for v in w]}
    return out


def peer_dump(peer: Peer, path: Path) -> Dict[str, Any]:
    """A record read by the peer (``MrecFile`` for the sections, ``MrecReader`` for the
    trajectory), in the conformance kit's canonical form: what our dumper prints for the same
    record, less what the peer cannot express (``PEER_BLIND``; metrics, status, method and
    observables only for a peer with ``documents``)."""
    source = Path(path)
    f = peer.mrec.MrecFile(source)
    sections = sorted(f.sections())
    doc: Dict[str, Any] = {"molrec_dump": FORMAT, "sections": sections, "meta": json_document(f.meta())}
    for name in ("system", "frame"):
        if name in sections:
            section = getattr(f, name)()
            if section is not None:
                doc[name] = _frame(from_peer_frame(section))
    if "forcefield" in sections:
        ff = f.forcefield()
        if ff is not None:
            doc["forcefield"] = _peer_forcefield_doc(ff)
    if peer.documents:
        for name in ("status", "method"):
            value = getattr(f, name)()
            if value is not None:
                doc[name] = json_document(value)
        obs = f.observables() if "observables" in sections else None
        if obs is not None:
            doc["observables"] = {n: {"meta": json_document(o["meta"]),
                                      "data": _column(_column_values(np.asarray(o["data"])), None, None, {})}
                                  for n, o in obs.items()}
        metrics = f.metrics() if "metrics" in sections else None
        if metrics is not None:
            doc["metrics"] = _peer_metrics_doc(metrics)
    if "trajectory" in sections:
        doc["trajectory"] = peer_trajectory_doc(peer, source)
    return doc


def strip_attrs(node: Any) -> Any:
    """A canonical document without its ``attrs`` members (``PEER_BLIND``)."""
    if isinstance(node, dict):
        return {k: strip_attrs(v) for k, v in node.items() if k != "attrs"}
    if isinstance(node, list):
        return [strip_attrs(v) for v in node]
    return node


def comparable(doc: Dict[str, Any], peer: Peer, path: Optional[Path] = None) -> Dict[str, Any]:
    """A canonical document less what ``peer`` cannot express (``PEER_BLIND``); given the
    record's ``path``, our metrics are replaced by their dense part (what molpy returns)."""
    out = strip_attrs(doc)
    out.pop("unknown", None)
    if not peer.documents:
        for name in ("status", "method", "metrics", "observables"):
            out.pop(name, None)
    elif path is not None and "metrics" in out:
        out["metrics"] = ours_dense_metrics(path)
    return out


def ours_dump(path: Path) -> Dict[str, Any]:
    """A record read by molrec_raw, in the canonical form."""
    return dump_path(Path(path))


def assert_same_reading(peer: Peer, path: Path, drop: Iterable[str] = ()) -> Dict[str, Any]:
    """Both implementations read ``path`` to the same document (value for value, floats bit
    for bit); returns our document.  ``drop`` names top-level keys left out on purpose."""
    ours = comparable(ours_dump(path), peer, path)
    theirs = comparable(peer_dump(peer, path), peer)
    for key in drop:
        ours.pop(key, None)
        theirs.pop(key, None)
    difference = first_difference(ours, theirs)
    assert difference is None, f"{peer.name} reads {path} differently: {difference}"
    return ours


def forcefield_doc(section: ForceFieldSection) -> Dict[str, Any]:
    """An in-memory force field section in the canonical form (no attrs)."""
    return strip_attrs({"document": json_document(section.document),
                         "tables": {name: _block(b) for name, b in section.tables.items()}})


def frame_doc(frame: Frame) -> Dict[str, Any]:
    """An in-memory frame in the canonical form (no attrs)."""
    return strip_attrs(_frame(frame))


def assert_same_frame(expected: Frame, actual: Frame, where: str = "") -> None:
    difference = first_difference(frame_doc(expected), frame_doc(actual))
    assert difference is None, f"{where}: {difference}"
