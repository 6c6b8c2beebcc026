"""Blocks of a trajectory (trajectory §6, §8): the updates a writer buffers, their bitwise
change detection, validation against the pin, and how a reader finds the committed updates
(regular markers or CSR ``step_index``/``offset``).
"""
from __future__ import annotations

from math import prod
from typing import AbstractSet, Container, Dict, List, Optional, Sequence, Tuple

import numpy as np

from molrec_raw.errors import InvalidValueError, MolrecError, SpecViolationError
from molrec_raw.record.columns import COLUMN_DTYPES, VOCABULARY, ZARR_TO_COLUMN, as_column, column_dtype_of
from molrec_raw.record.model import Block
from molrec_raw.record.precision import round_to_precision
from molrec_raw.record.trajectory.common import spec_error
from molrec_raw.record.trajectory.schema import BlockSpec, ColumnSpec
from molrec_raw.record.trajectory.storage import prefix_below
from molrec_raw.zarr import Array, Group


class CheckedShape:
    """A block shape ``prepare_update`` checked whole and took as given: per declared column
    (in declaration order) its name, dtype and full shape (rows included), and the commit
    buffer each column's rows are copied into (``buffers``).  Compared by identity: one
    object per shape a block's writer state has taken."""

    __slots__ = ("columns", "rows", "buffers")

    def __init__(self, columns: Tuple[Tuple[str, np.dtype, Tuple[int, ...]], ...], rows: int,
                 buffers: Tuple[Tuple[str, "ColumnBuffer"], ...]) -> None:
        self.columns, self.rows, self.buffers = columns, rows, buffers


class Update:
    """One buffered (or the last committed) block update.  ``columns`` of a pending update
    are views into the block's commit buffers; precision columns hold the values as given
    until the commit rounds them (all of a commit's rows at once).  ``tentative``: the
    update differs from the one before it only in precision columns before rounding — the
    commit decides whether it is an update at all (its rounded values may repeat).
    ``shape``: the ``BlockWriter.shape`` it has when ``prepare_update`` took its columns as
    given (None otherwise)."""

    __slots__ = ("ordinal", "rows", "columns", "masks", "tentative", "shape")

    def __init__(self, ordinal: int, rows: int, columns: Dict[str, np.ndarray], masks: Dict[str, np.ndarray],
                 tentative: bool = False, shape: Optional[CheckedShape] = None) -> None:
        self.ordinal, self.rows, self.columns, self.masks = ordinal, rows, columns, masks
        self.tentative, self.shape = tentative, shape


def _same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    """Bitwise equality of two arrays (dtype, shape, every bit; strings by value)."""
    if x.dtype != y.dtype or x.shape != y.shape:
        return False
    if x.dtype == object:
        return bool(x.ravel().tolist() == y.ravel().tolist())
    if x.size:  # moving coordinates differ at once: one value first (a NaN decides nothing)
        a = x.item(0)
        if a != y.item(0) and a == a:
            return False
    return x.tobytes() == y.tobytes()


SAME, CHANGED, TENTATIVE = 0, 1, 2


def compare(base: Update, update: Update, precise: AbstractSet[str] = frozenset()) -> int:
    """Bitwise change detection (§6, ``trajectory#I15``) of ``update`` against ``base``:
    ``SAME``, ``CHANGED``, or ``TENTATIVE`` when only the ``precise`` (precision) columns
    differ as given — their stored values are rounded, and the rounded ones may not differ.
    Rows, values and masks (absent = all-true) count.  Two updates of the same checked shape
    (``prepare_update``: same columns, dtypes and shapes, no masks) compare by values alone."""
    shape = update.shape
    if shape is not None and base.shape is shape:
        return _compare_values(base.columns, update.columns, precise)
    if base.rows != update.rows:
        return CHANGED
    before = base.columns
    if before.keys() != update.columns.keys():
        return CHANGED
    if base.masks or update.masks:
        for c in set(base.masks) | set(update.masks):
            ma, mb = base.masks.get(c), update.masks.get(c)
            ma = np.ones(base.rows, bool) if ma is None else ma
            mb = np.ones(update.rows, bool) if mb is None else mb
            if not np.array_equal(ma, mb):
                return CHANGED
    verdict = SAME
    for c, x in update.columns.items():
        if c in precise:
            if verdict == SAME and not _same_bits(before[c], x):
                verdict = TENTATIVE
        elif not _same_bits(before[c], x):
            return CHANGED
    return verdict


