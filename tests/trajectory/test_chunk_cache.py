"""The reader's cache of decoded inner chunks (trajectory §9): bounded in bytes, reads
ahead only when frames are visited in order, never decodes rows past the committed ones."""
from __future__ import annotations

import numpy as np

import molrec_raw as mr
from molrec_raw import MrecReader, MrecWriter, SequenceSchema
from molrec_raw.record.trajectory.chunk_cache import LOCAL_RUN_CHUNKS
from traj_helpers import CountingStore

ROWS = 2048  # one 16 KiB inner chunk per frame and column


def _write(path, frames):
    schema = SequenceSchema().declare_block("atoms", rows=ROWS).declare_column("atoms", "x", "f64")
    with MrecWriter(path, schema, durable=False) as w:
        for i in range(frames):
            w.append(mr.Frame({}, {"atoms": mr.Block({"x": np.full(ROWS, float(i) + 1.0)})}))


def _chunk_reads(store):
    return [r for r in store.reads if r[0].startswith("trajectory/atoms/x/c/") and r[1] and r[1][0] > 0]


def test_trajectory_9_sequential_reads_ahead_in_doubling_runs(tmp_path):
    _write(tmp_path / "t.mrec", 100)
    store = CountingStore(tmp_path / "t.mrec")
    with MrecReader(store) as reader:
        store.reads.clear()
        for i in range(100):  # frames in order, one by one: the reader sees it and reads ahead
            assert reader[i].blocks["atoms"].columns["x"][0] == i + 1
        reads = _chunk_reads(store)
    # runs of 1, 2, 4, then LOCAL_RUN_CHUNKS = 8 inner chunks on a local store (one read each,
    # every chunk once): 3 + ceil(93 / 8) = 15 reads for 100 frames
    assert LOCAL_RUN_CHUNKS == 8 and len(reads) == 15


def test_trajectory_9_latency_bound_store_doubles_runs_up_to_the_budget(tmp_path):
    _write(tmp_path / "t.mrec", 100)
    store = CountingStore(tmp_path / "t.mrec")
    store.concurrency = 4  # as a remote store says: requests, not decoding, are the cost
    with MrecReader(store) as reader:
        store.reads.clear()
        for i in range(100):
            assert reader[i].blocks["atoms"].columns["x"][0] == i + 1
        reads = _chunk_reads(store)
    # runs of 1, 2, 4, ... 64 inner chunks (the share of the 64 MiB budget is larger): 7 reads
    assert len(reads) == 7


def test_trajectory_9_iteration_holds_a_few_inner_chunks_per_column(tmp_path):
    """Sequential iteration keeps the run it decodes and one chunk before it, per array:
    never more than LOCAL_RUN_CHUNKS + 1 inner chunks per column, whatever the budget."""
    _write(tmp_path / "t.mrec", 100)
    with MrecReader(tmp_path / "t.mrec") as reader:
        most = 0
        for i, frame in enumerate(reader):
            assert frame.blocks["atoms"].columns["x"][0] == i + 1
            most = max(most, len(reader._chunks._chunks))
    assert most <= LOCAL_RUN_CHUNKS + 1


def test_trajectory_9_iteration_reads_ahead_at_full_length_from_the_start(tmp_path):
    _write(tmp_path / "t.mrec", 100)
    store = CountingStore(tmp_path / "t.mrec")
    with MrecReader(store, cache_bytes=32 * 16384) as reader:  # runs of 8 chunks: a quarter of the budget
        store.reads.clear()
        assert [f.blocks["atoms"].columns["x"][0] for f in reader] == list(range(1, 101))
        reads = _chunk_reads(store)
    assert len(reads) == 13  # ceil(100 / 8), the first run already full length


def test_trajectory_9_random_access_reads_only_what_it_needs(tmp_path):
    _write(tmp_path / "t.mrec", 100)
    store = CountingStore(tmp_path / "t.mrec")
    with MrecReader(store) as reader:
        store.reads.clear()
        for i in (50, 10, 90, 30, 70):
            assert reader[i].blocks["atoms"].columns["x"][0] == i + 1
        reads = _chunk_reads(store)
    assert len(reads) == 5 and all(length <= 16384 + 64 for _, (_, length) in reads)


def test_trajectory_9_cache_stays_within_its_budget(tmp_path):
    _write(tmp_path / "t.mrec", 60)
    budget = 8 * ROWS * 8  # eight inner chunks
    with MrecReader(tmp_path / "t.mrec", cache_bytes=budget) as reader:
        for i, frame in enumerate(reader):
            assert frame.blocks["atoms"].columns["x"][0] == i + 1
            assert reader._chunks._bytes <= budget
        for i in (59, 3, 40, 3):
            assert reader[i].blocks["atoms"].columns["x"][0] == i + 1
            assert reader._chunks._bytes <= budget
    with MrecReader(tmp_path / "t.mrec", cache_bytes=0) as reader:  # no cache: direct reads
        assert [f.blocks["atoms"].columns["x"][0] for f in reader] == list(range(1, 61))


def test_trajectory_9_random_whole_chunk_frames_are_handed_over_not_shared(tmp_path):
    """A frame that is exactly one inner chunk, fetched alone for a random access, is handed
    to the caller (no copy, not kept); the caller's array is its own, so changing it does
    not change what the next read of that frame returns."""
    _write(tmp_path / "t.mrec", 100)
    with MrecReader(tmp_path / "t.mrec") as reader:
        first = reader[50].blocks["atoms"].columns["x"]
        assert first[0] == 51 and not any(c == 50 for path, c in reader._chunks._chunks if path.endswith("atoms/x"))
        assert reader[49].blocks["atoms"].columns["x"][0] == 50
        first[:] = -1.0
        again = reader[50].blocks["atoms"].columns["x"]
        assert np.all(again == 51) and not np.shares_memory(first, again)
        assert reader[51].blocks["atoms"].columns["x"][0] == 52  # a neighbour: read ahead, copied out
        later = reader[52].blocks["atoms"].columns["x"]
        later[:] = -1.0
        assert np.all(reader[52].blocks["atoms"].columns["x"] == 53)
