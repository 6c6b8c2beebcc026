"""A record of a collection and its trajectory, read at random (lmdb.md): :class:`Record`
(``meta``, ``system``, ``trajectory``, ``frame(k)``, ``index``) and :class:`RecordTrajectory`
(``[k]`` resolved by carry-forward inside the record, trajectory#R16, ``collection#C11``;
iteration; ``step``/``time``).  The reader's view of a frame — a system block and the trajectory
block of its name as one block — is :func:`_merged` (one row count, ``collection#C9``; no shared
column, ``collection#C10``).  The values are the reader's to decode and check
(``CollectionReader``); these classes only say which ones a record's frame needs.
"""
from __future__ import annotations

import bisect
import operator
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional

import numpy as np

from molrec_raw.errors import CorruptDataError, MolrecError, SpecViolationError
from molrec_raw.record import typed_json
from molrec_raw.record.model import Block, Box, Frame
from molrec_raw.record.trajectory.references import check_resolved
from molrec_raw.collection import binding
from molrec_raw.collection.binding import FRAME, RECORD_META, SYSTEM, key, key_name
from molrec_raw.collection.frame_bytes import header_of
from molrec_raw.collection.model import C9, C10, C11
from molrec_raw.collection.transaction import L8, Getter, _fail, _Reading

if TYPE_CHECKING:
    from molrec_raw.collection.reader import CollectionReader, CollectionView

__all__ = ["Record", "RecordTrajectory"]

_RESOLVED_RULES = {"trajectory#R16": C11}
_new_frame = Frame.__new__


class Record:
    """Record ``r`` of a collection: ``meta``, ``system`` (a ``Frame`` or None),
    ``trajectory`` (None or a :class:`RecordTrajectory`), ``frame(k)`` (the reader's view),
    ``index`` (its row of the collection's own index columns), ``n_frames``, ``n_atoms``."""

    __slots__ = ("_c", "number", "_view")

    def __init__(self, reader: CollectionReader, number: int, view: Optional[CollectionView]) -> None:
        self._c, self.number, self._view = reader, number, view

    def _getter(self) -> Getter:
        return self._c._get if self._view is None else self._view._open().get

    @property
    @binding.lmdb_errors(lambda self: self._c._where)
    def meta(self) -> Dict[str, Any]:
        """The record's meta document (``{}`` when it has none)."""
        return self._c._record_meta(self._getter()(key(RECORD_META, self.number)), self.number)

    @property
    def system(self) -> Optional[Frame]:
        """The record's system, or None."""
        c = self._c
        if self._view is None:
            r = self.number
            return c._system(c._get(SYSTEM + r.to_bytes(8, "big")), r)  # (_get names LMDB's errors)
        return self._view_system()

    @binding.lmdb_errors(lambda self: self._c._where)
    def _view_system(self) -> Optional[Frame]:
        assert self._view is not None
        return self._c._system(self._view._open().get(SYSTEM + self.number.to_bytes(8, "big")), self.number)

    @property
    def has_trajectory(self) -> bool:
        """Whether the record has a trajectory (one of zero frames included)."""
        return bool(self._c._has_trajectory[self.number])

    @property
    def n_frames(self) -> int:
        """Frames of the record's trajectory (0 without one)."""
        return int(self._c._count[self.number])

    @property
    def n_atoms(self) -> int:
        """Rows of the record's ``atoms`` (its system's, else its trajectory's first update's; 0 without)."""
        return int(self._c._n_atoms[self.number])

    @property
    def index(self) -> Dict[str, Any]:
        """The record's values of the collection's own index columns (None where null)."""
        block = self._c._index
        out: Dict[str, Any] = {}
        for name, values in block.columns.items():
            mask = block.masks.get(name)
            if mask is not None and not mask[self.number]:
                out[name] = None
            else:
                value = values[self.number]
                out[name] = value.copy() if isinstance(value, np.ndarray) else (
                    value.item() if isinstance(value, np.generic) else value)
        return out

    @property
    def trajectory(self) -> Optional["RecordTrajectory"]:
        """The record's trajectory (carry-forward resolved inside the record), or None."""
        if not self._c._has_trajectory.item(self.number):
            return None
        return RecordTrajectory(self._c, self.number, self._view)

    @binding.lmdb_errors(lambda self: self._c._where)
    def frame(self, k: int = 0) -> Frame:
        """The reader's view of frame ``k``: the system's blocks and trajectory frame ``k``'s,
        a block of both names presented as one (columns united, rows aligned 1:1,
        ``collection#C9``/``#C10``); meta the system's then the frame's per-step keys; the
        frame's cell.  A record without a trajectory has only ``frame(0)``, its system."""
        system = self.system
        if not self.has_trajectory:
            if k not in (0, -1):
                raise IndexError(f"record {self.number} has no trajectory: frame(0) is its system")
            return system if system is not None else Frame()
        own = RecordTrajectory(self._c, self.number, self._view)[k]
        return _merged(system, own, self._c._where, self.number)

    def __repr__(self) -> str:
        return f"Record({self.number}, {self.n_frames} frames)"


