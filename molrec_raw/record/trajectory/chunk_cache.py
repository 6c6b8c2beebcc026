"""The reader's cache of decoded inner chunks (trajectory §9, "chunk cache").

Rows are read through whole inner chunks along the first axis, kept least-recently-used
first out within a byte budget shared by the reader's arrays.  Sequential use of an array
reads ahead: each miss that continues where the last read of that array ended doubles the
run of chunks fetched, so iterating over a trajectory costs one read per run instead of one
per frame — on a remote store, one request per run.  On a local store a run is at most
``LOCAL_RUN_CHUNKS`` chunks (decoding is the cost there, not the request) and a sequential
run drops the chunks of its array behind it, so an iteration holds a few inner chunks per
column, whatever the budget; on a latency-bound store runs grow up to a share of the budget.
A random access fetches just the chunks it needs.  A read never goes past ``limit`` (the
committed rows): rows of an uncommitted tail are never decoded.

``plan`` (which chunks a read needs), ``load``/``load_many`` (read them: one array, or the
runs of several arrays decoded in one batch) and ``keep`` (insert, advance the read-ahead
state) are separate so the reader can fetch the columns of a frame together.  Given an
executor (a reader on a latency-bound store), a sequential run also starts fetching the next
run in the background, so iteration over a remote trajectory waits for the network only at
its start.
"""
from __future__ import annotations

from collections import OrderedDict
from concurrent.futures import Executor, Future
from math import prod
from typing import Dict, List, Optional, Tuple

import numpy as np

from molrec_raw.zarr import Array
from molrec_raw.zarr.array import read_many

__all__ = ["ChunkCache", "DEFAULT_CACHE_BYTES", "LOCAL_RUN_CHUNKS"]

DEFAULT_CACHE_BYTES = 64 * 1024 * 1024
# The longest read-ahead run on a local store (spec-notes/trajectory.md, "Reader cache"):
# enough chunks for a decode batch to use two threads on 80 KB chunks, few enough to hold.
LOCAL_RUN_CHUNKS = 8
_STRING_ITEM_BYTES = 16
# Background read-ahead starts once runs have doubled to this many chunks (three reads in a
# row, each where the last ended): two random frames that happen to be neighbours do not.
_BACKGROUND_AFTER = 4
Run = Tuple[int, int]  # chunks [first, stop) along the first axis


def _chunk_bytes(arr: Array) -> int:
    item = arr.metadata.dtype.itemsize or _STRING_ITEM_BYTES
    return max(1, prod(arr.chunks) * item)


