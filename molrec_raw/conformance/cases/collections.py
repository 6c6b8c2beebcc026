"""Collection cases (MolCrafts/molrec ``docs/spec/collection.md``, ``docs/spec/lmdb.md``):
one ``collection.mrec.lmdb`` file each, written by :class:`CollectionWriter`; an invalid case
then changes one value through py-lmdb — a key removed, a ``meta`` field, a frame-bytes
header rewritten (the payload kept, its padding recomputed) — the one thing its rule forbids.

The valid cases are collection.md's conformance list: the round trip of meta, schema, index
and every record; records without a system, without a trajectory, with zero frames; a
topology block that changes mid-record and one that never does; subsets of one declaration;
a collection-wide force field; an aligned block carried forward while its target moves and
restated on growth; an empty collection whose index columns are declared; a collection whose meta carries no
version keys (the newest lmdb.md).
"""
from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any, Callable, Dict, Optional

import numpy as np

from molrec_raw.conformance.cases.base import invalid_collection, strings, valid_collection
from molrec_raw.record.forcefield import ForceFieldSection, block_name
from molrec_raw.record.model import Block, Box, Frame, MetaValue
from molrec_raw.record.trajectory import SequenceSchema

_UNITS = {"length": "angstrom", "energy": "eV", "force": "eV/angstrom", "time": "fs"}
_XYZF = ("x", "y", "z", "fx", "fy", "fz")


def _writer(path: Path, **options: Any) -> Any:
    from molrec_raw.collection import CollectionWriter

    options.setdefault("units", _UNITS)
    return CollectionWriter(path, durable=False, **options)


def _xyzf(n: int, k: int, r: int) -> Dict[str, np.ndarray]:
    base = np.arange(n, dtype=np.float64)
    return {c: base * (i + 1) + 0.25 * k + r for i, c in enumerate(_XYZF)}


def _xyzf_schema() -> SequenceSchema:
    schema = SequenceSchema()
    for c in _XYZF:
        schema.declare_column("atoms", c, "f64")
    return schema.declare_meta("pe", "f64")


