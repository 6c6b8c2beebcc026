"""CollectionReader: which calls copy and which view LMDB's map, ``c.batch``, random and
sequential frame access inside a record, and the reader's own refusals."""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

import molrec_raw as mr
from collection_helpers import UNITS, XYZF, molecule, same_frame, xyzf_schema
from molrec_raw.errors import InvalidValueError, MolrecError, SpecViolationError


@pytest.fixture
def written(path: Path) -> Path:
    with mr.CollectionWriter(path, units=UNITS, schema=xyzf_schema()) as w:
        for r in range(8):
            w.add_record(**molecule(r, n=2 + r, frames=1 + r % 3), steps=[10 * k for k in range(1 + r % 3)])
    return path


def test_calls_return_copies_the_caller_owns(written: Path) -> None:
    c = mr.read_collection(written)
    x = c[3].trajectory[0].blocks["atoms"].columns["x"]
    element = c[3].system.blocks["atoms"].columns["element"]
    assert x.flags.writeable and x.flags.owndata is False and isinstance(x.base, (bytearray, np.ndarray))
    x += 1.0  # ours to change: nothing else sees it
    assert not np.array_equal(c[3].trajectory[0].blocks["atoms"].columns["x"], x)
    c.close()
    assert element.tolist() == ["C", "H", "O", "N", "C"] and np.isfinite(x).all()  # still valid after close


def test_views_point_into_the_map_only_while_the_view_is_open(written: Path) -> None:
    c = mr.read_collection(written)
    with c.view() as v:
        rec = v[5]
        x = rec.trajectory[0].blocks["atoms"].columns["x"]
        assert not x.flags.writeable  # read-only: a view of LMDB's map
        assert np.array_equal(x, c[5].trajectory[0].blocks["atoms"].columns["x"])
        assert same_frame(rec.system, c[5].system) and len(v) == 8
        batch = v.batch([1, 2])
        assert batch["atoms/x"].flags.writeable  # a batch is always new arrays
    with pytest.raises(InvalidValueError):
        rec.system  # the view is closed
    with pytest.raises(InvalidValueError):
        v.batch([1])


def test_batch_flat_arrays_of_the_readers_view(written: Path) -> None:
    c = mr.read_collection(written)
    records = [4, 0, 7]
    b = c.batch(records, frame=0)
    n = [2 + r for r in records]
    assert b["n_atoms"].tolist() == n and b["record"].tolist() == records
    assert b["atoms/x"].shape == (sum(n),) and b["atoms/element"].dtype == object
    for i, r in enumerate(records):
        lo = sum(n[:i])
        assert np.array_equal(b["atoms/fx"][lo:lo + n[i]], c[r].trajectory[0].blocks["atoms"].columns["fx"])
    assert b["pe"].tolist() == [-4.0, 0.0, -7.0] and b["step"].tolist() == [0, 0, 0]
    assert b["box/vectors"].shape == (3, 3, 3) and b["box/vectors"][0, 0, 0] == 14.0 and b["box/cell_defined"].all()
    assert "time" not in b
    last = c.batch(np.array(records), frame=-1)
    assert last["step"].tolist() == [10 * (r % 3) for r in records]
    assert last["pe"].tolist() == [-r - 0.5 * (r % 3) for r in records]
    systems = c.batch(records, frame=None)
    assert set(systems) == {"atoms/element", "n_atoms", "record"}
    with pytest.raises(InvalidValueError):
        c.batch([0], frame=1)  # record 0 has one frame
    with pytest.raises(IndexError):
        c.batch([8])
    empty = c.batch([])
    assert empty["record"].tolist() == []


def test_batch_refuses_records_whose_blocks_disagree(path: Path) -> None:
    with mr.CollectionWriter(path, units=UNITS) as w:
        w.add_record(system=mr.Frame({}, {"atoms": mr.Block({"q": np.zeros(2)})}))
        w.add_record(system=mr.Frame({}, {"atoms": mr.Block({"q": np.zeros(2, np.int32)})}))
        w.add_record(system=mr.Frame({}, {"atoms": mr.Block({"w": np.zeros(2)})}))
    c = mr.read_collection(path)
    for records in ([0, 1], [0, 2]):
        with pytest.raises(SpecViolationError) as caught:
            c.batch(records, frame=None)
        assert caught.value.rule == "collection#C2"


