"""Helpers of the collection tests (tests/collection/): small records to write, and a builder of ``*.mrec.lmdb``
files *by hand* — frame bytes put together with ``struct`` and ``json`` from lmdb.md's
grammar, keys put with py-lmdb directly — so a test reads bytes this package's encoder did
not produce (the other direction of every round trip)."""
from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

import lmdb

import molrec_raw as mr

UNITS = {"length": "angstrom", "energy": "eV", "force": "eV/angstrom"}
XYZF = ("x", "y", "z", "fx", "fy", "fz")


def u64be(prefix: bytes, n: int) -> bytes:
    return prefix + n.to_bytes(8, "big")


def stored_pairs(path: Path) -> List[Tuple[bytes, bytes]]:
    """Every key and value of a collection file, in key order (through the binding's checks)."""
    from molrec_raw.collection import binding
    handle = binding.acquire(path)
    try:
        with handle.env.begin() as txn:
            return [(bytes(k), bytes(v)) for k, v in txn.cursor()]
    finally:
        handle.release()


def hand_frame(header: Dict[str, Any], buffers: Sequence[Tuple[int, bytes]] = (), *, pad: bytes = b"\0") -> bytes:
    """Frame bytes from lmdb.md's grammar: ``MRF1``, a u32 LE header length, the JSON header,
    padding to 8, then each ``(payload offset, bytes)`` buffer where it says."""
    text = json.dumps(header).encode()
    head = b"MRF1" + struct.pack("<I", len(text)) + text
    head += pad * (-len(head) % 8)
    payload = bytearray()
    for offset, data in buffers:
        if len(payload) < offset + len(data):
            payload.extend(b"\0" * (offset + len(data) - len(payload)))
        payload[offset:offset + len(data)] = data
    return head + bytes(payload)


class Columns:
    """Builds a block's ``columns`` entries and their buffers at 8-aligned payload offsets."""

    def __init__(self, start: int = 0) -> None:
        self.offset = start
        self.entries: Dict[str, Dict[str, Any]] = {}
        self.buffers: List[Tuple[int, bytes]] = []

    def _place(self, data: bytes) -> int:
        at = self.offset
        self.buffers.append((at, data))
        self.offset = at + len(data) + (-len(data) % 8)
        return at

    def numeric(self, name: str, dtype: str, values: Any, validity: Optional[Sequence[bool]] = None,
                precision: Optional[float] = None) -> "Columns":
        little = {"f64": "<f8", "i8": "i1", "i16": "<i2", "i32": "<i4", "i64": "<i8", "u8": "u1", "u16": "<u2",
                  "u32": "<u4", "u64": "<u8", "bool": "u1", "c64": "<c8", "c128": "<c16"}[dtype]
        array = np.asarray(values).astype(little)
        entry: Dict[str, Any] = {"dtype": dtype, "shape": list(array.shape), "offset": self._place(array.tobytes())}
        if validity is not None:
            entry["validity"] = self._place(bytes(bytearray(int(bool(v)) for v in validity)))
        if precision is not None:
            entry["precision"] = precision
        self.entries[name] = entry
        return self

    def strings(self, name: str, values: Sequence[str]) -> "Columns":
        self.entries[name] = {"dtype": "string", "shape": [len(values)], "values": list(values)}
        return self


def hand_block(count: int, columns: Columns, **extra: Any) -> Dict[str, Any]:
    return {"count": count, "structural_shape": None, "columns": columns.entries, **extra}


def hand_index(n_frames: Sequence[int], n_atoms: Sequence[int], has_trajectory: Sequence[bool],
               first_frame: Optional[Sequence[int]] = None, extra: Optional[Dict[str, Any]] = None) -> bytes:
    if first_frame is None:
        first_frame = [int(v) for v in np.concatenate([[0], np.cumsum(n_frames)[:-1]])] if len(n_frames) else []
    cols = (Columns().numeric("first_frame", "u64", np.asarray(first_frame, np.uint64))
            .numeric("n_frames", "u64", np.asarray(n_frames, np.uint64))
            .numeric("n_atoms", "u64", np.asarray(n_atoms, np.uint64))
            .numeric("has_trajectory", "bool", np.asarray(has_trajectory, bool)))
    for name, values in (extra or {}).items():
        cols.numeric(name, "i64", values)
    return hand_frame({"blocks": {"records": hand_block(len(n_frames), cols)}}, cols.buffers)