def _compare_values(before: Dict[str, np.ndarray], after: Dict[str, np.ndarray], precise: AbstractSet[str]) -> int:
    """:func:`compare` of two updates of one checked shape: values only, bitwise (the first
    value of each column first: moving coordinates differ there at once).  A checked shape
    holds no string column (``BlockWriter.plain``), so bytes are the values."""
    verdict = SAME
    for c, x in after.items():
        if verdict and c in precise:  # TENTATIVE already: only a non-precision column can say more
            continue
        y = before[c]
        if x.size:
            a = x.item(0)
            differs = a != y.item(0) and a == a or x.tobytes() != y.tobytes()
        else:
            differs = False
        if differs:
            if c not in precise:
                return CHANGED
            verdict = TENTATIVE
    return verdict


def same_content(a: Update, b: Update) -> bool:
    """Bitwise equality (§6, ``trajectory#I15``): rows, values, masks (absent = all-true)."""
    return compare(a, b) == SAME


class ColumnBuffer:
    """The rows of one column's pending updates, side by side, in a buffer reused from
    commit to commit (grown by doubling when a commit holds more): a commit rounds and lands
    them in one piece, and an append copies the caller's values in once."""

    def __init__(self, dtype: np.dtype, trailing: Tuple[int, ...]) -> None:
        self.dtype, self.trailing = dtype, trailing
        self.data = np.empty((0,) + trailing, dtype)
        self.used = 0
        self._rounded: Optional[np.ndarray] = None  # the rounded rows of a precision column

    def reserve(self, rows: int) -> None:
        if rows > self.data.shape[0]:
            grown = np.empty((max(rows, 2 * self.data.shape[0]),) + self.trailing, self.dtype)
            grown[:self.used] = self.data[:self.used]
            self.data = grown

    def rounded(self, precision: float) -> np.ndarray:
        """The held rows on the precision grid, in a second buffer reused from commit to
        commit (valid until the next commit's rounding)."""
        if self._rounded is None or self._rounded.shape[0] < self.data.shape[0]:
            self._rounded = np.empty_like(self.data)
        return round_to_precision(self.rows(), precision, out=self._rounded[:self.used])

    def add(self, values: np.ndarray) -> np.ndarray:
        """Copy ``values`` in after the rows held; their view in the buffer."""
        start = self.used
        end = start + values.shape[0]
        if end > self.data.shape[0]:
            self.reserve(end)
        view = self.data[start:end]
        view[...] = values
        self.used = end
        return view

    def rows(self) -> np.ndarray:
        return self.data[:self.used]


