"""Arrays read in whole inner chunks along the first axis, many chunks of many arrays at once.

A read engine above this layer decides which inner chunks it needs (chunk ``c`` holds rows
``[c*R, (c+1)*R)`` of the first axis, ``R`` = :attr:`FirstAxis.rows`); this module finds
where their bytes lie, fetches them and decodes them:

- :class:`FirstAxis` — an array's geometry along its first axis: rows per inner chunk, the
  shard and slot of each chunk, whether the fast path applies (one chunk spans every other
  axis and inner chunks are not sharded again; anything else is read through
  :func:`read_many`, whatever its chunking).
- :class:`ShardIndexes` — decoded shard indexes, least recently used first out within a
  byte budget.  Each is kept with the leading rows of the array it was proven for
  (``trusted``): an index read when rows ``[0, n)`` were committed serves chunks of those
  rows only, for a reader that knows that bytes holding them are never rewritten
  (trajectory §10); a chunk past them has its index read again.  The caller decides what to
  trust (:meth:`ShardIndexes.retain`).
- :func:`read_chunks` — every chunk of every request: missing indexes fetched (one range
  per shard, every shard of a request in one call), then every chunk's byte range, one
  :class:`~molrec_raw.zarr.handles.RangeReader` call per stored value (neighbours read as
  one run), then one decode batch for all of them (codecs/batch.py ``decode_jobs``: a
  number of threads, or a caller's ``CodecThreads``).
- :func:`check_landed` — the index pages of chosen shards, each at least as new as a
  landing a writer recorded (``Array.check_landed``), kept in a :class:`ShardIndexes`; a
  read checks every index page it reads (checksum, entries inside the shard), so a caller
  checks the shards a commit may have left stale when it opens an array and leaves the rest
  to the first read of each.
"""
from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from math import prod
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import zstandard

from molrec_raw.errors import CorruptDataError, MolrecError
from molrec_raw.zarr.codecs.batch import DecodeJob, Threads, decode_jobs
from molrec_raw.zarr.codecs.quick import QuickDecoder, QuickRefused, quick_decoder
from molrec_raw.zarr.codecs.sharding import EMPTY, PAST_END
from molrec_raw.zarr.handles import RangeReader

__all__ = ["FirstAxis", "ShardIndexes", "read_chunks", "read_few", "read_many", "check_landed", "INDEX_CACHE_BYTES"]

INDEX_CACHE_BYTES = 8 << 20  # decoded shard indexes a reader keeps: 2,048 indexes of 255 inner chunks
# Decoded bytes below which read_chunks decodes by QuickDecoder, chunk by chunk: zstd's batch
# call runs on one thread below 1 MiB (codecs/zstd_codec.py) and costs twice a one-shot call
# per 16 KiB chunk there (bench/trajectory.py S2)
QUICK_BATCH_BYTES = 1 << 20
_EMPTY = int(EMPTY)
_PAST_END = int(PAST_END)  # at or above: an empty entry, or one past the end of its shard
# what sends a chunk from the quick path to the general one (which reads it again and raises
# its own error, or accepts a value the quick path does not decode)
_QUICK_MISSES = (QuickRefused, MolrecError, zstandard.ZstdError, ValueError, TypeError, OverflowError)
_STRING_ITEM_BYTES = 16
Mapper = Callable[..., Iterable[Any]]


