"""Many chunks through the codec pipeline at once (zarr-v3-subset §5): the batch path.

A write lands, and a read needs, many chunks at a time.  Coding them one by one pays every
codec's Python overhead per chunk and runs zstd on one core; here each stage runs over the
whole batch: the ``bytes`` codec is one view of the stacked chunks, the byte shuffle one
vectorised transpose of all of them, zstd one call of zstandard's C-threaded batch API
(``multi_compress_to_buffer`` / ``multi_decompress_to_buffer``: the GIL is released and no
Python thread pool is involved) for every chunk of every pipeline in the batch, crc32c one C
call per chunk.  Decoding writes its last step — the unshuffle, or the copy out of the
decompressed buffer — straight into the caller's target, which may be a strided view (a
column of an interleaved array), so a read makes no copy it does not need.

The bytes are those of :meth:`CodecPipeline.encode` chunk by chunk (the batch API writes
the same zstd frames as ``ZstdCompressor.compress`` with the same parameters;
tests/zarr_layer/test_batch_codecs.py); a decode error names the chunk's key.  Work is
split into waves of at most :data:`WAVE_BYTES` decoded bytes, so a large read or write
never holds more than one wave of intermediate buffers.
"""
from __future__ import annotations

import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from molrec_raw.errors import CorruptDataError, MolrecError
from molrec_raw.zarr.codecs.base import Buffer, Item, item_size, join_item
from molrec_raw.zarr.codecs.shuffle import ShuffleCodec
from molrec_raw.zarr.codecs.threads import POOL_MIN_BYTES, CodecThreads, runs
from molrec_raw.zarr.codecs.zstd_codec import ZstdCodec, decompress_many
from molrec_raw.zarr.indexing import Local

__all__ = ["DecodeJob", "EncodeScratch", "Item", "POOL_BYTES", "Threads", "WAVE_BYTES", "codes", "decode_batch", "decode_each",
           "decode_jobs", "encode_batch", "encode_groups", "item_size", "join_item"]

# What codes a batch: a number of threads (zstd's batch API threads inside zstandard; a
# Python pool is made for the call from POOL_BYTES on), or a CodecThreads its owner keeps
# (used from POOL_MIN_BYTES on: handing work to its running helpers is cheap).
Threads = Union[int, CodecThreads]

# Decoded bytes per wave: each stage runs over a wave while it is still in the CPU's caches
# (a 2 MiB wave decoded W7 1.3-1.5x faster than 64 MiB ones; spec-notes/zarr.md), and the
# intermediate buffers of a batch stay that small.
WAVE_BYTES = 2 * 1024 * 1024
# Chunk bytes per encoding wave: larger, as each zstd batch call starts its threads anew and
# on a busy machine a new thread may wait for a core (a whole W1 commit, 4 MB, in one call).
ENCODE_WAVE_BYTES = 8 * 1024 * 1024


# ----------------------------------------------------------------------------- encode
class EncodeScratch:
    """A byte buffer that a caller encoding batch after batch (a streaming writer's commits)
    keeps and hands to :func:`encode_batch`: each wave's byte shuffles land in it side by
    side instead of in new arrays — no allocation and no fresh pages (a page fault per 4 KiB)
    per commit.  What lands in it lives until zstd, the next stage, has read it; grown on
    demand; one caller at a time."""

    __slots__ = ("buffer", "used")

    def __init__(self) -> None:
        self.buffer = np.empty(0, np.uint8)
        self.used = 0

    def reserve(self, nbytes: int) -> None:
        """Room for ``nbytes`` from the start (what it held is given up)."""
        if self.buffer.size < nbytes:
            self.buffer = np.empty(nbytes, np.uint8)
        self.used = 0

    def take(self, nbytes: int) -> np.ndarray:
        """The next ``nbytes`` of the buffer (an empty array when it has no more room: the
        caller then allocates)."""
        start = self.used
        if start + nbytes > self.buffer.size:
            return self.buffer[:0]
        self.used = start + nbytes
        return self.buffer[start:self.used]


def _serialized(pipeline: Any, chunks: Sequence[np.ndarray]) -> Any:
    """The chunks after the array->array and array->bytes codecs: one 2-D ``uint8`` array
    (a row per chunk) when the chain is plain native bytes, else a list of buffers."""
    if not len(chunks):
        return []
    if pipeline.direct and isinstance(chunks, np.ndarray) and chunks.dtype == pipeline.spec.dtype.numpy:
        return np.ascontiguousarray(chunks).reshape(len(chunks), -1).view(np.uint8)
    out = []
    for chunk in chunks:
        for codec in pipeline.array_codecs:
            chunk = codec.encode(chunk)
        out.append(pipeline.array_bytes.encode(chunk))
    return out