class BlockWriter:
    """Writer state of one declared block: ``mode`` is ``none`` (no update yet),
    ``regular`` (elision markers, §8.3) or ``indexed`` (CSR ``step_index``/``offset``)."""

    def __init__(self, name: str, spec: BlockSpec) -> None:
        self.name, self.spec = name, spec
        self.group: Optional[Group] = None
        self.columns: Dict[str, Array] = {}
        self.masks: Dict[str, Array] = {}
        self.step_index: Optional[Array] = None
        self.offset: Optional[Array] = None
        self.mode = "none"
        self.uniform_rows = 0
        self.n_updates = 0  # committed
        self.total = 0  # committed rows
        self.pending: List[Update] = []
        self.last: Optional[Update] = None
        self.precise = frozenset(c for c, s in spec.columns.items() if s.precision is not None)
        # per column: (numpy dtype, ndim, trailing) a caller's array needs to skip conversion
        self.plain: Dict[str, Tuple[np.dtype, int, Tuple[int, ...]]] = {
            c: (np.dtype(COLUMN_DTYPES[s.dtype]), 1 + len(s.trailing), tuple(s.trailing))
            for c, s in spec.columns.items()
            if s.dtype != "string" and (c not in VOCABULARY or (VOCABULARY[c] == s.dtype and not s.trailing))}
        self.buffers: Dict[str, ColumnBuffer] = {
            c: ColumnBuffer(np.dtype(COLUMN_DTYPES[s.dtype]), tuple(s.trailing))
            for c, s in spec.columns.items() if s.dtype != "string"}
        self.shape: Optional[CheckedShape] = None  # the last shape prepare_update checked whole
        self.shapes: Dict[Tuple[Tuple[str, np.dtype, Tuple[int, ...]], ...], CheckedShape] = {}  # one object each

    @property
    def nullable(self) -> List[str]:
        return [c for c, s in self.spec.columns.items() if s.nullable]

    def stays_regular(self, ups: List[Update]) -> bool:
        if self.mode == "indexed" or not self.spec.columns:
            return False  # a block without columns always keeps its index
        n = self.uniform_rows if self.mode == "regular" else ups[0].rows
        return n > 0 and all(u.ordinal == self.n_updates + k and u.rows == n for k, u in enumerate(ups))

    def base(self) -> Optional[Update]:
        """What the next update is compared with: the last buffered one, else the last committed."""
        return self.pending[-1] if self.pending else self.last

    def accept(self, update: Update, tentative: bool) -> None:
        """Buffer a checked update: its values are copied into the commit buffers (strings
        copied as they are), so the caller may reuse its arrays."""
        columns = update.columns
        shape = update.shape
        if shape is not None:  # every column native, buffered, of the shape's rows: copied in place
            rows = shape.rows
            for column, buffer in shape.buffers:
                start = buffer.used
                end = start + rows
                data = buffer.data
                if end > len(data):
                    buffer.reserve(end)
                    data = buffer.data
                view = data[start:end]
                view[...] = columns[column]
                buffer.used = end
                columns[column] = view
        else:
            buffers = self.buffers
            for column, values in columns.items():
                held = buffers.get(column)
                columns[column] = values.copy() if held is None else held.add(values)
        update.tentative = tentative
        self.pending.append(update)

    def reserve(self, frames: int, rows: int) -> None:
        """Size the commit buffers for ``frames`` updates of ``rows`` rows."""
        for buffer in self.buffers.values():
            buffer.reserve(frames * rows)

    def take_pending(self) -> Tuple[List[Update], Dict[str, np.ndarray]]:
        """The pending updates that are updates, and each column's committed rows (precision
        columns rounded, §8 ``frame-and-types#14.45``: every row of the commit at once);
        tentative updates whose rounded values repeat the update before them are dropped
        (§6: an unchanged block is not an update).  Empties the buffers."""
        ups = self.pending
        values: Dict[str, np.ndarray] = {}
        for column, cspec in self.spec.columns.items():
            buffer = self.buffers.get(column)
            if buffer is None:
                values[column] = np.concatenate([u.columns[column] for u in ups]) if ups else np.empty(0, object)
            elif cspec.precision is not None:
                values[column] = buffer.rounded(cspec.precision)
            else:
                values[column] = buffer.rows()
        keep = self._repeats(ups, values)
        if keep is not None:
            ups = [u for u, k in zip(ups, keep) if k]
            row_keep = np.repeat(keep, [u.rows for u in self.pending])
            values = {c: v[row_keep] for c, v in values.items()}
        return ups, values

    def _repeats(self, ups: List[Update], values: Dict[str, np.ndarray]) -> Optional[np.ndarray]:
        """Which pending updates stay (None: all): a tentative update goes when every
        precision column's rounded rows equal those of the update before it (bitwise)."""
        tentative = np.fromiter((u.tentative for u in ups), bool, len(ups))
        if not tentative.any():
            return None
        bounds = np.cumsum([0] + [u.rows for u in ups])
        undecided = tentative.copy()
        rows = ups[0].rows
        if rows and all(u.rows == rows for u in ups):  # the first values of every update at once
            for column in self.precise:
                first = values[column].reshape(len(ups), -1)[:, 0].view(np.uint64)
                before = np.empty_like(first)
                before[1:] = first[:-1]
                if undecided[0]:  # a tentative first update has the last committed one as base
                    assert self.last is not None, "compare() found a base"
                    before[0] = self.last.columns[column].reshape(-1)[:1].view(np.uint64)[0]
                undecided &= first == before
                if not undecided.any():
                    return None
        keep = np.ones(len(ups), bool)
        for j in np.flatnonzero(undecided):
            lo, hi = int(bounds[j]), int(bounds[j + 1])
            same = True
            for column in self.precise:
                now = values[column][lo:hi]
                if j:
                    prev = values[column][int(bounds[j - 1]):lo]
                else:
                    assert self.last is not None, "a first tentative update has a committed base"
                    prev = self.last.columns[column]
                if not _same_bits(np.ascontiguousarray(prev), np.ascontiguousarray(now)):
                    same = False
                    break
            keep[j] = not same
        return None if keep.all() else keep

    def clear_pending(self, ups: List[Update], values: Dict[str, np.ndarray]) -> None:
        """After a commit: the last update kept as the next base (its own copy of the
        committed rows), the buffers emptied."""
        if ups:
            n = ups[-1].rows
            tail = {c: v[v.shape[0] - n:].copy() for c, v in values.items()}
            self.last = Update(ups[-1].ordinal, n, tail, ups[-1].masks)
        self.pending = []
        for buffer in self.buffers.values():
            buffer.used = 0


