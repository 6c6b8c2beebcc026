"""The read engine's caches (trajectory §9, spec-notes/trajectory.md "Read engine"): decoded
inner chunks bounded in bytes, read-ahead only when frames are visited in order, iteration
holding a batch of chunks whatever the record's length, never a row past the committed ones."""
from __future__ import annotations

import numpy as np

import molrec_raw as mr
from molrec_raw import MrecReader, MrecWriter, SequenceSchema
import tracemalloc

from molrec_raw.record.trajectory.engine import LOCAL_RUN_CHUNKS
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
    # every chunk once): frames 0, 1, 3, 7, then every 8th from 15: 4 + 11 = 15 reads
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


def _iteration_peak(path, frames):
    """Peak bytes allocated while iterating ``frames`` frames, each dropped at once (the
    second pass: the first one makes what a reader makes once)."""
    with MrecReader(path) as reader:
        assert sum(1 for _ in reader) == frames
        tracemalloc.start()
        try:
            for i, frame in enumerate(reader):
                assert frame.blocks["atoms"].columns["x"][0] == i + 1
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


def test_trajectory_9_iteration_holds_a_batch_of_chunks_whatever_the_length(tmp_path):
    """Iteration decodes a batch of LOCAL_RUN_CHUNKS inner chunks per column at a time and
    keeps none of them past the next batch: the peak memory of iterating 400 frames is that
    of 100 (one 16 KiB chunk per frame) give or take the one batch read ahead (issue 37:
    whether it is in flight while the peak is reached depends on the threads' timing), and
    far below the 6.4 MB the frames hold."""
    _write(tmp_path / "a.mrec", 100)
    _write(tmp_path / "b.mrec", 400)
    short, long = _iteration_peak(tmp_path / "a.mrec", 100), _iteration_peak(tmp_path / "b.mrec", 400)
    batch = LOCAL_RUN_CHUNKS * ROWS * 8
    assert long < short + batch + 64 * 1024, (short, long)
    assert long < 4 * batch, long


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
            assert reader._engine.cache.nbytes <= budget
        for i in (59, 3, 40, 3):
            assert reader[i].blocks["atoms"].columns["x"][0] == i + 1
            assert reader._engine.cache.nbytes <= budget
    with MrecReader(tmp_path / "t.mrec", cache_bytes=0) as reader:  # no cache: direct reads
        assert [f.blocks["atoms"].columns["x"][0] for f in reader] == list(range(1, 61))


def test_trajectory_9_random_whole_chunk_frames_are_handed_over_not_shared(tmp_path):
    """A frame that is exactly one inner chunk, fetched alone for a random access, is handed
    to the caller (no copy, not kept); the caller's array is its own, so changing it does
    not change what the next read of that frame returns."""
    _write(tmp_path / "t.mrec", 100)
    with MrecReader(tmp_path / "t.mrec") as reader:
        first = reader[50].blocks["atoms"].columns["x"]
        assert first[0] == 51 and not any(c == 50 for path, c in reader._engine.cache.keys() if path.endswith("atoms/x"))
        assert reader[49].blocks["atoms"].columns["x"][0] == 50
        first[:] = -1.0
        again = reader[50].blocks["atoms"].columns["x"]
        assert np.all(again == 51) and not np.shares_memory(first, again)
        assert reader[51].blocks["atoms"].columns["x"][0] == 52  # a neighbour: read ahead, copied out
        later = reader[52].blocks["atoms"].columns["x"]
        later[:] = -1.0
        assert np.all(reader[52].blocks["atoms"].columns["x"] == 53)
