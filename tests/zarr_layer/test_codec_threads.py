"""Codec work on threads (zarr/codecs/threads.py, batch.py ``encode_groups``/``decode_jobs``,
issue 37): a read or write coded on two threads stores the bytes, in the chunk order, of one
thread and reads back the same values; the helper threads start on first use, finish their
runs before an error is raised, and stop at ``close()`` (zarr-v3-subset#5, #7)."""
import contextlib
import os
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from molrec_raw.errors import CorruptDataError
from molrec_raw.zarr import MemoryStore, open_array, open_group
from molrec_raw.zarr.array import read_many
from molrec_raw.zarr.codecs import batch
from molrec_raw.zarr.codecs import threads as threads_module
from molrec_raw.zarr.codecs.threads import CodecThreads, runs

CHAINS = [
    [{"name": "bytes", "configuration": {"endian": "little"}}],
    [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
    [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "numcodecs.shuffle", "configuration": {"elementsize": 8}},
     {"name": "zstd", "configuration": {"level": 3, "checksum": False}}, {"name": "crc32c"}],
    [{"name": "bytes", "configuration": {"endian": "big"}}, {"name": "zstd", "configuration": {"level": 1, "checksum": True}}],
    [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "gzip", "configuration": {"level": 1}}],
]


@contextlib.contextmanager
def pooled_from_any_size():
    """Every read and write of two chunks or more goes to the threads (the size floor at 0),
    and two threads are usable whatever the machine's cores (so a 1-core runner tests them)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(batch, "POOL_MIN_BYTES", 0)
        patch.setattr(os, "cpu_count", lambda: 4)
        yield


def stored(store):
    return {key: bytes(store.get(key)) for key in sorted(store.list(""))}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 40), min_size=1, max_size=2), st.data(), st.sampled_from(range(len(CHAINS))),
       st.booleans())
def test_zarr_5_two_threads_store_the_bytes_and_read_the_values_of_one(shape, data, chain, sharded):
    """Writes and reads of random shapes, chunks and chains (sharded or not): the stores
    written with threads 1 and 2 are byte-identical, and each reads both back exactly."""
    shape = tuple(shape)
    chunks = tuple(data.draw(st.integers(1, s)) for s in shape)
    shards = tuple(c * data.draw(st.integers(1, 3)) for c in chunks) if sharded else None
    values = np.random.default_rng(len(shape) * 97 + sum(shape)).normal(size=shape).round(3)
    selection = tuple(slice(data.draw(st.integers(0, s - 1)), None) for s in shape)
    with pooled_from_any_size():
        stores, arrays = {}, {}
        for threads in (1, 2):
            store = MemoryStore()
            arr = open_array(store, mode="w", shape=shape, dtype="float64", chunks=chunks, shards=shards,
                             codecs=CHAINS[chain], fill_value=0.0, threads=threads)
            arr[...] = values
            arr[selection] = values[selection] * 2  # a partial write: chunks read, changed, rewritten
            stores[threads], arrays[threads] = stored(store), arr
        assert stores[1] == stores[2]
        expected = values.copy()
        expected[selection] *= 2
        for threads in (1, 2):
            for store_of in (1, 2):
                with open_array(arrays[store_of].store, mode="r", threads=threads) as back:
                    assert np.array_equal(back[...], expected)
                    assert np.array_equal(back[selection], expected[selection])
        several = np.prod([-(-s // c) for s, c in zip(shape, chunks)]) > 1  # inner chunks
        # plain bytes (+ crc32c: chains 0 and 1) stay on the caller's thread (batch.codes)
        assert (arrays[2].codec_threads.handed > 0) == (several and chain >= 2)
        assert arrays[1].codec_threads.handed == 0
        for arr in arrays.values():
            arr.close()
            assert not arr.codec_threads.started


def test_zarr_5_a_large_read_and_write_at_the_default_floor_use_the_threads_and_stop_at_close(tmp_path):
    """At the real floor (POOL_MIN_BYTES, 1 MiB): a 2 MiB write and read run on the shared
    threads of the hierarchy — one helper for every node — and close() stops it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "cpu_count", lambda: 2)
        root = open_group(str(tmp_path / "g"), mode="w", threads=2)
        a = root.create_array("a", shape=(1 << 18,), dtype="float64", chunks=(1 << 14,), codecs=CHAINS[2],
                              fill_value=0.0)
        b = root.create_array("b", shape=(1000,), dtype="float64", chunks=(100,), fill_value=0.0)
        assert a.codec_threads is b.codec_threads is root.codec_threads
        b[...] = np.arange(1000.0)  # 8 KB: below the floor, no thread started
        assert root.codec_threads.handed == 0 and not root.codec_threads.started
        values = np.arange(1 << 18, dtype="float64") / 7
        a[...] = values
        assert root.codec_threads.handed == 1 and len(root.codec_threads._helpers) <= 1
        assert np.array_equal(root["a"][...], values)
        assert root.codec_threads.handed == 2 and len(root.codec_threads._helpers) <= 1
        root.close()
        assert not root.codec_threads.started
        with open_array(str(tmp_path / "g" / "a"), mode="r") as again:  # a node is a context manager
            assert np.array_equal(again[...], values)
            assert again.codec_threads.handed == 1
        assert not again.codec_threads.started