class _Update:
    __slots__ = ("k", "blocks", "meta", "step", "time", "box", "layout")

    def __init__(self, k: int, blocks: Dict[str, Block], meta: Dict[str, Any], step: int, time: Optional[float],
                 box: Optional[Box], layout: Any = None) -> None:
        self.k, self.blocks, self.meta, self.step, self.time, self.box = k, blocks, meta, step, time, box
        self.layout = layout


class RecordTrajectory:
    """A record's trajectory: ``len``, ``[k]`` (a ``Frame`` of the trajectory's own blocks,
    each resolved to its latest update at or before ``k`` inside the record — present,
    empty or absent), iteration in order, ``step`` (int64 array) and ``time`` (float64 array,
    or None).  Random access reads the headers of frames ``0..k`` once (kept), then only the
    updates frame ``k`` resolves to."""

    __slots__ = ("_c", "number", "_view", "_n", "_updates", "_box_updates", "_steps", "_times")

    def __init__(self, reader: CollectionReader, number: int, view: Optional[CollectionView]) -> None:
        self._c, self.number, self._view = reader, number, view
        self._n: int = reader._count.item(number)
        self._updates: Dict[str, List[int]] = {}  # what the frames' headers scanned so far say (_scan)
        self._box_updates: List[int] = []
        self._steps: List[int] = []
        self._times: List[Optional[float]] = []

    def __len__(self) -> int:
        """The number of frames."""
        return self._n

    def _ordinal(self, k: Any) -> int:
        n = k if type(k) is int else operator.index(k)
        if n < 0:
            n += self._n
        if not 0 <= n < self._n:
            raise IndexError(f"frame {k} of a trajectory of {self._n} frames (record {self.number})")
        return n

    def __getitem__(self, k: int) -> Frame:
        """Frame ``k`` (negative counts from the end), carry-forward resolved inside the record."""
        if k == 0 and self._view is None and self._n and type(k) is int:
            return self._first_frame(self._c._get)  # (_get names LMDB's errors)
        return self._read(k)

    def _first_frame(self, get: Getter) -> Frame:
        """Frame 0: one value (the first frame holds every block present there)."""
        c, r = self._c, self.number
        update = c._update(get, r, 0)
        if c._resolved_check:
            self._check(update.blocks, 0)
        return _frame(c._meta_values(update.meta, r), update.blocks, update.box)

    @binding.lmdb_errors(lambda self: self._c._where)
    def _read(self, k: int) -> Frame:
        k = self._ordinal(k)
        if k == 0:
            return self._first_frame(self._c._get if self._view is None else self._view._open().get)
        if self._view is not None:
            return self._resolve(self._view._open(), k)
        with self._c._reading() as reading:
            return self._resolve(reading, k)

    @binding.lmdb_errors(lambda self: self._c._where)
    def __iter__(self) -> Iterator[Frame]:
        """Every frame in order, carry-forward kept from frame to frame."""
        state: Dict[str, Block] = {}
        box: Optional[Box] = None
        get = self._c._get if self._view is None else self._view._open().get
        for k in range(self._n):
            update = self._c._update(get, self.number, k)
            state.update(update.blocks)
            if update.box is not None:
                box = update.box
            self._check(state, k)
            yield Frame(self._c._meta_values(update.meta, self.number),
                        {n: state[n] for n in self._c._plans if n in state}, box)

    def _scan(self, reading: _Reading, upto: int) -> None:
        """Headers of the frames not yet scanned, up to ``upto`` (inclusive): which blocks and
        whether a cell each one updates, its step and time."""
        c = self._c
        first = int(c._first[self.number])
        node = f"/records/{self.number}/trajectory"
        for k in range(len(self._steps), upto + 1):
            fk = key(FRAME, first + k)
            raw = reading.txn.get(fk)
            if raw is None:
                raise _fail(CorruptDataError, f"frame {k} of record {self.number} is missing", c._where, fk, node, L8)
            try:
                header, _ = header_of(raw, node)
                blocks = header.get("blocks")
                if type(blocks) is not dict:
                    raise CorruptDataError("the header's 'blocks' is not a JSON object", node=node, rule="lmdb#L17")
                step = typed_json.decode_value("i64", header.get("step"), f"{node}/step")
                time = header.get("time")
                timed = typed_json.decode_value("f64", time, f"{node}/time") if time is not None else None
            except MolrecError as exc:
                raise exc.add_context(store=c._where, key=key_name(fk)) from None
            for name in blocks:
                self._updates.setdefault(name, []).append(k)
            if header.get("box") is not None:
                self._box_updates.append(k)
            self._steps.append(step)
            self._times.append(timed)

    def _resolve(self, reading: _Reading, k: int, meta: bool = True) -> Frame:
        c = self._c
        self._scan(reading, k)
        where_from: Dict[int, List[str]] = {}
        for name, ordinals in self._updates.items():
            i = bisect.bisect_right(ordinals, k) - 1
            if i >= 0:
                where_from.setdefault(ordinals[i], []).append(name)
        i = bisect.bisect_right(self._box_updates, k) - 1
        box_at = self._box_updates[i] if i >= 0 else None
        wanted = set(where_from) | {k} | ({box_at} if box_at is not None else set())
        updates = {u: c._update(reading.get, self.number, u) for u in sorted(wanted)}
        found = {name: updates[u].blocks[name] for u, names in where_from.items() for name in names}
        blocks = {name: found[name] for name in c._plans if name in found}
        self._check(blocks, k)
        box = updates[box_at].box if box_at is not None else None
        raw = updates[k].meta
        return Frame(c._meta_values(raw, self.number) if meta else raw, blocks, box)

    def _check(self, blocks: Dict[str, Block], k: int) -> None:
        c = self._c
        if not c._resolved_check:
            return
        try:
            check_resolved(c._schema, {n: b.nrows for n, b in blocks.items()},
                           lambda b, col: (blocks[b].columns[col], blocks[b].masks.get(col)), lambda s, b: None, k,
                           writing=False)
        except SpecViolationError as exc:
            raise SpecViolationError(exc.message, store=c._where, node=f"/records/{self.number}{exc.node}",
                                     rule=_RESOLVED_RULES.get(exc.rule or "", exc.rule)) from None

    @binding.lmdb_errors(lambda self: self._c._where)
    def _scan_all(self) -> None:
        if len(self._steps) < self._n:
            if self._view is not None:
                self._scan(self._view._open(), self._n - 1)
            else:
                with self._c._reading() as reading:
                    self._scan(reading, self._n - 1)

    @property
    def step(self) -> np.ndarray:
        """Each frame's step number (int64)."""
        self._scan_all()
        return np.asarray(self._steps, dtype=np.int64)

    @property
    def time(self) -> Optional[np.ndarray]:
        """Each frame's time (float64), or None when the trajectory has none."""
        self._scan_all()
        if not self._times or self._times[0] is None:
            return None
        return np.asarray(self._times, dtype=np.float64)

    def __repr__(self) -> str:
        return f"RecordTrajectory(record {self.number}, {self._n} frames)"


