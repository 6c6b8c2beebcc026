"""collection.md "Conformance", both directions: what CollectionWriter writes reads back, and
files built by hand from lmdb.md read as the spec says (or are refused with the rule).

Each item of the chapter's list is one or more tests here:

* round trip of meta, schema, index and every record ............ test_collection_round_trip_*
* a record with no system, one with no trajectory ................ test_C8_*
* topology changing mid-record, and one that never does .......... test_lmdb_L8_topology_*
* records presenting subsets of one declaration, zero frames ..... test_C2_subsets_*, test_zero_frame_*
* refusal: trajectory declaration differs from sequence_schema .. test_C3_*
* refusal: trajectory block rows differ from its system block .... test_C9_*
* refusal: a collection without units ............................ test_C1_*
* a collection-wide force field round-trips ...................... test_C7_*
* aligned block carried forward while its target moves, restated . test_aligned_*
* refusal: aligned block named like a system block, wrong rows ... test_C11_*
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import molrec_raw as mr
from collection_helpers import (ATOMS_SCHEMA, UNITS, XYZF, Columns, atoms_frame, element_system, hand_block, hand_frame,
                                hand_index, hand_meta, molecule, same_block, same_frame, u64be, write_lmdb, xyzf_schema)
from molrec_raw.collection import binding
from molrec_raw.collection.binding import key
from molrec_raw.collection.frame_bytes import header_of
from molrec_raw.errors import MolrecError, SpecViolationError


def _raw(path: Path, k: bytes) -> bytes:
    """A stored value as bytes (through this process's one environment of the file)."""
    handle = binding.acquire(path)
    try:
        with handle.env.begin() as txn:
            value = txn.get(k)
        return b"" if value is None else bytes(value)
    finally:
        handle.release()


def _frame_blocks(path: Path, j: int) -> list:
    return list(header_of(_raw(path, key(b"f", j)), "")[0]["blocks"])


# -- round trips ---------------------------------------------------------------------------------
def test_collection_round_trip_of_meta_schema_index_and_every_record(path: Path) -> None:
    records = [molecule(r, n=3 + r, frames=1 + r % 3) for r in range(6)]
    schema = xyzf_schema()
    with mr.CollectionWriter(path, units=UNITS, schema=schema, meta={"name": "tiny", "source": {"doi": "x"}}) as w:
        for r, rec in enumerate(records):
            assert w.add_record(**rec) == r
    c = mr.read_collection(path)
    assert len(c) == 6 and c.n_frames == sum(1 + r % 3 for r in range(6))
    assert c.meta == {"molrec_version": 2, "units": UNITS, "name": "tiny", "source": {"doi": "x"}}
    assert c.units == UNITS
    assert c.schema == schema
    assert c.index.columns["n"].tolist() == [3, 4, 5, 6, 7, 8]
    assert c.index.columns["tag"].tolist() == [f"t{r}" for r in range(6)]
    assert c.index_schema["n"].dtype == "i64" and c.index_schema["tag"].dtype == "string"
    for r, rec in enumerate(records):
        got = c[r]
        assert got.meta == rec["meta"]
        assert same_frame(got.system, rec["system"])
        assert got.index == rec["index"]
        assert len(got.trajectory) == len(rec["frames"]) == got.n_frames
        assert got.n_atoms == 3 + r
        for k, frame in enumerate(rec["frames"]):
            assert same_frame(got.trajectory[k], frame), (r, k)
        assert [same_frame(a, b) for a, b in zip(got.trajectory, rec["frames"])] == [True] * len(rec["frames"])
        assert got.trajectory.step.tolist() == list(range(len(rec["frames"])))
        assert got.trajectory.time is None


def test_collection_round_trip_with_a_derived_schema_steps_times_and_typed_meta(path: Path) -> None:
    frames = [mr.Frame({"pe": -1.0, "flag": True, "count": mr.MetaValue("u32", 3), "v": mr.MetaValue("f64x3", (1, 2, 3)),
                        "note": {"a": [1, None]}},
                       {"atoms": mr.Block({"x": np.arange(3.0), "id": np.arange(3, dtype=np.uint64)},
                                          masks={"x": np.array([True, False, True])})})
              for _ in range(2)]
    frames[1].meta["pe"] = float("nan")
    with mr.CollectionWriter(path, units=UNITS) as w:
        w.add_record(frames=frames, steps=[10, 20], times=[0.5, 1.0])
    c = mr.read_collection(path)
    schema = c.schema
    assert schema.meta_keys() == [("pe", "f64"), ("flag", "bool"), ("count", "u32"), ("v", "f64x3"), ("note", "json")]
    assert schema.columns("atoms")["x"].nullable
    rec = c[0]
    assert rec.trajectory.step.tolist() == [10, 20] and rec.trajectory.time.tolist() == [0.5, 1.0]
    f1 = rec.trajectory[1]
    assert np.isnan(f1.meta["pe"]) and f1.meta["count"] == mr.MetaValue("u32", 3)
    assert f1.meta["v"] == mr.MetaValue("f64x3", (1.0, 2.0, 3.0)) and f1.meta["note"] == {"a": [1, None]}
    assert f1.blocks["atoms"].masks["x"].tolist() == [True, False, True]
    assert rec.system is None


def test_writer_is_deterministic_byte_for_byte(tmp_path: Path) -> None:
    outs = []
    for name in ("a.mrec.lmdb", "b.mrec.lmdb"):
        with mr.CollectionWriter(tmp_path / name, units=UNITS, commit_every=2) as w:
            for r in range(5):
                w.add_record(**molecule(r))
        outs.append((tmp_path / name).read_bytes())
    assert outs[0] == outs[1]


# -- records without system or trajectory -------------------------------------------------------
def test_C8_a_record_with_no_system_and_one_with_no_trajectory(path: Path) -> None:
    one = molecule(1)
    with mr.CollectionWriter(path, units=UNITS) as w:
        w.add_record(frames=one["frames"])
        w.add_record(system=one["system"])
        with pytest.raises(SpecViolationError) as caught:
            w.add_record(meta={"a": 1})
        assert caught.value.rule == "collection#C8" and caught.value.store == str(path)
    c = mr.read_collection(path)
    assert c[0].system is None and len(c[0].trajectory) == 2 and c[0].n_atoms == 4
    assert c[1].trajectory is None and not c[1].has_trajectory and c[1].n_atoms == 4
    assert same_frame(c[1].frame(0), one["system"])
    with pytest.raises(IndexError):
        c[1].frame(1)
    assert _raw(path, key(b"s", 0)) == b""  # absent key = no system (lmdb#L2)


def test_C8_hand_built_records_without_system_or_trajectory_read_as_the_spec_says(path: Path) -> None:
    write_lmdb(path, {
        b"meta": hand_meta(2, 1, ATOMS_SCHEMA),
        b"index": hand_index([1, 0], [2, 2], [True, False]),
        u64be(b"r", 0): b"{}", u64be(b"r", 1): b'{"x": 1}',
        u64be(b"f", 0): atoms_frame([1.0, 2.0], [0.0, 0.0], [0.0, 0.0], -3.5, 5),
        u64be(b"s", 1): element_system(["O", "H"], {"title": "w"}, meta_types={"title": "string"}),
    })
    c = mr.read_collection(path)
    assert c[0].system is None and c[0].trajectory[0].blocks["atoms"].columns["x"].tolist() == [1.0, 2.0]
    assert c[0].trajectory[0].meta == {"pe": -3.5} and c[0].trajectory.step.tolist() == [5]
    assert c[1].trajectory is None and c[1].meta == {"x": 1}
    assert c[1].system.meta == {"title": "w"} and c[1].system.blocks["atoms"].columns["element"].tolist() == ["O", "H"]


# -- topology ---------------------------------------------------------------------------------
def _bonded_frames(changes_at: int = -1) -> list:
    frames = []
    for k in range(4):
        bonds = np.array([[0, 1], [1, 2]] if changes_at < 0 or k < changes_at else [[0, 1]], dtype=np.uint64)
        frames.append(mr.Frame({}, {"atoms": mr.Block({"x": np.arange(3.0) + k}),
                                    "bonds": mr.Block({"atomi": bonds[:, 0].copy(), "atomj": bonds[:, 1].copy()})}))
    return frames


def test_lmdb_L8_topology_that_never_changes_is_stored_once_and_carried_forward(path: Path) -> None:
    with mr.CollectionWriter(path, units=UNITS) as w:
        w.add_record(frames=_bonded_frames())
        w.add_record(frames=_bonded_frames())
    assert [_frame_blocks(path, j) for j in range(8)] == [["atoms", "bonds"], ["atoms"], ["atoms"], ["atoms"]] * 2
    c = mr.read_collection(path)
    for r in range(2):  # carry-forward never crosses a record: each record's first frame restates it
        assert [t.blocks["bonds"].columns["atomi"].tolist() for t in c[r].trajectory] == [[0, 1]] * 4
        assert c[r].trajectory[3].blocks["bonds"].count == 2


def test_lmdb_L8_topology_that_changes_mid_record_is_written_where_it_changes(path: Path) -> None:
    with mr.CollectionWriter(path, units=UNITS) as w:
        w.add_record(frames=_bonded_frames(changes_at=2))
    assert [_frame_blocks(path, j) for j in range(4)] == [["atoms", "bonds"], ["atoms"], ["atoms", "bonds"], ["atoms"]]
    c = mr.read_collection(path)
    got = [c[0].trajectory[k].blocks["bonds"].count for k in range(4)]
    assert got == [2, 2, 1, 1]
    assert [f.blocks["bonds"].count for f in c[0].trajectory] == got  # sequential iteration agrees


def test_lmdb_L8_hand_built_sparse_updates_resolve_present_empty_and_absent(path: Path) -> None:
    schema = {"blocks": {"atoms": ATOMS_SCHEMA["blocks"]["atoms"],
                         "bonds": {"columns": {"atomi": {"dtype": "u64", "trailing": []}}}},
              "meta": {"pe": {"dtype": "f64"}}}

    def frame(k: int, bonds: object = None, box: object = None) -> bytes:
        cols = Columns().numeric("x", "f64", [k, k]).numeric("y", "f64", [0, 0]).numeric("z", "f64", [0, 0])
        blocks = {"atoms": hand_block(2, cols)}
        buffers = list(cols.buffers)
        if bonds is not None:
            b = Columns(cols.offset).numeric("atomi", "u64", np.asarray(bonds, np.uint64))
            blocks["bonds"] = hand_block(len(bonds), b)
            buffers += b.buffers
        header = {"blocks": blocks, "meta": {"pe": float(k)}, "step": 100 + k}
        if box is not None:
            header["box"] = box
        return hand_frame(header, buffers)

    cube = {"vectors": [[5.0, 0, 0], [0, 5.0, 0], [0, 0, 5.0]]}
    write_lmdb(path, {b"meta": hand_meta(2, 5, schema), b"index": hand_index([3, 2], [2, 2], [True, True]),
                      u64be(b"r", 0): b"{}", u64be(b"r", 1): b"{}",
                      u64be(b"f", 0): frame(0, box=cube), u64be(b"f", 1): frame(1, bonds=[0]), u64be(b"f", 2): frame(2, bonds=[]),
                      u64be(b"f", 3): frame(0), u64be(b"f", 4): frame(1)})
    c = mr.read_collection(path)
    t = c[0].trajectory
    assert "bonds" not in t[0].blocks                               # absent before its first update
    assert t[1].blocks["bonds"].columns["atomi"].tolist() == [0]     # present
    assert t[2].blocks["bonds"].count == 0 and "atomi" in t[2].blocks["bonds"].columns  # empty, still there
    assert [f.box for f in t] == [mr.Box(np.eye(3) * 5.0)] * 3       # the cell carries forward
    assert t.step.tolist() == [100, 101, 102]
    second = c[1].trajectory  # carry-forward never crosses a record: record 1 has no bonds, no cell
    assert all("bonds" not in f.blocks and f.box is None for f in second)


# -- subsets of one declaration, zero frames -------------------------------------------------------
def test_C2_subsets_of_one_declaration_and_refusal_of_anything_outside_it(path: Path) -> None:
    schema = (mr.SequenceSchema().declare_column("atoms", "x", "f64").declare_column("bonds", "atomi", "u64")
              .declare_column("charges", "q", "f64"))
    with mr.CollectionWriter(path, units=UNITS, schema=schema) as w:
        w.add_record(frames=[mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(2)})})])
        w.add_record(frames=[mr.Frame({}, {"bonds": mr.Block({"atomi": np.zeros(1, np.uint64)}),
                                           "charges": mr.Block({"q": np.ones(2)})})])
        for frame in (mr.Frame({}, {"angles": mr.Block({"atomi": np.zeros(1, np.uint64)})}),
                      mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(2), "y": np.zeros(2)})}),
                      mr.Frame({"pe": 1.0}, {"atoms": mr.Block({"x": np.zeros(2)})})):
            with pytest.raises(SpecViolationError) as caught:
                w.add_record(frames=[frame])
            assert caught.value.rule in ("collection#C2", "collection#C3"), caught.value
            assert caught.value.node.startswith("/records/2/trajectory"), caught.value
        assert w.n_records == 2  # a refused record changes nothing
    c = mr.read_collection(path)
    assert list(c[0].trajectory[0].blocks) == ["atoms"] and list(c[1].trajectory[0].blocks) == ["bonds", "charges"]
    b = c.batch([0, 1])
    assert b["n_atoms"].tolist() == [2, 0] and b["n_bonds"].tolist() == [0, 1] and b["atoms/x"].shape == (2,)