@pytest.mark.parametrize("where", ["first", "last"])
def test_zarr_5_a_corrupt_chunk_in_a_threaded_read_refuses_after_every_run_finished(where):
    """A damaged chunk in the caller's run or in a helper's run: the read raises the chunk's
    own error, naming its key, once every run is done (no thread still writes into the
    result); the threads keep working and stop at close()."""
    with pooled_from_any_size():
        store = MemoryStore()
        arr = open_array(store, mode="w", shape=(64,), dtype="float64", chunks=(8,), codecs=CHAINS[2],
                         fill_value=0.0, threads=2)
        arr[...] = np.arange(64.0)
        key = "c/0" if where == "first" else "c/7"
        raw = bytearray(store.get(key))
        raw[3] ^= 0xFF
        store.set(key, bytes(raw))
        with pytest.raises(CorruptDataError) as info:
            arr[...]
        assert key in str(info.value)
        assert np.array_equal(arr[8:56], np.arange(8.0, 56.0))
        out = np.zeros((2, 48))
        read_many([(arr, slice(8, 56), out[0]), (arr, slice(8, 56), out[1])], threads=arr.codec_threads)
        assert np.array_equal(out, np.tile(np.arange(8.0, 56.0), (2, 1)))
        arr.close()
        assert not arr.codec_threads.started