def _molecule(r: int, n: int, frames: int) -> Dict[str, Any]:
    system = Frame({"smiles": "C" * n, "charge": MetaValue("i32", 0)},
                   {"atoms": Block({"element": strings(*(["C", "H", "O"] * n)[:n]),
                                    "mol_id": np.zeros(n, dtype=np.uint64)})})
    trajectory = [Frame({"pe": -1.5 * r - 0.125 * k}, {"atoms": Block(_xyzf(n, k, r))}, Box(np.eye(3) * (8.0 + r)))
                  for k in range(frames)]
    return {"meta": {"source": f"mol-{r}"}, "system": system, "frames": trajectory,
            "steps": [10 * k for k in range(frames)], "times": [0.5 * k for k in range(frames)],
            "index": {"n_heavy": n - n // 3, "code": f"m{r}"}}


def _basic(path: Path) -> None:
    with _writer(path, schema=_xyzf_schema(), meta={"dataset": "conformance", "version_note": "v1"}) as w:
        for r in range(3):
            w.add_record(**_molecule(r, n=2 + r, frames=1 + r))


@valid_collection("collection-basic", "collection.md: meta with units, one sequence_schema, an index of the "
                  "collection's own columns and three records (system with typed meta; trajectory of x y z fx fy "
                  "fz, per-step pe, steps, times, a cell); lmdb.md keys, meta and frame bytes")
def _valid_basic(path: Path) -> None:
    _basic(path)


def _bonds(pairs: Any) -> Block:
    pairs = np.asarray(pairs, dtype=np.uint64).reshape(-1, 2)
    return Block({"atomi": pairs[:, 0].copy(), "atomj": pairs[:, 1].copy()})


@valid_collection("collection-sparse-records", "collection.md: records presenting different subsets of one "
                  "declaration; a record without a system, one without a trajectory, one of zero frames; a "
                  "topology block (bonds) changing mid-record as sparse updates, and a system that never changes")
def _valid_sparse(path: Path) -> None:
    schema = (SequenceSchema().declare_column("atoms", "x", "f64").declare_column("bonds", "atomi", "u64")
              .declare_column("bonds", "atomj", "u64"))
    def atoms(k: int) -> Dict[str, Block]:
        return {"atoms": Block({"x": np.arange(3, dtype=np.float64) + k})}
    system = Frame({}, {"atoms": Block({"element": strings("O", "H", "H")})})
    with _writer(path, schema=schema, index_schema={"label": {"dtype": "string", "nullable": True}}) as w:
        # topology that changes: bonds restated at frame 2 only (frames 1 and 3 carry it forward)
        frames = [Frame({}, {**atoms(k), "bonds": _bonds([[0, 1], [0, 2]] if k < 2 else [[0, 1]])}) for k in range(4)]
        w.add_record(meta={"kind": "reaction"}, system=system, frames=frames, index={"label": "reaction"})
        w.add_record(meta={"kind": "no system"}, frames=[Frame({}, atoms(k)) for k in range(2)])
        w.add_record(meta={"kind": "no trajectory"}, system=system, index={"label": "static"})
        w.add_record(meta={"kind": "zero frames"}, system=system, frames=[])


def _forcefield() -> ForceFieldSection:
    return ForceFieldSection(
        {"name": "water-like", "units": {"length": "angstrom", "energy": "kcal/mol"},
         "styles": [{"category": "atom", "style": "full"}, {"category": "bond", "style": "harmonic"}]},
        {block_name("atom", "full"): Block({"name": strings("OW", "HW"), "mass": np.array([15.9994, 1.008]),
                                            "charge": np.array([-0.834, 0.417])}),
         block_name("bond", "harmonic"): Block({"name": strings("OW-HW"), "itom": strings("OW"),
                                                "jtom": strings("HW"), "k": np.array([450.0]),
                                                "r0": np.array([0.9572])})})


@valid_collection("collection-forcefield", "collection.md: a collection-wide force field (the ff key: meta the "
                  "document, blocks its style tables) every record's atoms.type links into")
def _valid_forcefield(path: Path) -> None:
    with _writer(path, forcefield=_forcefield()) as w:
        for r in range(2):
            w.add_record(system=Frame({}, {"atoms": Block({"type": strings("OW", "HW", "HW"),
                                                           "x": np.array([0.0, 0.96, -0.24]) + r})}))


def _aligned_schema() -> SequenceSchema:
    return (SequenceSchema().declare_column("atoms", "x", "f64").declare_column("atom_types", "t", "u64")
            .declare_aligned("atom_types", "atoms"))


def _grow(k: int, n: int, types: bool) -> Frame:
    blocks = {"atoms": Block({"x": np.arange(n, dtype=np.float64) + k})}
    if types:
        blocks["atom_types"] = Block({"t": np.arange(n, dtype=np.uint64)})
    return Frame({}, blocks)


@valid_collection("collection-aligned", "collection.md / ragged.md: an aligned block (atom_types aligned with "
                  "atoms) carried forward while its target moves, and restated when the target grows")
def _valid_aligned(path: Path) -> None:
    with _writer(path, schema=_aligned_schema()) as w:
        w.add_record(frames=[_grow(0, 2, True), _grow(1, 2, False), _grow(2, 3, True), _grow(3, 3, False)])


@valid_collection("collection-empty", "collection.md: a collection of no records still has its declaration and "
                  "its declared index columns (lmdb.md: an index of 0 rows)")
def _valid_empty(path: Path) -> None:
    with _writer(path, schema=_xyzf_schema(), index_schema={"n_heavy": "i64", "energy": {"dtype": "f64"}}):
        pass


# -- invalid: one edit each ----------------------------------------------------------------------
def _edit(path: Path, changes: Dict[bytes, Optional[bytes]]) -> None:
    """Put (or, for None, delete) raw values in a written collection, in one transaction."""
    from molrec_raw.collection.binding import import_lmdb

    lmdb = import_lmdb()
    env = lmdb.open(str(path), subdir=False, map_size=1 << 26, meminit=True)
    try:
        with env.begin(write=True) as txn:
            for k, v in changes.items():
                if v is None:
                    txn.delete(k)
                else:
                    txn.put(k, v)
    finally:
        env.close()
    lock = path.with_name(path.name + "-lock")
    if lock.exists():
        lock.unlink()


def _value(path: Path, k: bytes) -> bytes:
    from molrec_raw.collection.binding import import_lmdb

    env = import_lmdb().open(str(path), subdir=False, readonly=True, lock=False)
    try:
        with env.begin() as txn:
            value = txn.get(k)
    finally:
        env.close()
    assert value is not None, k
    return bytes(value)


def _frame_key(j: int) -> bytes:
    return b"f" + j.to_bytes(8, "big")


def _rewrite_header(value: bytes, change: Callable[[Dict[str, Any]], object]) -> bytes:
    """Frame bytes with the header edited: the payload kept, the padding recomputed
    (offsets are relative to the payload, so the buffers stay where the header says)."""
    (length,) = struct.unpack_from("<I", value, 4)
    payload = (8 + length + 7) // 8 * 8
    header = json.loads(value[8:8 + length])
    change(header)
    text = json.dumps(header, separators=(",", ":")).encode()
    head = b"MRF1" + struct.pack("<I", len(text)) + text
    return head + bytes(-len(head) % 8) + value[payload:]


def _meta_edit(change: Callable[[Dict[str, Any]], object]) -> Callable[[Path], None]:
    def build(path: Path) -> None:
        _basic(path)
        doc = json.loads(_value(path, b"meta"))
        change(doc)
        _edit(path, {b"meta": json.dumps(doc, separators=(",", ":")).encode()})
    return build


def _frame_edit(j: int, change: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def build(path: Path) -> None:
        _basic(path)
        _edit(path, {_frame_key(j): change(_value(path, _frame_key(j)))})
    return build


def _column_entry(header: Dict[str, Any], column: str = "y") -> Dict[str, Any]:
    entry: Dict[str, Any] = header["blocks"]["atoms"]["columns"][column]
    return entry


def _unversioned(doc: Dict[str, Any]) -> None:
    doc.pop("layout_version")
    doc["collection"].pop("molrec_version")


valid_collection("collection-unversioned", "lmdb.md (newest) meta: layout, collection, sequence_schema, n_records "
                 "and n_frames, no layout_version, and a collection document without molrec_version: the current "
                 "layout, read as such (README#decision-21, #decision-1)")(_meta_edit(_unversioned))


@invalid_collection("collection-no-meta", "lmdb#L3", "lmdb.md meta: a file without the meta key (its writer "
                    "writes it last) is not a collection")
def _no_meta(path: Path) -> None:
    _basic(path)
    _edit(path, {b"meta": None})


invalid_collection("collection-layout-version-newer", "lmdb#L4", "lmdb.md meta: layout_version 99 is outside "
                   "1..newest supported; a reader refuses it")(
    _meta_edit(lambda doc: doc.update(layout_version=99)))
invalid_collection("collection-no-units", "collection#C1", "collection.md meta: the collection document must "
                   "carry units")(
    _meta_edit(lambda doc: doc["collection"].pop("units")))
invalid_collection("collection-bad-magic", "lmdb#L9", "lmdb.md frame bytes: a value whose magic is not MRF1")(
    _frame_edit(1, lambda value: b"MRF2" + value[4:]))
invalid_collection("collection-unaligned-offset", "lmdb#L10", "lmdb.md frame bytes: a buffer offset that is not "
                   "a multiple of 8")(
    _frame_edit(1, lambda value: _rewrite_header(value, lambda h: _column_entry(h).update(
        offset=_column_entry(h)["offset"] + 4))))
invalid_collection("collection-buffer-past-value", "lmdb#L10", "lmdb.md frame bytes: a buffer that runs past the "
                   "end of the value")(
    _frame_edit(1, lambda value: _rewrite_header(value, lambda h: _column_entry(h, "fz").update(offset=4096))))
invalid_collection("collection-dtype-outside-set", "lmdb#L11", "lmdb.md frame bytes: dtype f16 is outside the "
                   "closed column set")(
    _frame_edit(1, lambda value: _rewrite_header(value, lambda h: _column_entry(h).update(dtype="f16"))))


def _broken_prefix_sum(path: Path) -> None:
    from molrec_raw.collection.frame_bytes import header_of

    _basic(path)
    value = bytearray(_value(path, b"index"))
    header, payload = header_of(bytes(value), "/index")
    offset = payload + header["blocks"]["records"]["columns"]["first_frame"]["offset"]
    struct.pack_into("<Q", value, offset + 8, 2)  # record 1's first frame: 2, not 1 (record 0 has one frame)
    _edit(path, {b"index": bytes(value)})


invalid_collection("collection-index-prefix-sum", "lmdb#L7", "lmdb.md index: first_frame must be the exclusive "
                   "prefix sum of n_frames")(_broken_prefix_sum)


def _rows_differ(path: Path) -> None:
    system = Frame({}, {"atoms": Block({"element": strings("O", "H", "H")})})
    with _writer(path) as w:
        w.add_record(system=system, frames=[Frame({}, {"atoms": Block({"x": np.arange(3, dtype=np.float64)})})])
    j = _frame_key(0)
    value = _value(path, j)

    def two_rows(h: Dict[str, Any]) -> None:  # the buffer stays; the block claims 2 of its 3 rows
        block = h["blocks"]["atoms"]
        block["count"] = 2
        block["columns"]["x"]["shape"] = [2]
    _edit(path, {j: _rewrite_header(value, two_rows)})


invalid_collection("collection-rows-differ-from-system", "collection#C9", "collection.md topology once: a "
                   "trajectory block whose row count differs from the system block of the same name")(_rows_differ)


def _undeclared_block(path: Path) -> None:
    _basic(path)

    def rename(h: Dict[str, Any]) -> None:
        h["blocks"]["velocities"] = h["blocks"].pop("atoms")
    _edit(path, {_frame_key(0): _rewrite_header(_value(path, _frame_key(0)), rename)})


invalid_collection("collection-undeclared-block", "collection#C2", "collection.md sequence_schema: a record's "
                   "trajectory presents a block outside the declaration")(_undeclared_block)