def test_zero_frame_record_has_a_trajectory_of_no_frames(path: Path) -> None:
    with mr.CollectionWriter(path, units=UNITS, schema=xyzf_schema()) as w:
        w.add_record(system=molecule(0)["system"], frames=[])
        w.add_record(**molecule(1))
    c = mr.read_collection(path)
    assert c[0].has_trajectory and len(c[0].trajectory) == 0 and c[0].n_frames == 0
    assert c[0].trajectory.step.tolist() == [] and c[0].trajectory.time is None
    assert c.binding_index()["first_frame"].tolist() == [0, 0]
    with pytest.raises(IndexError):
        c[0].trajectory[0]


def test_zero_frame_record_hand_built(path: Path) -> None:
    write_lmdb(path, {b"meta": hand_meta(1, 0, ATOMS_SCHEMA), b"index": hand_index([0], [3], [True]),
                      u64be(b"r", 0): b"{}", u64be(b"s", 0): element_system(["C", "C", "C"])})
    c = mr.read_collection(path)
    assert c[0].has_trajectory and len(c[0].trajectory) == 0 and c[0].n_atoms == 3


# -- refusals: the declaration -------------------------------------------------------------------
def test_C3_refuses_a_record_whose_declaration_differs_from_the_collections(path: Path) -> None:
    with mr.CollectionWriter(path, units=UNITS, schema=xyzf_schema()) as w:
        other = xyzf_schema().declare_column("atoms", "vx", "f64")
        with pytest.raises(SpecViolationError) as caught:
            w.add_record(**molecule(0), schema=other)
        assert caught.value.rule == "collection#C3"
        w.add_record(**molecule(0), schema=xyzf_schema())  # the same declaration is fine
        with pytest.raises(SpecViolationError) as caught:  # per-step meta outside the declaration
            w.add_record(frames=[mr.Frame({"pe": 1.0, "ke": 2.0}, molecule(0)["frames"][0].blocks)])
        assert caught.value.rule == "collection#C3"
        with pytest.raises(SpecViolationError) as caught:  # a declared key without fill, omitted
            w.add_record(frames=[mr.Frame({}, molecule(0)["frames"][0].blocks)])
        assert caught.value.rule == "collection#C3"


