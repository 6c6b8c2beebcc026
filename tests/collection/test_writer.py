"""CollectionWriter (lmdb.md "The file", "meta"): transactions every ``commit_every`` records
and at close, ``meta`` written last, a map that grows by itself, one writer at a time, records
added whole or not at all, and each refusal of the writer's arguments with its rule."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import molrec_raw as mr
from collection_helpers import (ATOMS_SCHEMA, UNITS, XYZF, hand_index, hand_meta, molecule, stored_pairs, u64be,
                                write_lmdb, xyzf_schema)
from molrec_raw.collection import binding
from molrec_raw.errors import (InvalidValueError, MolrecError, RecordExistsError, SpecViolationError,
                               UnsupportedFeatureError, WriterLockedError)


def _txnid(path: Path) -> int:
    handle = binding.acquire(path)
    try:
        return int(handle.env.info()["last_txnid"])
    finally:
        handle.release()


def _keys(path: Path) -> list:
    handle = binding.acquire(path)
    try:
        with handle.env.begin() as txn:
            return [bytes(k) for k, _ in txn.cursor()]
    finally:
        handle.release()


@pytest.mark.parametrize("records,every,transactions", [(10, 3, 4), (10, 5, 3), (9, 10, 1), (0, 4, 1)])
def test_lmdb_L3_a_write_transaction_every_commit_every_records_and_one_at_close(
        path: Path, records: int, every: int, transactions: int) -> None:
    with mr.CollectionWriter(path, units=UNITS, commit_every=every) as w:
        for r in range(records):
            w.add_record(**molecule(r))
    # every ``every`` records one transaction; close commits the rest with index, ff and meta
    assert _txnid(path) == transactions
    assert len(mr.read_collection(path)) == records


def test_lmdb_L3_meta_is_written_last_a_file_without_it_is_refused(path: Path) -> None:
    w = mr.CollectionWriter(path, units=UNITS, commit_every=1)
    w.add_record(**molecule(0))
    w.add_record(**molecule(1))
    assert b"meta" not in _keys(path) and len(_keys(path)) > 0  # records committed, no meta yet
    with pytest.raises(SpecViolationError) as caught:
        mr.read_collection(path)
    assert caught.value.rule == "lmdb#L3" and caught.value.key == "meta" and caught.value.store == str(path)
    w.close()
    assert len(mr.read_collection(path)) == 2
    assert b"meta" in _keys(path) and b"index" in _keys(path)


def test_lmdb_L3_an_interrupted_writer_leaves_no_collection(path: Path) -> None:
    with pytest.raises(RuntimeError):
        with mr.CollectionWriter(path, units=UNITS, commit_every=1) as w:
            w.add_record(**molecule(0))
            raise RuntimeError("the producer failed")
    assert not path.exists()  # removed: without meta it was not a collection
    w = mr.CollectionWriter(path, units=UNITS)
    w.add_record(**molecule(0))
    w.abort()
    assert not path.exists() and not Path(f"{path}-lock").exists()


def test_map_grows_by_itself_no_map_full_error_reaches_the_caller(path: Path) -> None:
    big = [mr.Frame({"pe": 0.0}, {"atoms": mr.Block({c: np.full(20000, float(k)) for c in XYZF})}) for k in range(3)]
    with mr.CollectionWriter(path, units=UNITS, map_size=1 << 16, commit_every=4, commit_bytes=1 << 30) as w:
        for r in range(8):  # ~ 8 x 3 x 960 kB against a 64 kB first map
            w.add_record(frames=big)
    c = mr.read_collection(path)
    assert c.n_frames == 24 and c[7].trajectory[2].blocks["atoms"].columns["z"][-1] == 2.0
    assert path.stat().st_size > 20 << 20


def test_a_long_record_commits_its_frames_as_it_goes_and_still_reads_whole(path: Path) -> None:
    frames = (mr.Frame({"pe": float(k)}, {"atoms": mr.Block({"x": np.full(1000, float(k))})}) for k in range(50))
    with mr.CollectionWriter(path, units=UNITS, commit_bytes=64 << 10) as w:
        w.add_record(frames=frames)  # a generator: streamed
    assert _txnid(path) > 3
    t = mr.read_collection(path)[0].trajectory
    assert len(t) == 50 and [f.meta["pe"] for f in t] == [float(k) for k in range(50)]


def test_a_refused_record_changes_nothing_even_after_its_frames_were_committed(path: Path) -> None:
    def frames(bad_at: int):
        for k in range(20):
            yield mr.Frame({"pe": 0.0}, {"atoms": mr.Block({"x": np.zeros(5 if k == bad_at else 1000)})})

    schema = mr.SequenceSchema().declare_column("atoms", "x", "f64").declare_structural_shape("atoms", [1000])
    schema.declare_meta("pe", "f64")
    with mr.CollectionWriter(path, units=UNITS, schema=schema, commit_bytes=32 << 10, index_schema={"n": "i64"}) as w:
        w.add_record(frames=frames(-1), index={"n": 1})
        with pytest.raises(SpecViolationError):
            w.add_record(frames=frames(15), index={"n": 2})  # frames 0..14 went to disk before frame 15 failed
        assert (w.n_records, w.n_frames) == (1, 20)
    c = mr.read_collection(path)
    assert len(c) == 1 and c.n_frames == 20 and c.index.columns["n"].tolist() == [1]
    assert [k for k in _keys(path) if k[:1] == b"f"] == [u64be(b"f", j) for j in range(20)]  # no stale frames


def test_derived_declaration_is_restored_when_a_record_is_refused(path: Path) -> None:
    with mr.CollectionWriter(path, units=UNITS) as w:
        w.add_record(frames=[mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(2)})})])
        bad = [mr.Frame({}, {"bonds": mr.Block({"atomi": np.zeros(1, np.uint64)})}), mr.Frame({}, {"bonds": mr.Block({})})]
        with pytest.raises(MolrecError):
            w.add_record(frames=bad)  # declares bonds, then fails on frame 1
        assert w.schema.block_names() == ["atoms"]
    assert mr.read_collection(path).schema.block_names() == ["atoms"]


def test_lmdb_L1_one_writer_never_overwrites_a_file(path: Path) -> None:
    """safety#overwrite: an existing collection is refused unless overwrite=True; safety#lock:
    a second writer of a file being written is refused (this process; tests/safety/ for others)."""
    with mr.CollectionWriter(path, units=UNITS) as w:
        w.add_record(**molecule(0))
    before = path.read_bytes()
    with pytest.raises(RecordExistsError) as caught:
        mr.CollectionWriter(path, units=UNITS)
    assert caught.value.rule == "safety#overwrite" and path.read_bytes() == before
    w = mr.CollectionWriter(path.with_name("two.mrec.lmdb"), units=UNITS)
    with pytest.raises(WriterLockedError):  # a second writer of a file being written (this process)
        mr.CollectionWriter(path.with_name("two.mrec.lmdb"), units=UNITS, overwrite=True)
    with pytest.raises(RecordExistsError):  # without the lock: the overwrite policy still refuses
        mr.CollectionWriter(path.with_name("two.mrec.lmdb"), units=UNITS, lock=False)
    w.close()


@pytest.mark.parametrize("name", ["c.lmdb", "c.mrec", "c.mrec.lmdb.tmp"])
def test_lmdb_L1_a_collection_file_is_named_mrec_lmdb(tmp_path: Path, name: str) -> None:
    with pytest.raises(SpecViolationError) as caught:
        mr.CollectionWriter(tmp_path / name, units=UNITS)
    assert caught.value.rule == "lmdb#L1" and not (tmp_path / name).exists()


def test_lmdb_L5_molrec_version_is_stamped_over_a_callers_value(path: Path) -> None:
    with mr.CollectionWriter(path, units=UNITS, meta={"molrec_version": 99, "creator": {"name": "me"}}) as w:
        w.add_record(**molecule(0))
    assert mr.read_collection(path).meta == {"molrec_version": 2, "units": UNITS, "creator": {"name": "me"}}


def test_lmdb_L5_a_record_meta_carries_no_version_and_is_a_checked_document(path: Path) -> None:
    with mr.CollectionWriter(path, units=UNITS) as w:
        with pytest.raises(SpecViolationError) as caught:
            w.add_record(meta={"molrec_version": 2}, **{k: v for k, v in molecule(0).items() if k != "meta"})
        assert caught.value.rule == "lmdb#L5" and caught.value.node == "/records/0/meta"
        for meta in ({"created_at": "yesterday"}, {"x": float("nan")}, {"creator": {"version": "1"}}, [1]):
            with pytest.raises(SpecViolationError):
                w.add_record(meta=meta, system=molecule(0)["system"])  # type: ignore[arg-type]
        assert w.n_records == 0


@pytest.mark.parametrize("units", [{"length": "nm"}, {"length": "angstrom", "energy": "eV"}])
def test_C1_units_given_twice_must_agree(path: Path, units: dict) -> None:
    if units == {"length": "angstrom", "energy": "eV"}:
        with pytest.raises(SpecViolationError) as caught:
            mr.CollectionWriter(path, units=UNITS, meta={"units": units})
        assert caught.value.rule == "collection#C1"
    else:
        with mr.CollectionWriter(path, units=None, meta={"units": units}) as w:
            w.add_record(system=molecule(0)["system"])
        assert mr.read_collection(path).units == units


def test_lmdb_L16_a_system_carries_no_cell(path: Path) -> None:
    system = mr.Frame({}, {"atoms": mr.Block({"element": np.array(["C"], dtype=object)})}, mr.Box())
    with mr.CollectionWriter(path, units=UNITS) as w:
        with pytest.raises(SpecViolationError) as caught:
            w.add_record(system=system)
        assert caught.value.rule == "lmdb#L16"


@pytest.mark.parametrize("system,rule", [
    (mr.Frame({}, {"box": mr.Block({"x": np.zeros(1)})}), "frame-and-types#14.31"),
    (mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(1, np.float32)})}), "frame-and-types#14.37"),
    (mr.Frame({}, {"atoms": mr.Block({"id": np.array([-1])})}), "frame-and-types#14.38"),
    (mr.Frame({}, {"bonds": mr.Block({"atomi": np.array([3], np.uint64)}, targets={"atomi": "atoms"}),
                   "atoms": mr.Block({"x": np.zeros(2)})}), "frame-and-types#14.12"),
    (mr.Frame({"_meta_types": 1}, {}), "frame-and-types#14.33"),
    (mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(2)}, precision={"x": -1.0})}), "frame-and-types#14.35"),
])
def test_a_system_is_checked_as_a_frame_shaped_section(path: Path, system: mr.Frame, rule: str) -> None:
    with mr.CollectionWriter(path, units=UNITS) as w:
        with pytest.raises(MolrecError) as caught:
            w.add_record(system=system)
        assert caught.value.rule == rule, caught.value
        assert caught.value.store == str(path)


@pytest.mark.parametrize("system,rule", [
    (mr.Frame({}, {"atoms": mr.Block({"element": np.array(["C", 7], dtype=object)})}), "frame-and-types#14.37"),
    (mr.Frame({}, {"atoms": mr.Block({"id": np.array([-1, 0])})}), "frame-and-types#14.38"),
])
def test_a_system_of_a_shape_checked_before_is_still_checked_for_its_values(path: Path, system: mr.Frame,
                                                                            rule: str) -> None:
    """A writer checks a plain system's shape once; the values of a later system of that shape
    are still held to the rules that depend on them."""
    good = mr.Frame({}, {"atoms": mr.Block({"element": np.array(["C", "H"], dtype=object)})})
    with mr.CollectionWriter(path, units=UNITS) as w:
        w.add_record(system=good)
        w.add_record(system=mr.Frame({}, {"atoms": mr.Block({"id": np.array([0, 1])})}))
        with pytest.raises(MolrecError) as caught:
            w.add_record(system=system)
        assert caught.value.rule == rule, caught.value
        w.add_record(system=good)
    with mr.read_collection(path) as c:
        assert len(c) == 3 and c[2].system.blocks["atoms"].columns["element"].tolist() == ["C", "H"]


def test_lmdb_L14_system_precision_rounds_the_stored_values(path: Path) -> None:
    system = mr.Frame({}, {"atoms": mr.Block({"charge": np.array([0.7572, -0.1])}, precision={"charge": 0.001})})
    with mr.CollectionWriter(path, units=UNITS) as w:
        w.add_record(system=system)
    atoms = mr.read_collection(path)[0].system.blocks["atoms"]
    assert atoms.precision == {"charge": 0.001} and atoms.columns["charge"][0] == 0.7568359375


def test_trajectory_precision_rounds_and_unchanged_rounded_values_are_no_update(path: Path) -> None:
    schema = mr.SequenceSchema().declare_column("atoms", "x", "f64").declare_precision("atoms", "x", 0.001)
    schema.declare_column("atoms", "y", "f64")
    frames = [mr.Frame({}, {"atoms": mr.Block({"x": np.array([0.7572]), "y": np.array([1.0])})}),
              mr.Frame({}, {"atoms": mr.Block({"x": np.array([0.75721]), "y": np.array([1.0])})})]
    with mr.CollectionWriter(path, units=UNITS, schema=schema) as w:
        w.add_record(frames=frames)
    t = mr.read_collection(path)[0].trajectory
    assert t[0].blocks["atoms"].columns["x"][0] == 0.7568359375 and t[0].blocks["atoms"].precision == {"x": 0.001}
    from molrec_raw.collection.frame_bytes import header_of
    handle = binding.acquire(path)
    with handle.env.begin() as txn:
        assert list(header_of(bytes(txn.get(u64be(b"f", 1))), "")[0]["blocks"]) == []  # the same after rounding
    handle.release()


@pytest.mark.parametrize("index_schema,index,rule", [
    ({"n_atoms": "u64"}, None, "collection#C5"),
    ({"first_frame": "u64"}, None, "collection#C5"),
    (None, {"has_trajectory": True}, "collection#C5"),
    ({"n": "i32"}, {"n": 2**40}, "collection#C6"),
    ({"n": "i32"}, {"n": 1.5}, "collection#C6"),
    ({"n": "i32"}, {"m": 1}, "collection#C6"),
    ({"n": "i32"}, {}, "collection#C6"),
    ({"v": {"dtype": "f64", "trailing": [3]}}, {"v": [1.0, 2.0]}, "collection#C6"),
    ({"s": "string"}, {"s": 3}, "collection#C6"),
    ({"f": "f64"}, {"f": 2**60 + 1}, "collection#C6"),
    ({"b": "bool"}, {"b": 1}, "collection#C6"),
    ({"x": "f32"}, None, "frame-and-types#14.37"),
    ({"mol_id": "i64"}, None, "frame-and-types#14.38"),
    ({"q": {"dtype": "i64", "precision": 0.1}}, None, "frame-and-types#14.34"),
    ({"q": {"dtype": "f64", "shape": [0]}}, None, "collection#C6"),
])
def test_C5_C6_index_columns_are_declared_and_held_to_their_declaration(
        path: Path, index_schema: object, index: object, rule: str) -> None:
    def attempt() -> None:
        with mr.CollectionWriter(path, units=UNITS, index_schema=index_schema) as w:  # type: ignore[arg-type]
            w.add_record(system=molecule(0)["system"], index=index)  # type: ignore[arg-type]
    with pytest.raises(MolrecError) as caught:
        attempt()
    assert caught.value.rule == rule, caught.value


def test_C6_index_schema_declares_columns_an_empty_collection_keeps(path: Path) -> None:
    index_schema = {"mask": {"dtype": "bool", "trailing": [4]}, "e": {"dtype": "f64", "precision": 0.5},
                    "code": {"dtype": "string", "nullable": True}}
    with mr.CollectionWriter(path, units=UNITS, index_schema=index_schema):
        pass
    c = mr.read_collection(path)
    assert len(c) == 0 and c.n_frames == 0
    spec = c.index_schema
    assert (spec["mask"].dtype, spec["mask"].trailing, spec["mask"].nullable) == ("bool", (4,), False)
    assert (spec["e"].precision, spec["code"].nullable) == (0.5, True)
    assert c.index.columns["mask"].shape == (0, 4)


def test_C6_index_values_round_trip_nulls_precision_and_a_derived_index(path: Path) -> None:
    index_schema = {"mask": {"dtype": "bool", "trailing": [2]}, "e": {"dtype": "f64", "precision": 0.5},
                    "code": {"dtype": "string", "nullable": True}}
    with mr.CollectionWriter(path, units=UNITS, index_schema=index_schema) as w:
        w.add_record(system=molecule(0)["system"], index={"mask": [True, False], "e": 1.3, "code": "a"})
        w.add_record(system=molecule(1)["system"], index={"mask": np.array([False, False]), "e": -0.2})
    c = mr.read_collection(path)
    first = c[0].index
    assert (first["e"], first["code"], first["mask"].tolist()) == (1.5, "a", [True, False])
    assert c[1].index["code"] is None and c[1].index["e"] == -0.0
    assert c.index.masks["code"].tolist() == [True, False]
    with mr.CollectionWriter(path.with_name("d.mrec.lmdb"), units=UNITS) as w:  # derived: records declare columns
        w.add_record(system=molecule(0)["system"])
        w.add_record(system=molecule(1)["system"], index={"smiles": "CO", "size": 3, "id": 7})
        w.add_record(system=molecule(2)["system"], index={"size": 4})
    d = mr.read_collection(path.with_name("d.mrec.lmdb"))
    assert {n: (s.dtype, s.nullable) for n, s in d.index_schema.items()} == {
        "smiles": ("string", True), "size": ("i64", True), "id": ("u64", True)}
    assert [d[r].index for r in range(3)] == [{"smiles": None, "size": None, "id": None},
                                              {"smiles": "CO", "size": 3, "id": 7},
                                              {"smiles": None, "size": 4, "id": None}]


def test_binding_index_columns(path: Path) -> None:
    with mr.CollectionWriter(path, units=UNITS) as w:
        w.add_record(**molecule(0, n=3, frames=2))
        w.add_record(system=molecule(1, n=5)["system"])
        w.add_record(frames=[mr.Frame({"pe": 0.0}, {"atoms": mr.Block({c: np.zeros(7) for c in XYZF})})])
        w.add_record(frames=[], system=mr.Frame({}, {"atoms": mr.Block({"element": np.array([], dtype=object)})}))
    b = mr.read_collection(path).binding_index()
    assert b["first_frame"].tolist() == [0, 2, 2, 3] and b["n_frames"].tolist() == [2, 0, 1, 0]
    assert b["n_atoms"].tolist() == [3, 5, 7, 0] and b["has_trajectory"].tolist() == [True, False, True, True]


def test_writer_arguments_are_checked(path: Path) -> None:
    for kwargs in ({"commit_every": 0}, {"commit_bytes": -1}, {"map_size": 1.5}, {"schema": {"blocks": {}}}):
        with pytest.raises(InvalidValueError):
            mr.CollectionWriter(path, units=UNITS, **kwargs)  # type: ignore[arg-type]
    assert not path.exists()
    with mr.CollectionWriter(path, units=UNITS) as w:
        for bad in ({"system": {"atoms": {}}}, {"frames": [{"x": 1}]}, {"frames": mr.Frame()}, {"schema": "x", "frames": []},
                    {"frames": [mr.Frame()], "steps": [1, 2]}, {"frames": [mr.Frame(), mr.Frame()], "steps": [1]},
                    {"frames": [mr.Frame(), mr.Frame()], "steps": [2, 1]}, {"frames": [mr.Frame()], "times": ["a"]},
                    {"frames": [mr.Frame()], "steps": [2**63]}, {"index": [1], "frames": []}):
            with pytest.raises(MolrecError):
                w.add_record(**bad)  # type: ignore[arg-type]
        assert w.n_records == 0
    with pytest.raises(InvalidValueError):
        w.add_record(frames=[])  # closed


def test_lmdb_L4_L6_hand_built_meta_values_are_checked(tmp_path: Path) -> None:
    index = hand_index([], [], [])
    cases = [
        (hand_meta(0, 0, ATOMS_SCHEMA, layout="mrec-zarr"), "lmdb#L4", SpecViolationError),
        (hand_meta(0, 0, ATOMS_SCHEMA, layout_version=2), "lmdb#L4", UnsupportedFeatureError),
        (hand_meta(0, 0, ATOMS_SCHEMA, layout_version=0), "lmdb#L4", SpecViolationError),
        (hand_meta(0, 0, ATOMS_SCHEMA, layout_version=1.0), "lmdb#L4", SpecViolationError),
        (hand_meta(0, 0, ATOMS_SCHEMA, layout_version=None), "lmdb#L4", SpecViolationError),
        (hand_meta(0, -1, ATOMS_SCHEMA), "lmdb#L6", SpecViolationError),
        (hand_meta(1, 0, ATOMS_SCHEMA), "lmdb#L7", SpecViolationError),  # n_records disagrees with the index
        (hand_meta(0, 0, ATOMS_SCHEMA, drop=["sequence_schema"]), "lmdb#L3", SpecViolationError),
        (hand_meta(0, 0, {"blocks": {"atoms": {"columns": {"x": {"dtype": "f32"}}}}}), "trajectory#R11",
         SpecViolationError),
        (b"not json", "lmdb#L3", MolrecError),
    ]
    for n, (meta, rule, error) in enumerate(cases):
        path = write_lmdb(tmp_path / f"{n}.mrec.lmdb", {b"meta": meta, b"index": index})
        with pytest.raises(error) as caught:
            mr.read_collection(path)
        assert caught.value.rule == rule and caught.value.store == str(path), (n, caught.value)


@pytest.mark.parametrize("version", [0, 3, "2", None, 2.0, True])
def test_lmdb_L5_hand_built_molrec_version_outside_1_to_2_is_refused(path: Path, version: object) -> None:
    write_lmdb(path, {b"meta": hand_meta(0, 0, ATOMS_SCHEMA, collection={"molrec_version": version, "units": UNITS}),
                      b"index": hand_index([], [], [])})
    with pytest.raises(SpecViolationError) as caught:
        mr.read_collection(path)
    assert caught.value.rule == "lmdb#L5"


def test_lmdb_L5_a_collection_of_version_1_or_without_one_is_read(tmp_path: Path) -> None:
    for n, collection in enumerate(({"molrec_version": 1, "units": UNITS}, {"units": UNITS})):
        path = write_lmdb(tmp_path / f"{n}.mrec.lmdb", {b"meta": hand_meta(0, 0, ATOMS_SCHEMA, collection=collection),
                                                         b"index": hand_index([], [], [])})
        assert mr.read_collection(path).meta == collection


@pytest.mark.parametrize("case", ["prefix", "total", "no-index", "dtype", "frames-without-trajectory", "extra-block"])
def test_lmdb_L7_hand_built_index_that_breaks_its_rules_is_refused(path: Path, case: str) -> None:
    index = {"prefix": hand_index([1, 1], [1, 1], [True, True], first_frame=[0, 2]),
             "total": hand_index([1, 1], [1, 1], [True, True]),
             "no-index": None,
             "dtype": None,
             "frames-without-trajectory": hand_index([1, 1], [1, 1], [True, False]),
             "extra-block": None}[case]
    n_frames = 3 if case == "total" else 2
    items = {b"meta": hand_meta(2, n_frames, ATOMS_SCHEMA)}
    if case == "dtype":
        from collection_helpers import Columns, hand_block, hand_frame
        cols = (Columns().numeric("first_frame", "i64", [0, 1]).numeric("n_frames", "u64", [1, 1])
                .numeric("n_atoms", "u64", [1, 1]).numeric("has_trajectory", "bool", [1, 1]))
        index = hand_frame({"blocks": {"records": hand_block(2, cols)}}, cols.buffers)
    if case == "extra-block":
        from collection_helpers import Columns, hand_block, hand_frame
        cols = (Columns().numeric("first_frame", "u64", [0, 1]).numeric("n_frames", "u64", [1, 1])
                .numeric("n_atoms", "u64", [1, 1]).numeric("has_trajectory", "bool", [1, 1]))
        index = hand_frame({"blocks": {"records": hand_block(2, cols), "more": hand_block(0, Columns())}}, cols.buffers)
    if index is not None:
        items[b"index"] = index
    write_lmdb(path, items)
    with pytest.raises(SpecViolationError) as caught:
        mr.read_collection(path)
    assert caught.value.rule == "lmdb#L7" and caught.value.key == "index", caught.value


def test_a_reader_names_a_missing_frame_key(path: Path) -> None:
    write_lmdb(path, {b"meta": hand_meta(1, 2, ATOMS_SCHEMA), b"index": hand_index([2], [2], [True]),
                      u64be(b"r", 0): b"{}"})
    with pytest.raises(MolrecError) as caught:
        mr.read_collection(path)[0].trajectory[1]
    assert caught.value.key in ("f‖0", "f‖1") and caught.value.rule == "lmdb#L8"


def test_the_file_is_one_lmdb_environment_of_one_unnamed_database(path: Path) -> None:
    with mr.CollectionWriter(path, units=UNITS) as w:
        w.add_record(**molecule(0))
    assert path.is_file() and sorted(p.name for p in path.parent.iterdir()) == ["c.mrec.lmdb", "c.mrec.lmdb-lock"]
    keys = _keys(path)
    assert set(keys) == {b"index", b"meta", u64be(b"r", 0), u64be(b"s", 0), u64be(b"f", 0), u64be(b"f", 1)}
    doc = json.loads(dict((bytes(k), bytes(v)) for k, v in stored_pairs(path))[b"meta"])
    assert doc["sequence_schema"]["meta"] == {"pe": {"dtype": "f64"}}



def test_frames_given_with_a_schema_and_masks_on_a_declared_nullable_column(path: Path) -> None:
    schema = mr.SequenceSchema().declare_column("atoms", "q", "f64").declare_nullable("atoms", "q")
    with mr.CollectionWriter(path, units=UNITS, schema=schema) as w:
        w.add_record(frames=[mr.Frame({}, {"atoms": mr.Block({"q": np.arange(3.0)}, masks={"q": np.array([1, 0, 1], bool)})})])
        with pytest.raises(MolrecError):  # a mask on a column the declaration does not make nullable
            bad = mr.SequenceSchema().declare_column("atoms", "q", "f64")
            with mr.CollectionWriter(path.with_name("x.mrec.lmdb"), units=UNITS, schema=bad) as w2:
                w2.add_record(frames=[mr.Frame({}, {"atoms": mr.Block({"q": np.zeros(1)}, masks={"q": np.array([False])})})])
    assert mr.read_collection(path)[0].trajectory[0].blocks["atoms"].masks["q"].tolist() == [True, False, True]


def test_repr_and_properties(path: Path) -> None:
    w = mr.CollectionWriter(path, units=UNITS, schema=xyzf_schema())
    w.add_record(**molecule(0))
    assert "1 records" in repr(w) and w.path == path and w.schema == xyzf_schema()
    w.close()
    w.close()  # idempotent
    c = mr.read_collection(path)
    assert "1 records" in repr(c) and c.path == path and repr(c[0]).startswith("Record(0")


def test_lmdb_L8_a_producer_reusing_one_array_in_place_is_recorded_frame_by_frame(path: Path) -> None:
    x = np.zeros(3)

    def frames():
        for k in range(4):
            x[:] = k // 2  # changes at frames 0 and 2, the same object every time
            yield mr.Frame({}, {"atoms": mr.Block({"x": x})})

    with mr.CollectionWriter(path, units=UNITS) as w:
        w.add_record(frames=frames())
    t = mr.read_collection(path)[0].trajectory
    assert [f.blocks["atoms"].columns["x"].tolist() for f in t] == [[0.0] * 3, [0.0] * 3, [1.0] * 3, [1.0] * 3]
    from molrec_raw.collection.frame_bytes import header_of
    handle = binding.acquire(path)
    with handle.env.begin() as txn:
        changed = [list(header_of(bytes(txn.get(u64be(b"f", j))), "")[0]["blocks"]) for j in range(4)]
    handle.release()
    assert changed == [["atoms"], [], ["atoms"], []]
