"""Unversioned stores are current (README decisions 1, 15 and 21 as revised; spec-notes/record.md
and spec-notes/collection.md): the newest public chapters carry no version key, and molrs 0.19
stamps none.  A record without ``molrec_version`` — written by molrs when it is installed, or
one of ours with the key removed — is read, validated clean, reopened and appended to, its
force field read as current; a collection whose ``meta`` has no ``layout_version`` (and whose
collection document has no ``molrec_version``) reads as the current layout.  A stamped value
that is not a valid version is still refused, and our writers keep stamping 2.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Dict

import numpy as np
import pytest

import molrec_raw as mr
from molrec_raw.errors import SpecViolationError, UnsupportedFeatureError
from molrec_raw.record.doors import read_mrec_meta, write_mrec_frame, write_mrec_forcefield
from molrec_raw.record.forcefield import ForceFieldSection, block_name
from molrec_raw.record.model import Block, Frame
from molrec_raw.record.molrec import validate
from molrec_raw.zarr import open_group

MOLRS_REASON = "molrs (the reference implementation) ships wheels for Python >= 3.12 only"


def unstamp(path: Path) -> None:
    """Remove ``molrec_version`` from the record's meta/ (a store as the newest texts write it)."""
    meta = open_group(path, mode="r+")["meta"]
    attrs = dict(meta.attrs)
    del attrs["molrec_version"]
    meta.attrs.put(attrs)


def frame(i: int, n: int = 4) -> Frame:
    return Frame({}, {"atoms": Block({c: np.arange(n, dtype=np.float64) * (i + 1) + k for k, c in enumerate("xyz")})})


def schema() -> mr.SequenceSchema:
    s = mr.SequenceSchema().declare_block("atoms")
    for c in "xyz":
        s.declare_column("atoms", c, "f64")
    return s


def forcefield() -> ForceFieldSection:
    return ForceFieldSection(
        {"name": "water", "units": {"preset": "real"},
         "styles": [{"category": "atom", "style": "full"}, {"category": "bond", "style": "harmonic"}]},
        {block_name("atom", "full"): Block({"name": np.array(["OW", "HW"], dtype=object),
                                             "mass": np.array([15.999, 1.008]), "charge": np.array([-0.8, 0.4])}),
         block_name("bond", "harmonic"): Block({"name": np.array(["OW-HW"], dtype=object),
                                                 "itom": np.array(["OW"], dtype=object),
                                                 "jtom": np.array(["HW"], dtype=object),
                                                 "k": np.array([1059.162]), "r0": np.array([1.0])})})


def same_forcefield(a: ForceFieldSection, b: ForceFieldSection) -> bool:
    return a.document == b.document and sorted(a.tables) == sorted(b.tables) and all(
        sorted(a.tables[t].columns) == sorted(b.tables[t].columns)
        and all(np.array_equal(a.tables[t].columns[c], b.tables[t].columns[c]) for c in b.tables[t].columns)
        for t in b.tables)


def molrs_trajectory(path: Path, frames: int) -> None:
    molrs = pytest.importorskip("molrs", reason=MOLRS_REASON)
    from molrs.io import mrec

    s = mrec.SequenceSchema.from_frames([])
    s.declare_block("atoms")
    for c in "xyz":
        s.declare_column("atoms", c, "f64")
    w = mrec.MrecWriter(path, s, meta={"creator": {"name": "molrs"}})
    for i in range(frames):
        w.append(molrs.Frame({"atoms": dict(frame(i).blocks["atoms"].columns)}), step=i)
    w.close()


def our_unstamped_trajectory(path: Path, frames: int) -> None:
    with mr.MrecWriter(path, schema(), meta={"creator": {"name": "another writer"}}) as w:
        for i in range(frames):
            w.append(frame(i), step=i)
    unstamp(path)


