"""A dataset of shards read as one sequence of records (issue 35 item 1; dataset#D1-D4):
every read compared with one collection holding the same records in the same order."""
from __future__ import annotations

import multiprocessing
import os
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

import molrec_raw as mr
from molrec_raw.errors import MolrecError, SpecViolationError, StoreError

from dataset_helpers import INDEX_SCHEMA, UNITS, assert_same_batch, one_collection, varied_items

N = 37


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """37 varied records as 5 shards of 8 (the last of 5) and as one collection."""
    root = tmp_path_factory.mktemp("dataset")
    items = varied_items(N)
    mr.write_dataset(items, root / "shards", units=UNITS, records_per_shard=8, index_schema=INDEX_SCHEMA,
                     durable=False)
    return root / "shards", one_collection(items, root / "one.mrec.lmdb")


@pytest.fixture(scope="module")
def pair(built):
    shards, one = built
    with mr.open_dataset(shards) as ds, mr.read_collection(one) as c:
        yield ds, c


def test_D3_len_shards_and_global_numbers(pair):
    ds, c = pair
    assert len(ds) == len(c) == N and ds.n_frames == c.n_frames
    assert [s.n_records for s in ds.shards] == [8, 8, 8, 8, 5]
    assert [s.start for s in ds.shards] == [0, 8, 16, 24, 32] and ds.shards[-1].stop == N
    assert [s.path.name for s in ds.shards] == [f"part-{k:05d}.mrec.lmdb" for k in range(5)]
    assert ds.units == UNITS and ds.sequence_schema.to_json() == c.schema.to_json()
    assert ds.locate(17) == (ds.shards[2], 1) and ds.locate(-1) == (ds.shards[4], 4)


def test_D3_getitem_is_the_collections_record(pair):
    ds, c = pair
    for g in (0, 7, 8, 20, N - 1, -1, -N):
        record, reference = ds[g], c[g]
        assert isinstance(record, type(reference))
        assert record.meta == reference.meta and record.index == reference.index
        assert np.array_equal(record.system.blocks["atoms"].columns["x"], reference.system.blocks["atoms"].columns["x"])
        assert record.frame(0).box == reference.frame(0).box
    assert [r.meta["name"] for r in ds] == [f"r{i}" for i in range(N)]


def test_D3_out_of_range_refused_as_the_collection_refuses(pair):
    ds, c = pair
    for g in (N, -N - 1, 10**12):
        with pytest.raises(IndexError) as theirs:
            c[g]
        with pytest.raises(IndexError) as ours:
            ds[g]
        assert str(ours.value).replace("dataset", "collection") == str(theirs.value)
        with pytest.raises(IndexError):
            ds.batch([0, g])
    with pytest.raises(TypeError):
        ds["3"]


@pytest.mark.parametrize("frame", [0, -1, None])
def test_D3_batch_in_the_callers_order_equals_one_collections_batch(pair, frame):
    ds, c = pair
    rng = np.random.default_rng(4)
    orders = [list(range(N)), rng.permutation(N).tolist(), [33, 2, 2, 17, -1, 9], [5], list(range(10)),
              rng.integers(-N, N, 60).tolist(), np.array([31, 0, 30], np.int64)]
    for ids in orders:
        assert_same_batch(ds.batch(ids, frame), c.batch(ids, frame))


def test_D3_batch_joins_what_only_some_shards_have(pair):
    """Times on records 0..9 only (shard 0 and part of 1), cells on every third: the joined
    batch drops ``time`` when a record lacks it and gives the others an undefined cell, as
    one collection's batch does."""
    ds, c = pair
    timed = ds.batch(range(8))
    assert "time" in timed and "box/vectors" in timed
    mixed = ds.batch([1, 2, 25, 0])
    assert "time" not in mixed and mixed["box/cell_defined"].tolist() == [False, False, False, True]
    assert_same_batch(mixed, c.batch([1, 2, 25, 0]))
    assert_same_batch(ds.batch([]), c.batch([]))


def test_D3_index_joined_with_shard_and_record(pair):
    ds, c = pair
    index, reference = ds.index, c.index
    assert list(index.columns) == ["energy", "tag", "shard", "record"] and index.nrows == N
    assert np.array_equal(index.columns["energy"], reference.columns["energy"])
    assert np.array_equal(index.masks["tag"], reference.masks["tag"])
    assert index.columns["shard"].tolist() == [k for k in range(5) for _ in range(8)][:N]
    assert index.columns["record"].tolist() == list(range(N))
    assert not index.columns["energy"].flags.writeable
    assert set(ds.index_schema) == {"energy", "tag"} and ds.index_schema["tag"]["nullable"]