def test_C4_a_derived_declaration_refuses_records_that_disagree(path: Path) -> None:
    with mr.CollectionWriter(path, units=UNITS) as w:
        w.add_record(frames=[mr.Frame({"pe": 1.0}, {"atoms": mr.Block({"q": np.zeros(2)})})])
        for frame in (mr.Frame({"pe": 1.0}, {"atoms": mr.Block({"q": np.zeros(2, np.int64)})}),   # dtype
                      mr.Frame({"pe": 1.0}, {"atoms": mr.Block({"q": np.zeros((2, 3))})}),          # trailing shape
                      mr.Frame({"pe": 1.0}, {"atoms": mr.Block({"q": np.zeros(2), "y": np.zeros(2)})}),  # columns
                      mr.Frame({"pe": 1.0}, {"atoms": mr.Block({"q": np.zeros(2)}, precision={"q": 0.1})})):
            with pytest.raises(SpecViolationError) as caught:
                w.add_record(frames=[frame])
            assert caught.value.rule == "collection#C4", caught.value
        with pytest.raises(SpecViolationError) as caught:  # per-step meta
            w.add_record(frames=[mr.Frame({"pe": 1.0, "ke": 0.0}, {"atoms": mr.Block({"q": np.zeros(2)})})])
        assert caught.value.rule == "collection#C3"
        w.add_record(frames=[mr.Frame({"pe": 2.0}, {"bonds": mr.Block({"atomi": np.zeros(1, np.uint64)})})])  # a new block
        assert w.schema.block_names() == ["atoms", "bonds"]
    assert mr.read_collection(path).schema.block_names() == ["atoms", "bonds"]


