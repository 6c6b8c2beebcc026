"""Reads over shards equal one file's (issue 35, dataset#D3): random record numbers over a
random split of the same records into shards give what one collection of them gives, in a
batch and one record at a time.  The records are of one shape (every batch of frame 0 is
one batch over the shards, ``gather_across``) or of two (read shard by shard, joined)."""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import molrec_raw as mr
from molrec_raw.collection import batch as batch_module

from dataset_helpers import UNITS, assert_same_batch

N = 24
_COUNTER = itertools.count()


def _schema() -> mr.SequenceSchema:
    declared = mr.SequenceSchema()
    for name in ("x", "fx"):
        declared.declare_column("atoms", name, "f64")
    declared.declare_meta("pe", "f64")
    return declared


def _items(mixed: bool):
    """``N`` records: 3 atoms each (one shape), or 3 and 5 atoms by turns (two shapes)."""
    rng = np.random.default_rng(7)
    for r in range(N):
        atoms = 5 if mixed and r % 2 else 3
        system = mr.Frame({}, {"atoms": mr.Block({"element": np.array(["H", "C", "N", "O", "S"][:atoms], object)})})
        frame = mr.Frame({"pe": float(rng.normal())}, {"atoms": mr.Block({"x": rng.normal(size=atoms),
                                                                        "fx": rng.normal(size=atoms)})})
        yield {"system": system, "frames": [frame]}


def _write(path: Path, items) -> Path:
    with mr.CollectionWriter(path, units=UNITS, schema=_schema(), durable=False) as writer:
        for item in items:
            writer.add_record(**item)
    return path


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("reads")
    return root, {mixed: (list(_items(mixed)), _write(root / f"one-{mixed}.mrec.lmdb", _items(mixed)))
                  for mixed in (False, True)}


def test_D3_one_shape_batches_over_shards_are_one_batch(sources, monkeypatch):
    """The shards share their layout caches: after the first batch (which checks the layouts
    shard by shard), a batch of frame 0 over every shard is assembled once."""
    root, made = sources
    items, one = made[False]
    paths = [_write(root / f"even-{k}.mrec.lmdb", items[k * 6:(k + 1) * 6]) for k in range(4)]
    calls = []
    real = batch_module.gather_across

    def counted(*args, **kwargs):
        out = real(*args, **kwargs)
        calls.append(out is not None)
        return out

    monkeypatch.setattr("molrec_raw.dataset.shards.gather_across", counted)
    with mr.open_dataset(paths) as ds, mr.read_collection(one) as c:
        ids = [23, 0, 7, 12, 5, 18, 0]
        for _ in range(2):
            assert_same_batch(ds.batch(ids), c.batch(ids))
        readers = [shard._reader for shard in ds.shards]
        assert all(reader is not None and reader._layouts is readers[0]._layouts for reader in readers)
    assert calls == [False, True]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mixed=st.booleans(), cuts=st.sets(st.integers(1, N - 1), max_size=7),
       ids=st.lists(st.integers(-N, N - 1), max_size=40), warm=st.booleans())
def test_D3_property_random_ids_over_random_shard_splits_equal_one_file(sources, mixed, cuts, ids, warm):
    root, made = sources
    items, one = made[mixed]
    edges = [0, *sorted(cuts), N]
    directory = root / f"split-{next(_COUNTER)}"
    directory.mkdir()
    paths = [_write(directory / f"part-{k:05d}.mrec.lmdb", items[lo:hi]) for k, (lo, hi) in
             enumerate(zip(edges, edges[1:]))]
    with mr.open_dataset(paths) as ds, mr.read_collection(one) as c:
        assert [s.n_records for s in ds.shards] == [hi - lo for lo, hi in zip(edges, edges[1:])]
        if warm:  # every layout checked first: the batches below are one batch over the shards
            ds.batch(range(N))
        assert_same_batch(ds.batch(ids), c.batch(ids))
        assert_same_batch(ds.batch(ids[::-1], None), c.batch(ids[::-1], None))
        for g in ids[:8]:
            got, want = ds[g], c[g]
            for name, values in want.system.blocks["atoms"].columns.items():
                assert np.array_equal(got.system.blocks["atoms"].columns[name], values)
            frame, reference = got.trajectory[0], want.trajectory[0]
            assert frame.meta == reference.meta
            for name, values in reference.blocks["atoms"].columns.items():
                assert np.array_equal(frame.blocks["atoms"].columns[name], values)