def encode_batch(groups: Sequence[Tuple[Any, Sequence[np.ndarray]]], threads: int = 1,
                 wave_bytes: int = ENCODE_WAVE_BYTES, scratch: Optional[EncodeScratch] = None) -> List[List[Item]]:
    """Encode ``groups`` of ``(pipeline, chunks)`` — each chunk of its pipeline's full chunk
    shape, ``chunks`` a stacked array or a list — into one list of encoded items per group,
    in order.  Chunks of every group pass through each stage together, a wave of at most
    ``wave_bytes`` at a time; zstd stages with the same settings share one batch call on up
    to ``threads`` threads.  ``scratch``: where byte shuffles that zstd follows land (the
    same bytes; :class:`EncodeScratch`)."""
    out: List[List[Item]] = [[] for _ in groups]
    wave: List[Tuple[int, Any, Any]] = []
    size = 0
    for g, (pipeline, chunks) in enumerate(groups):
        count = len(chunks)
        each = max(1, pipeline.spec.nbytes or 1)
        lo = 0
        while lo < count:
            take = max(1, min(count - lo, (wave_bytes - size) // each))
            wave.append((g, pipeline, chunks[lo:lo + take]))
            size += take * each
            lo += take
            if size >= wave_bytes:
                _encode_wave(wave, threads, out, scratch)
                wave, size = [], 0
    if wave:
        _encode_wave(wave, threads, out, scratch)
    return out


def _encode_wave(pieces: List[Tuple[int, Any, Any]], threads: int, out: List[List[Item]],
                 scratch: Optional[EncodeScratch] = None) -> None:
    """All stages over one wave of ``(group, pipeline, chunks)`` pieces; results appended.
    With a ``scratch``, a byte shuffle of a stacked batch lands in it when zstd follows
    (zstd reads it within the wave and returns new buffers)."""

    states = [_serialized(pipeline, chunks) for _, pipeline, chunks in pieces]
    if scratch is not None:
        scratch.reserve(sum(int(state.nbytes) for state in states if isinstance(state, np.ndarray)))
    depth = max((len(pipeline.bytes_codecs) for _, pipeline, _ in pieces), default=0)
    for stage in range(depth):
        batches: Dict[Tuple[int, bool], Tuple[Any, List[int]]] = {}
        for g, (_, pipeline, _) in enumerate(pieces):
            codecs = pipeline.bytes_codecs
            if stage >= len(codecs):
                continue
            codec = codecs[stage]
            if isinstance(codec, ZstdCodec):
                batches.setdefault((codec.level, codec.checksum), (codec, []))[1].append(g)
            elif (scratch is not None and isinstance(codec, ShuffleCodec) and isinstance(states[g], np.ndarray)
                  and stage + 1 < len(codecs) and isinstance(codecs[stage + 1], ZstdCodec)):
                states[g] = codec.encode_many(states[g], scratch.take(int(states[g].nbytes)))
            else:
                states[g] = codec.encode_many(states[g])
        for codec, members in batches.values():
            inputs = [join_item(item) for g in members for item in states[g]]
            outputs = codec.compress_many(inputs, threads)
            at = 0
            for g in members:
                count = len(states[g])
                states[g] = outputs[at:at + count]
                at += count
    for (g, _, _), state in zip(pieces, states):
        out[g].extend(state)


# A read or write of at least this many chunk bytes given a number of threads (no
# CodecThreads) is split into one contiguous run of chunks per thread of a pool made for the
# call, each run coded on its thread (the shuffle copies, zstd and crc32c all release the
# GIL); starting that pool costs more than it saves below it, where zstd's batch API threads
# inside C.  Measured on 2 cores (bench/zarr_layer.py W3, 256 MiB, same run): the batch path
# alone wrote the shuffle chain in 400 ms and read it in 350 ms; runs on threads 265 /
# 165-200 ms (spec-notes/zarr.md, "Batch codec path").
POOL_BYTES = 16 * 1024 * 1024


def codes(pipeline: Any) -> bool:
    """Does a chain do codec work a second thread pays for — a compressor or a shuffle (or a
    nested shard) — beyond the copy and a crc32c of plain bytes?  Those memory bandwidth
    bounds: split over two threads they ran at 0.55-1.04x of one on 2 cores
    (bench/codec_threads.py, reads of 1-64 MiB of ``bytes`` + ``crc32c``), so they stay on
    the caller's thread."""
    return pipeline.array_bytes.name != "bytes" or any(c.name != "crc32c" for c in pipeline.bytes_codecs)


def _pool_for(threads: Threads, nbytes: int, count: int, worth: bool = True) -> Tuple[Optional[CodecThreads], int]:
    """(the CodecThreads to split ``count`` chunks of ``nbytes`` over, or None: one batch;
    the thread count of that batch).  ``worth``: some chain of the work :func:`codes`.  A
    pool made here must be closed by the caller (it is not ``threads``)."""
    if isinstance(threads, CodecThreads):
        pooled = worth and threads.threads > 1 and count > 1 and nbytes >= POOL_MIN_BYTES
        return (threads if pooled else None), threads.threads
    if worth and threads > 1 and count > 1 and nbytes >= POOL_BYTES:
        return CodecThreads(threads), threads
    return None, threads


def encode_groups(groups: List[Tuple[Any, Any]], threads: Threads,
                  scratch: Optional[EncodeScratch] = None) -> List[List[Item]]:
    """:func:`encode_batch` of ``groups``, or (a chain that :func:`codes`, from
    :data:`POOL_MIN_BYTES` on a CodecThreads, :data:`POOL_BYTES` given a number) one contiguous run of chunks per
    thread, each encoded by :func:`encode_batch` on its thread — the same items in the same
    order.  ``scratch`` serves the one-batch path only (one caller at a time)."""
    total = sum(len(chunks) for _, chunks in groups)
    nbytes = sum(len(chunks) * (pipeline.spec.nbytes or 0) for pipeline, chunks in groups)
    pool, count = _pool_for(threads, nbytes, total, any(codes(pipeline) for pipeline, _ in groups))
    if pool is None:
        return encode_batch(groups, count, scratch=scratch)
    pieces = [(g, lo, hi) for g, (_, chunks) in enumerate(groups) for lo, hi in runs(len(chunks), pool.threads)]

    def encode_run(run: Sequence[Tuple[int, int, int]]) -> List[List[Item]]:
        return encode_batch([(groups[g][0], groups[g][1][lo:hi]) for g, lo, hi in run], 1)

    try:
        done = pool.map_runs(encode_run, pieces, pool.threads)
    finally:
        if pool is not threads:
            pool.close()
    out: List[List[Item]] = [[] for _ in groups]
    spans = runs(len(pieces), pool.threads)
    for (first, last), results in zip(spans, done):
        for (g, _, _), items in zip(pieces[first:last], results):
            out[g].extend(items)
    return out


# ----------------------------------------------------------------------------- decode
class DecodeJob:
    """One stored chunk value to decode into ``target`` (the chunk's ``local`` selection,
    None for the whole chunk); ``key`` names it in errors."""

    __slots__ = ("pipeline", "data", "target", "local", "key", "owner")

    def __init__(self, pipeline: Any, data: Buffer, target: np.ndarray,
                 local: Optional[Tuple[Local, ...]] = None, key: Optional[str] = None) -> None:
        self.pipeline, self.data, self.target, self.local, self.key = pipeline, data, target, local, key
        self.owner: Any = None  # the array the chunk belongs to: its errors name it

    @property
    def whole(self) -> bool:
        """The target receives the whole chunk in the pipeline's own dtype."""
        spec = self.pipeline.spec
        return (self.local is None and self.target.shape == spec.shape
                and self.target.dtype == spec.dtype.numpy)


def _failed(job: DecodeJob, exc: Exception) -> MolrecError:
    """The error of one job, as a MolrecError naming its chunk (and its array's store and
    node when the job has an owner)."""
    error = exc if isinstance(exc, MolrecError) else CorruptDataError(f"cannot decode chunk: {exc}")
    if job.owner is not None:
        return job.owner._context(error, job.key)  # type: ignore[no-any-return]
    return error.add_context(key=job.key)


_DECODE_ERRORS = (MolrecError, ValueError, TypeError, IndexError, OverflowError, struct.error)


def _finish(job: DecodeJob, data: Buffer) -> None:
    """The decoded bytes of a chunk, through the array->bytes and array->array codecs, into
    the job's target."""
    pipeline = job.pipeline
    spec = pipeline.spec
    if pipeline.direct:
        if memoryview(data).nbytes != spec.nbytes:
            raise CorruptDataError(
                f"bytes codec: chunk has {memoryview(data).nbytes} bytes, expected {spec.nbytes}",
                rule="zarr-v3-subset#5.1")
        chunk = np.frombuffer(data, dtype=spec.dtype.numpy).reshape(spec.shape)
    else:
        chunk = pipeline.decode_array(data)
    job.target[...] = chunk if job.local is None else chunk[job.local]


def _waves(jobs: Sequence[DecodeJob], wave_bytes: int) -> List[Sequence[DecodeJob]]:
    waves: List[Sequence[DecodeJob]] = []
    first, size = 0, 0
    for k, job in enumerate(jobs):
        size += job.pipeline.nbytes or 0
        if size > wave_bytes and k > first:
            waves.append(jobs[first:k])
            first, size = k, job.pipeline.nbytes or 0
    waves.append(jobs[first:])
    return waves


# Below this many decoded bytes a wave is decoded chunk by chunk through each pipeline's
# scratch buffer (no allocation per chunk): cheaper than a batch call for a frame's few chunks.
SMALL_WAVE_BYTES = 256 * 1024


def decode_batch(jobs: Sequence[DecodeJob], threads: int = 1, wave_bytes: int = WAVE_BYTES) -> None:
    """Decode every job into its target; zstd stages of all jobs share one batch call per
    wave (at most ``wave_bytes`` decoded) on up to ``threads`` threads — on one thread, and
    for a frame's few chunks, each job alone through the per-thread scratch buffers instead
    (zarr-v3-subset §5).  Raises the first failing job's error (naming its key); the targets
    of other jobs may then be partly written.

    One thread takes nothing from the batch call but its output: a fresh buffer the size of
    the wave, whose pages glibc may map anew on every call — a 5.5 MiB read of 80 KB chunks
    took 7.5-9 ms through it against 5.0 ms chunk by chunk, and chunk by chunk was as fast
    for 64-atom frames (bench/README.md, "Idle round of stop 40")."""
    if not jobs:
        return
    total = 0
    for job in jobs:
        total += job.pipeline.nbytes or SMALL_WAVE_BYTES
    if total < SMALL_WAVE_BYTES or threads <= 1:  # one by one, no batch call
        for job in jobs:
            _decode_one(job)
        return
    for wave in _waves(jobs, wave_bytes):
        if sum(job.pipeline.nbytes or SMALL_WAVE_BYTES for job in wave) < SMALL_WAVE_BYTES:
            for job in wave:
                _decode_one(job)
        else:
            _decode_wave(wave, threads)


def decode_jobs(jobs: Sequence[DecodeJob], threads: Threads) -> None:
    """Decode every job into its target: :func:`decode_batch`, or (a chain that :func:`codes`,
    from :data:`POOL_MIN_BYTES` on a CodecThreads, :data:`POOL_BYTES` given a number) one
    contiguous run of jobs per thread, each job by :func:`decode_each` straight into its
    target.  Errors as :func:`decode_batch` (every run has finished when one is raised)."""
    if not jobs:
        return
    nbytes = sum(job.pipeline.spec.nbytes or 0 for job in jobs)
    pool, count = _pool_for(threads, nbytes, len(jobs), any(codes(job.pipeline) for job in jobs))
    if pool is None:
        decode_batch(jobs, count)
        return
    try:
        pool.map_runs(decode_each, jobs, pool.threads)
    finally:
        if pool is not threads:
            pool.close()


# Chunk bytes whose byte shuffle :func:`decode_each` undoes in one set of plane copies: the
# run's decompressed bytes stay in a core's cache (a chunk of this size or more goes alone).
RUN_BYTES = 1024 * 1024


def decode_each(jobs: Sequence[DecodeJob]) -> None:
    """Decode the jobs one by one, each through its pipeline's per-thread scratch buffer
    straight into its target (a thread's run of a large read, ``Array._decode``).  Consecutive
    chunks (up to :data:`RUN_BYTES`) whose targets follow one another and whose last step is
    the byte shuffle are unshuffled together: one strided copy per byte plane for the
    run instead of per chunk, so a thread takes the GIL once per plane of a run — per chunk,
    the copies on two threads ran at 1.1-1.3x of one, the runs at 1.5-1.7x (bench/README.md,
    "Unmet targets of issue 37").  A thread's share of one run or less (a 1-2 MiB read)
    goes chunk by chunk, as before: there the runs gained nothing the benchmark could show.
    The same bytes land in each target (zarr-v3-subset#5.6)."""
    if sum(job.pipeline.nbytes or 0 for job in jobs) <= RUN_BYTES:
        for job in jobs:
            _decode_one(job)
        return
    at = 0
    while at < len(jobs):
        count = _shuffle_run(jobs, at)
        if count > 1:
            _decode_run(jobs[at:at + count])
            at += count
        else:
            _decode_one(jobs[at])
            at += 1


def _shuffle_run(jobs: Sequence[DecodeJob], at: int) -> int:
    """How many jobs from ``at`` on :func:`_decode_run` can take together (0: not the first)."""
    first = jobs[at]
    pipeline = first.pipeline
    size = pipeline.nbytes or 0
    if 2 * size > RUN_BYTES or at + 1 == len(jobs):  # a chunk this large goes alone
        return 0
    shuffle = pipeline.bytes_codecs[0] if pipeline.bytes_codecs else None
    target = first.target
    if not (isinstance(shuffle, ShuffleCodec) and shuffle.elementsize > 1 and size % shuffle.elementsize == 0
            and pipeline.direct and first.whole and target.flags.c_contiguous):
        return 0
    start = _address(target)
    count = 1
    while (count + 1) * size <= RUN_BYTES and at + count < len(jobs):
        job = jobs[at + count]
        if (job.pipeline is not pipeline or not job.whole or not job.target.flags.c_contiguous
                or _address(job.target) != start + count * size):  # each starts where the last ends
            break
        count += 1
    return count


def _address(array: np.ndarray) -> int:
    return int(array.__array_interface__["data"][0])


def _decode_run(run: Sequence[DecodeJob]) -> None:
    """Chunks of one pipeline into adjacent targets: every step but the byte shuffle chunk by
    chunk into this thread's run buffer, then the shuffle of them all, plane by plane."""
    pipeline = run[0].pipeline
    shuffle = pipeline.bytes_codecs[0]
    size = run[0].target.nbytes
    rows = pipeline.run_buffer(len(run) * size).reshape(len(run), size)
    for row, job in zip(rows, run):
        try:
            pipeline.decode_shuffled_into(job.data, memoryview(row))
        except _DECODE_ERRORS as exc:
            raise _failed(job, exc) from None
    first = run[0].target.reshape(-1).view(np.uint8)  # the others follow it in memory (_shuffle_run)
    shuffle.unshuffle_rows(rows, np.lib.stride_tricks.as_strided(first, shape=(len(run) * size,), strides=(1,)))


def _decode_one(job: DecodeJob) -> None:
    try:
        if job.pipeline.direct and job.whole:
            job.pipeline.decode_to(job.data, job.target)
        else:
            _finish(job, job.pipeline.decode_bytes(job.data))
    except _DECODE_ERRORS as exc:
        raise _failed(job, exc) from None


def _decode_wave(jobs: Sequence[DecodeJob], threads: int) -> None:

    items: List[Any] = [job.data for job in jobs]
    done = [False] * len(jobs)
    depth = max(len(job.pipeline.bytes_codecs) for job in jobs)
    for step in range(depth):
        batch: List[int] = []
        for k, job in enumerate(jobs):
            codecs = job.pipeline.bytes_codecs
            stage = len(codecs) - 1 - step
            if stage < 0 or done[k]:
                continue
            codec = codecs[stage]
            size = job.pipeline.stage_sizes[stage]
            try:
                if isinstance(codec, ZstdCodec) and size is not None:
                    batch.append(k)
                elif (stage == 0 and isinstance(codec, ShuffleCodec) and job.pipeline.direct and job.whole
                      and codec.elementsize == job.target.itemsize):
                    codec.unshuffle_into(items[k], job.target)  # the last step, into the target
                    done[k] = True
                else:
                    items[k] = codec.decode(items[k], size, job.pipeline.spec.limits.max_chunk_bytes)
            except _DECODE_ERRORS as exc:
                raise _failed(job, exc) from None
        if batch:
            results = decompress_many([items[k] for k in batch],
                                      [jobs[k].pipeline.stage_sizes[len(jobs[k].pipeline.bytes_codecs) - 1 - step]
                                       for k in batch], threads)
            for k, result in zip(batch, results):
                if isinstance(result, Exception):
                    raise _failed(jobs[k], result)
                items[k] = result
    for k, job in enumerate(jobs):
        if not done[k]:
            try:
                _finish(job, items[k])
            except _DECODE_ERRORS as exc:
                raise _failed(job, exc) from None