def test_zarr_5_map_runs_waits_for_every_run_then_raises_the_first_error_in_order():
    """CodecThreads.map_runs: contiguous runs, results in order, the first run on the calling
    thread; with errors in several runs every run still completes and the earliest run's
    error is raised."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "cpu_count", lambda: 4)
        pool = CodecThreads(3)
        caller = threading.get_ident()
        seen = []

        def work(run):
            seen.append((list(run), threading.get_ident() == caller))
            if 5 in run or 9 in run:
                raise ValueError(f"bad {run[0]}")
            return sum(run)

        assert pool.map_runs(lambda run: list(run), list(range(10)), 3) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
        seen.clear()
        with pytest.raises(ValueError, match="bad 4"):
            pool.map_runs(work, list(range(10)), 3)
        assert sorted(run for run, _ in seen) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
        assert [on_caller for run, on_caller in seen if run[0] == 0] == [True]
        assert pool.map_runs(work, [1, 2], 1) == [3]  # one run: the caller alone
        pool.close()
        assert not pool.started
    assert runs(5, 2) == [(0, 3), (3, 5)] and runs(0, 2) == [] and runs(3, 8) == [(0, 1), (1, 2), (2, 3)]


def test_zarr_5_helpers_left_idle_exit_without_close(monkeypatch):
    """An owner never closed leaves no thread behind: a helper without work for
    HELPER_IDLE_SECONDS exits, and later work starts one again."""
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(threads_module, "HELPER_IDLE_SECONDS", 0.05)
    pool = CodecThreads(2)
    for _ in range(2):
        assert pool.map_runs(sum, list(range(100)), 2) == [sum(range(50)), sum(range(50, 100))]
        deadline = time.monotonic() + 30
        while pool.started and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not pool.started
    assert pool.handed == 2


def test_zarr_5_one_thread_disables_the_threads(monkeypatch):
    """threads=1 (or a machine of one core) starts no helper thread, whatever the size."""
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert CodecThreads(8).threads == 1
    arr = open_array(MemoryStore(), mode="w", shape=(1 << 18,), dtype="float64", chunks=(1 << 14,), fill_value=0.0)
    arr[...] = 1.0
    assert arr[...].sum() == 1 << 18 and arr.codec_threads.handed == 0


def test_zarr_5_plain_chains_stay_on_the_callers_thread():
    """A chain of plain bytes (and a crc32c) is memory-bound: its reads and writes are not
    split over the threads at any size (batch.codes); a shuffle + zstd chain is."""
    with pooled_from_any_size():
        for chain, split in ((CHAINS[0], False), (CHAINS[1], False), (CHAINS[2], True), (CHAINS[4], True)):
            arr = open_array(MemoryStore(), mode="w", shape=(64,), dtype="float64", chunks=(8,), codecs=chain,
                             fill_value=0.0, threads=2)
            arr[...] = np.arange(64.0)
            assert np.array_equal(arr[...], np.arange(64.0))
            assert (arr.codec_threads.handed > 0) == split, chain
            arr.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([2, 3, 4, 8, 16]), st.sampled_from(["float64", "int16", "uint8"]), st.booleans(),
       st.lists(st.integers(1, 60), min_size=1, max_size=2), st.data())
def test_zarr_5_6_runs_of_chunks_unshuffled_together_give_the_bytes_of_one_by_one(elementsize, dtype, zstd, shape,
                                                                                   data):
    """decode_each unshuffles consecutive chunks into adjacent targets as one run (batch.py
    ``_decode_run``): every target receives the bytes that decoding chunk by chunk gives, for
    any element size of the shuffle, whole reads and partial ones, reads longer than a run."""
    with pytest.MonkeyPatch.context() as monkeypatch:  # runs of a few chunks; undone whatever happens
        monkeypatch.setattr(batch, "RUN_BYTES", data.draw(st.sampled_from([16, 64, 512])))
        _runs_give_the_bytes_of_one_by_one(elementsize, dtype, zstd, shape, data)


def _runs_give_the_bytes_of_one_by_one(elementsize, dtype, zstd, shape, data):
    shape = tuple(shape)
    chunks = tuple(data.draw(st.integers(1, s)) for s in shape)
    assume(int(np.prod(chunks)) * np.dtype(dtype).itemsize % elementsize == 0)  # what the shuffle can encode
    chain = [{"name": "bytes", "configuration": {"endian": "little"}},
             {"name": "numcodecs.shuffle", "configuration": {"elementsize": elementsize}}]
    if zstd:
        chain.append({"name": "zstd", "configuration": {"level": 1, "checksum": False}})
    chain.append({"name": "crc32c"})
    arr = open_array(MemoryStore(), mode="w", shape=shape, dtype=dtype, chunks=chunks, codecs=chain, fill_value=0,
                     threads=1)
    values = (np.random.default_rng(sum(shape) * 31 + elementsize).normal(size=shape) * 100).astype(dtype)
    arr[...] = values
    selection = tuple(slice(data.draw(st.integers(0, s - 1)), None, data.draw(st.integers(1, 2))) for s in shape)
    for sel in (Ellipsis, selection):
        ones, runs = np.zeros_like(values[sel]), np.zeros_like(values[sel])
        batch.decode_batch(arr._read_jobs(sel, ones)[1], 1)
        batch.decode_each(arr._read_jobs(sel, runs)[1])
        assert ones.tobytes() == runs.tobytes()
        assert np.array_equal(runs, values[sel])


def test_zarr_5_6_a_corrupt_chunk_inside_a_run_is_named(monkeypatch):
    """A damaged chunk in the middle of a run unshuffled together refuses with its own key."""
    monkeypatch.setattr(batch, "RUN_BYTES", 4 * 64)  # runs of 4 chunks of 8 float64
    arr = open_array(MemoryStore(), mode="w", shape=(80,), dtype="float64", chunks=(8,), codecs=CHAINS[2],
                     fill_value=0.0, threads=1)
    arr[...] = np.arange(80.0)
    raw = bytearray(arr.store.get("c/5"))
    raw[-6] ^= 0x10
    arr.store.set("c/5", bytes(raw))
    runs = []
    monkeypatch.setattr(batch, "_decode_run", lambda run, original=batch._decode_run: (runs.append(len(run)),
                                                                                      original(run))[1])
    out = np.zeros(80)
    with pytest.raises(CorruptDataError) as info:
        batch.decode_each(arr._read_jobs(Ellipsis, out)[1])
    assert "c/5" in str(info.value) and runs[:2] == [4, 4]
    assert np.array_equal(out[:32], np.arange(32.0))


def test_zarr_5_6_chunks_into_targets_that_do_not_follow_one_another_are_not_run_together(monkeypatch):
    """A run of chunks is unshuffled together only when each target starts where the one
    before it ends: targets with gaps between them, targets each in an array of its own,
    and adjacent targets visited downwards each receive exactly their own chunk's values."""
    monkeypatch.setattr(batch, "RUN_BYTES", 4 * 64)  # runs of up to 4 chunks of 8 float64
    arr = open_array(MemoryStore(), mode="w", shape=(80,), dtype="float64", chunks=(8,), codecs=CHAINS[2],
                     fill_value=0.0, threads=1)
    arr[...] = np.arange(80.0)
    out = np.zeros(80)
    jobs = arr._read_jobs(Ellipsis, out)[1]
    expected = [np.arange(8.0 * k, 8.0 * k + 8) for k in range(len(jobs))]

    def into(targets):
        batch.decode_each([batch.DecodeJob(job.pipeline, job.data, target, job.local, job.key)
                           for job, target in zip(jobs, targets)])
        return all(np.array_equal(t, e) for t, e in zip(targets, expected))

    slab = np.zeros(9 * len(jobs))  # one array, a gap of one element after each target
    assert into([slab[9 * k:9 * k + 8] for k in range(len(jobs))])
    assert into([np.zeros(8) for _ in jobs])  # one array each, wherever the allocator put them
    batch.decode_each(jobs[::-1])  # adjacent targets, visited downwards
    assert np.array_equal(out, np.arange(80.0))
    # a part of the first chunk, then whole chunks exactly one chunk further on each: the part
    # is decoded alone, the whole ones as a run
    slab = np.zeros(len(jobs) * 8)
    first = jobs[0]
    part = batch.DecodeJob(first.pipeline, first.data, slab[:4], (slice(0, 4, 1),), first.key)
    rest = [batch.DecodeJob(job.pipeline, job.data, slab[8 * k:8 * k + 8], job.local, job.key)
            for k, job in enumerate(jobs) if k]
    batch.decode_each([part] + rest)
    assert np.array_equal(slab[:4], np.arange(4.0)) and not slab[4:8].any()
    assert np.array_equal(slab[8:], np.arange(8.0, 80.0))
