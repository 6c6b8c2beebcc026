"""``MrecReader.block_array`` / ``column_array``: a block with a fixed row count over many
frames as one array, equal to stacking the resolved frames (trajectory §9) for every layout
(regular, indexed with carried-forward updates, any chunking a foreign writer chose)."""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import molrec_raw as mr
from molrec_raw import MrecReader, MrecWriter, SequenceSchema
from molrec_raw.errors import InvalidValueError
from molrec_raw.zarr import open_group
from traj_helpers import CountingStore


def _schema(rows: int) -> SequenceSchema:
    schema = SequenceSchema().declare_block("atoms", rows=rows)
    schema.declare_column("atoms", "x", "f64").declare_column("atoms", "y", "f64")
    schema.declare_column("atoms", "tag", "i32").declare_column("atoms", "pos", "f64", (3,))
    return schema


def _atoms(rng: np.random.Generator, rows: int) -> mr.Block:
    return mr.Block({"x": rng.normal(size=rows), "y": rng.normal(size=rows),
                     "tag": rng.integers(-9, 9, size=rows).astype(np.int32), "pos": rng.normal(size=(rows, 3))})


def _write(path: Path, rows: int, plan, flush_every: int, seed: int) -> None:
    """``plan[i]``: 'new' (fresh values), 'same' (the previous values again: no update),
    'omit' (block left out: carried forward)."""
    rng = np.random.default_rng(seed)
    last = None
    with MrecWriter(path, _schema(rows), flush_every=flush_every, durable=False) as w:
        for i, what in enumerate(plan):
            if what == "new" or (what == "same" and last is None):
                last = _atoms(rng, rows)
            blocks = {} if what == "omit" or last is None else {"atoms": last}
            w.append(mr.Frame({}, blocks), step=i)


def _rechunk(path: Path, chunk_rows: int, per_shard: int) -> None:
    """Store every column again with another chunking, as a foreign writer might."""
    group = open_group(path, mode="r+")["trajectory/atoms"]
    for name in ("x", "y", "tag", "pos"):
        values = group[name][...]
        trailing = values.shape[1:]
        group.create_array(name, shape=values.shape, dtype=values.dtype, chunks=(chunk_rows,) + trailing,
                           shards=(chunk_rows * per_shard,) + trailing, overwrite=True)[...] = values


def _expected(reader: MrecReader, frames, columns):
    return np.stack([np.stack([reader[int(i)].blocks["atoms"].columns[c] for c in columns], axis=-1)
                     for i in frames]) if len(frames) else None


plans = st.lists(st.sampled_from(["new", "new", "same", "omit"]), min_size=1, max_size=16)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.integers(1, 7), plan=plans, flush=st.integers(1, 9), seed=st.integers(0, 2**16),
       chunking=st.one_of(st.none(), st.tuples(st.integers(1, 11), st.integers(1, 4))), data=st.data())