def test_C2_hand_built_update_outside_the_declaration_is_refused(path: Path) -> None:
    cols = Columns().numeric("x", "f64", [1.0]).numeric("w", "f64", [1.0])
    bad = hand_frame({"blocks": {"atoms": hand_block(1, cols)}, "meta": {"pe": 0.0}, "step": 0}, cols.buffers)
    write_lmdb(path, {b"meta": hand_meta(1, 1, ATOMS_SCHEMA), b"index": hand_index([1], [1], [True]),
                      u64be(b"r", 0): b"{}", u64be(b"f", 0): bad})
    with pytest.raises(SpecViolationError) as caught:
        mr.read_collection(path)[0].trajectory[0]
    assert caught.value.rule == "collection#C2" and caught.value.key == "f‖0" and caught.value.store == str(path)


# -- refusals: system and trajectory side by side ------------------------------------------------------
def test_C9_refuses_a_trajectory_block_whose_rows_differ_from_its_system_block(path: Path) -> None:
    rec = molecule(0, n=4)
    with mr.CollectionWriter(path, units=UNITS) as w:
        rec["frames"][1] = mr.Frame({"pe": 0.0}, {"atoms": mr.Block({c: np.zeros(5) for c in XYZF})})
        with pytest.raises(SpecViolationError) as caught:
            w.add_record(**rec)
        assert caught.value.rule == "collection#C9" and caught.value.node == "/records/0/trajectory/atoms"