def prepare_update(state: BlockWriter, blk: Block, ordinal: int) -> Update:
    """Validate one presented block against the pin; its values as given (a precision
    column is rounded at the commit, ``BlockWriter.take_pending``).

    A block of exactly the shape checked whole last time (``BlockWriter.shape``: the declared
    columns' names, dtypes and shapes, native arrays taken as given; no masks, precision,
    targets or structural shape stated) is taken without the per-column checks: they
    depend on that shape alone (``trajectory#W18``–``#W26``).  Anything else is checked
    whole, and a block that passes as given becomes the shape."""
    shape = state.shape
    if shape is not None and type(blk) is Block and not (blk.masks or blk.precision or blk.targets) \
            and blk.structural_shape is None:
        given = blk.columns
        if len(given) == len(shape.columns):
            columns: Dict[str, np.ndarray] = {}
            for column, dtype, full in shape.columns:
                values = given.get(column)
                if type(values) is not np.ndarray or values.shape != full or (
                        values.dtype is not dtype and values.dtype != dtype):
                    break
                columns[column] = values
            else:
                rows = shape.rows
                if blk.count is None or int(blk.count) == rows:
                    return Update(ordinal, rows, columns, {}, False, shape)
    return _prepare_whole(state, blk, ordinal)


def _prepare_whole(state: BlockWriter, blk: Block, ordinal: int) -> Update:
    """:func:`prepare_update`'s every check; a block taken as given sets the state's shape."""
    name, spec = state.name, state.spec
    node = f"/trajectory/{name}"
    where = f"trajectory frame {ordinal}: block {name!r}"
    if not isinstance(blk, Block):
        raise InvalidValueError(f"{where} is not a Block")
    given = blk.columns
    if len(given) != len(spec.columns) or any(c not in spec.columns for c in given):
        for column in given:
            if column not in spec.columns:
                raise spec_error("W18", f"{where}: column {column!r} is not declared in the sequence schema", f"{node}/{column}")
        missing = [c for c in spec.columns if c not in given]
        raise spec_error("W20", f"{where} lacks declared column(s) {missing}; a present block carries every column", node)
    columns: Dict[str, np.ndarray] = {}
    plain = state.plain
    as_given = bool(spec.columns) and type(blk) is Block and not (blk.masks or blk.precision or blk.targets) \
        and blk.structural_shape is None
    for column, cspec in spec.columns.items():
        values = given[column]
        fast = plain.get(column)
        if not (fast is not None and type(values) is np.ndarray and values.dtype == fast[0]
                and values.ndim == fast[1] and (fast[1] == 1 or values.shape[1:] == fast[2])):
            values = _checked_column(column, cspec, values, where, f"{node}/{column}")
            as_given = False
        if blk.precision:
            stated = blk.precision.get(column)
            if stated is not None and (cspec.precision is None or float(stated) != cspec.precision):
                raise spec_error("W25", f"{where}: column {column!r} states precision {stated!r} but the pin has "
                                 f"{cspec.precision!r}", f"{node}/{column}")
        if blk.targets:
            target = blk.targets.get(column)
            if target is not None and target != spec.targets.get(column):
                raise spec_error("W26", f"{where}: column {column!r} states target {target!r} but the pin has "
                                 f"{spec.targets.get(column)!r}", f"{node}/{column}")
        columns[column] = values
    for column in blk.targets:
        if column not in spec.columns:
            raise spec_error("W26", f"{where}: target stated for undeclared column {column!r}", node)
    lengths = {v.shape[0] for v in columns.values()}
    if len(lengths) > 1:
        raise spec_error("W19", f"{where}: columns disagree on the row count ({sorted(lengths)})", node)
    rows = lengths.pop() if lengths else blk.nrows
    if blk.count is not None and int(blk.count) != rows:
        raise spec_error("W19", f"{where}: count {blk.count} but the columns have {rows} rows", node)
    if spec.structural_shape is not None and rows != prod(spec.structural_shape):
        raise spec_error("W21", f"{where} has {rows} rows; its structural shape {list(spec.structural_shape)} "
                         f"needs {prod(spec.structural_shape)} rows", node)
    if blk.structural_shape is not None and tuple(blk.structural_shape) != spec.structural_shape:
        raise spec_error("W21", f"{where} states structural shape {list(blk.structural_shape)}, the pin "
                         f"{spec.structural_shape}", node)
    masks: Dict[str, np.ndarray] = {}
    for column, mask in blk.masks.items():
        cnode = f"{node}/_validity/{column}"
        mask_spec = spec.columns.get(column)
        if mask_spec is None:
            raise spec_error("W18", f"{where}: mask for undeclared column {column!r}", cnode)
        if not mask_spec.nullable:
            raise spec_error("W24", f"{where}: column {column!r} of block {name!r} is non-nullable in the pin "
                             "and cannot carry a mask", cnode)
        mask = np.asarray(mask)
        if mask.dtype != np.bool_ or mask.shape != (rows,):
            raise spec_error("W24", f"{where}: mask of {column!r} must be bool[{rows}], got {mask.dtype}{list(mask.shape)}", cnode)
        masks[column] = mask.copy()
    if as_given:
        key = tuple([(c, v.dtype, v.shape) for c, v in columns.items()])
        shape = state.shapes.get(key)
        if shape is None:
            if len(state.shapes) >= 1024:
                state.shapes.clear()
            shape = state.shapes[key] = CheckedShape(key, rows, tuple((c, state.buffers[c]) for c in columns))
        state.shape = shape
        return Update(ordinal, rows, columns, masks, False, shape)
    return Update(ordinal, rows, columns, masks)