def hand_meta(n_records: int, n_frames: int, schema: Dict[str, Any], *, collection: Optional[Dict[str, Any]] = None,
              layout: Any = "mrec-lmdb", layout_version: Any = 1, drop: Sequence[str] = ()) -> bytes:
    doc: Dict[str, Any] = {"layout": layout, "layout_version": layout_version,
                           "collection": {"molrec_version": 2, "units": UNITS} if collection is None else collection,
                           "sequence_schema": schema, "n_records": n_records, "n_frames": n_frames}
    for key in drop:
        doc.pop(key, None)
    return json.dumps(doc).encode()


def write_lmdb(path: Path, items: Dict[bytes, bytes]) -> Path:
    """An LMDB file (subdir=False) holding exactly ``items``."""
    env = lmdb.open(str(path), subdir=False, map_size=1 << 26)
    with env.begin(write=True) as txn:
        for k, v in items.items():
            txn.put(k, v)
    env.close()
    return path


ATOMS_SCHEMA = {"blocks": {"atoms": {"columns": {c: {"dtype": "f64", "trailing": []} for c in ("x", "y", "z")}}},
                "meta": {"pe": {"dtype": "f64"}}}


def atoms_frame(x: Any, y: Any, z: Any, pe: float, step: int, **extra: Any) -> bytes:
    n = len(x)
    cols = Columns().numeric("x", "f64", x).numeric("y", "f64", y).numeric("z", "f64", z)
    return hand_frame({"blocks": {"atoms": hand_block(n, cols)}, "meta": {"pe": pe}, "step": step, **extra},
                      cols.buffers)


def element_system(elements: Sequence[str], meta: Optional[Dict[str, Any]] = None, **header: Any) -> bytes:
    cols = Columns().strings("element", elements)
    h: Dict[str, Any] = {"blocks": {"atoms": hand_block(len(elements), cols)}, "meta": meta or {}}
    h.update(header)
    return hand_frame(h, cols.buffers)


# -- records written through the public API ---------------------------------------------------
def molecule(r: int, n: int = 4, frames: int = 2, rng: Optional[np.random.Generator] = None) -> Dict[str, Any]:
    """``add_record`` arguments of a small molecule: elements in the system, x y z fx fy fz per frame."""
    rng = rng or np.random.default_rng(r)
    system = mr.Frame({"smiles": "C" * n, "charge": MetaValueI32(0)},
                      {"atoms": mr.Block({"element": np.array(["C", "H", "O", "N"] * n, dtype=object)[:n]})})
    trajectory = [mr.Frame({"pe": float(-r - 0.5 * k)}, {"atoms": mr.Block({c: rng.normal(size=n) for c in XYZF})},
                           mr.Box(np.eye(3) * (10.0 + r)))
                  for k in range(frames)]
    return {"meta": {"source": f"mol-{r}"}, "system": system, "frames": trajectory, "index": {"n": n, "tag": f"t{r}"}}


def MetaValueI32(v: int) -> mr.MetaValue:
    return mr.MetaValue("i32", v)


def xyzf_schema() -> mr.SequenceSchema:
    schema = mr.SequenceSchema()
    for c in XYZF:
        schema.declare_column("atoms", c, "f64")
    return schema.declare_meta("pe", "f64")


def same_block(a: mr.Block, b: mr.Block) -> bool:
    from molrec_raw.record.forcefield import blocks_equal
    return blocks_equal(a, b)


def same_frame(a: mr.Frame, b: mr.Frame) -> bool:
    return (a.meta == b.meta and a.blocks.keys() == b.blocks.keys()
            and all(same_block(a.blocks[k], b.blocks[k]) for k in a.blocks) and a.box == b.box)