def test_C9_hand_built_mismatch_is_refused_by_the_readers_view(path: Path) -> None:
    write_lmdb(path, {b"meta": hand_meta(1, 1, ATOMS_SCHEMA), b"index": hand_index([1], [3], [True]),
                      u64be(b"r", 0): b"{}", u64be(b"s", 0): element_system(["C", "C", "C"]),
                      u64be(b"f", 0): atoms_frame([1.0, 2.0], [0, 0], [0, 0], 0.0, 0)})
    c = mr.read_collection(path)
    assert c[0].trajectory[0].blocks["atoms"].count == 2  # the trajectory's own blocks read
    for read in (lambda: c[0].frame(0), lambda: c.batch([0])):
        with pytest.raises(SpecViolationError) as caught:
            read()
        assert caught.value.rule == "collection#C9"


def test_C10_refuses_a_column_in_both_the_system_and_the_trajectory_block(path: Path) -> None:
    system = mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(2)})})
    with mr.CollectionWriter(path, units=UNITS, schema=xyzf_schema()) as w:
        with pytest.raises(SpecViolationError) as caught:
            w.add_record(system=system, frames=[])
        assert caught.value.rule == "collection#C10"


# -- units ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("units", [None, "angstrom", {"length": 1}, {"length": ""}])
def test_C1_refuses_a_collection_without_units(path: Path, units: object) -> None:
    with pytest.raises(SpecViolationError) as caught:
        mr.CollectionWriter(path, units=units)  # type: ignore[arg-type]
    assert caught.value.rule == "collection#C1"
    assert not path.exists()  # refused before the file was created


@pytest.mark.parametrize("collection", [{"molrec_version": 2}, {"molrec_version": 2, "units": "eV"}, []])
def test_C1_hand_built_collection_without_units_is_refused(path: Path, collection: object) -> None:
    write_lmdb(path, {b"meta": hand_meta(0, 0, ATOMS_SCHEMA, collection=collection),  # type: ignore[arg-type]
                      b"index": hand_index([], [], [])})
    with pytest.raises(SpecViolationError) as caught:
        mr.read_collection(path)
    assert caught.value.rule == "collection#C1" and caught.value.key == "meta"