def test_batch_carries_masks_and_per_step_meta_of_every_tag(path: Path) -> None:
    schema = (mr.SequenceSchema().declare_column("atoms", "q", "f64").declare_nullable("atoms", "q")
              .declare_meta("n", "u32").declare_meta("v", "f64x3").declare_meta_with_fill("note", {"a": 1}, "json"))
    with mr.CollectionWriter(path, units=UNITS, schema=schema) as w:
        w.add_record(frames=[mr.Frame({"n": 1, "v": (1, 2, 3)}, {"atoms": mr.Block({"q": np.ones(2)},
                                                                                  masks={"q": np.array([1, 0], bool)})})],
                     times=[0.5])
        w.add_record(frames=[mr.Frame({"n": 2, "v": (0, 0, 0), "note": [1]}, {"atoms": mr.Block({"q": np.ones(1)})})],
                     times=[1.5])
    b = mr.read_collection(path).batch([0, 1])
    assert b["atoms/_validity/q"].tolist() == [True, False, True]
    assert b["n"].dtype == np.uint32 and b["n"].tolist() == [1, 2] and b["v"].shape == (2, 3)
    assert b["note"].tolist() == [{"a": 1}, [1]] and b["time"].tolist() == [0.5, 1.5]


def test_random_and_sequential_access_inside_a_record_agree(path: Path) -> None:
    rng = np.random.default_rng(5)
    frames = []
    for k in range(12):
        blocks = {"atoms": mr.Block({"x": rng.normal(size=3)})}
        if k % 4 == 0:
            blocks["bonds"] = mr.Block({"atomi": np.arange(k // 4 + 1, dtype=np.uint64)})
        frames.append(mr.Frame({"pe": float(k)}, blocks, mr.Box(np.eye(3) * (1 + k // 5)) if k % 5 == 0 else None))
    with mr.CollectionWriter(path, units=UNITS) as w:
        w.add_record(frames=frames, times=[0.1 * k for k in range(12)])
    t = mr.read_collection(path)[0].trajectory
    sequential = list(t)
    for k in (11, 3, 0, 7, 7, -1, 5):
        assert same_frame(t[k], sequential[k]), k
    assert [f.blocks["bonds"].count for f in sequential] == [1] * 4 + [2] * 4 + [3] * 4
    assert [f.box.vectors[0, 0] for f in sequential] == [1.0] * 5 + [2.0] * 5 + [3.0] * 2
    assert t.time.tolist() == pytest.approx([0.1 * k for k in range(12)]) and len(t) == 12
    with pytest.raises(IndexError):
        t[12]


def test_records_are_numbered_like_a_sequence(written: Path) -> None:
    c = mr.read_collection(written)
    assert c[-1].number == 7 and c[np.int64(2)].number == 2 and [r.number for r in c] == list(range(8))
    for bad in (8, -9):
        with pytest.raises(IndexError):
            c[bad]
    with pytest.raises(TypeError):
        c["1"]  # type: ignore[index]


def test_a_reader_pickles_as_its_path(written: Path) -> None:
    c = mr.read_collection(written)
    again = pickle.loads(pickle.dumps(c))
    assert len(again) == 8 and same_frame(again[2].system, c[2].system)
    again.close()
    assert len(c[1].trajectory) == 2  # the first reader is unaffected (one environment per process, counted)


def test_two_readers_of_one_file_in_one_process_share_its_environment(written: Path) -> None:
    a, b = mr.read_collection(written), mr.CollectionReader(written)
    assert a._handle is b._handle and a._handle.users == 2
    a.close()
    assert same_frame(b[0].system, molecule(0, n=2)["system"])
    b.close()
    with pytest.raises(InvalidValueError):
        b[0].system
    with mr.read_collection(written) as c:  # reopened after the last close
        assert len(c) == 8


def test_a_file_that_is_not_a_collection_is_refused(tmp_path: Path) -> None:
    junk = tmp_path / "junk.mrec.lmdb"
    junk.write_bytes(b"not an lmdb file at all" * 300)
    with pytest.raises(MolrecError) as caught:
        mr.read_collection(junk)
    assert caught.value.store == str(junk)
    with pytest.raises(MolrecError):
        mr.read_collection(tmp_path / "missing.mrec.lmdb")
    with pytest.raises(MolrecError):
        mr.read_collection(tmp_path)  # a directory


def test_record_meta_system_and_index_of_a_record(written: Path) -> None:
    c = mr.read_collection(written)
    rec = c[6]
    assert rec.meta == {"source": "mol-6"} and rec.index == {"n": 8, "tag": "t6"}
    assert rec.n_atoms == 8 and rec.n_frames == 1 and rec.has_trajectory
    assert rec.system.meta == {"smiles": "C" * 8, "charge": mr.MetaValue("i32", 0)}
    assert list(rec.frame(0).blocks["atoms"].columns) == ["element", *XYZF]
