"""Random access over a committed trajectory (trajectory §9): ``MrecReader`` reads logical
lengths only (``nstep``; longer arrays are an uncommitted tail, ``trajectory#N1``) and
``read_mrec_trajectory`` loads a whole one.  A reader opens a local path, a URL or a store.

The reader is the public face; the work is done by the parts behind it, data flowing one
way (spec-notes/trajectory.md "Read engine"): ``recovery.open_state`` chooses and proves the
state to read (``layout.py`` finds its layout), ``engine.py`` plans, fetches, decodes, caches
and assembles frames (``plan.py``, ``zarr/chunkread.py``, ``chunk_cache.py``,
``assemble.py``), ``blockread.py`` reads whole blocks as arrays.  :meth:`MrecReader.refresh`
is the only thing that moves the reader to a newer state.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

import numpy as np

from molrec_raw.errors import CorruptDataError, InvalidValueError, MolrecError, StoreError
from molrec_raw.record import live
from molrec_raw.record.doors import RecordInput
from molrec_raw.record.model import Frame
from molrec_raw.record.trajectory import recovery
from molrec_raw.record.trajectory.blockread import BlockArrays, BlockInfo, ColumnInfo, FrameSelection, frame_indices
from molrec_raw.record.trajectory.chunk_cache import DEFAULT_CACHE_BYTES
from molrec_raw.record.trajectory.common import TRAJ, is_int
from molrec_raw.record.trajectory.engine import READ_THREADS, ReadEngine
from molrec_raw.record.trajectory.layout import TrajectoryLayout, derive_schema
from molrec_raw.record.trajectory.meta import META_STORAGE
from molrec_raw.record.trajectory.references import SystemCounterparts
from molrec_raw.record.trajectory.schema import SequenceSchema
from molrec_raw.record.trajectory.storage import open_root
from molrec_raw.record.violations import Violation
from molrec_raw.zarr import Array, Group, Store
from molrec_raw.zarr.chunkread import INDEX_CACHE_BYTES

__all__ = ["MrecReader", "Trajectory", "read_mrec_trajectory", "BlockInfo", "ColumnInfo", "derive_schema"]


class Trajectory:
    """A whole trajectory in memory: ``frames``, ``step`` (i64 array), ``time`` (f64 array or None)."""

    def __init__(self, frames: List[Frame], step: Optional[np.ndarray] = None, time: Optional[np.ndarray] = None) -> None:
        self.frames, self.step, self.time = frames, step, time

    def __len__(self) -> int:
        return len(self.frames)

    def __getitem__(self, i: int) -> Frame:
        return self.frames[i]


class MrecReader(BlockArrays):
    """Random access over a committed trajectory (§9): ``len``, ``[i]``, iteration, batches.

    ``path`` is a local path (``*.mrec`` or ``*.mrec.zip``), a URL (``https://…/x.mrec.zip``,
    ``s3://…``) or an open store (left open by :meth:`close`).  ``cache_bytes`` bounds the
    cache of decoded inner chunks (default 64 MiB, whatever the record's size; 0 turns off
    every cache of the reader, shard indexes included).  ``threads``: threads for codec work
    (default 2, capped by the machine's cores; 1: every read on the caller's thread) — a read of
    1 MiB of chunks on is decoded on them, ``close`` stops them (zarr-v3-subset §5; spec-notes/
    zarr.md "Threads for codec work").  What each call returns:
    ``reader[i]``, :meth:`read_frame`, :meth:`read_columns`, :meth:`read_frames` and the
    whole-block arrays give arrays the caller owns; iteration (``for frame in reader``,
    :meth:`iter_frames`) gives read-only views of decoded chunks (spec-notes/trajectory.md,
    "Read engine")."""

    def __init__(self, path: RecordInput, *, cache_bytes: int = DEFAULT_CACHE_BYTES,
                 threads: int = READ_THREADS) -> None:
        owns = not isinstance(path, Store)
        root = open_root(path, "r")  # R1 version check
        try:
            self._start(root, cache_bytes, owns, threads)
        except BaseException:
            if owns:
                root.store.close()
            raise

    @classmethod
    def over(cls, root: Group, *, cache_bytes: int = DEFAULT_CACHE_BYTES, threads: int = READ_THREADS) -> "MrecReader":
        """A reader of the trajectory under an opened record root (its version checked); the
        caller keeps the root's store (``close`` leaves it open)."""
        self = cls.__new__(cls)
        self._start(root, cache_bytes, False, threads)
        return self

    def _start(self, root: Group, cache_bytes: int, owns: bool, threads: int) -> None:
        self._owns_store = owns
        self._origin = root  # the record as it is on disk: what a refresh re-reads
        self._cache_bytes = max(0, int(cache_bytes))
        state = recovery.open_state(root, index_budget=self._index_budget())
        self._engine = ReadEngine(state, self._cache_bytes, int(root.store.concurrency), threads)
        self._seen = state.layout.marker  # the marker as this state found it (refresh compares)

    def _index_budget(self) -> int:
        return INDEX_CACHE_BYTES if self._cache_bytes else 0

    # ------------------------------------------------------------------ state
    @property
    def _layout(self) -> TrajectoryLayout:
        return self._engine.layout

    @property
    def source(self) -> str:
        """Where the state read comes from: ``"live"``, or ``"checkpoint"`` when the live
        state could not prove its last commit (a power cut; trajectory/recovery.py)."""
        return self._engine.state.source

    @property
    def recovery_reason(self) -> Optional[str]:
        """Why the live state was not read (None when it was)."""
        return self._engine.state.reason

    def logical_rows(self) -> Dict[str, int]:
        """Store path -> the committed rows this reader reads, for every array it reads
        (trajectory §11 logical lengths; recovery cuts arrays back to them)."""
        return dict(self._layout.logical)

    def __len__(self) -> int:
        return self._layout.nstep

    def damaged(self) -> Dict[str, MolrecError]:
        """Store path -> the damage met when the reader opened (a block whose metadata does
        not parse, a column whose array is gone or unreadable, an array whose shard index
        pages fail): the reads that need one refuse with its error, the others read
        (spec-notes/safety.md "Damage costs only the reads that need it")."""
        return self._layout.damage()

    @property
    def root(self) -> Group:
        """The record root this reader reads: the live store, or a read-only view of the
        trajectory's checkpoint when ``source == "checkpoint"`` (``molrec-raw explain``)."""
        return self._layout.root

    def cell_updates(self) -> np.ndarray:
        """Frame ordinals of the cell's committed updates (trajectory §7): one entry per
        change, ``[0]`` for the fixed-cell attribute form, empty without a cell."""
        return self._layout.box.ordinals.copy()

    @property
    def schema(self) -> SequenceSchema:
        """A copy of the pinned sequence schema (derived from the store when it has none)."""
        return self._layout.schema.copy()

    @property
    def step(self) -> List[int]:
        """The step of every committed frame (trajectory §3)."""
        return self._layout.steps.as_list()

    @property
    def time(self) -> Optional[List[float]]:
        """The time of every committed frame, None when the trajectory records none."""
        times = self._layout.times
        return None if times is None else times.as_list()

    def block_names(self) -> List[str]:
        """The declared blocks, in pin order."""
        return self._layout.schema.block_names()

    def has_block(self, name: str) -> bool:
        """Declared and present with at least one committed update."""
        b = self._layout.blocks.get(name)
        return b is not None and b.count > 0

    def _index(self, i: int) -> int:
        if not is_int(i):
            raise TypeError(f"frame index must be an integer, got {type(i).__name__}")
        n = self._layout.nstep
        j = int(i) + n if i < 0 else int(i)
        if not 0 <= j < n:
            raise IndexError(f"frame {i} out of range for {n} frames")
        return j

    def block_update_at(self, name: str, i: int) -> Optional[int]:
        """The update of block ``name`` in effect at frame ``i`` (None before its first)."""
        if not self._layout.schema.has_block(name):
            raise KeyError(f"block {name!r} is not declared")
        b = self._layout.blocks.get(name)
        return None if b is None else b.update_at(self._index(i))

    def box_at(self, i: int) -> Any:
        """The cell at frame ``i``; None before the first cell or past the end."""
        n = self._layout.nstep
        if not is_int(i) or not -n <= i < n:
            return None
        return self._layout.box.at(int(i) % n)

    def meta_series(self, key: str) -> np.ndarray:
        """Every committed value of per-step meta key ``key`` in one read (trajectory §5):
        ``nstep`` rows as stored (numeric tags as their numpy dtype, fills included; strings
        and json as an object array of text)."""
        layout = self._layout
        if key not in layout.meta:
            raise KeyError(f"per-step meta key {key!r} is not declared")
        tag, arr = layout.meta[key]
        if arr is None:  # declared, no frame committed yet
            dtype, trailing = META_STORAGE[tag]
            return np.empty((0,) + trailing, dtype=dtype)
        if not layout.nstep:
            return np.asarray(arr[0:0])
        return self._engine.gather([arr], np.zeros(1, np.int64), layout.nstep, layout.nstep)[0][0]  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ frames
    def read_frame(self, i: int) -> Frame:
        """Frame ``i`` (negative: from the end) with every block, its cell and its meta, as
        arrays the caller owns.  A shard index torn by a concurrent commit is read again
        (trajectory/live.py)."""
        j = self._index(i)
        found: Frame = self._read_retrying(lambda: self._engine.read_one(j))
        return found

    def _wanted(self, pairs: Iterable[Tuple[str, str]]) -> Dict[str, List[str]]:
        """Block -> the columns named; a block a named column references or is aligned with
        is planned too, with no column (its row count is what ``trajectory#R17``/``#R16``
        check a frame against: nothing of it is decoded)."""
        wanted: Dict[str, List[str]] = {}
        schema = self._layout.schema
        for block, column in pairs:
            if not schema.has_block(block) or column not in schema.column_names(block):
                raise InvalidValueError(f"({block!r}, {column!r}) is not a declared column")
            wanted.setdefault(block, []).append(column)
        todo = list(wanted)
        while todo:
            block = todo.pop()
            spec = schema.block_spec(block)
            related = [t for c, t in spec.targets.items() if c in wanted[block] and not t.startswith("/")]
            if spec.aligned_with is not None:
                related.append(spec.aligned_with)
            for target in related:
                if schema.has_block(target) and target not in wanted:
                    wanted[target] = []
                    todo.append(target)
        return wanted

    @staticmethod
    def _named(frames: List[Frame], pairs: Dict[str, List[str]]) -> List[Frame]:
        """``frames`` without the blocks planned only for their row counts (``_wanted``)."""
        for frame in frames:
            for name in [n for n in frame.blocks if not pairs.get(n)]:
                del frame.blocks[name]
        return frames

    def read_columns(self, i: int, pairs: Iterable[Tuple[str, str]], *, meta: bool = True) -> Frame:
        """Frame ``i`` with only the named ``(block, column)`` pairs decoded (its cell and
        meta too; ``meta`` False: no per-step meta, its arrays not read — damage there
        costs such a read nothing), as arrays the caller owns.  A row reference among them
        is checked against its target block's row count at that frame (``trajectory#R17``),
        whether or not that block's columns are named."""
        pairs = list(pairs)
        wanted = self._wanted(pairs)
        j = self._index(i)
        found: List[Frame] = self._read_retrying(
            lambda: self._engine.read(np.asarray([j], np.int64), wanted, meta))
        return self._named(found, self._requested(pairs))[0]

    @staticmethod
    def _requested(pairs: Iterable[Tuple[str, str]]) -> Dict[str, List[str]]:
        out: Dict[str, List[str]] = {}
        for block, column in pairs:
            out.setdefault(block, []).append(column)
        return out

    def read_frames(self, indices: FrameSelection, columns: Optional[Iterable[Tuple[str, str]]] = None) -> List[Frame]:
        """Frames ``indices`` (a slice or a 1-D array of indices: any order, duplicates
        allowed, negatives from the end) planned as one read: each inner chunk they need is
        fetched and decoded once, neighbouring chunks in one ``pread`` (one request over
        HTTP).  Equal to ``[reader[i] for i in indices]``; arrays the caller owns.
        ``columns``: only these ``(block, column)`` pairs, as :meth:`read_columns`."""
        pairs = None if columns is None else list(columns)
        wanted = None if pairs is None else self._wanted(pairs)
        idx = frame_indices(indices, self._layout.nstep)
        found: List[Frame] = self._read_retrying(lambda: self._engine.read(idx, wanted))
        return found if pairs is None else self._named(found, self._requested(pairs))

    def __getitem__(self, i: int) -> Frame:
        return self.read_frame(i)

    def __iter__(self) -> Iterator[Frame]:
        return self.iter_frames()

    def iter_frames(self, start: int = 0, stop: Optional[int] = None,
                    columns: Optional[Iterable[Tuple[str, str]]] = None, *,
                    read_ahead: Optional[bool] = None) -> Iterator[Frame]:
        """Frames ``start:stop`` in order (default: every committed frame), decoded a batch
        of frames at a time, as read-only views of the decoded chunks (frames of one chunk
        share it; a frame that fills an inner chunk alone gets that chunk, writable).  The
        next batch is read on a thread while one is handed out (one batch ahead, never past
        the frames committed when the iteration began; spec-notes/trajectory.md "Read-ahead
        for in-order iteration"; ``read_ahead`` False: none, every batch on the caller's
        thread — the same frames for less CPU; None: when the machine has a second core).
        ``columns``: only these ``(block, column)`` pairs."""
        n = self._layout.nstep
        pairs = None if columns is None else list(columns)
        wanted = None if pairs is None else self._wanted(pairs)
        first, last, _ = slice(start, stop).indices(n)
        frames = self._engine.iterate(first, max(first, last), wanted, read_ahead)
        if pairs is None:
            return frames
        requested = self._requested(pairs)
        return (self._named([frame], requested)[0] for frame in frames)

    def _read_retrying(self, read: Callable[[], Any]) -> Any:
        """``read()``, again when it meets bytes a writer is rewriting in place (a shard
        index torn by a concurrent commit fails its checksum), a bounded number of times on
        a store that can change; the last error says how often it was read."""
        attempts = 1 if self._origin.store.immutable else _LIVE_ATTEMPTS
        for attempt in range(attempts):
            try:
                return read()
            except CorruptDataError as exc:
                if (exc.node or "").strip("/") in self._layout.damage():
                    raise  # damage found when the reader opened: reading again changes nothing
                if attempt == attempts - 1:
                    if attempts > 1:
                        exc.message = f"{exc.message} (read {attempts} times)"
                        exc.args = (exc.message,)
                    raise
            time.sleep(_retry_pause(attempt + 1))
        raise AssertionError("unreachable")  # pragma: no cover

    # ------------------------------------------------------------------ summaries and checks
    def describe(self) -> Dict[str, Any]:
        """A summary for people and tools (``molrec-raw inspect``): frames, step and time
        ranges, and per block its layout, committed updates, the rows of its last update
        and the rows stored past the committed ones (an uncommitted tail, ``trajectory#N1``);
        the cell's updates and the per-step meta keys.  A block found damaged when the
        reader opened says so (``damaged``: column, or "" for the whole block -> why; its
        reads refuse, the other blocks' read), and so does a per-step meta key's array
        (``meta_damaged``: key -> why, present only then)."""
        layout = self._layout
        n = layout.nstep
        blocks: Dict[str, Any] = {}
        tail = False
        for name in layout.schema.block_names():
            b = layout.blocks.get(name)
            if name in layout.damaged:
                blocks[name] = {"layout": "damaged", "updates": None, "last_rows": None, "uncommitted_rows": 0,
                                "damaged": {"": str(layout.damaged[name])}}
                continue
            if b is None:
                blocks[name] = {"layout": "none", "updates": 0, "last_rows": None, "uncommitted_rows": 0}
                continue
            stored = max((a.shape[0] for a in [*b.columns.values(), *b.masks.values()]), default=0)
            extra = max(0, stored - b.total)
            tail = tail or extra > 0
            updates = b.count
            lo, hi = b.rows(updates - 1) if updates else (0, 0)
            blocks[name] = {"layout": b.kind, "updates": updates, "last_rows": hi - lo if updates else None,
                            "uncommitted_rows": extra}
            damaged = {c: str(e) for c, e in b.damaged.items()}
            damaged.update((c, str(found)) for c, found in _array_damage(layout, b.columns).items())
            if damaged:
                blocks[name]["damaged"] = damaged
        series_lengths = [arr.shape[0] for _, arr in layout.meta.values() if arr is not None]
        tgroup = layout.root.get(TRAJ)
        if isinstance(tgroup, Group):
            series_lengths += [a.shape[0] for a in (tgroup.get("step"), tgroup.get("time")) if isinstance(a, Array)]
        tail = tail or any(length > n for length in series_lengths)
        summary = {"nstep": n, "steps": layout.steps.ends(),
                   "times": None if layout.times is None else layout.times.ends(),
                   "blocks": blocks, "box_updates": len(layout.box.cells), "meta_keys": list(layout.meta),
                   "uncommitted_tail": tail}
        meta = {key: arr for key, (_, arr) in layout.meta.items() if arr is not None}
        damaged_meta = _array_damage(layout, meta)
        if damaged_meta:
            summary["meta_damaged"] = {key: str(found) for key, found in damaged_meta.items()}
        return summary

    def verify(self, progress: Optional[Callable[[int, int], None]] = None,
               damage: Optional[List[MolrecError]] = None) -> List[Violation]:
        """Check the whole committed trajectory, not only what opening checks: resolve every
        frame (every stored chunk a frame uses is decoded, so checksums are verified, and row
        references and alignments are checked, ``trajectory#R16``/``#R17``), every update of
        a block named like a system block (§8.8) and the step and time arrays.  One violation
        per rule and node, saying how many frames share it; ``progress(done, total)`` is
        called as frames resolve.  ``damage`` (a list): a read refused for damaged bytes
        (``CorruptDataError``) is put there instead, for a survey of the damaged chunks
        (record/damage.py) to report."""
        found: Dict[Tuple[str, str], List[Any]] = {}
        layout = self._layout

        def note(exc: MolrecError) -> None:
            if damage is not None and isinstance(exc, CorruptDataError):
                damage.append(exc.detached())
                return
            key = (exc.rule or type(exc).__name__, exc.node or "/trajectory")
            found.setdefault(key, [exc.message, 0])[1] += 1

        system = SystemCounterparts(layout.schema, layout.root)
        for name, b in layout.blocks.items():
            if name not in system:
                continue
            for j, ordinal in enumerate(b.ordinals.tolist()):
                lo, hi = b.rows(j)
                try:
                    ids = (self.column_rows(name, "id", lo, hi) if "id" in b.columns and hi > lo else None)
                    system.check(name, hi - lo, ids, f"trajectory frame {ordinal}")
                except MolrecError as exc:
                    note(exc)
        for series in (layout.steps, layout.times):
            try:
                if series is not None:
                    series.values()
            except MolrecError as exc:
                note(exc)
        done, total = 0, layout.nstep
        step = self._engine.batch_frames()
        for first in range(0, total, step):
            last = min(total, first + step)
            try:
                for _ in self._engine.iterate(first, last):
                    pass
            except MolrecError:
                for i in range(first, last):  # which frames share the fault, one by one
                    try:
                        self._engine.read(np.asarray([i], np.int64))
                    except MolrecError as exc:
                        note(exc)
            done = last
            if progress is not None:
                for k in range(first, done):
                    progress(k + 1, total)
        return [Violation(rule, node, message if count == 1 else f"{message} (and {count - 1} more like it)")
                for (rule, node), (message, count) in found.items()]

    def frames_or_damage(self, start: int = 0, stop: Optional[int] = None) -> Iterator[Tuple[int, Any]]:
        """``(i, frame)`` for every frame ``start:stop`` that reads intact, ``(i, error)`` for
        one that is refused (damaged bytes it needs, or a rule it breaks; read once: damage is
        not a commit in progress), in order; a batch of frames at a time, a batch that meets
        a refusal read again frame by frame (salvage: record/salvage.py)."""
        first, last, _ = slice(start, stop).indices(self._layout.nstep)
        step = self._engine.batch_frames()
        for lo in range(first, last, step):
            hi = min(last, lo + step)
            try:
                yield from zip(range(lo, hi), self._engine.read(np.arange(lo, hi, dtype=np.int64)))
                continue
            except MolrecError:
                pass
            for i in range(lo, hi):
                try:
                    found: Any = self._engine.read(np.asarray([i], np.int64))[0]
                except MolrecError as exc:
                    found = exc
                yield i, found

    def frame_damage(self, i: int) -> List[str]:
        """The nodes (relative to ``trajectory/``: ``atoms/x``, ``meta/pe``) that refuse frame
        ``i``: each declared column read alone, then the per-step meta and the cell."""
        j = self._index(i)
        frame = np.asarray([j], np.int64)
        schema = self._layout.schema
        reads: List[Tuple[Dict[str, List[str]], bool]] = [
            (self._wanted([(block, column)]), False) for block in schema.block_names()
            for column in schema.column_names(block)]
        reads.append(({}, True))
        nodes: List[str] = []
        for wanted, meta in reads:
            try:
                self._engine.read(frame, wanted, meta)
            except MolrecError as exc:
                node = refused_node(exc)
                if node not in nodes:
                    nodes.append(node)
        return nodes

    def recovery_violations(self) -> List[Violation]:
        """``trajectory#10``: the live state is damaged (a power cut) and other readers would
        not read what this one reads from the checkpoint — ``molrec-raw repair`` puts it
        back.  Empty when the live state is what the last commit says."""
        if self.source != "checkpoint":
            return []
        root = self._layout.root
        base = getattr(root.store, "base", None)
        live_root = root if base is None else Group(base, root.path, root.metadata, read_only=True, threads=1)
        plan = recovery.plan_recovery(live_root, self.source, self.recovery_reason, len(self), self.logical_rows())
        if not plan.actions:
            return []
        return [Violation(recovery.RULE, "/trajectory",
                          f"the record needs repair: {self.recovery_reason or 'its live state is damaged'}; "
                          f"readers here use its checkpoint ({len(self)} committed frames), other readers "
                          f"would not ({len(plan.actions)} change(s); run `molrec-raw repair`)")]

    # ------------------------------------------------------------ live reading
    def refresh(self) -> int:
        """Re-read the commit marker (trajectory §10) and return the committed length.

        Frames below the old length read exactly as before (committed bytes are never
        rewritten) and the new ones become readable.  The new state is read whole, beside
        the current one, which stays in use until it is adopted: a read that meets a commit
        in progress (a shard index torn by its in-place rewrite fails its checksum; a live
        state that does not match its manifest) is read again from the marker, a bounded
        number of times, then a ``CorruptDataError`` names the node.  The caches keep only
        rows below the old committed length and the old durable extent, of arrays whose
        layout did not change (``ReadEngine.adopt``): nothing a recovery could roll back,
        and no tail index or chunk, is served from a cache as new data.  A record that
        shrank or changed its pin was replaced: ``StoreError``.  An archive or a URL cannot
        change: the same length, nothing read.  No lock is taken (record/live.py)."""
        origin = self._origin
        n = self._layout.nstep
        if origin.store.immutable:
            return n
        problem: Optional[MolrecError] = None
        for attempt in range(_LIVE_ATTEMPTS):
            if attempt:
                time.sleep(_retry_pause(attempt))
            try:
                tgroup = origin.get(TRAJ)
                seen = dict(tgroup.attrs) if isinstance(tgroup, Group) else None
                if seen == self._seen:
                    return n  # nothing committed since
                fresh = recovery.open_state(origin, verified=self._layout.logical, index_budget=self._index_budget())
            except MolrecError as exc:
                problem = exc
                continue
            if fresh.reason is not None and (attempt < _LIVE_ATTEMPTS - 1 or fresh.nstep < n):
                # most likely a commit caught half-read: read it again (the checkpoint's
                # older state is taken only at the last attempt, and never to go back)
                fresh.ranges.close()
                problem = CorruptDataError(f"the live state did not match its commit: {fresh.reason}",
                                           node="/trajectory", rule=recovery.RULE)
                continue
            self._adopt(fresh, seen)
            return self._layout.nstep
        assert problem is not None
        problem.message = f"{problem.message} (the trajectory read {_LIVE_ATTEMPTS} times while it changed)"
        problem.args = (problem.message,)
        raise problem.add_context(store=origin.store.describe(), node="/trajectory")

    def _adopt(self, fresh: recovery.CommittedState, seen: Optional[Dict[str, Any]]) -> None:
        """Take over the state ``fresh`` (refused when it is not a continuation of this one)."""
        where = self._origin.store.describe()
        n = self._layout.nstep
        if fresh.nstep < n:
            fresh.ranges.close()
            raise StoreError(f"the trajectory went from {n} to {fresh.nstep} committed frames: the "
                             "record was replaced or rolled back; open it again", store=where, node="/trajectory")
        if n and fresh.layout.schema != self._layout.schema:
            fresh.ranges.close()
            raise StoreError("the trajectory's sequence_schema changed (a pin never changes, trajectory#I13): "
                             "the record was replaced; open it again", store=where, node="/trajectory")
        self._engine.adopt(fresh)
        self._seen = seen

    def run_status(self) -> Optional[Dict[str, Any]]:
        """The record's status document as it is now (None: it has none); its ``state``
        says where the run is (documents §2; what ``MrecWriter`` records: record/live.py)."""
        return live.read_status(self._origin)

    def watch(self, poll: float = 0.5, timeout: Optional[float] = None, *,
              stop_after: Optional[float] = None) -> Iterator[int]:
        """The committed length now, then each new one as commits land (a :meth:`refresh`
        every ``poll`` seconds), until the run is over (its status ``state`` is one of
        ``live.FINISHED_STATES``), ``timeout`` seconds pass without a commit, or
        ``stop_after`` seconds in all.  On an archive or a URL: the length now, then stop."""
        live.check_follow_args(poll, timeout, stop_after)
        shown = [-1]

        def news() -> List[int]:
            n = self.refresh()
            if n == shown[0]:
                return []
            shown[0] = n
            return [n]
        return live.follow_loop(news, live.finished_or_unreadable(self._origin), poll=poll, timeout=timeout,
                                stop_after=stop_after, can_change=not self._origin.store.immutable)

    def follow(self, poll: float = 0.5, timeout: Optional[float] = None, *, start: int = 0,
               stop_after: Optional[float] = None) -> Iterator[Tuple[int, Frame]]:
        """``(index, frame)`` for every committed frame from ``start`` (negative: from the end
        at the first look), then for each new one as it commits, until the run is over or
        ``timeout`` seconds pass without a commit (see :meth:`watch`).  A killed writer cannot
        record its end: give a ``timeout`` when that matters."""
        if not is_int(start):
            raise InvalidValueError(f"start must be an integer frame index, got {start!r}")
        lengths = self.watch(poll, timeout, stop_after=stop_after)

        def frames() -> Iterator[Tuple[int, Frame]]:
            i: Optional[int] = None
            for n in lengths:
                if i is None:
                    i = int(start) if start >= 0 else max(0, n + int(start))
                while i < n:
                    yield i, self.read_frame(i)
                    i += 1
        return frames()

    def close(self) -> None:
        """Release the reader's threads and descriptors, and its store unless the caller
        passed it in."""
        self._engine.close()
        if self._owns_store:
            self._origin.store.close()

    def __enter__(self) -> "MrecReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_LIVE_ATTEMPTS = 5  # reads of a changing record before its error is believed


def refused_node(exc: MolrecError) -> str:
    """The node a read's refusal names, relative to ``trajectory/`` (``atoms/x``, ``meta/pe``)."""
    node = (exc.node or TRAJ).strip("/")
    return node[len(TRAJ) + 1:] if node.startswith(f"{TRAJ}/") else node


def _array_damage(layout: TrajectoryLayout, arrays: Dict[str, Array]) -> Dict[str, MolrecError]:
    """Name -> the damage found at opening in the array of that name (its shard index pages
    fail: every read refuses; or entries past the end of a shard: the reads of those chunks)."""
    found: Dict[str, MolrecError] = {}
    for name, arr in arrays.items():
        hit = layout.damaged_arrays.get(arr.path) or layout.damaged_parts.get(arr.path)
        if hit is not None:
            found[name] = hit
    return found


def _retry_pause(attempt: int) -> float:
    """Seconds before attempt ``attempt`` (1, 2, ...): 1, 4, 16, 64 ms — a writer rewrites a
    shard index page in one ``pwrite``, so the first retry nearly always sees it whole."""
    return 0.001 * float(4 ** (attempt - 1))


def read_mrec_trajectory(path: RecordInput) -> Trajectory:
    """The whole trajectory (0 frames when the record has no trajectory section)."""
    with MrecReader(path) as reader:
        frames = list(reader)
        times = reader.time
        return Trajectory(frames, np.asarray(reader.step, dtype=np.int64),
                          None if times is None else np.asarray(times, dtype=np.float64))