# -- the force field ---------------------------------------------------------------------------------
def _forcefield() -> mr.ForceFieldSection:
    """A force field with a unicode name, a mask, an unknown table with attributes, a pair style."""
    S = lambda *v: np.array(v, dtype=object)  # noqa: E731
    doc = {"name": "toy ünï", "units": {"length": "angstrom", "energy": "kcal/mol", "angle": "degree"},
           "vendor_key": None,
           "styles": [{"category": "atom", "style": "full"}, {"category": "bond", "style": "harmonic"},
                      {"category": "pair", "style": "lj/cut", "params": {"cutoff": 9.0}}]}
    return mr.ForceFieldSection(doc, {
        "atom.full": mr.Block({"name": S("c", "h"), "mass": np.array([12.011, 1.008]),
                               "element": S("C", "")}, masks={"element": np.array([True, False])}),
        "bond.harmonic": mr.Block({"name": S("c-h"), "itom": S("c"), "jtom": S("h"), "k": np.array([340.0]),
                                   "r0": np.array([1.09])}),
        "pair.lj%2Fcut": mr.Block({"name": S("c", "h"), "itom": S("c", "h"), "jtom": S("c", "h"),
                                   "epsilon": np.array([0.086, 0.015]), "sigma": np.array([3.4, 2.6])}),
        "notes.free%20text": mr.Block({"text": S("free text")}, attrs={"author": "someone"}),
    })


def test_C7_a_collection_wide_force_field_round_trips(path: Path) -> None:
    ff = _forcefield()
    with mr.CollectionWriter(path, units=UNITS, forcefield=ff) as w:
        w.add_record(system=mr.Frame({}, {"atoms": mr.Block({"type": np.array(["c", "h"], dtype=object)})}))
    c = mr.read_collection(path)
    assert c.forcefield == ff
    header, _ = header_of(_raw(path, b"ff"), "")
    assert header["meta"] == ff.document and "meta_types" not in header
    with mr.CollectionWriter(path.with_name("none.mrec.lmdb"), units=UNITS) as w:
        w.add_record(system=mr.Frame({}, {"atoms": mr.Block({"type": np.array(["c"], dtype=object)})}))
    assert mr.read_collection(path.with_name("none.mrec.lmdb")).forcefield is None


def test_C7_a_force_field_is_a_ForceFieldSection_and_is_checked(path: Path) -> None:
    with pytest.raises(TypeError):
        mr.CollectionWriter(path, units=UNITS, forcefield={"name": "x"})  # type: ignore[arg-type]
    bad = mr.ForceFieldSection({"name": "x", "styles": [{"category": "bond", "style": "harmonic"}]}, {})
    with pytest.raises(MolrecError):
        mr.CollectionWriter(path, units=UNITS, forcefield=bad)
    assert not path.exists()


# -- aligned blocks --------------------------------------------------------------------------------------
def _aligned_schema() -> mr.SequenceSchema:
    return (mr.SequenceSchema().declare_column("atoms", "x", "f64").declare_column("atom_types", "t", "u64")
            .declare_aligned("atom_types", "atoms"))


def _grow(k: int, n: int, types: bool) -> mr.Frame:
    blocks = {"atoms": mr.Block({"x": np.arange(n, dtype=float) + k})}
    if types:
        blocks["atom_types"] = mr.Block({"t": np.arange(n, dtype=np.uint64)})
    return mr.Frame({}, blocks)


def test_aligned_block_carries_forward_while_its_target_moves_and_is_restated_on_growth(path: Path) -> None:
    frames = [_grow(0, 2, True), _grow(1, 2, False), _grow(2, 2, False), _grow(3, 3, True), _grow(4, 3, False)]
    with mr.CollectionWriter(path, units=UNITS, schema=_aligned_schema()) as w:
        w.add_record(frames=frames)
    assert [_frame_blocks(path, j) for j in range(5)] == [["atoms", "atom_types"], ["atoms"], ["atoms"],
                                                          ["atoms", "atom_types"], ["atoms"]]
    t = mr.read_collection(path)[0].trajectory
    assert [f.blocks["atom_types"].count for f in t] == [2, 2, 2, 3, 3]
    assert t[2].blocks["atom_types"].columns["t"].tolist() == [0, 1] and t[4].blocks["atoms"].count == 3