class FirstAxis:
    """How the inner chunks along the first axis of ``array`` are stored (see the module)."""

    __slots__ = ("array", "path", "rows", "per_shard", "pipeline", "sharding", "direct", "chunk_shape", "cut",
                 "nbytes", "plain", "quick", "_keys")

    def __init__(self, array: Any) -> None:
        metadata = array.metadata
        array._check_chunk_size(metadata)
        self.array, self.path = array, array.path
        sharding = array.pipeline.sharding
        grid_one = all(g <= 1 for g in metadata.grid_shape[1:])
        if sharding is not None:
            self.sharding = sharding
            self.pipeline = sharding.inner
            self.rows = int(sharding.chunk_shape[0]) if sharding.chunk_shape else 1
            self.per_shard = int(sharding.chunks_per_shard[0]) if sharding.chunk_shape else 1
            self.direct = (array.ndim > 0 and grid_one and all(n == 1 for n in sharding.chunks_per_shard[1:])
                           and sharding.inner.sharding is None)
        else:
            self.sharding = None
            self.pipeline = array.pipeline
            self.rows = int(metadata.chunk_shape[0]) if metadata.chunk_shape else 1
            self.per_shard = 1
            self.direct = array.ndim > 0 and grid_one
        self.chunk_shape: Tuple[int, ...] = tuple(self.pipeline.spec.shape) if self.direct else \
            (self.rows,) + tuple(array.shape[1:])
        trailing = tuple(array.shape[1:])
        self.cut = None if self.chunk_shape[1:] == trailing else (slice(None),) + tuple(slice(0, s) for s in trailing)
        # a chunk stored as its plain bytes (then a crc32c, or nothing): read in place
        codecs = [c.name for c in self.pipeline.bytes_codecs]
        self.plain: Optional[int] = (4 if codecs == ["crc32c"] else 0) if (
            self.direct and self.pipeline.direct and codecs in ([], ["crc32c"])) else None
        item = metadata.dtype.itemsize or _STRING_ITEM_BYTES
        self.nbytes = max(1, prod(self.chunk_shape) * item)
        # the decoder of read_few (sharded direct arrays only; None: read_chunks reads them)
        self.quick: Optional[QuickDecoder] = quick_decoder(self.pipeline) if self.direct and sharding is not None \
            else None
        self._keys: Dict[int, str] = {}

    def key(self, unit: int) -> str:
        """The store key of shard ``unit`` (sharded) or of chunk ``unit`` (not sharded)."""
        key = self._keys.get(unit)
        if key is None:
            if len(self._keys) > 4096:
                self._keys.clear()
            key = self._keys[unit] = self.array.chunk_key((unit,) + (0,) * (self.array.ndim - 1))
        return key

    def fill(self, out: np.ndarray) -> None:
        """Set ``out`` (one chunk) to the fill value."""
        out[...] = self.pipeline.spec.fill_value

    def empty_chunk(self) -> np.ndarray:
        """A new array of one inner chunk's shape and dtype (uninitialised, or None objects)."""
        return np.empty(self.chunk_shape, dtype=self.array.metadata.dtype.numpy)


class ShardIndexes:
    """Decoded shard indexes within ``budget`` bytes, each with the rows it is trusted for
    (see the module docstring).  Every index is checked when read: its checksum and the
    shard's size.  Thread-safe."""

    def __init__(self, budget: int = INDEX_CACHE_BYTES, strict: bool = False) -> None:
        self.budget = max(0, int(budget))
        # a shard holding trusted rows must be stored (a writer that stores every shard it
        # lands rows in: one not stored was deleted, its rows are not fill values)
        self.strict = strict
        self._entries: "OrderedDict[Tuple[str, int], Tuple[np.ndarray, int]]" = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.reads = 0  # index pages read (tests, benchmarks)

    def get(self, path: str, shard: int, rows: int) -> Optional[np.ndarray]:
        """The index of shard ``shard`` of array ``path`` when it is trusted for rows ``[0, rows)``."""
        with self._lock:
            found = self._entries.get((path, shard))
            if found is None or found[1] < rows:
                return None
            self._entries.move_to_end((path, shard))
            return found[0]

    def put(self, path: str, shard: int, index: np.ndarray, trusted: int) -> None:
        """Keep ``index`` as trusted for rows ``[0, trusted)`` (never less than before)."""
        if not self.budget:
            return
        with self._lock:
            old = self._entries.pop((path, shard), None)
            if old is not None:
                self._bytes -= old[0].nbytes
                if old[1] > trusted and old[0].shape == index.shape:
                    index, trusted = old
            self._entries[(path, shard)] = (index, trusted)
            self._bytes += index.nbytes
            while self._bytes > self.budget and self._entries:
                _, (evicted, _) = self._entries.popitem(last=False)
                self._bytes -= evicted.nbytes

    def retain(self, trusted: Dict[str, int]) -> None:
        """Keep the indexes of the arrays named (path -> rows still trusted, each cut to
        it); drop every other one and those left trusting no row."""
        with self._lock:
            for (path, shard), (index, rows) in list(self._entries.items()):
                keep = min(rows, trusted.get(path, 0))
                if keep <= 0:
                    del self._entries[(path, shard)]
                    self._bytes -= index.nbytes
                elif keep != rows:
                    self._entries[(path, shard)] = (index, keep)

    def merge(self, other: "ShardIndexes") -> None:
        """Keep what ``other`` holds too (each index with the rows it is trusted for)."""
        with other._lock:
            entries = list(other._entries.items())
        for (path, shard), (index, trusted) in entries:
            self.put(path, shard, index, trusted)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        """Bytes the kept indexes hold."""
        return self._bytes