# -- records -------------------------------------------------------------------------------------
@pytest.mark.parametrize("write", [molrs_trajectory, our_unstamped_trajectory], ids=["molrs", "key-removed"])
def test_decision_1_an_unstamped_trajectory_is_read_validated_reopened_and_appended(
        tmp_path: Path, write: Callable[[Path, int], None]) -> None:
    path = tmp_path / "t.mrec"
    write(path, 3)
    meta = (path / "meta" / "zarr.json").read_bytes()
    assert "molrec_version" not in read_mrec_meta(path)
    assert validate(path) == []
    w = mr.MrecWriter.open(path)  # once refused: "a molrec_version None record"
    for i in range(3, 5):
        w.append(frame(i), step=i)
    w.close()
    with mr.MrecReader(path) as r:
        assert len(r) == 5 and r.step == list(range(5))
        for i in range(5):
            assert all(np.array_equal(r[i].blocks["atoms"][c], frame(i).blocks["atoms"][c]) for c in "xyz")
    assert (path / "meta" / "zarr.json").read_bytes() == meta  # a reopen writes nothing into meta
    assert validate(path) == []


def test_decision_1_a_frame_record_molrs_wrote_reads_as_written(tmp_path: Path) -> None:
    molrs = pytest.importorskip("molrs", reason=MOLRS_REASON)
    import molrs.io

    values = {"x": np.array([0.5, -0.0, 5e-324]), "element": ["O", "H", "H"]}
    molrs.io.write_mrec(tmp_path / "f.mrec", meta={"source": "molrs", "n": 3}, frame=molrs.Frame({"atoms": values}))
    assert read_mrec_meta(tmp_path / "f.mrec") == {"source": "molrs", "n": 3}
    assert validate(tmp_path / "f.mrec") == []
    atoms = mr.read_mrec_frame(tmp_path / "f.mrec").blocks["atoms"]
    assert atoms["x"].tobytes() == values["x"].tobytes() and list(atoms["element"]) == values["element"]


def test_decision_15_a_forcefield_molrs_wrote_is_current(tmp_path: Path) -> None:
    """molrs's force field (no molrec_version): validate says nothing, not the version-1 note."""
    pytest.importorskip("molrs", reason=MOLRS_REASON)
    import molrs.io
    from molrs.io import mrec

    write_mrec_forcefield(tmp_path / "ours.mrec", forcefield())
    section = mrec.MrecFile(tmp_path / "ours.mrec").forcefield()
    molrs.io.write_mrec(tmp_path / "ff.mrec", meta={"creator": {"name": "molrs"}}, forcefield=section)
    assert "molrec_version" not in read_mrec_meta(tmp_path / "ff.mrec")
    assert validate(tmp_path / "ff.mrec") == []  # once: README#decision-15 "version-1 force field"
    got = mr.read_mrec_forcefield(tmp_path / "ff.mrec")
    assert got is not None and same_forcefield(got, forcefield())


def test_decision_15_an_unstamped_forcefield_is_current_one_stamped_1_is_noted(tmp_path: Path) -> None:
    path = tmp_path / "ff.mrec"
    write_mrec_forcefield(path, forcefield(), meta={"source": "x"})
    unstamp(path)
    assert validate(path) == []
    open_group(path, mode="r+")["meta"].attrs["molrec_version"] = 1
    assert [v.rule for v in validate(path)] == ["README#decision-15"]


def test_frame_and_types_14_30_nothing_calls_an_unstamped_store_old(tmp_path: Path) -> None:
    """explain and validate never call an unstamped store legacy, pre-1 or version 1."""
    from molrec_raw.record.explain import explain

    path = tmp_path / "t.mrec"
    our_unstamped_trajectory(path, 2)
    text = "\n".join([explain(path).text(), explain(path, frame=1).text(), *(v.message for v in validate(path))])
    for word in ("legacy", "pre-1", "version-1", "version 1"):
        assert word not in text.lower()


@pytest.mark.parametrize("value, error", [(3, SpecViolationError), ("2", SpecViolationError),
                                          (None, SpecViolationError), (2.0, SpecViolationError)])
def test_frame_and_types_14_23_a_stamped_value_that_is_not_a_version_is_refused(
        tmp_path: Path, value: Any, error: type) -> None:
    path = tmp_path / "t.mrec"
    our_unstamped_trajectory(path, 2)
    open_group(path, mode="r+")["meta"].attrs["molrec_version"] = value
    with pytest.raises(error, match="molrec_version"):
        mr.MrecReader(path)
    with pytest.raises(error, match="molrec_version"):
        mr.MrecWriter.open(path)
    assert [v.rule for v in validate(path)][:1] == ["frame-and-types#14.23"]