def _checked_column(column: str, cspec: ColumnSpec, raw: object, where: str, cnode: str) -> np.ndarray:
    """A caller's column converted and checked against the pin (``as_column``, W19)."""
    try:
        values = as_column(column, raw, cnode)
    except SpecViolationError as exc:
        raise spec_error("W19", f"{where}: {exc.message}", cnode) from None
    dtype = column_dtype_of(values)
    if dtype != cspec.dtype or tuple(values.shape[1:]) != tuple(cspec.trailing):
        raise spec_error("W19", f"sequence schema mismatch: {where}, column {column!r}: expected {cspec.dtype} "
                         f"with trailing {list(cspec.trailing)}, found {dtype} with trailing {list(values.shape[1:])}", cnode)
    return values


def check_index(ordinals: np.ndarray, block: str) -> None:
    if ordinals.size > 1 and not np.all(ordinals[1:] > ordinals[:-1]):
        raise spec_error("R7", f"block {block!r}: step_index must increase strictly", f"/trajectory/{block}/step_index")


def check_offsets(offsets: np.ndarray, block: str) -> None:
    node = f"/trajectory/{block}/offset"
    if offsets.size == 0 or offsets[0] != 0:
        raise spec_error("R8", f"block {block!r}: offset must start at 0", node)
    if offsets.size > 1 and not np.all(offsets[1:] >= offsets[:-1]):
        raise spec_error("R8", f"block {block!r}: offset is non-monotonic", node)