def _checked_page(array: Any, coords: Tuple[int, ...], ranges: RangeReader,
                  end: Optional[int] = None, lenient: bool = True) -> Tuple[str, Optional[np.ndarray]]:
    """Read and decode the index of the shard at grid ``coords``, checked: its checksum, its
    entries inside the shard and, when ``end`` is given, reaching at least that end (see
    :func:`check_landed`).  (key, index), or (key, None) for a shard not stored — it reads
    as the fill value, unless ``end`` says a landing stored it.  ``lenient``: an entry past
    the end of the shard costs only its inner chunk (``ShardingCodec.mark_past_end``: a
    read of it refuses), else it refuses the page."""
    sharding = array.pipeline.sharding
    key = array.chunk_key(coords)
    try:
        found = ranges.read(key, [sharding.index_range()])
        size = None if found is None else ranges.size(key)
        if found is None or size is None:  # (size None: removed between the two reads)
            if end is not None:
                raise CorruptDataError(f"shard {list(coords)} was landed in, but it is not stored",
                                       rule="zarr-v3-subset#7")
            return key, None
        index = sharding.decode_index(memoryview(found[0])[:sharding.index_size], None)
        if not lenient:
            sharding.check_index(index, size)
        if end is not None and sharding.index_end(index) < end:
            raise CorruptDataError(
                f"the index of shard {list(coords)} covers bytes up to {sharding.index_end(index)}, but the landing "
                f"recorded for it wrote an index covering bytes up to {end}: it is older than the rows claimed, "
                "which were never written here", rule="zarr-v3-subset#7")
        if lenient:
            index = sharding.mark_past_end(index, size)
    except MolrecError as exc:
        raise array._context(exc, key) from None
    return key, index


