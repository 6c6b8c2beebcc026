"""Random access over a committed trajectory (trajectory §9): ``MrecReader`` reads logical
lengths only (``nstep``; longer arrays are an uncommitted tail, ``trajectory#N1``) and
``read_mrec_trajectory`` loads a whole one.  A reader opens a local path, a URL or a store;
on a latency-bound store it fetches the columns of a frame concurrently, and its chunk cache
reads ahead when frames are visited in order.  ``block_array`` reads a block with a fixed
row count over many frames as one array, each needed inner chunk decoded once.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from molrec_raw.errors import CorruptDataError, InvalidValueError, MolrecError, StoreError
from molrec_raw.record.doors import RecordSource
from molrec_raw.record import live, typed_json
from molrec_raw.record.columns import ZARR_TO_COLUMN
from molrec_raw.record.model import Block, Frame
from molrec_raw.record.trajectory import recovery
from molrec_raw.record.trajectory.blocks import BlockReader, block_layout, check_column_array
from molrec_raw.record.trajectory.cell import BoxReader
from molrec_raw.record.trajectory.chunk_cache import DEFAULT_CACHE_BYTES, ChunkCache
from molrec_raw.record.trajectory.common import TRAJ, is_int, numpy_dtype, spec_error
from molrec_raw.record.trajectory.meta import META_STORAGE, meta_value, open_meta_array
from molrec_raw.record.trajectory.progressions import check_progression, expand_progression
from molrec_raw.record.trajectory.references import (SystemCounterparts, check_resolved, refuse_aligned_system_names,
                                                     section_rows)
from molrec_raw.record.trajectory.schema import RESERVED_BLOCK_NAMES, SequenceSchema
from molrec_raw.record.trajectory.storage import open_root, read_nstep
from molrec_raw.record.violations import Violation
from molrec_raw.zarr import Array, Group, Store
from molrec_raw.zarr.array import read_many

__all__ = ["MrecReader", "Trajectory", "read_mrec_trajectory", "BlockInfo", "ColumnInfo"]

FrameSelection = Union[None, slice, Sequence[int], np.ndarray]
# Decode batches of a reader run zstd on up to two threads inside zstandard (large batches
# only: codecs/zstd_codec.py); no Python pool on a local store.
READ_THREADS = 2


@dataclass(frozen=True)
class ColumnInfo:
    """A declared column as stored: dtype tag (and the numpy dtype it reads as), trailing
    shape, pinned precision and target, nullability and whether a mask array is stored, and
    the rows per stored inner chunk (the unit of reading)."""

    dtype: str
    numpy_dtype: np.dtype
    trailing: Tuple[int, ...]
    precision: Optional[float]
    target: Optional[str]
    nullable: bool
    has_mask: bool
    chunk_rows: Optional[int]  # None when the column has no array yet


@dataclass(frozen=True)
class BlockInfo:
    """A block's committed layout: ``kind`` (none/regular/indexed), ``ordinals`` (frames of
    its updates) and ``offsets`` (row range of update j: ``offsets[j]:offsets[j+1]``),
    ``fixed_rows`` (the row count shared by every update, None when ragged or without an
    update), and its columns in pin order."""

    name: str
    kind: str
    ordinals: np.ndarray
    offsets: np.ndarray
    fixed_rows: Optional[int]
    columns: Dict[str, ColumnInfo]


class Trajectory:
    """A whole trajectory in memory: ``frames``, ``step`` (i64 array), ``time`` (f64 array or None)."""

    def __init__(self, frames: List[Frame], step: Optional[np.ndarray] = None, time: Optional[np.ndarray] = None) -> None:
        self.frames, self.step, self.time = frames, step, time

    def __len__(self) -> int:
        return len(self.frames)

    def __getitem__(self, i: int) -> Frame:
        return self.frames[i]


class MrecReader:
    """Random access over a committed trajectory (§9): ``len``, ``[i]``, iteration.

    ``path`` is a local path (``*.mrec`` or ``*.mrec.zip``), a URL (``https://…/x.mrec.zip``,
    ``s3://…``) or an open store (left open by :meth:`close`).  ``cache_bytes`` bounds the
    cache of decoded inner chunks."""

    def __init__(self, path: RecordSource, *, cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self._owns_store = not isinstance(path, Store)
        self._root = open_root(path, "r")  # R1 version check
        self._pool: Optional[ThreadPoolExecutor] = None  # made at the first read on a latency-bound store
        self._workers = max(1, int(self._root.store.concurrency))
        self._cache_bytes = cache_bytes
        self._open(self._root)

    @classmethod
    def over(cls, root: Group) -> "MrecReader":
        """A reader of the trajectory under an opened record root (its version checked); the
        caller keeps the root's store (``close`` leaves it open)."""
        self = cls.__new__(cls)
        self._owns_store, self._pool, self._cache_bytes = False, None, DEFAULT_CACHE_BYTES
        self._workers = max(1, int(root.store.concurrency))
        self._open(root)
        return self

    def _open(self, root: Group, verified: Optional[Dict[str, int]] = None) -> None:
        """Open the live state, or the checkpoint's when the live one cannot prove its
        commit (a power cut; trajectory/recovery.py).  Nothing is written.  ``verified``:
        rows an earlier state of this reader already proved (a refresh decodes only the
        rows committed since, trajectory/live.py)."""
        self.source, self.recovery_reason = "live", None
        self._origin = root  # the record as it is on disk: what a refresh re-reads
        attempts = recovery.candidates(root)
        for n, attempt in enumerate(attempts):
            try:
                self._load(attempt.root)
                tgroup = self._marker_group  # verified against the marker it was loaded from
                if isinstance(tgroup, Group):
                    since = attempt.since
                    if since is not None and verified:
                        since = dict(since)
                        for path, rows in verified.items():
                            rel = path[len(TRAJ) + 1:]
                            since[rel] = max(since.get(rel, 0), rows)
                    recovery.verify_state(tgroup, self._logical, self._arrays, since, attempt.strict)
            except MolrecError as exc:
                if n == len(attempts) - 1:
                    raise
                self.recovery_reason = f"the live state is not what its commit says ({exc})"
                continue
            self._root, self.source = attempt.root, attempt.source
            self._seen = self._marker  # the marker as this state found it (refresh compares)
            return

    def _load(self, root: Group) -> None:
        self._root = root
        self._chunks = ChunkCache(self._cache_bytes)  # nothing decoded from another attempt's arrays
        tgroup = root.get(TRAJ)
        self._blocks: Dict[str, BlockReader] = {}
        self._schema = SequenceSchema()
        self._nstep = 0
        self._steps: List[int] = []
        self._times: Optional[List[float]] = None
        self._box = BoxReader.__new__(BoxReader)
        self._box.ordinals, self._box.cells, self._box.lengths = np.zeros(0, np.int64), [], {}
        self._meta: Dict[str, Tuple[str, Optional[Array]]] = {}
        self._needs_check = False
        self._logical: Dict[str, int] = {}  # array path -> committed rows this reader reads
        self._arrays: Dict[str, Array] = {}  # ... and the arrays it opened for them
        self._marker_group = tgroup if isinstance(tgroup, Group) else None  # the commit read
        self._marker: Optional[Dict[str, Any]] = None  # ... and its attributes (refresh compares them)
        if not isinstance(tgroup, Group):
            return
        if tgroup.get("frames") is not None:
            raise spec_error("R2", "legacy layout (trajectory/frames/, written by molrs <= 0.13); re-write it with 0.13")
        attrs = dict(tgroup.attrs)
        self._marker = attrs
        nstep = read_nstep(tgroup, attrs)
        if "sequence_schema" in attrs:
            self._schema = SequenceSchema.from_json(attrs["sequence_schema"])
        else:
            self._schema = derive_schema(tgroup)
        self._nstep = nstep
        self._needs_check = any(self._schema.targets(b) or self._schema.aligned_with(b)
                                for b in self._schema.block_names())
        self._steps = self._series(tgroup, attrs, "step", False, nstep) or []
        self._times = self._series(tgroup, attrs, "time", True, nstep)
        for name in ("step", "time"):
            arr = tgroup.get(name)
            if isinstance(arr, Array) and f"{name}_progression" not in attrs:
                self._logical[arr.path], self._arrays[arr.path] = nstep, arr
        for name in self._schema.block_names():
            group = tgroup.get(name)
            if isinstance(group, Group):
                self._blocks[name] = self._open_block(name, group, nstep)
        refuse_aligned_system_names(self._schema, root, "R16")
        self._section_rows = section_rows(root)
        self._box = BoxReader(tgroup, nstep)
        self._logical.update(self._box.lengths)
        mgroup = tgroup.get("meta")
        for key, tag in self._schema.meta_keys():
            arr = mgroup.get(key) if isinstance(mgroup, Group) else None
            self._meta[key] = (tag, open_meta_array(arr, key, tag, nstep))
            if isinstance(arr, Array):
                self._logical[arr.path], self._arrays[arr.path] = nstep, arr

    @staticmethod
    def _series(tgroup: Group, attrs: Dict[str, Any], name: str, is_float: bool, nstep: int) -> Optional[List[Any]]:
        prog = check_progression(attrs, f"{name}_progression", nstep, is_float)
        if prog is not None:
            return expand_progression(prog, nstep, is_float)
        arr = tgroup.get(name)
        if isinstance(arr, Array):
            if arr.shape[0] < nstep:
                raise spec_error("R6", f"trajectory claims {nstep} committed frames but carries {arr.shape[0]} {name} values")
            return list(np.asarray(arr[0:nstep]).tolist())
        if name == "step":
            return list(range(nstep))
        return None

    def _open_block(self, name: str, group: Group, nstep: int) -> BlockReader:
        spec = self._schema.block_spec(name)
        b = BlockReader(name, spec)
        for column, cspec in spec.columns.items():
            arr = group.get(column)
            if isinstance(arr, Array):
                check_column_array(arr, name, column, cspec.dtype, cspec.trailing, "R12")
                b.columns[column] = arr
        validity = group.get("_validity")
        if isinstance(validity, Group):
            for column in spec.columns:
                arr = validity.get(column)
                if isinstance(arr, Array):
                    if arr.metadata.dtype.name != "bool" or arr.ndim != 1:
                        raise spec_error("R14", f"mask of {column!r} in block {name!r} is not bool[rows]",
                                         f"/trajectory/{name}/_validity/{column}")
                    b.masks[column] = arr
        kind, ordinals, offsets, _ = block_layout(group, name, spec, b.columns, nstep)
        total = int(offsets[-1])
        if len(ordinals) and len(b.columns) < len(spec.columns):
            missing = [c for c in spec.columns if c not in b.columns]
            raise spec_error("R6", f"block {name!r} has updates but no array for column(s) {missing}", f"/trajectory/{name}")
        for arr in list(b.columns.values()):
            if arr.shape[0] < total:
                raise spec_error("R6", f"block {name!r}: {arr.basename} has {arr.shape[0]} rows, offsets claim {total}",
                                 f"/trajectory/{name}/{arr.basename}")
        for arr in b.masks.values():
            if arr.shape[0] < total:
                raise spec_error("R14", f"block {name!r}: mask {arr.basename} is shorter than its {total} rows",
                                 f"/trajectory/{name}/_validity/{arr.basename}")
        b.kind, b.ordinals, b.offsets = kind, ordinals, offsets
        for arr in [*b.columns.values(), *b.masks.values()]:
            self._logical[arr.path], self._arrays[arr.path] = total, arr
        if kind == "indexed":
            self._logical[f"{group.path}/step_index"] = len(ordinals)
            self._logical[f"{group.path}/offset"] = len(ordinals) + 1
        return b

    # ------------------------------------------------------------------ API
    def logical_rows(self) -> Dict[str, int]:
        """Store path -> the committed rows this reader reads, for every array it reads
        (trajectory §11 logical lengths; recovery cuts arrays back to them)."""
        return dict(self._logical)

    def __len__(self) -> int:
        return self._nstep

    @property
    def root(self) -> Group:
        """The record root this reader reads: the live store, or a read-only view of the
        trajectory's checkpoint when ``source == "checkpoint"`` (``molrec-raw explain``)."""
        return self._root

    def cell_updates(self) -> np.ndarray:
        """Frame ordinals of the cell's committed updates (trajectory §7): one entry per
        change, ``[0]`` for the fixed-cell attribute form, empty without a cell."""
        return self._box.ordinals.copy()

    @property
    def schema(self) -> SequenceSchema:
        return self._schema.copy()

    @property
    def step(self) -> List[int]:
        return list(self._steps)

    @property
    def time(self) -> Optional[List[float]]:
        return None if self._times is None else list(self._times)

    def block_names(self) -> List[str]:
        return self._schema.block_names()

    def has_block(self, name: str) -> bool:
        """Declared and present with at least one committed update."""
        b = self._blocks.get(name)
        return b is not None and b.ordinals.size > 0

    def _index(self, i: int) -> int:
        if not is_int(i):
            raise TypeError(f"frame index must be an integer, got {type(i).__name__}")
        j = int(i) + self._nstep if i < 0 else int(i)
        if not 0 <= j < self._nstep:
            raise IndexError(f"frame {i} out of range for {self._nstep} frames")
        return j

    def block_update_at(self, name: str, i: int) -> Optional[int]:
        """The update of block ``name`` in effect at frame ``i`` (None before its first)."""
        if not self._schema.has_block(name):
            raise KeyError(f"block {name!r} is not declared")
        b = self._blocks.get(name)
        return None if b is None else b.update_at(self._index(i))

    def box_at(self, i: int) -> Any:
        """The cell at frame ``i``; None before the first cell or past the end."""
        if not is_int(i) or not -self._nstep <= i < self._nstep:
            return None
        return self._box.at(int(i) % self._nstep)

    def meta_series(self, key: str) -> np.ndarray:
        """Every committed value of per-step meta key ``key`` in one read (trajectory §5):
        ``nstep`` rows as stored (numeric tags as their numpy dtype, fills included; strings
        and json as an object array of text)."""
        if key not in self._meta:
            raise KeyError(f"per-step meta key {key!r} is not declared")
        tag, arr = self._meta[key]
        if arr is None:  # declared, no frame committed yet
            dtype, trailing = META_STORAGE[tag]
            return np.empty((0,) + trailing, dtype=dtype)
        return np.asarray(arr[0:self._nstep])

    def read_frame(self, i: int) -> Frame:
        j = self._index(i)
        return self._read_retrying(lambda: self._frame(j, None))

    def read_columns(self, i: int, pairs: Iterable[Tuple[str, str]]) -> Frame:
        """Frame ``i`` with only the named ``(block, column)`` pairs decoded."""
        wanted: Dict[str, List[str]] = {}
        for block, column in pairs:
            if not self._schema.has_block(block) or column not in self._schema.column_names(block):
                raise InvalidValueError(f"({block!r}, {column!r}) is not a declared column")
            wanted.setdefault(block, []).append(column)
        j = self._index(i)
        return self._read_retrying(lambda: self._frame(j, wanted))

    def _frame(self, i: int, wanted: Optional[Dict[str, List[str]]], consume: bool = False) -> Frame:
        """Frame ``i`` (only the ``wanted`` columns).  ``consume``: part of a pass over every
        frame in order, so rows that are exactly one inner chunk (a frame per chunk, as for
        large systems) are handed over as decoded, not copied out of the cache."""
        self._prefetch(i, wanted)
        blocks: Dict[str, Block] = {}
        for name, b in self._blocks.items():
            if wanted is not None and name not in wanted:
                continue
            j = b.update_at(i)
            if j is None:
                continue
            lo, hi = b.rows(j)
            limit = int(b.offsets[-1])
            names = list(b.spec.columns) if wanted is None else [c for c in b.spec.columns if c in wanted[name]]
            columns = {c: self._chunks.rows(b.columns[c], lo, hi, limit, consume) for c in names}
            masks = {}
            for c in names:
                if c in b.masks:
                    m = self._chunks.rows(b.masks[c], lo, hi, limit)
                    if not m.all():
                        masks[c] = m
            precision = {c: p for c in names if (p := b.spec.columns[c].precision) is not None}
            targets = {c: t for c, t in b.spec.targets.items() if c in names}
            blocks[name] = Block(columns, masks, precision, targets, b.spec.structural_shape, count=hi - lo)
        if self._needs_check:
            rows = {}
            for name, b in self._blocks.items():
                j = b.update_at(i)
                if j is not None:
                    lo, hi = b.rows(j)
                    rows[name] = hi - lo
            only = None if wanted is None else wanted
            check_resolved(self._schema, rows, lambda bn, c: (blocks[bn].columns[c], blocks[bn].masks.get(c)),
                           self._section_rows, i, writing=False, only=only)
        meta: Dict[str, Any] = {}
        for key, (tag, arr) in self._meta.items():
            if arr is not None:
                meta[key] = meta_value(tag, self._chunks.rows(arr, i, i + 1, self._nstep)[0], f"/trajectory/meta/{key}")
        return Frame(meta, blocks, self._box.at(i))

    def _prefetch(self, i: int, wanted: Optional[Dict[str, List[str]]]) -> None:
        """Fetch the chunks frame ``i`` misses, every array at once: on a latency-bound store
        one request per array in parallel, on a local one a single decode batch."""
        needs: List[Tuple[Array, int, int, int]] = []
        for name, b in self._blocks.items():
            j = b.update_at(i) if wanted is None or name in wanted else None
            if j is None:
                continue
            lo, hi = b.rows(j)
            limit = int(b.offsets[-1])
            for c in b.spec.columns:
                if wanted is None or c in wanted[name]:
                    needs.extend((arr, lo, hi, limit) for arr in (b.columns.get(c), b.masks.get(c)) if arr is not None)
        needs.extend((arr, i, i + 1, self._nstep) for _, arr in self._meta.values() if arr is not None)
        plans = [(arr, run, limit) for arr, lo, hi, limit in needs
                 if (run := self._chunks.plan(arr, lo, hi, limit)) is not None]
        if not plans:
            return
        if self._threads() is None:
            loaded = self._chunks.load_many(plans, READ_THREADS)
        elif len(plans) < 2:
            return
        else:
            loaded = list(self._map(lambda p: self._chunks.load(*p), plans))
        for (arr, _, limit), (run, data) in zip(plans, loaded):
            self._chunks.keep(arr, run, data, limit)

    def _threads(self) -> Optional[ThreadPoolExecutor]:
        """The reader's pool on a latency-bound store (columns in parallel, read-ahead in the
        background), made when first needed; None on a local store."""
        if self._pool is None and self._workers > 1:
            self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="molrec-reader")
            self._chunks.executor = self._pool
        return self._pool

    def _map(self, fn: Callable[[Any], Any], items: List[Any]) -> Iterator[Any]:
        """``fn`` over ``items`` on the reader's pool (threads only for latency-bound stores)."""
        pool = self._threads()
        if pool is None or len(items) < 2:
            return map(fn, items)
        return pool.map(fn, items)

    def __getitem__(self, i: int) -> Frame:
        return self.read_frame(i)

    def __iter__(self) -> Iterator[Frame]:
        self._expect_sequential()
        for i in range(self._nstep):
            yield self._frame(i, None, consume=True)

    def _expect_sequential(self) -> None:
        """Every frame in order follows: let the chunk cache read ahead at full length."""
        arrays = [arr for b in self._blocks.values() for arr in (*b.columns.values(), *b.masks.values())]
        self._chunks.expect_sequential(arrays + [arr for _, arr in self._meta.values() if arr is not None])

    # ------------------------------------------------------------ whole blocks
    def block_info(self, name: str) -> BlockInfo:
        """The committed layout of block ``name`` and its columns (for tools that read whole
        blocks: the xarray backend, the Dask arrays)."""
        if not self._schema.has_block(name):
            raise InvalidValueError(f"block {name!r} is not declared (declared: {self._schema.block_names()})")
        spec = self._schema.block_spec(name)
        b = self._blocks.get(name)
        ordinals = np.zeros(0, np.int64) if b is None else b.ordinals.copy()
        offsets = np.zeros(1, np.int64) if b is None else b.offsets.copy()
        counts = np.diff(offsets)
        fixed = int(counts[0]) if counts.size and np.all(counts == counts[0]) else None
        columns = {}
        for column, cspec in spec.columns.items():
            arr = None if b is None else b.columns.get(column)
            columns[column] = ColumnInfo(cspec.dtype, np.dtype(numpy_dtype(cspec.dtype)), tuple(cspec.trailing),
                                         cspec.precision, spec.targets.get(column), bool(cspec.nullable),
                                         b is not None and column in b.masks,
                                         None if arr is None else int(arr.chunks[0]))
        return BlockInfo(name, "none" if b is None else b.kind, ordinals, offsets, fixed, columns)

    def _frame_indices(self, frames: FrameSelection) -> np.ndarray:
        n = self._nstep
        if frames is None:
            return np.arange(n, dtype=np.int64)
        if isinstance(frames, slice):
            return np.arange(n, dtype=np.int64)[frames]
        idx = np.asarray(frames)
        if idx.ndim != 1 or (idx.size and idx.dtype.kind not in "iu"):
            raise InvalidValueError(f"frames must be a slice or a 1-D array of frame indices, got {idx.dtype}{list(idx.shape)}")
        idx = idx.astype(np.int64)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"frame index out of range for {n} frames")
        return np.where(idx < 0, idx + n, idx)

    def _fixed_block(self, name: str, frames: FrameSelection,
                     whole_run: bool = True) -> Tuple[BlockReader, int, np.ndarray]:
        """(block, its row count, first row of each selected frame).  The row count must be
        the same for every committed update (``whole_run``) or at the selected frames."""
        info = self.block_info(name)
        b = self._blocks.get(name)
        idx = self._frame_indices(frames)
        if b is None or not info.ordinals.size:
            if whole_run or idx.size:
                raise InvalidValueError(f"block {name!r} has no committed update")
            return BlockReader(name, self._schema.block_spec(name)), 0, np.zeros(0, np.int64)
        if whole_run and info.fixed_rows is None:
            counts = np.diff(info.offsets)
            raise InvalidValueError(
                f"block {name!r} is ragged (its updates have {int(counts.min())} to {int(counts.max())} rows): "
                "a frames x rows array needs a fixed row count; read its frames with read_frame/read_columns")
        j = np.searchsorted(b.ordinals, idx, side="right") - 1
        if idx.size and j.min() < 0:
            first = int(idx[int(np.argmin(j))])
            raise InvalidValueError(f"block {name!r} is absent at frame {first} (its first update is at frame "
                                    f"{int(b.ordinals[0])})")
        counts = b.offsets[j + 1] - b.offsets[j]
        if counts.size and counts.min() != counts.max():
            at = int(idx[int(np.argmax(counts != counts[0]))])
            raise InvalidValueError(f"block {name!r} changes its row count at the selected frames (frame {at} has "
                                    f"{int(counts[counts != counts[0]][0])} rows, frame {int(idx[0])} "
                                    f"{int(counts[0])}); read it per frame")
        rows = info.fixed_rows if info.fixed_rows is not None else (int(counts[0]) if counts.size else 0)
        return b, rows, b.offsets[j]

    def _gather(self, arr: Array, starts: np.ndarray, rows: int, limit: int) -> np.ndarray:
        """Rows ``start:start+rows`` of ``arr`` for every start, as (starts, rows, trailing...)."""
        return self._gather_many([arr], starts, rows, limit)[0]

    def _gather_many(self, arrays: List[Array], starts: np.ndarray, rows: int, limit: int,
                     outs: Optional[List[np.ndarray]] = None) -> List[np.ndarray]:
        """``_gather`` of several arrays with one decode batch (each inner chunk any start
        touches is read and decoded once).  Frames whose rows follow each other (any slice
        of frames) are read straight into the result — into ``outs`` when given, views of any
        strides such as the columns of an interleaved array; other frames go through the
        runs of neighbouring chunks they touch (one array read per run: one request per run
        on a remote store) and one gather."""
        shapes = [(len(starts), rows) + tuple(arr.shape[1:]) for arr in arrays]
        if not len(starts) or not rows:
            return [np.empty(shape, arr.dtype) if outs is None else outs[k] for k, (arr, shape) in enumerate(zip(arrays, shapes))]
        if len(starts) == 1 or bool(np.all(np.diff(starts) == rows)):
            lo, hi = int(starts[0]), int(starts[0]) + len(starts) * rows
            targets = [None if outs is None else outs[k].reshape((hi - lo,) + tuple(arr.shape[1:]))
                       for k, arr in enumerate(arrays)]
            found = read_many([(arr, slice(lo, hi), t) for arr, t in zip(arrays, targets)], READ_THREADS)
            if outs is not None:
                for out, target, got in zip(outs, targets, found):
                    if not np.shares_memory(out, got):  # reshape had to copy: put it in place
                        out[...] = got.reshape(out.shape)
                return outs
            return [got.reshape(shape) for got, shape in zip(found, shapes)]
        result = []
        for k, arr in enumerate(arrays):
            size = int(arr.chunks[0])
            first = np.unique(starts) // size
            last = (np.unique(starts) + rows - 1) // size
            n_chunks = -(-limit // size)
            edges = np.zeros(n_chunks + 1, np.int64)
            np.add.at(edges, first, 1)
            np.add.at(edges, last + 1, -1)
            ids = np.flatnonzero(np.cumsum(edges[:-1]) > 0)
            runs = np.split(ids, np.flatnonzero(np.diff(ids) != 1) + 1)
            pieces = read_many([(arr, slice(int(r[0]) * size, min((int(r[-1]) + 1) * size, limit)), None) for r in runs],
                               READ_THREADS)
            buffer = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
            position = np.zeros(n_chunks, np.int64)
            position[ids] = np.arange(ids.size, dtype=np.int64) * size
            at = position[starts // size] + starts % size  # each frame's first row in the buffer
            gathered: np.ndarray = buffer[at[:, None] + np.arange(rows, dtype=np.int64)]
            if outs is not None:
                outs[k][...] = gathered
                gathered = outs[k]
            result.append(gathered)
        return result

    def _block_column(self, b: BlockReader, column: str, starts: np.ndarray, rows: int) -> Array:
        """A column's array, refused when a mask marks any of the selected rows invalid."""
        arr = b.columns.get(column)
        if arr is None:
            raise InvalidValueError(f"column {column!r} of block {b.name!r} has no stored array")
        mask = b.masks.get(column)
        if mask is not None and not self._gather(mask, starts, rows, int(b.offsets[-1])).all():
            raise InvalidValueError(
                f"column {column!r} of block {b.name!r} has invalid (masked) rows in the selected frames; "
                "whole-block arrays carry plain values: read masked rows with read_frame/read_columns")
        return arr

    def _block_values(self, b: BlockReader, column: str, starts: np.ndarray, rows: int) -> np.ndarray:
        """A column's rows for the given starts, refused when a mask marks any of them invalid."""
        return self._gather(self._block_column(b, column, starts, rows), starts, rows, int(b.offsets[-1]))

    def block_array(self, block: str, columns: Optional[Sequence[str]] = None,
                    frames: FrameSelection = None) -> np.ndarray:
        """``columns`` (default: every column, in pin order) of a block with a fixed row count
        over ``frames`` (default all; a slice or an array of frame indices, negatives from the
        end, any order) as one array of shape ``(frames, rows, len(columns))``.  A frame after
        the block's last update carries that update (§9).  Each inner chunk the frames need
        is read and decoded once.  Refused: a ragged block, a frame before its first update,
        columns with trailing axes or differing dtypes, masked rows (use ``read_frame``)."""
        b, rows, starts = self._fixed_block(block, frames)
        names = list(b.spec.columns) if columns is None else [str(c) for c in columns]
        if isinstance(columns, str):
            raise InvalidValueError("columns must be a sequence of column names, not one string")
        for column in names:
            cspec = b.spec.columns.get(column)
            if cspec is None:
                raise InvalidValueError(f"({block!r}, {column!r}) is not a declared column")
            if cspec.trailing:
                raise InvalidValueError(f"column {column!r} of block {block!r} has trailing axes {list(cspec.trailing)}: "
                                        "block_array stacks one value per row; use column_array for it")
        dtypes = {b.spec.columns[c].dtype for c in names}
        if len(dtypes) > 1:
            raise InvalidValueError(f"columns {names} of block {block!r} have different dtypes {sorted(dtypes)}: "
                                    "read them with separate block_array calls")
        if not names:
            return np.empty((len(starts), rows, 0), np.float64)
        arrays = [self._block_column(b, c, starts, rows) for c in names]
        out = np.empty((len(starts), rows, len(names)), arrays[0].dtype)
        self._gather_many(arrays, starts, rows, int(b.offsets[-1]), [out[:, :, k] for k in range(len(names))])
        return out

    def block_columns(self, block: str, columns: Optional[Iterable[str]] = None,
                      frames: FrameSelection = None) -> Dict[str, np.ndarray]:
        """``{column: (frames, rows, *trailing)}`` — the per-column form of :meth:`block_array`
        (trailing axes and different dtypes allowed), for tools that read coordinates in
        batches.  The row count must be the same at the selected frames only (a block whose
        atom count changes elsewhere still reads where it does not).  Nullable and
        row-reference columns are refused: read them per frame with ``read_columns``, which
        applies masks and checks references (trajectory#R14, #R16)."""
        if not self._schema.has_block(block):
            raise InvalidValueError(f"block {block!r} is not declared (declared: {self._schema.block_names()})")
        spec = self._schema.block_spec(block)
        names = list(spec.columns) if columns is None else [str(c) for c in columns]
        for column in names:
            cspec = spec.columns.get(column)
            if cspec is None:
                raise InvalidValueError(f"({block!r}, {column!r}) is not a declared column")
            if cspec.nullable or column in spec.targets:
                raise InvalidValueError(f"({block!r}, {column!r}) is {'nullable' if cspec.nullable else 'a row reference'}: "
                                        "read it per frame with read_columns")
        b, rows, starts = self._fixed_block(block, frames, whole_run=False)
        out: Dict[str, np.ndarray] = {}
        stored = []
        for column in names:
            arr = b.columns.get(column)
            if arr is None or not rows or not len(starts):
                cspec = b.spec.columns[column]
                empty = object if cspec.dtype == "string" else numpy_dtype(cspec.dtype)
                out[column] = np.zeros((len(starts), rows) + tuple(cspec.trailing), empty)
            else:
                stored.append(column)
        if stored:  # one decode batch for every column
            found = self._gather_many([b.columns[c] for c in stored], starts, rows, int(b.offsets[-1]))
            out.update(zip(stored, found))
        return {column: out[column] for column in names}

    def column_array(self, block: str, column: str, frames: FrameSelection = None) -> np.ndarray:
        """One column of a block with a fixed row count over ``frames`` as an array of shape
        ``(frames, rows, *trailing)`` (see :meth:`block_array` for the rules)."""
        b, rows, starts = self._fixed_block(block, frames)
        if column not in b.spec.columns:
            raise InvalidValueError(f"({block!r}, {column!r}) is not a declared column")
        return self._block_values(b, column, starts, rows)

    def mask_array(self, block: str, column: str, frames: FrameSelection = None) -> np.ndarray:
        """The validity flags of a column of a block with a fixed row count over ``frames``,
        shape ``(frames, rows)`` (all true when the column has no mask, trajectory §8.4)."""
        b, rows, starts = self._fixed_block(block, frames)
        if column not in b.spec.columns:
            raise InvalidValueError(f"({block!r}, {column!r}) is not a declared column")
        mask = b.masks.get(column)
        if mask is None:
            return np.ones((len(starts), rows), dtype=bool)
        return self._gather(mask, starts, rows, int(b.offsets[-1]))

    def column_rows(self, block: str, column: str, start: int, stop: int) -> np.ndarray:
        """Committed rows ``start:stop`` of a column as stored (all updates concatenated, the
        CSR values of a ragged block; :meth:`block_info` gives the offsets)."""
        b = self._blocks.get(block)
        if b is None or column not in b.spec.columns or column not in b.columns:
            raise InvalidValueError(f"({block!r}, {column!r}) is not a stored column")
        total = int(b.offsets[-1])
        if not 0 <= start <= stop <= total:
            raise IndexError(f"rows {start}:{stop} outside the {total} committed rows of block {block!r}")
        return np.asarray(b.columns[column][start:stop])

    def column_mask_rows(self, block: str, column: str, start: int, stop: int) -> Optional[np.ndarray]:
        """Validity flags of committed rows ``start:stop`` (None: the column has no mask)."""
        b = self._blocks.get(block)
        if b is None or column not in b.masks:
            return None
        total = int(b.offsets[-1])
        if not 0 <= start <= stop <= total:
            raise IndexError(f"rows {start}:{stop} outside the {total} committed rows of block {block!r}")
        return np.asarray(b.masks[column][start:stop])

    def describe(self) -> Dict[str, Any]:
        """A summary for people and tools (``molrec-raw inspect``): frames, step and time
        ranges, and per block its layout, committed updates, the rows of its last update
        and the rows stored past the committed ones (an uncommitted tail, ``trajectory#N1``);
        the cell's updates and the per-step meta keys."""
        n = self._nstep
        blocks: Dict[str, Any] = {}
        tail = False
        for name in self._schema.block_names():
            b = self._blocks.get(name)
            if b is None:
                blocks[name] = {"layout": "none", "updates": 0, "last_rows": None, "uncommitted_rows": 0}
                continue
            stored = max((a.shape[0] for a in [*b.columns.values(), *b.masks.values()]), default=0)
            extra = max(0, stored - int(b.offsets[-1]))
            tail = tail or extra > 0
            updates = len(b.ordinals)
            lo, hi = b.rows(updates - 1) if updates else (0, 0)
            blocks[name] = {"layout": b.kind, "updates": updates, "last_rows": hi - lo if updates else None,
                            "uncommitted_rows": extra}
        series_lengths = [arr.shape[0] for _, arr in self._meta.values() if arr is not None]
        tgroup = self._root.get(TRAJ)
        if isinstance(tgroup, Group):
            series_lengths += [a.shape[0] for a in (tgroup.get("step"), tgroup.get("time")) if isinstance(a, Array)]
        tail = tail or any(length > n for length in series_lengths)
        times = self._times
        return {"nstep": n, "steps": [self._steps[0], self._steps[-1]] if n else None,
                "times": [times[0], times[-1]] if n and times is not None else None,
                "blocks": blocks, "box_updates": len(self._box.cells), "meta_keys": list(self._meta),
                "uncommitted_tail": tail}

    def verify(self, progress: Optional[Callable[[int, int], None]] = None) -> List[Violation]:
        """Check the whole committed trajectory, not only what opening checks: resolve every
        frame (every stored chunk a frame uses is decoded, so checksums are verified, and row
        references and alignments are checked, ``trajectory#R16``/``#R17``) and every update
        of a block named like a system block (§8.8).  One violation per rule and node, saying
        how many frames share it; ``progress(done, total)`` is called as frames resolve."""
        found: Dict[Tuple[str, str], List[Any]] = {}

        def note(exc: MolrecError) -> None:
            key = (exc.rule or type(exc).__name__, exc.node or "/trajectory")
            found.setdefault(key, [exc.message, 0])[1] += 1

        system = SystemCounterparts(self._schema, self._root)
        for name, b in self._blocks.items():
            if name not in system:
                continue
            for j, ordinal in enumerate(b.ordinals.tolist()):
                lo, hi = b.rows(j)
                try:
                    ids = (self._chunks.rows(b.columns["id"], lo, hi, int(b.offsets[-1]))
                           if "id" in b.columns and hi > lo else None)
                    system.check(name, hi - lo, ids, f"trajectory frame {ordinal}")
                except MolrecError as exc:
                    note(exc)
        self._expect_sequential()
        for i in range(self._nstep):
            try:
                self._frame(i, None)
            except MolrecError as exc:
                note(exc)
            if progress is not None:
                progress(i + 1, self._nstep)
        return [Violation(rule, node, message if count == 1 else f"{message} (and {count - 1} more like it)")
                for (rule, node), (message, count) in found.items()]

    def recovery_violations(self) -> List[Violation]:
        """``trajectory#10``: the live state is damaged (a power cut) and other readers would
        not read what this one reads from the checkpoint — ``molrec-raw repair`` puts it
        back.  Empty when the live state is what the last commit says."""
        if self.source != "checkpoint":
            return []
        root = self._root
        base = getattr(root.store, "base", None)
        live = root if base is None else Group(base, root.path, root.metadata, read_only=True, threads=1)
        plan = recovery.plan_recovery(live, self.source, self.recovery_reason, self._nstep, self.logical_rows())
        if not plan.actions:
            return []
        return [Violation(recovery.RULE, "/trajectory",
                          f"the record needs repair: {self.recovery_reason or 'its live state is damaged'}; "
                          f"readers here use its checkpoint ({self._nstep} committed frames), other readers "
                          f"would not ({len(plan.actions)} change(s); run `molrec-raw repair`)")]

    # ------------------------------------------------------------ live reading
    def refresh(self) -> int:
        """Re-read the commit marker (trajectory §10) and return the committed length.

        Frames below the old length read exactly as before (committed bytes are never
        rewritten) and the new ones become readable.  The new state is read whole, beside
        the current one, which stays in use until it is adopted: a read that meets a commit
        in progress (a shard index torn by its in-place rewrite fails its checksum; a live
        state that does not match its manifest) is read again from the marker, a bounded
        number of times, then a ``CorruptDataError`` names the node.  The chunk cache keeps
        the whole inner chunks of arrays whose layout did not change and drops the rest
        (the tail chunk cut at the old length).  A record that shrank or changed its pin
        was replaced: ``StoreError``.  An archive or a URL cannot change: the same length,
        nothing read.  No lock is taken (record/live.py)."""
        origin = self._origin
        if origin.store.immutable:
            return self._nstep
        problem: Optional[MolrecError] = None
        for attempt in range(_LIVE_ATTEMPTS):
            if attempt:
                time.sleep(_retry_pause(attempt))
            try:
                tgroup = origin.get(TRAJ)
                seen = dict(tgroup.attrs) if isinstance(tgroup, Group) else None
                if seen == self._seen:
                    return self._nstep  # nothing committed since
                fresh = MrecReader.__new__(MrecReader)
                fresh._owns_store, fresh._pool, fresh._workers = False, None, self._workers
                fresh._cache_bytes = self._cache_bytes
                fresh._open(origin, verified=self._logical)
            except MolrecError as exc:
                problem = exc
                continue
            if fresh.recovery_reason is not None and (attempt < _LIVE_ATTEMPTS - 1 or fresh._nstep < self._nstep):
                # most likely a commit caught half-read: read it again (the checkpoint's
                # older state is taken only at the last attempt, and never to go back)
                problem = CorruptDataError(f"the live state did not match its commit: {fresh.recovery_reason}",
                                           node="/trajectory", rule=recovery.RULE)
                continue
            self._adopt(fresh, seen)
            return self._nstep
        assert problem is not None
        problem.message = f"{problem.message} (the trajectory read {_LIVE_ATTEMPTS} times while it changed)"
        problem.args = (problem.message,)
        raise problem.add_context(store=origin.store.describe(), node="/trajectory")

    def _adopt(self, fresh: "MrecReader", seen: Optional[Dict[str, Any]]) -> None:
        """Take over the state ``fresh`` read (refused when it is not a continuation of
        this one), keeping this reader's pool, store ownership and still-valid chunks."""
        where = self._origin.store.describe()
        if fresh._nstep < self._nstep:
            raise StoreError(f"the trajectory went from {self._nstep} to {fresh._nstep} committed frames: the "
                             "record was replaced or rolled back; open it again", store=where, node="/trajectory")
        if self._nstep and fresh._schema != self._schema:
            raise StoreError("the trajectory's sequence_schema changed (a pin never changes, trajectory#I13): "
                             "the record was replaced; open it again", store=where, node="/trajectory")
        old, new = _cached_arrays(self), _cached_arrays(fresh)
        chunks = self._chunks
        chunks.retain({path: int(arr.chunks[0]) for path, arr in new.items()
                       if path in old and old[path].metadata.with_shape(arr.shape) == arr.metadata})
        pool, owns = self._pool, self._owns_store
        self.__dict__.update(fresh.__dict__)
        self._pool, self._owns_store, self._chunks, self._seen = pool, owns, chunks, seen

    def _read_retrying(self, read: Callable[[], Frame]) -> Frame:
        """``read()``, again when it meets bytes a writer is rewriting in place (a shard
        index torn by a concurrent commit fails its checksum), a bounded number of times on
        a store that can change; the last error says how often it was read."""
        attempts = 1 if self._origin.store.immutable else _LIVE_ATTEMPTS
        for attempt in range(attempts):
            try:
                return read()
            except CorruptDataError as exc:
                if attempt == attempts - 1:
                    if attempts > 1:
                        exc.message = f"{exc.message} (read {attempts} times)"
                        exc.args = (exc.message,)
                    raise
            time.sleep(_retry_pause(attempt + 1))
        raise AssertionError("unreachable")  # pragma: no cover

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
        """Release the reader's threads, and its store unless the caller passed it in."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        if self._owns_store:
            self._root.store.close()

    def __enter__(self) -> "MrecReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_LIVE_ATTEMPTS = 5  # reads of a changing record before its error is believed


def _retry_pause(attempt: int) -> float:
    """Seconds before attempt ``attempt`` (1, 2, ...): 1, 4, 16, 64 ms — a writer rewrites a
    shard index page in one ``pwrite``, so the first retry nearly always sees it whole."""
    return 0.001 * float(4 ** (attempt - 1))


def _cached_arrays(reader: MrecReader) -> Dict[str, Array]:
    """Path -> array of every array ``reader`` reads through its chunk cache."""
    out = {arr.path: arr for b in reader._blocks.values() for arr in (*b.columns.values(), *b.masks.values())}
    out.update((arr.path, arr) for _, arr in reader._meta.values() if arr is not None)
    return out


def derive_schema(tgroup: Group) -> SequenceSchema:
    """A store without a pin (``trajectory#N3``): blocks = non-reserved child groups,
    columns = their non-reserved arrays (stored dtype and trailing), nullable = a mask."""
    schema = SequenceSchema()
    for name, node in tgroup.members():
        if not isinstance(node, Group) or name in RESERVED_BLOCK_NAMES:
            continue
        schema.declare_block(name)
        validity = node.get("_validity")
        for column, arr in node.members():
            if not isinstance(arr, Array) or column in ("offset", "step_index"):
                continue
            dtype = ZARR_TO_COLUMN.get(arr.metadata.dtype.name)
            if dtype is None:
                raise spec_error("R12", f"column {column!r} of block {name!r} is stored as {arr.metadata.dtype.name}",
                                 f"/trajectory/{name}/{column}")
            schema.declare_column(name, column, dtype, arr.shape[1:])
            if isinstance(validity, Group) and validity.get(column) is not None:
                schema.declare_nullable(name, column)
        shape = node.attrs.get("structural_shape")
        if shape is not None:
            schema.declare_structural_shape(name, shape)
    mgroup = tgroup.get("meta")
    if isinstance(mgroup, Group):
        for key, arr in mgroup.members():
            if isinstance(arr, Array):
                tag = arr.attrs.get("meta_dtype")
                tag = typed_json.LEGACY_TAGS.get(tag, tag) if isinstance(tag, str) else tag
                if tag not in META_STORAGE:
                    raise spec_error("R10", f"meta array {key!r} has no valid meta_dtype ({tag!r})", f"/trajectory/meta/{key}")
                schema.declare_meta(key, tag)
    return schema


def read_mrec_trajectory(path: RecordSource) -> Trajectory:
    """The whole trajectory (0 frames when the record has no trajectory section)."""
    with MrecReader(path) as reader:
        frames = list(reader)
        times = reader.time
        return Trajectory(frames, np.asarray(reader.step, dtype=np.int64),
                          None if times is None else np.asarray(times, dtype=np.float64))