def test_D2_a_list_is_read_in_the_given_order(built):
    shards, _ = built
    paths = sorted(shards.glob("*.mrec.lmdb"))
    with mr.open_dataset(paths[::-1]) as ds:
        assert [s.path for s in ds.shards] == paths[::-1] and ds[0].meta == {"name": "r32"}
    with mr.open_dataset(str(shards / "part-0000[13].mrec.lmdb")) as ds:
        assert [s.path.name for s in ds.shards] == ["part-00001.mrec.lmdb", "part-00003.mrec.lmdb"]
        assert len(ds) == 16 and ds[8].meta == {"name": "r24"}
    with mr.open_dataset(paths[2]) as ds:
        assert len(ds) == 8 and ds[0].meta == {"name": "r16"}


def test_D2_a_source_naming_no_shard_is_refused(tmp_path, built):
    shards, _ = built
    with pytest.raises(StoreError, match="dataset#D2") as caught:
        mr.open_dataset(tmp_path)
    assert str(tmp_path) in str(caught.value)
    with pytest.raises(StoreError, match="glob matches no file"):
        mr.open_dataset(str(tmp_path / "*.mrec.lmdb"))
    with pytest.raises(StoreError, match="dataset#D2"):
        mr.open_dataset([])
    with pytest.raises(StoreError, match=r"\*\.mrec\.lmdb"):
        mr.open_dataset([shards / "part-00000.mrec.lmdb.sha256"])
    with pytest.raises(StoreError, match="no such file"):
        mr.open_dataset([tmp_path / "missing.mrec.lmdb"])


def _shard(path: Path, units=UNITS, index_schema=INDEX_SCHEMA, items=None) -> Path:
    with mr.CollectionWriter(path, units=units, index_schema=index_schema, durable=False) as writer:
        for item in items or varied_items(3):
            writer.add_record(**item)
    return path


@pytest.mark.parametrize("change, difference", [
    ({"units": {**UNITS, "energy": "kcal/mol"}}, "units/energy is 'eV' in the first shard and 'kcal/mol' here"),
    ({"index_schema": {"energy": "f64", "tag": "i64"}}, "index_columns/tag/nullable is True in the first"),
    ({"index_schema": {"energy": "f64"}}, "index_columns/tag is"),
    ({"items": [{**item, "frames": None, "steps": None, "times": None} for item in varied_items(3)]},
     "sequence_schema/"),
])
def test_D1_a_shard_with_another_declaration_is_refused_naming_it(tmp_path, change, difference):
    first = _shard(tmp_path / "a.mrec.lmdb")
    index = change.get("index_schema", INDEX_SCHEMA)
    items = change.get("items")
    if "tag" not in index and items is None:
        items = [{**item, "index": {"energy": item["index"]["energy"]}} for item in varied_items(3)]
    if "nullable" in difference:
        items = [{**item, "index": {**item["index"], "tag": 1}} for item in varied_items(3)]
    other = _shard(tmp_path / "b.mrec.lmdb", change.get("units", UNITS), index, items)
    with pytest.raises(SpecViolationError) as caught:
        mr.open_dataset([first, other])
    text = str(caught.value)
    assert caught.value.store == str(other) and caught.value.rule == "dataset#D1" and str(first) in text
    assert difference in text


def test_D4_pickled_into_a_spawned_process_reads_the_same(pair):
    ds, c = pair
    copy = pickle.loads(pickle.dumps(ds))
    assert len(copy) == N and copy[20].meta == c[20].meta and copy.index.nrows == N
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        got = pool.apply(_names, (ds, [0, 9, 36]))
    assert got == ["r0", "r9", "r36"]


def _names(ds, ids):
    return [ds[g].meta["name"] for g in ids]


@pytest.mark.forks
@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_D4_used_before_fork_reads_in_the_child(pair):
    ds, _ = pair
    ds[3], ds.batch([1, 20])  # every reader open in the parent
    context = multiprocessing.get_context("fork")
    with context.Pool(2) as pool:
        got = pool.starmap(_names, [(ds, [g]) for g in (0, 12, 36)])
    assert got == [["r0"], ["r12"], ["r36"]] and ds[36].meta == {"name": "r36"}


def test_D4_a_shard_changed_underneath_is_refused(tmp_path, built):
    shards, _ = built
    copy = tmp_path / "copy"
    shutil.copytree(shards, copy)
    ds = mr.open_dataset(copy)
    state = pickle.dumps(ds)
    ds.close()
    _shard(copy / "part-00002.mrec.lmdb.new.mrec.lmdb")
    os.replace(copy / "part-00002.mrec.lmdb.new.mrec.lmdb", copy / "part-00002.mrec.lmdb")
    moved = pickle.loads(state)
    assert moved[0].meta == {"name": "r0"}
    with pytest.raises(StoreError, match="dataset#D4") as caught:
        moved[17]
    assert caught.value.store == str(copy / "part-00002.mrec.lmdb")
    with pytest.raises(MolrecError, match="dataset#D4"):
        moved.index