def _shard_indexes(requests: Sequence[Tuple[FirstAxis, Sequence[int], int]], ranges: RangeReader,
                   indexes: Optional[ShardIndexes], each: Mapper) -> Dict[Tuple[str, int], Optional[np.ndarray]]:
    """(path, shard) -> the index of every shard the chunks of ``requests`` (sharded arrays:
    ``(axis, chunks, trusted rows)``) lie in: those ``indexes`` holds for the trusted rows,
    the others read and checked by :func:`_read_indexes` (None: a shard not stored)."""
    known: Dict[Tuple[str, int], Optional[np.ndarray]] = {}
    missing: Dict[Tuple[str, int], Tuple[FirstAxis, int, int]] = {}
    for axis, chunks, trusted in requests:
        for c in chunks:
            unit = (axis.path, int(c) // axis.per_shard)
            if unit not in known and unit not in missing:
                index = indexes.get(unit[0], unit[1], trusted) if indexes is not None else None
                if index is None:
                    missing[unit] = (axis, unit[1], trusted)
                else:
                    known[unit] = index
    if missing:
        known.update(_read_indexes(list(missing.values()), ranges, indexes, each))
    return known


def _read_indexes(wanted: List[Tuple[FirstAxis, int, int]], ranges: RangeReader, indexes: Optional[ShardIndexes],
                  each: Mapper) -> Dict[Tuple[str, int], Optional[np.ndarray]]:
    """The checked indexes (:func:`_checked_page`) of ``(axis, shard, trusted rows)``:
    (path, shard) -> index, None for a shard not stored.  Kept in ``indexes``."""

    strict = indexes is not None and indexes.strict

    def fetch(item: Tuple[FirstAxis, int, int]) -> Optional[np.ndarray]:
        axis, shard, trusted = item
        key, index = _checked_page(axis.array, (shard,) + (0,) * (axis.array.ndim - 1), ranges)
        if index is None and strict and trusted > shard * axis.array.metadata.chunk_shape[0]:
            raise axis.array._context(CorruptDataError(
                f"rows up to {trusted} are claimed but shard {shard} is missing: they were never written",
                rule="zarr-v3-subset#7"), key)
        if indexes is not None and index is not None:
            indexes.reads += 1
            indexes.put(axis.path, shard, index, trusted)
        return index

    items = list(each(fetch, wanted))
    return {(axis.path, shard): item for (axis, shard, _), item in zip(wanted, items)}


def read_many(requests: Sequence[Tuple[Any, Any, Optional[np.ndarray]]], threads: Threads = 1) -> List[np.ndarray]:
    """Selections of several arrays read with one decode batch (``threads``: a number, or a
    caller's :class:`~molrec_raw.zarr.codecs.threads.CodecThreads`; codecs/batch.py
    :func:`decode_jobs`): ``(array, selection, out)`` with ``out`` None (a new array) or a writable
    array of the selection's shape and dtype, any strides — the result is written into it.
    Returns each result (``out`` itself when given)."""
    jobs: List[DecodeJob] = []
    results = []
    for arr, selection, out in requests:
        result, found = arr._read_jobs(selection, out)
        results.append(result)
        jobs.extend(found)
    decode_jobs(jobs, threads)
    return results


def read_chunks(requests: Sequence[Tuple[FirstAxis, Sequence[int], int]], ranges: RangeReader,
                indexes: Optional[ShardIndexes] = None, *, threads: Threads = 1, each: Mapper = map,
                targets: Optional[Sequence[Sequence[Optional[np.ndarray]]]] = None) -> List[List[np.ndarray]]:
    """The decoded inner chunks ``chunks`` of each request ``(axis, chunks, trusted rows)``,
    one array per chunk (the chunk's shape, cut to the array's other axes); a chunk that
    is not stored reads as the fill value.  ``trusted``: the array's rows the caller relies
    on (an index cached for fewer is read again).  ``targets``: per request and chunk an
    array to decode into (chunk shape, any strides) or None.  ``each`` maps over the stored
    values (a pool's ``map`` fetches them concurrently).  Errors name the array and key."""
    out: List[List[np.ndarray]] = []
    jobs: List[DecodeJob] = []
    # stored value -> [(request, position in request, offset, nbytes)]; nbytes -1: the whole value
    wanted: "OrderedDict[Tuple[FirstAxis, str], List[Tuple[int, int, int, int]]]" = OrderedDict()
    generic: List[Tuple[int, int]] = []
    for r, (axis, chunks, trusted) in enumerate(requests):
        given = targets[r] if targets is not None else None
        row: List[Any] = [None] * len(chunks) if given is None else list(given)  # made when decoded
        out.append(row)
        if not axis.direct:
            generic.extend((r, p) for p in range(len(chunks)))
    known = _shard_indexes([request for request in requests if request[0].direct and request[0].sharding is not None],
                           ranges, indexes, each)
    for r, (axis, chunks, trusted) in enumerate(requests):
        if not axis.direct:
            continue
        if axis.sharding is None:
            for p, c in enumerate(chunks):
                wanted.setdefault((axis, axis.key(int(c))), []).append((r, p, 0, -1))
            continue
        per = axis.per_shard
        for p, c in enumerate(chunks):
            shard, slot = divmod(int(c), per)
            index = known[(axis.path, shard)]
            offset = _EMPTY if index is None else int(index[slot, 0])
            if index is None or offset >= _PAST_END:  # not stored (the shard, or this chunk): the fill value
                if index is not None and offset != _EMPTY:  # an entry past the end of the shard
                    raise _past_end(axis, index, slot, shard, ranges)
                axis.fill(_target(out, r, p, axis))
                continue
            wanted.setdefault((axis, axis.key(shard)), []).append((r, p, offset, int(index[slot, 1])))

    def fetch(item: Tuple[Tuple[FirstAxis, str], List[Tuple[int, int, int, int]]]) -> Optional[List[Any]]:
        (axis, key), members = item
        try:
            if members[0][3] < 0:  # an unsharded chunk: the whole value
                data = axis.array.store.get(key)
                return None if data is None else [data]
            return ranges.read(key, [(offset, nbytes) for _, _, offset, nbytes in members])
        except MolrecError as exc:
            raise axis.array._context(exc, key) from None

    if hasattr(ranges, "read_into"):  # plain-bytes chunks: straight into their arrays
        for item in [item for item in wanted.items() if _in_place(item, out)]:
            _read_in_place(item, out, ranges, requests)
            del wanted[item[0]]
    items = list(wanted.items())
    # a batch below QUICK_BATCH_BYTES is decoded chunk by chunk (zstd's batch call would
    # run on one thread there, and costs more per chunk than one-shot calls), into new arrays
    quick = targets is None and sum(axis.nbytes * len(members) for (axis, _), members in items) < QUICK_BATCH_BYTES
    for ((axis, key), members), datas in zip(items, each(fetch, items)):
        if datas is None:  # gone since its index was read: fill (unsharded), or a lying index
            if members[0][3] < 0:
                for r, p, _, _ in members:
                    axis.fill(_target(out, r, p, axis))
                continue
            raise axis.array._context(CorruptDataError("the shard its index was read from is gone",
                                                       rule="zarr-v3-subset#7"), key)
        decode = axis.quick if quick else None
        for (r, p, offset, nbytes), data in zip(members, datas):
            if nbytes >= 0 and len(data) != nbytes:
                raise axis.array._context(CorruptDataError(
                    f"inner chunk {int(requests[r][1][p])} ({nbytes} bytes at {offset}) runs past the end of "
                    "the shard", rule="zarr-v3-subset#7"), key)
            if decode is not None:
                try:
                    out[r][p] = decode(data)
                    continue
                except _QUICK_MISSES:
                    pass  # the general decode below reads it (or raises its own error)
            job = DecodeJob(axis.pipeline, data, _target(out, r, p, axis), None, key)
            job.owner = axis.array
            jobs.append(job)
    decode_jobs(jobs, threads)
    if generic:
        reads = []
        for r, p in generic:
            axis, chunks, _ = requests[r]
            lo = int(chunks[p]) * axis.rows
            hi = min(lo + axis.rows, axis.array.shape[0])
            target = _target(out, r, p, axis)
            if hi < lo + axis.rows:
                axis.fill(target)
            reads.append((axis.array, slice(lo, max(lo, hi)), target[:max(0, hi - lo)]))
        read_many(reads, threads)
    for r, (axis, _, _) in enumerate(requests):
        if axis.cut is not None and axis.direct:
            out[r] = [chunk[axis.cut] for chunk in out[r]]
    return out


def read_few(requests: Sequence[Tuple[FirstAxis, Sequence[int], int]], ranges: RangeReader,
             indexes: Optional[ShardIndexes] = None, *, threads: Threads = 1, each: Mapper = map,
             planes: bool = False) -> List[List[Any]]:
    """:func:`read_chunks` for a few chunks (a frame's columns) of sharded arrays whose
    chain a :class:`~molrec_raw.zarr.codecs.quick.QuickDecoder` serves, without the
    general path's bookkeeping: the indexes not held read and checked as there (checksum,
    entries inside the shard, a missing shard refused when ``strict``), each shard's chunks
    read with one ``ranges.read`` (neighbours coalesced into one ``pread``), every length
    checked, each chunk decoded by the quick decoder — a value it does not take goes
    through the general decode, which decodes it or raises its own error.  The same steps
    in the same order as :func:`read_chunks`, so the same chunks are refused with the same
    errors.  Other arrays: :func:`read_chunks`.  ``planes``: a chunk whose chain ends in the
    byte shuffle comes as a :class:`~molrec_raw.zarr.codecs.quick.Planes` (every check made,
    the transposition left to the caller, who may need a few rows only)."""
    if any(axis.quick is None for axis, _, _ in requests):
        return read_chunks(requests, ranges, indexes, threads=threads, each=each)
    known = _shard_indexes(requests, ranges, indexes, each)
    out: List[List[Any]] = []
    reads: List[Tuple[int, FirstAxis, str, List[Tuple[int, int, int]]]] = []
    for r, (axis, chunks, _) in enumerate(requests):
        per = axis.per_shard
        row: List[Any] = [None] * len(chunks)
        members: Dict[int, List[Tuple[int, int, int]]] = {}
        for p, c in enumerate(chunks):
            shard, slot = divmod(int(c), per)
            index = known[(axis.path, shard)]
            offset = _EMPTY if index is None else int(index[slot, 0])
            if index is None or offset >= _PAST_END:  # not stored (the shard, or this chunk): the fill value
                if index is not None and offset != _EMPTY:  # an entry past the end of the shard
                    raise _past_end(axis, index, slot, shard, ranges)
                chunk = axis.empty_chunk()
                axis.fill(chunk)
                row[p] = chunk
                continue
            members.setdefault(shard, []).append((p, offset, int(index[slot, 1])))
        reads.extend((r, axis, axis.key(shard), items) for shard, items in members.items())
        out.append(row)
    fetched = []
    for r, axis, key, items in reads:
        try:
            datas = ranges.read(key, [(offset, nbytes) for _, offset, nbytes in items])
        except MolrecError as exc:
            raise axis.array._context(exc, key) from None
        if datas is None:
            raise axis.array._context(CorruptDataError("the shard its index was read from is gone",
                                                       rule="zarr-v3-subset#7"), key)
        for (p, offset, nbytes), data in zip(items, datas):
            if len(data) != nbytes:
                raise axis.array._context(CorruptDataError(
                    f"inner chunk {int(requests[r][1][p])} ({nbytes} bytes at {offset}) runs past the end of "
                    "the shard", rule="zarr-v3-subset#7"), key)
        fetched.append(datas)
    for (r, axis, key, items), datas in zip(reads, fetched):
        row = out[r]
        decode = axis.quick
        assert decode is not None
        split = planes and axis.cut is None
        for (p, _, _), data in zip(items, datas):
            try:
                row[p] = decode(data, split)
            except _QUICK_MISSES:  # the general decode: the chunk, or its own error
                job = DecodeJob(axis.pipeline, data, axis.empty_chunk(), None, key)
                job.owner = axis.array
                decode_jobs([job], threads)
                row[p] = job.target
    for (axis, _, _), row in zip(requests, out):
        if axis.cut is not None:
            row[:] = [chunk[axis.cut] for chunk in row]
    return out


def _past_end(axis: FirstAxis, index: Any, slot: int, shard: int, ranges: RangeReader) -> MolrecError:
    """The refusal of a read of an inner chunk whose index entry points past the end of its
    shard (marked when the page was read): that chunk alone is lost."""
    key = axis.key(shard)
    assert axis.sharding is not None
    return axis.array._context(axis.sharding.entry_error(index, slot, ranges.size(key)), key)  # type: ignore[no-any-return]


def _target(out: List[List[Any]], r: int, p: int, axis: FirstAxis) -> np.ndarray:
    """The array chunk ``p`` of request ``r`` is decoded into (made when first needed)."""
    target = out[r][p]
    if target is None:
        target = out[r][p] = axis.empty_chunk()
    return target  # type: ignore[no-any-return]


def _in_place(item: Tuple[Tuple[FirstAxis, str], List[Tuple[int, int, int, int]]],
              out: List[List[np.ndarray]]) -> bool:
    """Can the chunks of one stored value be read straight into their arrays: a plain-bytes
    chain, every target a C-contiguous whole chunk, every stored size what that chain gives."""
    (axis, _), members = item
    if axis.plain is None:
        return False
    size = (axis.pipeline.nbytes or -1) + axis.plain
    for r, p, _, nbytes in members:
        target = _target(out, r, p, axis)
        if nbytes != size or not target.flags.c_contiguous or not target.flags.writeable \
                or target.shape != axis.chunk_shape:
            return False
    return True


def _read_in_place(item: Tuple[Tuple[FirstAxis, str], List[Tuple[int, int, int, int]]],
                   out: List[List[np.ndarray]], ranges: Any,
                   requests: Sequence[Tuple[FirstAxis, Sequence[int], int]]) -> None:
    """Read plain-bytes chunks into their arrays, neighbours with one ``preadv``, then check
    each one's crc32c as the codec does (zarr-v3-subset#5.5)."""
    from molrec_raw.errors import ChecksumMismatchError
    from molrec_raw.zarr.codecs.crc32c_codec import crc32c_of

    (axis, key), members = item
    order = sorted(members, key=lambda m: m[2])
    runs: List[Tuple[int, List[Any]]] = []
    sums: List[Tuple[Tuple[int, int, int, int], Optional[bytearray]]] = []
    end = -1
    for member in order:
        r, p, offset, nbytes = member
        body = memoryview(out[r][p].reshape(-1).view(np.uint8))
        crc = bytearray(axis.plain) if axis.plain else None
        pieces: List[Any] = [body] if crc is None else [body, crc]
        if runs and offset == end:
            runs[-1][1].extend(pieces)
        else:
            runs.append((offset, pieces))
        end = offset + nbytes
        sums.append((member, crc))
    try:
        got = ranges.read_into(key, runs)
    except MolrecError as exc:
        raise axis.array._context(exc, key) from None
    if got is None:
        raise axis.array._context(CorruptDataError("the shard its index was read from is gone",
                                                   rule="zarr-v3-subset#7"), key)
    for (offset, parts), done in zip(runs, got):
        want = sum(len(memoryview(part).cast("B")) for part in parts)
        if done != want:
            chunk = next(int(requests[r][1][p]) for r, p, o, _ in order if o >= offset)
            raise axis.array._context(CorruptDataError(
                f"inner chunk {chunk} ({want} bytes at {offset}) runs past the end of the shard",
                rule="zarr-v3-subset#7"), key)
    for (r, p, _, _), crc in sums:
        if crc is None:
            continue
        stored, actual = int.from_bytes(crc, "little"), crc32c_of(memoryview(out[r][p].reshape(-1).view(np.uint8)))
        if stored != actual:
            raise axis.array._context(ChecksumMismatchError(
                f"crc32c mismatch: stored {stored:#010x}, computed {actual:#010x}", rule="zarr-v3-subset#5.5"), key)


def check_landed(array: Any, ends: Mapping[str, Optional[int]], ranges: RangeReader,
                 indexes: Optional[ShardIndexes] = None, trusted: int = 0, each: Mapper = map,
                 lenient: bool = False) -> Dict[str, List[int]]:
    """Refuse when a positional shard's index is older than a landing recorded in it
    (``Array.check_landed``: the rule and its messages).  ``ends``: shard key -> the end of
    the index that landing wrote (``ShardingCodec.index_end``; a landing only appends, so a
    later index ends at or past it), or None for a shard only checked when stored (its
    checksum and entries).  The indexes read are kept in ``indexes``, trusted for rows
    ``[0, trusted)``; every page is fetched in one pass (``each``).  ``lenient``: an entry
    past the end of its shard is no refusal; returned instead (shard key -> the inner
    chunks, as slots of the shard, whose entries are marked: their reads refuse)."""
    sharding = array.pipeline.sharding
    if sharding is None or sharding.index_location != "start" or array.ndim == 0 or not ends:
        return {}
    by_key = {array.chunk_key(coords): coords for coords in _shard_coords(array, ends)}
    unknown = sorted(set(ends) - set(by_key))
    if unknown:
        raise array._context(CorruptDataError(f"{unknown[0]!r} is not a shard key of this array",
                                              rule="zarr-v3-subset#7"))
    units = [(by_key[key], end) for key, end in sorted(ends.items())]
    keep = indexes is not None and FirstAxis(array).direct
    pages = each(lambda unit: _checked_page(array, unit[0], ranges, unit[1], lenient), units)
    marked: Dict[str, List[int]] = {}
    for (coords, _), (key, index) in zip(units, pages):
        found = [] if index is None else sharding.marked_slots(index)
        if found:
            marked[key] = found
        if keep and index is not None and indexes is not None:
            indexes.reads += 1
            indexes.put(array.path, coords[0], index, trusted)
    return marked


def _shard_coords(array: Any, keys: Iterable[str]) -> List[Tuple[int, ...]]:
    """The grid coordinates of the shard keys ``keys`` of ``array`` (others left out)."""
    prefix = f"{array.path}/" if array.path else ""
    encoding = array.metadata.chunk_key_encoding
    out = []
    for key in keys:
        if not key.startswith(prefix):
            continue
        coords = encoding.decode(key[len(prefix):], array.ndim)
        if coords is not None:
            out.append(coords)
    return out
