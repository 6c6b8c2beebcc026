"""The read engine of a trajectory (trajectory §9–§11; spec-notes/trajectory.md "Read engine").

Data flows one way through four parts:

1. **plan** (``plan.py``): frame indices -> the update and rows of each wanted block, the
   row of each meta key, the cell, and per array the inner chunks they lie in (each once);
2. **fetch/decode** (``zarr/chunkread.py`` through this module): the chunks not held are
   located through cached shard indexes, read with one ``pread`` per run of neighbouring
   chunks (one request per run over HTTP, stored values fetched concurrently there), and
   decoded in one batch — each chunk once, for every frame it holds;
3. **cache** (``chunk_cache.py`` for decoded chunks, ``zarr.chunkread.ShardIndexes`` for
   shard indexes, ``zarr.handles.FileRanges`` for open descriptors): all bounded, all
   trusting only rows the adopted state committed (:meth:`ReadEngine.adopt` cuts them to
   the rows no recovery can roll back);
4. **assemble** (``assemble.py``): ``Frame`` objects, views or the caller's own arrays.

An engine reads one :class:`~molrec_raw.record.trajectory.recovery.CommittedState` at a
time; :meth:`adopt` moves it to a newer one (``MrecReader.refresh``), the only way what it
trusts grows.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

import numpy as np

from molrec_raw.errors import MolrecError
from molrec_raw.record.model import Frame
from molrec_raw.record.trajectory.assemble import Chunks, FrameRecipe, assemble, frames_in_order
from molrec_raw.record.trajectory.chunk_cache import ChunkCache
from molrec_raw.record.trajectory.layout import TrajectoryLayout
from molrec_raw.record.trajectory.plan import FramePlan, Wanted, chunks_of
from molrec_raw.record.trajectory.readahead import Pending, ReadAhead
from molrec_raw.record.trajectory.recovery import CommittedState
from molrec_raw.zarr import Array
from molrec_raw.zarr.chunkread import FirstAxis, read_chunks, read_few
from molrec_raw.zarr.codecs.threads import CodecThreads

__all__ = ["ReadEngine", "READ_THREADS", "LOCAL_RUN_CHUNKS", "BATCH_BYTES"]

# A reader's threads for codec work by default (capped by the machine's cores; 1: none).  The
# engine keeps them in one CodecThreads: reads of 1 MiB of chunks on are split over them, smaller
# ones use them inside zstandard's batch call (codecs/batch.py; zarr-v3-subset §5).
READ_THREADS = 2
# An iteration over a local store decodes this many inner chunks of its finest array per
# batch: enough for a zstd batch to use two threads on 80 KB chunks, few enough to stay in
# the CPU's caches until the frames are assembled (bench/trajectory.py W6).
LOCAL_RUN_CHUNKS = 8
# Decoded bytes of one batch at most (a frame larger than that is a batch alone).  On a
# latency-bound store a batch is a quarter of the chunk cache's budget instead (fewer,
# longer requests), and the next batch is fetched while the frames of one are handed out.
BATCH_BYTES = 8 << 20
# Random reads of at most this many frames are planned as one read; larger lists are read
# in such pieces (each planned as one read), so the chunks in flight stay bounded.
WAVE_FRAMES = 4096

# One batch of an iteration: its plan, its decoded chunks, those offered for hand-over, rows per chunk.
BatchRead = Tuple[FramePlan, Chunks, Set[Tuple[str, int]], Dict[str, int]]


class ReadEngine:
    """Reads frames, chunks and row ranges of one committed state (see the module)."""

    def __init__(self, state: CommittedState, cache_bytes: int, concurrency: int = 1,
                 threads: int = READ_THREADS) -> None:
        self.cache = ChunkCache(cache_bytes)
        self.concurrency = max(1, int(concurrency))
        # codec work of every read (threads start with the first read of 1 MiB; close() stops them)
        self.codec_threads = CodecThreads(threads)
        self._pool: Optional[ThreadPoolExecutor] = None
        self._follows: Optional[int] = None  # the frame after the last one read alone
        self._run = 0  # chunks the last sequential miss fetched per array
        self._pending = Pending()  # iterations' batches read ahead, in flight
        self._use(state)

    def _use(self, state: CommittedState) -> None:
        self.state = state
        self.layout: TrajectoryLayout = state.layout
        self.indexes = state.indexes
        self.ranges = state.ranges
        self._axes: Dict[str, FirstAxis] = {}
        self._rows: Dict[str, int] = {}  # path -> rows per inner chunk
        self._limit = state.layout.logical  # path -> committed rows (what the state trusts)
        self._recipe: Any = None  # read_one's FrameRecipe, made at its first use (False: not served)

    # ------------------------------------------------------------ resources
    def axis(self, arr: Array) -> FirstAxis:
        """The first-axis geometry of ``arr`` (made once per state)."""
        found = self._axes.get(arr.path)
        if found is None or found.array is not arr:
            found = self._axes[arr.path] = FirstAxis(arr)
        return found

    def rows_of(self, arrays: Iterable[Array]) -> Dict[str, int]:
        """Path -> rows per inner chunk of (at least) each array."""
        rows = self._rows
        for arr in arrays:
            if arr.path not in rows:
                rows[arr.path] = self.axis(arr).rows
        return rows

    def _each(self) -> Callable[..., Iterable[Any]]:
        """How stored values are fetched: at once on the pool of a latency-bound store."""
        if self.concurrency < 2:
            return map
        return self.pool().map

    def pool(self) -> ThreadPoolExecutor:
        """The engine's threads (latency-bound stores only), made when first needed."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="molrec-reader")
        return self._pool

    def close(self) -> None:
        """Release the threads and the open descriptors (the state stays readable: a later
        read opens what it needs again).  Batches read ahead and in flight finish first."""
        self._pending.wait()
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        self.codec_threads.close()
        self.ranges.close()

    # ------------------------------------------------------------ refresh
    def adopt(self, state: CommittedState) -> None:
        """Read ``state`` from now on (a refresh found it newer).  Of what the caches hold,
        only rows below both the old committed length and the old durable extent stay, and
        only of arrays whose metadata is unchanged but for the shape: committed bytes are
        never rewritten (trajectory §10), rows past the durable extent could be rolled back
        by a recovery and rewritten, a chunk or index page past the committed length was
        never proven.  Descriptors of the old state are closed (files may have been
        replaced since).  Batches read ahead from the old state finish first."""
        self._pending.wait()
        old, new = self.layout, state.layout
        old_arrays, durable = old.read_arrays(), self.state.durable
        trusted: Dict[str, Tuple[int, int]] = {}
        for path, arr in new.read_arrays().items():
            before = old_arrays.get(path)
            if before is not None and before.metadata.with_shape(arr.shape) == arr.metadata:
                rows = min(old.logical.get(path, 0), durable.get(path, 0))
                if rows > 0:
                    trusted[path] = (self.axis(before).rows, rows)
        self.cache.retain(trusted)
        self.indexes.retain({path: rows for path, (_, rows) in trusted.items()})
        self.indexes.merge(state.indexes)
        merged = self.indexes
        merged.strict = state.indexes.strict  # the new state's rule for shards not stored
        self.ranges.close()
        self._use(state)
        self.indexes = merged

    # ------------------------------------------------------------ chunks
    def _trusted(self, arr: Array) -> int:
        """The leading rows of ``arr`` the state committed."""
        limit = self._limit.get(arr.path)
        return arr.shape[0] if limit is None else limit

    def _valid(self, arr: Array, chunk: int, rows: int) -> int:
        """Rows of chunk ``chunk`` (``rows`` rows each) the state proves."""
        return max(0, min(rows, self._trusted(arr) - chunk * rows))

    def load(self, needs: Dict[str, Tuple[Array, List[int]]], *, keep: bool = True,
             held: Optional[Chunks] = None, handover: Optional[Dict[str, bool]] = None,
             ahead: int = 0) -> Tuple[Chunks, Set[Tuple[str, int]]]:
        """The decoded chunks ``needs`` names (path -> (array, chunks)): from ``held`` (an
        iteration's previous batch), the cache, else read now in one batch.  ``keep``: put
        what is read in the cache; ``handover``: path -> its chunks read now may be taken by
        a whole-chunk frame (kept out of the cache; returned as the second item);
        ``ahead``: when an array's last chunk is read, read up to that many chunks after it
        too (committed ones only) into the cache."""
        out: Chunks = {}
        missing: List[Tuple[Array, FirstAxis, List[int]]] = []
        extra: Dict[str, int] = {}
        cache = self.cache
        for path, (arr, ids) in needs.items():
            axis = self.axis(arr)
            rows = axis.rows
            trusted = self._trusted(arr)
            got: Dict[int, np.ndarray] = {}
            prior = held.get(path) if held else None
            absent = []
            for c in ids:
                found = prior.get(c) if prior is not None else None
                if found is None and cache.budget:
                    found = cache.get(path, c, min(rows, trusted - c * rows))
                if found is None:
                    absent.append(c)
                else:
                    got[c] = found
            out[path] = got
            if absent and ahead and absent[-1] == ids[-1] and self.cache.fits(axis.nbytes):
                end = -(-self._trusted(arr) // rows)
                more = [c for c in range(ids[-1] + 1, min(end, ids[-1] + 1 + ahead))
                        if not self.cache.contains(path, c)]
                extra[path] = len(more)
                absent += more
            if absent:
                missing.append((arr, axis, absent))
        taken: Set[Tuple[str, int]] = set()
        if missing:
            requests = [(axis, absent, self._trusted(arr)) for arr, axis, absent in missing]
            try:
                decoded = read_chunks(requests, self.ranges, self.indexes, threads=self.codec_threads,
                                      each=self._each())
            except MolrecError:
                if not any(extra.values()):
                    raise
                # a chunk read ahead is damaged: that costs this read nothing (issue 36)
                return self.load(needs, keep=keep, held=held, handover=handover)
            for (arr, axis, absent), chunks in zip(missing, decoded):
                path = arr.path
                may_take = bool(handover and handover.get(path))
                wanted_count = len(absent) - extra.get(path, 0)
                for k, (c, data) in enumerate(zip(absent, chunks)):
                    if k >= wanted_count:  # read ahead: into the cache only
                        self.cache.put(path, c, data, self._valid(arr, c, axis.rows))
                        continue
                    if may_take:
                        taken.add((path, c))
                    elif keep:
                        self.cache.put(path, c, data, self._valid(arr, c, axis.rows))
                    else:
                        data.flags.writeable = False
                    out[path][c] = data
        return out, taken

    def settle(self, chunks: Chunks, taken: Set[Tuple[str, int]], keep: bool) -> None:
        """After assembly: chunks offered for hand-over that no frame took are cached (or
        made read-only when not kept)."""
        for path, c in taken:
            data = chunks[path][c]
            arr = self._array(path)
            if keep and arr is not None:
                self.cache.put(path, c, data, self._valid(arr, c, self.axis(arr).rows))
            else:
                data.flags.writeable = False

    def _array(self, path: str) -> Optional[Array]:
        found = self._axes.get(path)
        return None if found is None else found.array

    # ------------------------------------------------------------ frames
    def read(self, frames: np.ndarray, wanted: Wanted = None, meta: bool = True) -> List[Frame]:
        """Frames ``frames`` (in range; any order, duplicates allowed) as the caller's own
        arrays, planned as one read per wave of :data:`WAVE_FRAMES` frames (``meta`` False:
        the per-step meta left out, its arrays not read)."""
        out: List[Frame] = []
        for first in range(0, int(frames.size), WAVE_FRAMES):
            out.extend(self._read_wave(frames[first:first + WAVE_FRAMES], wanted, meta))
        return out

    def read_one(self, i: int) -> Frame:
        """Frame ``i`` (in range) as the caller's own arrays: :meth:`read` of one frame, by
        the one-frame path on a local store — the chunks located by the state's
        :class:`~molrec_raw.record.trajectory.assemble.FrameRecipe`, looked up in the cache
        under one lock, the missing ones read by ``zarr.chunkread.read_few`` (every check of
        the general path) and kept in the cache, the frame built from them.  Frames the
        recipe does not serve, damaged layouts, latency-bound stores and a miss in a run of
        frames read in order (which reads ahead, :meth:`_ahead`) take :meth:`read`."""
        recipe = self._recipe
        if recipe is None:
            layout = self.layout
            served = self.concurrency < 2 and not layout.has_damage
            recipe = self._recipe = FrameRecipe(layout, self.axis, self._trusted) if served else False
        located = recipe.locate(i) if recipe else None
        if located is None:
            return self.read(np.asarray([i], np.int64))[0]
        spans, keys, where = located
        cache = self.cache
        found: List[Any] = cache.get_many(keys) if cache.budget else [None] * len(keys)
        missing = [k for k, chunk in enumerate(found) if chunk is None]
        sequential = i == self._follows
        if missing and sequential:
            return self.read(np.asarray([i], np.int64))[0]  # in order: read ahead
        self._follows = i + 1
        if not sequential:
            self._run = 1
        if missing:
            requests = [(where[k][0], [keys[k][1]], where[k][1]) for k in missing]
            decoded = read_few(requests, self.ranges, self.indexes, threads=self.codec_threads, each=self._each(),
                               planes=True)  # a frame needs a few rows of each chunk: unshuffled by build
            for k, got in zip(missing, decoded):
                path, c, _ = keys[k]
                axis, trusted = where[k]
                rows = axis.rows
                found[k] = cache.put(path, c, got[0], max(0, min(rows, trusted - c * rows)))
        built: Frame = recipe.build(i, spans, found)
        return built

    def _read_wave(self, frames: np.ndarray, wanted: Wanted, meta: bool = True) -> List[Frame]:
        plan = FramePlan(self.layout, frames, wanted, meta)
        rows_of = self.rows_of(plan.arrays())
        needs = plan.needs(rows_of)
        # a frame that is one whole inner chunk takes it, when the chunk is read for it
        # alone on a local store (a second read decodes it again, which costs less than
        # copying every frame out; over a network it would cost a request: kept there)
        handover: Dict[str, bool] = {}
        if self.concurrency < 2:
            for bp in plan.blocks:
                for _, arr in bp.columns:
                    rows = rows_of[arr.path]
                    handover[arr.path] = all(hi - lo == rows and lo % rows == 0 for lo, hi in zip(bp.lo, bp.hi))
        chunks, taken = self.load(needs, handover=handover, ahead=self._ahead(frames, needs))
        left = set(taken)  # assemble removes what a frame takes
        frames_out = assemble(plan, chunks, rows_of, own=True, handover=left)
        self.settle(chunks, left, keep=True)
        return frames_out

    def _ahead(self, frames: np.ndarray, needs: Dict[str, Tuple[Array, List[int]]]) -> int:
        """Chunks to read ahead for a read of one frame: frames read one by one in order
        (``for i in ...: reader[i]``, ``follow``) read runs that double at each miss, up to
        :data:`LOCAL_RUN_CHUNKS` on a local store (decoding is the cost there), up to a
        share of the cache's budget on a latency-bound one (requests are)."""
        if frames.size != 1:
            return 0
        i = int(frames[0])
        sequential, self._follows = i == self._follows, i + 1
        if not sequential:
            self._run = 1
            return 0
        missing = any(self.cache.get(path, ids[-1], 1) is None for path, (_, ids) in needs.items())
        if not missing:
            return 0
        widest = max((self.axis(arr).nbytes for arr, _ in needs.values()), default=1)
        longest = max(1, self.cache.budget // (4 * max(1, len(needs)) * widest))
        if self.concurrency < 2:
            longest = min(longest, LOCAL_RUN_CHUNKS)
        self._run = min(2 * max(1, self._run), longest)
        return self._run - 1

    def batch_frames(self, wanted: Wanted = None) -> int:
        """Frames per batch of an iteration (see :data:`LOCAL_RUN_CHUNKS`, :data:`BATCH_BYTES`)."""
        layout = self.layout
        n = max(1, layout.nstep)
        per_frame_bytes, finest = 0.0, float("inf")
        arrays: List[Tuple[Array, float]] = []
        for name, b in layout.blocks.items():
            if wanted is not None and name not in wanted:
                continue
            rows = float(b.total) / b.count if b.count else 0.0
            arrays += [(arr, rows) for c, arr in (*b.columns.items(), *b.masks.items())
                       if wanted is None or c in wanted[name]]
        arrays += [(arr, 1.0) for _, arr in layout.meta.values() if arr is not None]
        for arr, rows in arrays:
            axis = self.axis(arr)
            if rows > 0:
                per_frame_bytes += rows * axis.nbytes / axis.rows
                finest = min(finest, axis.rows / rows)
        budget = BATCH_BYTES if self.concurrency < 2 else max(BATCH_BYTES, self.cache.budget // 4)
        by_bytes = budget / per_frame_bytes if per_frame_bytes else float(n)
        by_chunks = finest * LOCAL_RUN_CHUNKS if self.concurrency < 2 else by_bytes
        return int(max(1, min(n, by_bytes, by_chunks)))

    def iterate(self, start: int, stop: int, wanted: Wanted = None, read_ahead: Optional[bool] = None) -> Iterator[Frame]:
        """Frames ``start:stop`` in order as views (assemble.py), a batch of frames decoded
        at a time; a chunk shared by two batches is decoded once.  The next batch is read
        and decoded on a thread while this one is handed out (readahead.py): one batch
        ahead, never past ``stop`` (the committed length the caller was given), never into
        the cache; its error, if any, raised when its first frame is reached.  ``read_ahead``
        False: every batch on the caller's thread (None: read ahead when the machine has a
        second core)."""
        if read_ahead is None:
            read_ahead = (os.cpu_count() or 1) > 1
        shared_cells: Dict[int, Tuple[np.ndarray, np.ndarray]] = {}
        held: Chunks = {}
        layout = self.layout
        step = self.batch_frames(wanted)
        ahead: Optional[ReadAhead[BatchRead]] = None
        i = start
        try:
            while i < stop:
                if self.layout is not layout:  # refreshed meanwhile: a newer state, the same frames below
                    if ahead is not None:
                        ahead.wait()
                    layout, shared_cells, held, ahead = self.layout, {}, {}, None
                j = min(stop, i + step)
                if ahead is not None:
                    plan, chunks, taken, rows_of = ahead.result()
                else:
                    plan, chunks, taken, rows_of = self._batch(layout, i, j, wanted, held)
                ahead = None
                if j < stop and read_ahead:
                    following = {p: {c: a for c, a in m.items() if (p, c) not in taken} for p, m in chunks.items()}
                    ahead = ReadAhead(partial(self._batch, layout, j, min(stop, j + step), wanted, following),
                                      self._pending)
                lazy = None if taken else frames_in_order(plan, chunks, rows_of, shared_cells)
                if lazy is not None:  # each frame built when asked for (assemble.py)
                    held = chunks
                    del plan, chunks, taken
                    yield from lazy
                    i = j
                    continue
                left = set(taken)  # assemble removes what a frame takes
                frames = assemble(plan, chunks, rows_of, own=False, handover=left, shared_cells=shared_cells)
                self.settle(chunks, left, keep=False)
                held = {p: {c: a for c, a in m.items() if (p, c) not in taken or (p, c) in left}
                        for p, m in chunks.items()}
                del plan, chunks, taken  # the frames own the chunks they took: freed with them
                frames.reverse()
                while frames:  # hand each frame out, keeping no reference to it: memory is reused warm
                    yield frames.pop()
                i = j
        finally:  # finished, failed, closed or collected: the batch in flight is waited for, dropped
            if ahead is not None:
                ahead.wait()

    def _batch(self, layout: TrajectoryLayout, i: int, j: int, wanted: Wanted, held: Chunks) -> "BatchRead":
        plan = FramePlan(layout, np.arange(i, j, dtype=np.int64), wanted)
        rows_of = self.rows_of(plan.arrays())
        handover = {}
        for bp in plan.blocks:
            for _, arr in bp.columns:
                rows = rows_of[arr.path]
                handover[arr.path] = all(hi - lo == rows for lo, hi in zip(bp.lo, bp.hi))
        chunks, taken = self.load(plan.needs(rows_of), keep=False, held=held, handover=handover)
        return plan, chunks, taken, rows_of

    # ------------------------------------------------------------ rows
    def gather(self, arrays: Sequence[Array], starts: np.ndarray, rows: int, limit: int,
               outs: Optional[Sequence[np.ndarray]] = None) -> List[np.ndarray]:
        """Rows ``start:start+rows`` of each array for every start, as ``(starts, rows,
        trailing...)`` — into ``outs`` when given (any strides: a column of an interleaved
        array).  Each inner chunk is read and decoded once; chunks wholly inside a
        contiguous selection are decoded straight into the result; the cache is read but
        not filled (a bulk read would evict it)."""
        count = int(starts.size)
        results = [np.empty((count, rows) + tuple(arr.shape[1:]), arr.dtype) if outs is None else outs[k]
                   for k, arr in enumerate(arrays)]
        if not count or not rows:
            return results
        contiguous = count == 1 or bool(np.all(np.diff(starts) == rows))
        flats: List[Tuple[Array, np.ndarray]] = []
        for arr, result in zip(arrays, results):
            axis = self.axis(arr)
            size = axis.rows
            flat = result.reshape((count * rows,) + result.shape[2:]) if contiguous else None
            if contiguous and flat is not None and not np.shares_memory(flat, result):
                flat = None  # the reshape copied: fill per chunk below
            if contiguous and flat is not None:
                flats.append((arr, flat))
                continue
            ids = chunks_of(starts, starts + rows, size)
            for wave in _waves(ids, axis.nbytes):
                got = self._chunks(arr, axis, wave, limit)
                position = {c: k for k, c in enumerate(wave.tolist())}
                ends = starts + rows - 1
                touched = ((starts // size) <= int(wave[-1])) & ((ends // size) >= int(wave[0]))
                for k in np.flatnonzero(touched).tolist():
                    lo = int(starts[k])
                    for c in range(max(lo // size, int(wave[0])), min((lo + rows - 1) // size, int(wave[-1])) + 1):
                        a, b = max(lo, c * size), min(lo + rows, (c + 1) * size)
                        result[k, a - lo:b - lo] = got[position[c]][a - c * size:b - c * size]
        if flats:
            lo = int(starts[0])
            self._rows_into([arr for arr, _ in flats], lo, lo + count * rows, [flat for _, flat in flats], limit)
        return results

    def _chunks(self, arr: Array, axis: FirstAxis, ids: np.ndarray, limit: int,
                targets: Optional[List[Optional[np.ndarray]]] = None) -> List[np.ndarray]:
        """Chunks ``ids`` of ``arr``: held ones from the cache, the rest read in one batch
        (into ``targets`` where given)."""
        out: List[Optional[np.ndarray]] = [None] * int(ids.size)
        absent, where, into = [], [], []
        for k, c in enumerate(ids.tolist()):
            found = self.cache.get(arr.path, c, max(0, min(axis.rows, limit - c * axis.rows)))
            if found is None:
                absent.append(c)
                where.append(k)
                into.append(None if targets is None else targets[k])
            else:
                out[k] = found
        if absent:
            decoded = read_chunks([(axis, absent, limit)], self.ranges, self.indexes, threads=self.codec_threads,
                                  each=self._each(), targets=[into])[0]
            for k, data in zip(where, decoded):
                out[k] = data
        return [x for x in out if x is not None]

    def _rows_into(self, arrays: List[Array], lo: int, hi: int, outs: List[np.ndarray], limit: int) -> None:
        """Rows ``lo:hi`` of each array into its ``out``: whole chunks decoded in place, the
        edge chunks through a buffer.  Arrays that share their rows per chunk go together: a
        run of chunks of all of them per read, decoded in one batch (the columns of the same
        rows written close in time: an interleaved result is walked once, not per column)."""
        groups: Dict[int, List[Tuple[Array, np.ndarray]]] = {}
        for arr, out in zip(arrays, outs):
            groups.setdefault(self.axis(arr).rows, []).append((arr, out))
        for size, members in groups.items():
            axes = [self.axis(arr) for arr, _ in members]
            per = max(1, DECODE_RUN_BYTES // max(1, sum(axis.nbytes for axis in axes)))
            first, last = lo // size, (hi - 1) // size
            for start in range(first, last + 1, per):
                wave = list(range(start, min(last + 1, start + per)))
                requests, targets, cached = [], [], []
                for (arr, out), axis in zip(members, axes):
                    into: List[Optional[np.ndarray]] = []
                    ids: List[int] = []
                    for c in wave:
                        found = self.cache.get(arr.path, c, max(0, min(size, limit - c * size)))
                        if found is not None:
                            cached.append((out, c, found))
                            continue
                        a, b = c * size, (c + 1) * size
                        ids.append(c)
                        into.append(out[a - lo:b - lo] if axis.cut is None and a >= lo and b <= hi else None)
                    if ids:
                        requests.append((axis, ids, limit, out))
                        targets.append(into)
                decoded = read_chunks([(axis, ids, lim) for axis, ids, lim, _ in requests], self.ranges, self.indexes,
                                      threads=self.codec_threads, each=self._each(),
                                      targets=targets) if requests else []
                pieces = [(out, c, data, target) for (_, ids, _, out), into, got in zip(requests, targets, decoded)
                          for c, data, target in zip(ids, got, into)]
                pieces += [(out, c, data, None) for out, c, data in cached]
                for out, c, data, target in pieces:
                    if target is not None and data is target:
                        continue  # decoded in place
                    a, b = max(lo, c * size), min(hi, (c + 1) * size)
                    out[a - lo:b - lo] = data[a - c * size:b - c * size]


DECODE_RUN_BYTES = 2 << 20  # decoded bytes of one run of a whole-block read, all its columns (one decode batch)


WAVE_BYTES = 32 << 20  # decoded chunk bytes a gather holds at once (besides its result)


def _waves(ids: np.ndarray, chunk_bytes: int) -> List[np.ndarray]:
    """``ids`` in consecutive pieces of at most :data:`WAVE_BYTES` of decoded chunks."""
    per = max(1, WAVE_BYTES // max(1, chunk_bytes))
    return [ids[k:k + per] for k in range(0, int(ids.size), per)]