def check_column_array(arr: Array, block: str, column: str, dtype: str, trailing: Sequence[int], rule: str) -> None:
    node = f"/trajectory/{block}/{column}"
    stored = ZARR_TO_COLUMN.get(arr.metadata.dtype.name)
    if stored is None:
        raise spec_error("R12", f"column {column!r} of block {block!r} is stored as {arr.metadata.dtype.name}, "
                         "not one of the 13 column dtypes (narrow floats are not read; F = f64)", node)
    canonical = VOCABULARY.get(column)
    if rule == "R12" and canonical is not None and stored != canonical:
        raise spec_error("R13", f"column {column!r} of block {block!r} is stored as {stored}; the canonical key "
                         f"is {canonical}, and a store is not converted on read", node)
    if stored != dtype or tuple(arr.shape[1:]) != tuple(trailing):
        raise spec_error(rule, f"sequence schema mismatch at {node}: expected {dtype} with trailing {list(trailing)}, "
                         f"found {stored} with trailing {list(arr.shape[1:])}", node)


MARKERS = ("uniform_rows", "dense_updates")


def block_layout(group: Group, name: str, spec: BlockSpec, columns: Dict[str, Array],
                 nstep: int) -> Tuple[str, np.ndarray, np.ndarray, Optional[int]]:
    """How a block's committed updates are found (§8.1, §8.3, §11): ``(kind, ordinals,
    offsets, uniform_rows)`` with ``kind`` in ``none``/``regular``/``indexed``.  Index arrays
    beside markers win (a crash mid-switch, ``trajectory#N7``); an ``offset`` without
    ``step_index`` is an interrupted first index (no update)."""
    kind, count, uniform, ordinals, offsets = find_updates(group, name, spec, columns, nstep)
    if kind == "regular":
        assert uniform is not None
        return kind, np.arange(count, dtype=np.int64), np.arange(count + 1, dtype=np.int64) * uniform, uniform
    assert ordinals is not None and offsets is not None
    return kind, ordinals, offsets, None