def test_trajectory_W14_a_trajectory_stamped_1_is_read_but_not_reopened(tmp_path: Path) -> None:
    path = tmp_path / "t.mrec"
    our_unstamped_trajectory(path, 2)
    open_group(path, mode="r+")["meta"].attrs["molrec_version"] = 1
    with mr.MrecReader(path) as r:
        assert len(r) == 2
    with pytest.raises(SpecViolationError, match="molrec_version 1") as caught:
        mr.MrecWriter.open(path)
    assert caught.value.rule == "trajectory#W14"


def test_frame_and_types_14_50_our_writers_keep_stamping_2(tmp_path: Path) -> None:
    write_mrec_frame(tmp_path / "f.mrec", frame(0), meta={"molrec_version": 7, "source": "x"})
    assert read_mrec_meta(tmp_path / "f.mrec") == {"molrec_version": 2, "source": "x"}
    our_unstamped_trajectory(tmp_path / "t.mrec", 1)
    with mr.MrecWriter(tmp_path / "t2.mrec", schema(), meta=read_mrec_meta(tmp_path / "t.mrec")) as w:
        w.append(frame(0))
    assert read_mrec_meta(tmp_path / "t2.mrec")["molrec_version"] == 2


# -- collections ---------------------------------------------------------------------------------
UNITS = {"length": "angstrom", "energy": "eV"}


def collection(path: Path) -> Path:
    pytest.importorskip("lmdb", reason="collections need py-lmdb (the [lmdb] extra)")
    with mr.CollectionWriter(path, units=UNITS, meta={"dataset": "unversioned"}, schema=schema()) as w:
        for r in range(3):
            w.add_record(meta={"source": f"r{r}"}, frames=[frame(10 * r + k, 2 + r) for k in range(r + 1)])
    return path


def edit_meta(path: Path, change: Callable[[Dict[str, Any]], object]) -> None:
    """Rewrite the collection's ``meta`` value through py-lmdb."""
    import lmdb

    env = lmdb.open(str(path), subdir=False, lock=False)
    try:
        with env.begin(write=True) as txn:
            doc = json.loads(bytes(txn.get(b"meta")))
            change(doc)
            txn.put(b"meta", json.dumps(doc).encode())
    finally:
        env.close()


def read_all(path: Path) -> None:
    with mr.read_collection(path) as c:
        assert len(c) == 3 and c.meta["units"] == UNITS
        for r in range(3):
            record = c[r]
            assert record.meta == {"source": f"r{r}"} and record.n_frames == r + 1
            for k in range(r + 1):
                got, want = record.frame(k).blocks["atoms"], frame(10 * r + k, 2 + r).blocks["atoms"]
                assert all(np.array_equal(got[col], want[col]) for col in "xyz")


def test_decision_21_a_collection_without_layout_version_reads_as_the_current_layout(tmp_path: Path) -> None:
    from molrec_raw.collection.inspection import describe, describe_lines, validate_collection

    path = collection(tmp_path / "c.mrec.lmdb")
    edit_meta(path, lambda doc: doc.pop("layout_version"))
    read_all(path)
    assert validate_collection(path) == []
    assert describe(path)["layout_version"] is None
    assert "(mrec-lmdb, molrec_version 2)" in describe_lines(describe(path))[0]
    edit_meta(path, lambda doc: doc["collection"].pop("molrec_version"))  # the newest lmdb.md's meta, whole
    read_all(path)
    assert validate_collection(path) == []


@pytest.mark.parametrize("value, error", [(0, SpecViolationError), (None, SpecViolationError),
                                          (1.0, SpecViolationError), (2, UnsupportedFeatureError)])
def test_lmdb_L4_a_present_layout_version_must_be_known(tmp_path: Path, value: Any, error: type) -> None:
    path = collection(tmp_path / "c.mrec.lmdb")
    edit_meta(path, lambda doc: doc.update(layout_version=value))
    with pytest.raises(error, match="layout_version") as caught:
        mr.read_collection(path)
    assert caught.value.rule == "lmdb#L4"


def test_lmdb_L4_our_writer_keeps_writing_layout_version_1(tmp_path: Path) -> None:
    import lmdb

    path = collection(tmp_path / "c.mrec.lmdb")
    env = lmdb.open(str(path), subdir=False, lock=False, readonly=True)
    try:
        with env.begin() as txn:
            doc = json.loads(bytes(txn.get(b"meta")))
    finally:
        env.close()
    assert doc["layout_version"] == 1 and doc["collection"]["molrec_version"] == 2