def test_C11_refuses_an_aligned_block_whose_rows_differ_from_its_target(path: Path) -> None:
    with mr.CollectionWriter(path, units=UNITS, schema=_aligned_schema()) as w:
        with pytest.raises(SpecViolationError) as caught:  # growth without restating the aligned block
            w.add_record(frames=[_grow(0, 2, True), _grow(1, 3, False)])
        assert caught.value.rule == "collection#C11" and "trajectory#W28" in caught.value.message
        assert w.n_records == 0


def test_C11_refuses_an_aligned_block_named_like_a_system_block(path: Path) -> None:
    system = mr.Frame({}, {"atom_types": mr.Block({"name": np.array(["a", "b"], dtype=object)})})
    with mr.CollectionWriter(path, units=UNITS, schema=_aligned_schema()) as w:
        with pytest.raises(SpecViolationError) as caught:
            w.add_record(system=system, frames=[_grow(0, 2, True)])
        assert caught.value.rule == "collection#C11"


def test_C11_hand_built_aligned_violations_are_refused(path: Path) -> None:
    schema = _aligned_schema().to_json()
    cols = Columns().numeric("x", "f64", [0.0, 1.0, 2.0])
    types = Columns(cols.offset).numeric("t", "u64", np.array([0, 1], np.uint64))
    grown = hand_frame({"blocks": {"atoms": hand_block(3, cols), "atom_types": hand_block(2, types)}, "meta": {}, "step": 0},
                       cols.buffers + types.buffers)
    system = element_system(["C"])
    system = hand_frame({"blocks": {"atom_types": hand_block(1, Columns().strings("name", ["a"]))}, "meta": {}})
    write_lmdb(path, {b"meta": hand_meta(2, 1, schema), b"index": hand_index([1, 0], [3, 0], [True, True]),
                      u64be(b"r", 0): b"{}", u64be(b"r", 1): b"{}", u64be(b"f", 0): grown, u64be(b"s", 1): system})
    c = mr.read_collection(path)
    for read in (lambda: c[0].trajectory[0], lambda: c[1].system):
        with pytest.raises(SpecViolationError) as caught:
            read()
        assert caught.value.rule == "collection#C11", caught.value


# -- the reader's view --------------------------------------------------------------------------------
def test_readers_view_presents_system_and_trajectory_blocks_of_one_name_as_one(path: Path) -> None:
    rec = molecule(3, n=5, frames=2)
    with mr.CollectionWriter(path, units=UNITS) as w:
        w.add_record(**rec)
    frame = mr.read_collection(path)[0].frame(1)
    atoms = frame.blocks["atoms"]
    assert list(atoms.columns) == ["element", *XYZF] and atoms.count == 5
    assert frame.meta == {"smiles": "CCCCC", "charge": mr.MetaValue("i32", 0), "pe": -3.5}
    assert frame.box == mr.Box(np.eye(3) * 13.0)
    assert np.array_equal(atoms.columns["fx"], rec["frames"][1].blocks["atoms"].columns["fx"])


def test_hand_built_json_layout_is_the_one_lmdb_md_documents(path: Path) -> None:
    with mr.CollectionWriter(path, units=UNITS, schema=xyzf_schema()) as w:
        w.add_record(**molecule(0))
    meta = json.loads(_raw(path, b"meta"))
    assert list(meta) == ["layout", "layout_version", "collection", "sequence_schema", "n_records", "n_frames"]
    assert meta["layout"] == "mrec-lmdb" and meta["layout_version"] == 1
    assert meta["collection"]["molrec_version"] == 2 and meta["n_records"] == 1 and meta["n_frames"] == 2
    header, _ = header_of(_raw(path, b"index"), "")
    assert list(header["blocks"]) == ["records"]
    assert list(header["blocks"]["records"]["columns"])[:4] == ["first_frame", "n_frames", "n_atoms", "has_trajectory"]
    assert json.loads(_raw(path, key(b"r", 0))) == {"source": "mol-0"}
    system, _ = header_of(_raw(path, key(b"s", 0)), "")
    assert system["meta_types"] == {"smiles": "string", "charge": "i32"} and "step" not in system
    frame, _ = header_of(_raw(path, key(b"f", 1)), "")
    assert frame["step"] == 1 and frame["meta"] == {"pe": -0.5} and "meta_types" not in frame
    assert "box" not in frame  # the cell is only where it changes (it did not)