def find_updates(group: Group, name: str, spec: BlockSpec, columns: Dict[str, Array], nstep: int,
                 unknown: Container[str] = ()) -> Tuple[str, int, Optional[int], Optional[np.ndarray], Optional[np.ndarray]]:
    """:func:`block_layout` without materialising a regular block's updates: ``(kind, count,
    uniform_rows, ordinals, offsets)``, the arrays None for ``regular`` (update j is frame j,
    rows ``j*uniform:(j+1)*uniform``) — what a reader of a long trajectory keeps.
    ``unknown``: columns whose length cannot be known (damaged), left out of the shortest."""
    node = f"/trajectory/{name}"
    attrs = dict(group.attrs)
    si, off = group.get("step_index"), group.get("offset")
    if isinstance(si, Array):
        if not isinstance(off, Array):
            raise spec_error("R8", f"block {name!r} has a step_index but no offset", node)
        if si.ndim != 1 or off.ndim != 1:
            raise spec_error("R8", f"block {name!r}: index arrays must be one-dimensional", node)
        raw = si[...].astype(np.int64) if si.shape[0] else np.zeros(0, np.int64)
        n = prefix_below(raw, nstep)
        ordinals = raw[:n]
        check_index(ordinals, name)
        if off.shape[0] < n + 1:
            raise spec_error("R8", f"block {name!r}: offsets missing for its {n} updates", f"{node}/offset")
        offsets = off[0:n + 1].astype(np.int64)
        check_offsets(offsets, name)
        return "indexed", n, None, ordinals, offsets
    markers = [k for k in MARKERS if k in attrs]
    if markers:
        uniform, dense = attrs.get("uniform_rows"), attrs.get("dense_updates")
        if len(markers) != 2:
            raise spec_error("R9", f"block {name!r}: elision marker {markers[0]!r} without its pair", node)
        if type(uniform) is not int or uniform <= 0:
            raise spec_error("R9", f"block {name!r}: uniform_rows {uniform!r} is not a positive integer", node)
        if dense is not True:
            raise spec_error("R9", f"block {name!r}: dense_updates {dense!r} is not true", node)
        if not spec.columns:
            raise spec_error("R9", f"block {name!r} has no columns, so it cannot carry elision markers", node)
        lengths = [columns[c].shape[0] if c in columns else 0 for c in spec.columns if c not in unknown] or [0]
        n = min(min(lengths) // uniform, nstep)  # the SHORTEST column (decision 4)
        return "regular", n, uniform, None, None
    return "none", 0, None, np.zeros(0, np.int64), np.zeros(1, np.int64)


class BlockReader:
    """Reader state of one block: its arrays and its committed updates (``kind`` as
    ``find_updates`` found them: ``none``, ``regular`` or ``indexed``; ``count`` updates).
    A regular block's ``ordinals``/``offsets`` are made only when asked for (update j is
    frame j, rows ``j*uniform:(j+1)*uniform``): a reader of 10^7 frames does not hold them."""

    def __init__(self, name: str, spec: BlockSpec) -> None:
        self.name, self.spec = name, spec
        self.kind = "none"
        self.columns: Dict[str, Array] = {}
        self.masks: Dict[str, Array] = {}
        self.damaged: Dict[str, MolrecError] = {}  # column -> why it cannot be read (layout.py)
        self.count = 0
        self.uniform: Optional[int] = None
        self._ordinals: Optional[np.ndarray] = np.zeros(0, np.int64)
        self._offsets: Optional[np.ndarray] = np.zeros(1, np.int64)

    def set_updates(self, kind: str, count: int, uniform: Optional[int], ordinals: Optional[np.ndarray],
                    offsets: Optional[np.ndarray]) -> None:
        """Adopt what :func:`find_updates` found."""
        self.kind, self.count, self.uniform = kind, count, uniform
        self._ordinals, self._offsets = ordinals, offsets

    @property
    def ordinals(self) -> np.ndarray:
        """Frame of each committed update."""
        if self._ordinals is None:
            self._ordinals = np.arange(self.count, dtype=np.int64)
        return self._ordinals

    @property
    def offsets(self) -> np.ndarray:
        """Rows of update j: ``offsets[j]:offsets[j+1]``."""
        if self._offsets is None:
            assert self.uniform is not None
            self._offsets = np.arange(self.count + 1, dtype=np.int64) * self.uniform
        return self._offsets

    @property
    def total(self) -> int:
        """Committed rows (all updates)."""
        if self.kind == "regular" and self.uniform is not None:
            return self.count * self.uniform
        return int(self.offsets[-1])

    @property
    def fixed_rows(self) -> Optional[int]:
        """The row count every committed update shares (None: ragged, or no update)."""
        if self.kind == "regular":
            return self.uniform
        found = getattr(self, "_fixed", False)
        if found is False:
            counts = np.diff(self.offsets)
            found = int(counts[0]) if counts.size and bool(np.all(counts == counts[0])) else None
            self._fixed: Optional[int] = found
        return found

    def updates_of(self, frames: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Vectorised :meth:`update_at` and :meth:`rows`: per frame the update in effect (-1
        before the first) and its rows ``lo``/``hi`` (0, 0 where absent)."""
        if self.kind == "regular":
            u = int(self.uniform or 0)
            js = np.minimum(frames, self.count - 1)
            lo = np.maximum(js, 0) * u
            return js, lo, np.where(js >= 0, lo + u, 0)
        offsets = self.offsets
        js = np.searchsorted(self.ordinals, frames, side="right") - 1
        safe = np.maximum(js, 0)
        present = js >= 0
        return (js, np.where(present, offsets[safe], 0),
                np.where(present, offsets[np.minimum(safe + 1, offsets.size - 1)], 0))

    def update_at(self, i: int) -> Optional[int]:
        if self.kind == "regular":
            j = min(i, self.count - 1)
        else:
            j = int(np.searchsorted(self.ordinals, i, side="right")) - 1
        return None if j < 0 else j

    def rows(self, j: int) -> Tuple[int, int]:
        if self.kind == "regular" and self.uniform is not None:
            return j * self.uniform, (j + 1) * self.uniform
        return int(self.offsets[j]), int(self.offsets[j + 1])