def _frame(meta: Dict[str, Any], blocks: Dict[str, Block], box: Optional[Box]) -> Frame:
    """``Frame(meta, blocks, box)`` without the dataclass's defaulting (one per read)."""
    frame = _new_frame(Frame)
    frame.__dict__ = {"meta": meta, "blocks": blocks, "box": box}
    return frame


def _merged(system: Optional[Frame], own: Frame, where: str, r: int) -> Frame:
    """The reader's view: system and trajectory blocks sharing a name as one block."""
    if system is None:
        return own
    blocks = dict(system.blocks)
    for name, block in own.blocks.items():
        base = blocks.get(name)
        if base is None:
            blocks[name] = block
            continue
        _check_pair(base, block, where, r, name)
        blocks[name] = Block({**base.columns, **block.columns}, {**base.masks, **block.masks},
                             {**base.precision, **block.precision}, {**base.targets, **block.targets},
                             base.structural_shape if base.structural_shape is not None else block.structural_shape,
                             dict(base.attrs), base.nrows)
    return Frame({**system.meta, **own.meta}, blocks, own.box)


def _check_pair(base: Block, block: Block, where: str, r: int, name: str) -> None:
    """A system block and the trajectory block of its name: one row count (``C9``), no shared
    column (``C10``)."""
    node = f"/records/{r}/trajectory/{name}"
    if base.nrows != block.nrows:
        raise SpecViolationError(f"trajectory block {name!r} has {block.nrows} rows, the system block of that name "
                                 f"{base.nrows}: they are aligned 1:1 by row order", store=where, node=node, rule=C9)
    for column in block.columns:
        if column in base.columns:
            raise SpecViolationError(f"column {column!r} is in both the system and the trajectory block {name!r}",
                                     store=where, node=node, rule=C10)