class ChunkCache:
    """Decoded inner chunks of a reader's arrays within ``budget`` bytes (see the module)."""

    def __init__(self, budget: int = DEFAULT_CACHE_BYTES, executor: Optional[Executor] = None) -> None:
        self.budget = max(0, int(budget))
        self._chunks: "OrderedDict[Tuple[str, int], np.ndarray]" = OrderedDict()
        self._bytes = 0
        self._ahead: Dict[str, Tuple[int, int]] = {}  # array -> (chunk after its last run, run length)
        self._behind: Dict[str, int] = {}  # array -> length of its last run (what a sequential run drops)
        self.executor = executor  # set by a reader on a latency-bound store
        self._pending: Dict[str, Tuple[Run, "Future[np.ndarray]"]] = {}  # background read-ahead per array

    def _longest(self, arr: Array) -> int:
        """The most chunks one read-ahead run of ``arr`` may hold (its share of the budget;
        ``LOCAL_RUN_CHUNKS`` at most on a local store)."""
        share = self.budget // (4 * max(1, len(self._ahead)))
        longest = max(1, share // _chunk_bytes(arr))
        return longest if self.executor is not None else min(longest, LOCAL_RUN_CHUNKS)

    def expect_sequential(self, arrays: List[Array]) -> None:
        """The caller will read ``arrays`` from their first row on, in order (an iteration
        over every frame): their first runs are read ahead at full length at once."""
        for arr in arrays:
            self._ahead.setdefault(arr.path, (0, 0))
        for arr in arrays:
            if self._ahead[arr.path] == (0, 0):
                self._ahead[arr.path] = (0, max(1, self._longest(arr) // 2))

    def plan(self, arr: Array, lo: int, hi: int, limit: int) -> Optional[Run]:
        """The run of chunks to fetch for rows ``lo:hi`` (None: all cached, or too large to
        cache — :meth:`rows` then reads directly)."""
        size = arr.chunks[0] if arr.ndim else 1
        if hi <= lo or not arr.ndim:
            return None
        first, last = lo // size, (hi - 1) // size
        chunk_bytes = _chunk_bytes(arr)
        if (last - first + 1) * chunk_bytes > self.budget // 4:
            return None
        missing = [c for c in range(first, last + 1) if (arr.path, c) not in self._chunks]
        if not missing:
            return None
        start, stop = missing[0], missing[-1] + 1
        follows, length = self._ahead.get(arr.path, (-1, 0))
        if start == follows:  # sequential: read ahead, twice as far as last time
            stop = max(stop, start + min(2 * max(1, length), self._longest(arr)))
        end = -(-min(limit, arr.shape[0]) // size)
        return start, max(min(stop, end), missing[-1] + 1)

    def load(self, arr: Array, run: Run, limit: int) -> Tuple[Run, np.ndarray]:
        """The run to keep and its rows: the background read-ahead of ``arr`` when it starts
        where ``run`` does and covers it, else ``run`` read now."""
        pending = self._pending.get(arr.path)
        if pending is not None and pending[0][0] == run[0] and pending[0][1] >= run[1]:
            return pending[0], pending[1].result()
        return run, self.fetch(arr, run, limit)

    def load_many(self, plans: List[Tuple[Array, Run, int]], threads: int = 1) -> List[Tuple[Run, np.ndarray]]:
        """``load`` of several ``(array, run, limit)`` plans: background read-aheads where
        they cover the run, every other run read now in one decode batch (zstd on up to
        ``threads`` threads)."""
        out: List[Optional[Tuple[Run, np.ndarray]]] = [None] * len(plans)
        now = []
        for k, (arr, run, limit) in enumerate(plans):
            pending = self._pending.get(arr.path)
            if pending is not None and pending[0][0] == run[0] and pending[0][1] >= run[1]:
                out[k] = (pending[0], pending[1].result())
            else:
                now.append(k)
        if now:
            requests = [(plans[k][0], self._span(*plans[k]), None) for k in now]
            for k, data in zip(now, read_many(requests, threads)):
                out[k] = (plans[k][1], data)
        return [item for item in out if item is not None]

    @staticmethod
    def _span(arr: Array, run: Run, limit: int) -> slice:
        size = arr.chunks[0]
        return slice(run[0] * size, min(run[1] * size, limit, arr.shape[0]))

    @staticmethod
    def fetch(arr: Array, run: Run, limit: int) -> np.ndarray:
        """The decoded rows of ``run`` (cut at ``limit`` and at the array's end)."""
        return np.asarray(arr[ChunkCache._span(arr, run, limit)])

    def keep(self, arr: Array, run: Run, data: np.ndarray, limit: int) -> None:
        """Insert the chunks of a fetched run; evict the least recently used beyond the budget;
        after a sequential run, start reading the next one in the background."""
        sequential = self._ahead.get(arr.path, (-1, 0))[0] == run[0]
        pending = self._pending.pop(arr.path, None)
        if pending is not None and pending[0] != run:
            pending[1].cancel()  # a read-ahead nobody asked for (a jump): dropped
        size = arr.chunks[0]
        for c in range(run[0], run[1]):
            piece = data[(c - run[0]) * size:(c - run[0] + 1) * size]
            old = self._chunks.pop((arr.path, c), None)
            if old is not None:
                self._bytes -= old.nbytes
            self._chunks[(arr.path, c)] = piece
            self._bytes += piece.nbytes
        self._ahead[arr.path] = (run[1], run[1] - run[0])
        if sequential:  # what lies behind a sequential run is not read again: dropped
            for c in range(run[0] - 2, max(-1, run[0] - 2 - self._behind.get(arr.path, 0)), -1):
                old = self._chunks.pop((arr.path, c), None)
                if old is not None:
                    self._bytes -= old.nbytes
        self._behind[arr.path] = run[1] - run[0]
        while self._bytes > self.budget and len(self._chunks) > run[1] - run[0]:
            _, evicted = self._chunks.popitem(last=False)
            self._bytes -= evicted.nbytes
        end = -(-min(limit, arr.shape[0]) // size)
        if self.executor is not None and sequential and run[1] - run[0] >= _BACKGROUND_AFTER and run[1] < end:
            following = (run[1], min(end, run[1] + min(2 * (run[1] - run[0]), self._longest(arr))))
            self._pending[arr.path] = (following, self.executor.submit(self.fetch, arr, following, limit))

    def retain(self, chunk_rows: Dict[str, int]) -> None:
        """After the reader re-read a growing record: keep only the whole inner chunks of
        the arrays named (path -> rows per inner chunk, layout unchanged).  Committed chunk
        bytes are never rewritten (trajectory §10), so a whole chunk stays valid; a chunk
        cut at the old committed length, and every chunk of an array not named, is
        dropped.  Read-ahead starts afresh."""
        for key in list(self._chunks):
            rows = chunk_rows.get(key[0])
            if rows is None or self._chunks[key].shape[0] != rows:
                self._bytes -= self._chunks.pop(key).nbytes
        for _, future in self._pending.values():
            future.cancel()
        self._pending.clear()
        self._ahead.clear()
        self._behind.clear()

    def rows(self, arr: Array, lo: int, hi: int, limit: int, consume: bool = False) -> np.ndarray:
        """A copy of rows ``lo:hi`` (``hi <= limit``).  Rows that are exactly one cached
        chunk are handed over instead of copied, and leave the cache, when ``consume`` (a
        sequential pass that will not come back) or, on a local store, when the chunk was
        fetched alone for this read (a random access: a frame per inner chunk, as for large
        systems — reading that frame again decodes it again, which costs less than copying
        every frame out; on a latency-bound store it would cost a request, so it is kept)."""
        run = self.plan(arr, lo, hi, limit)
        if run is not None:
            self.keep(arr, *self.load(arr, run, limit), limit)
        if hi <= lo or not arr.ndim:
            return np.asarray(arr[lo:hi] if arr.ndim else arr[...])
        size = arr.chunks[0]
        alone = self.executor is None and self._ahead.get(arr.path) == (lo // size + 1, 1)
        if lo % size == 0 and hi - lo == size and (consume or alone):
            whole = self._chunks.pop((arr.path, lo // size), None)
            if whole is not None and whole.shape[0] == size:
                self._bytes -= whole.nbytes
                return whole
            if whole is not None:  # the array's last chunk, cut at the end: not a whole chunk
                self._chunks[(arr.path, lo // size)] = whole
        parts: List[np.ndarray] = []
        for c in range(lo // size, (hi - 1) // size + 1):
            chunk = self._chunks.get((arr.path, c))
            if chunk is None:  # too large to cache: read directly
                return np.asarray(arr[lo:hi])
            self._chunks.move_to_end((arr.path, c))
            parts.append(chunk[max(lo - c * size, 0):min(hi, (c + 1) * size) - c * size])
        return (parts[0] if len(parts) == 1 else np.concatenate(parts)).copy()