def test_trajectory_9_block_array_equals_stacked_frames(rows, plan, flush, seed, chunking, data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.mrec"
        _write(path, rows, ["new"] + plan, flush, seed)
        if chunking is not None:
            _rechunk(path, *chunking)
        with MrecReader(path) as reader:
            n = len(reader)
            kind = data.draw(st.sampled_from(["all", "slice", "indices"]))
            if kind == "all":
                frames, expected_frames = None, list(range(n))
            elif kind == "slice":
                sl = slice(data.draw(st.integers(-n - 2, n + 2)), data.draw(st.integers(-n - 2, n + 2)),
                           data.draw(st.sampled_from([1, 2, 3, -1, -2])))
                frames, expected_frames = sl, list(range(n))[sl]
            else:
                frames = data.draw(st.lists(st.integers(-n, n - 1), max_size=12))
                expected_frames = [i % n for i in frames]
            names = data.draw(st.sampled_from([["x"], ["x", "y"], ["y", "x", "y"]]))
            if data.draw(st.booleans()):
                with pytest.raises(InvalidValueError):  # every column: pos has trailing axes, tag another dtype
                    reader.block_array("atoms", None, frames)
            got = reader.block_array("atoms", names, frames)
            assert got.shape == (len(expected_frames), rows, len(names))
            if expected_frames:
                np.testing.assert_array_equal(got, _expected(reader, expected_frames, names))
                pos = reader.column_array("atoms", "pos", frames)
                assert pos.shape == (len(expected_frames), rows, 3)
                np.testing.assert_array_equal(pos, np.stack([reader[i].blocks["atoms"].columns["pos"]
                                                             for i in expected_frames]))
                tags = reader.block_array("atoms", ["tag"], frames)
                assert tags.dtype == np.int32
                np.testing.assert_array_equal(tags[:, :, 0], np.stack([reader[i].blocks["atoms"].columns["tag"]
                                                                        for i in expected_frames]))


def test_trajectory_9_block_array_reads_each_inner_chunk_once(tmp_path):
    """Counted on the store: each inner chunk the frames need is read once."""
    path = tmp_path / "t.mrec"
    _write(path, 4, ["new"] * 40, 7, 0)
    store = CountingStore(path)
    with MrecReader(store) as reader:
        store.reads.clear()
        out = reader.block_array("atoms", ["x"], None)
        assert out.shape == (40, 4, 1)
        x_reads = [r for r in store.reads if r[0].startswith("trajectory/atoms/x/")]
        # the one inner chunk holding all 160 rows (2048 rows per chunk); its shard's index was
        # read when the reader opened (the written-rows check) and is kept (read engine)
        assert [r[1][0] > 0 for r in x_reads] == [True]
        store.reads.clear()
        reader.block_array("atoms", ["x"], [5, 5, 6, 5])  # frames 5 and 6 share that inner chunk
        assert len([r for r in store.reads if r[0] == "trajectory/atoms/x/c/0" and r[1][0] > 0]) == 1


def test_trajectory_9_block_array_refusals(tmp_path):
    path = tmp_path / "t.mrec"
    _write(path, 3, ["omit", "omit", "new", "new"], 2, 1)
    with MrecReader(path) as reader:
        assert reader.block_array("atoms", ["x"], slice(2, None)).shape == (2, 3, 1)
        with pytest.raises(InvalidValueError, match="absent at frame 0"):
            reader.block_array("atoms", ["x"])
        with pytest.raises(InvalidValueError, match="not a declared column"):
            reader.block_array("atoms", ["nope"], [3])
        with pytest.raises(InvalidValueError, match="trailing axes"):
            reader.block_array("atoms", ["pos"], [3])
        with pytest.raises(InvalidValueError, match="different dtypes"):
            reader.block_array("atoms", ["x", "tag"], [3])
        with pytest.raises(InvalidValueError, match="not one string"):
            reader.block_array("atoms", "x", [3])
        with pytest.raises(InvalidValueError, match="not declared"):
            reader.block_array("bonds")
        with pytest.raises(IndexError):
            reader.block_array("atoms", ["x"], [4])
        with pytest.raises(InvalidValueError, match="1-D array"):
            reader.block_array("atoms", ["x"], np.array([[2]]))
        with pytest.raises(InvalidValueError, match="1-D array"):
            reader.block_array("atoms", ["x"], [True, False, True, True])
    ragged = tmp_path / "r.mrec"
    frames = [mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(k)})}) for k in (2, 3)]
    mr.write_mrec_trajectory(ragged, frames)
    with MrecReader(ragged) as reader:
        with pytest.raises(InvalidValueError, match="ragged"):
            reader.block_array("atoms")
        assert reader.block_info("atoms").fixed_rows is None


def test_trajectory_8_4_block_array_refuses_masked_rows(tmp_path):
    schema = SequenceSchema().declare_block("atoms", rows=2).declare_column("atoms", "q", "f64")
    schema.declare_nullable("atoms", "q")
    with MrecWriter(tmp_path / "m.mrec", schema, durable=False) as w:
        w.append(mr.Frame({}, {"atoms": mr.Block({"q": np.ones(2)})}))
        w.append(mr.Frame({}, {"atoms": mr.Block({"q": np.zeros(2)}, masks={"q": np.array([True, False])})}))
    with MrecReader(tmp_path / "m.mrec") as reader:
        np.testing.assert_array_equal(reader.block_array("atoms", ["q"], [0])[:, :, 0], [[1.0, 1.0]])
        with pytest.raises(InvalidValueError, match="masked"):
            reader.block_array("atoms", ["q"])


def test_trajectory_9_block_columns_is_the_per_column_form(tmp_path):
    """``block_columns``: {column: (frames, rows, *trailing)}; the row count is checked at the
    selected frames only; nullable and row-reference columns are refused."""
    path = tmp_path / "t.mrec"
    _write(path, 3, ["new"] * 6, 4, 2)
    with MrecReader(path) as reader:
        got = reader.block_columns("atoms", None, [4, 1, 4])
        assert list(got) == ["x", "y", "tag", "pos"] and got["pos"].shape == (3, 3, 3) and got["tag"].dtype == np.int32
        for name, values in got.items():
            np.testing.assert_array_equal(values, reader.column_array("atoms", name, [4, 1, 4]))
        assert reader.block_columns("atoms", [], None) == {}
    late = tmp_path / "late.mrec"
    schema = SequenceSchema().declare_column("late", "q", "f64").declare_column("sites", "s", "f64")
    schema.declare_nullable("sites", "s")
    with MrecWriter(late, schema, durable=False) as w:
        for i in range(6):
            w.append(mr.Frame({}, {} if i < 2 else {"late": mr.Block({"q": np.full(2 if i < 5 else 1, float(i))})}))
    with MrecReader(late) as reader:
        assert reader.block_columns("late", ["q"], range(2, 5))["q"].shape == (3, 2)
        with pytest.raises(InvalidValueError, match="changes its row count"):
            reader.block_columns("late", ["q"], range(2, 6))
        with pytest.raises(InvalidValueError, match="ragged"):
            reader.block_array("late", ["q"], range(2, 5))  # the stacked form needs one count for the run
        with pytest.raises(InvalidValueError, match="absent at frame 0"):
            reader.block_columns("late")
        with pytest.raises(InvalidValueError, match="nullable"):
            reader.block_columns("sites")
