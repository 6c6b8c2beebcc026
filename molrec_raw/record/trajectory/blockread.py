"""Whole blocks over many frames as arrays (trajectory §9; the xarray backend, the Dask arrays,
MDAnalysis and mdtraj read through these): the :class:`BlockArrays` part of ``MrecReader``.

Every call returns new arrays the caller owns.  Rows come from the read engine's
``gather``: each inner chunk the selected frames touch is read and decoded once, chunks
wholly inside a contiguous run of frames straight into the result.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, Optional, Sequence, Tuple, Union

import numpy as np

from molrec_raw.errors import InvalidValueError
from molrec_raw.record.trajectory.blocks import BlockReader
from molrec_raw.record.trajectory.common import numpy_dtype
from molrec_raw.record.trajectory.engine import ReadEngine
from molrec_raw.record.trajectory.layout import TrajectoryLayout
from molrec_raw.zarr import Array

__all__ = ["BlockArrays", "BlockInfo", "ColumnInfo", "FrameSelection", "frame_indices"]

FrameSelection = Union[None, slice, Sequence[int], np.ndarray]


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


def frame_indices(frames: FrameSelection, n: int) -> np.ndarray:
    """Frame indices of a selection over ``n`` frames: None (all), a slice, or a 1-D array of
    indices (negatives from the end, any order, duplicates allowed).  Out of range:
    ``IndexError``; anything else wrong: ``InvalidValueError``."""
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


class BlockArrays:
    """The whole-block reads of ``MrecReader`` (mixed in; see the module docstring)."""

    _engine: ReadEngine

    @property
    def _state_layout(self) -> TrajectoryLayout:
        return self._engine.layout

    def block_info(self, name: str) -> BlockInfo:
        """The committed layout of block ``name`` and its columns (for tools that read whole
        blocks: the xarray backend, the Dask arrays)."""
        layout = self._state_layout
        if not layout.schema.has_block(name):
            raise InvalidValueError(f"block {name!r} is not declared (declared: {layout.schema.block_names()})")
        spec = layout.schema.block_spec(name)
        layout.refuse_damaged(name, [])
        b = layout.blocks.get(name)
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
                                         None if arr is None else self._engine.axis(arr).rows)
        return BlockInfo(name, "none" if b is None else b.kind, ordinals, offsets, fixed, columns)

    def _fixed_block(self, name: str, frames: FrameSelection,
                     whole_run: bool = True) -> Tuple[BlockReader, int, np.ndarray]:
        """(block, its row count, first row of each selected frame).  The row count must be
        the same for every committed update (``whole_run``) or at the selected frames."""
        layout = self._state_layout
        if not layout.schema.has_block(name):
            raise InvalidValueError(f"block {name!r} is not declared (declared: {layout.schema.block_names()})")
        layout.refuse_damaged(name, [])
        b = layout.blocks.get(name)
        idx = frame_indices(frames, layout.nstep)
        if b is None or not b.count:
            if whole_run or idx.size:
                raise InvalidValueError(f"block {name!r} has no committed update")
            return BlockReader(name, layout.schema.block_spec(name)), 0, np.zeros(0, np.int64)
        fixed = b.fixed_rows
        if whole_run and fixed is None:
            counts = np.diff(b.offsets)
            raise InvalidValueError(
                f"block {name!r} is ragged (its updates have {int(counts.min())} to {int(counts.max())} rows): "
                "a frames x rows array needs a fixed row count; read its frames with read_frame/read_columns")
        j, lo, hi = b.updates_of(idx)
        if idx.size and j.min() < 0:
            first = int(idx[int(np.argmin(j))])
            raise InvalidValueError(f"block {name!r} is absent at frame {first} (its first update is at frame "
                                    f"{int(b.ordinals[0])})")
        counts = hi - lo
        if counts.size and counts.min() != counts.max():
            at = int(idx[int(np.argmax(counts != counts[0]))])
            raise InvalidValueError(f"block {name!r} changes its row count at the selected frames (frame {at} has "
                                    f"{int(counts[counts != counts[0]][0])} rows, frame {int(idx[0])} "
                                    f"{int(counts[0])}); read it per frame")
        rows = fixed if fixed is not None else (int(counts[0]) if counts.size else 0)
        return b, rows, lo

    def _gather(self, arrays: Sequence[Array], b: BlockReader, starts: np.ndarray, rows: int,
                outs: Optional[Sequence[np.ndarray]] = None) -> Any:
        return self._engine.gather(list(arrays), starts, rows, b.total, outs)

    def _block_column(self, b: BlockReader, column: str, starts: np.ndarray, rows: int) -> Array:
        """A column's array, refused when a mask marks any of the selected rows invalid."""
        self._state_layout.refuse_damaged(b.name, [column])
        arr = b.columns.get(column)
        if arr is None:
            raise InvalidValueError(f"column {column!r} of block {b.name!r} has no stored array")
        mask = b.masks.get(column)
        if mask is not None and not self._gather([mask], b, starts, rows)[0].all():
            raise InvalidValueError(
                f"column {column!r} of block {b.name!r} has invalid (masked) rows in the selected frames; "
                "whole-block arrays carry plain values: read masked rows with read_frame/read_columns")
        return arr

    def block_array(self, block: str, columns: Optional[Sequence[str]] = None,
                    frames: FrameSelection = None) -> np.ndarray:
        """``columns`` (default: every column, in pin order) of a block with a fixed row count
        over ``frames`` (default all; a slice or an array of frame indices, negatives from the
        end, any order, duplicates allowed) as one new array of shape ``(frames, rows,
        len(columns))``.  A frame after the block's last update carries that update (§9).
        Each inner chunk the frames need is read and decoded once.  Refused: a ragged block,
        a frame before its first update, columns with trailing axes or differing dtypes,
        masked rows (use ``read_frame``)."""
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
        self._gather(arrays, b, starts, rows, [out[:, :, k] for k in range(len(names))])
        return out

    def block_columns(self, block: str, columns: Optional[Iterable[str]] = None,
                      frames: FrameSelection = None) -> Dict[str, np.ndarray]:
        """``{column: (frames, rows, *trailing)}`` — the per-column form of :meth:`block_array`
        (trailing axes and different dtypes allowed), for tools that read coordinates in
        batches.  The row count must be the same at the selected frames only (a block whose
        atom count changes elsewhere still reads where it does not).  Nullable and
        row-reference columns are refused: read them per frame with ``read_columns``, which
        applies masks and checks references (trajectory#R14, #R16)."""
        layout = self._state_layout
        if not layout.schema.has_block(block):
            raise InvalidValueError(f"block {block!r} is not declared (declared: {layout.schema.block_names()})")
        spec = layout.schema.block_spec(block)
        names = list(spec.columns) if columns is None else [str(c) for c in columns]
        for column in names:
            cspec = spec.columns.get(column)
            if cspec is None:
                raise InvalidValueError(f"({block!r}, {column!r}) is not a declared column")
            if cspec.nullable or column in spec.targets:
                raise InvalidValueError(f"({block!r}, {column!r}) is {'nullable' if cspec.nullable else 'a row reference'}: "
                                        "read it per frame with read_columns")
        b, rows, starts = self._fixed_block(block, frames, whole_run=False)
        layout.refuse_damaged(block, names)
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
        if stored:  # one pass of the engine for every column
            found = self._gather([b.columns[c] for c in stored], b, starts, rows)
            out.update(zip(stored, found))
        return {column: out[column] for column in names}

    def column_array(self, block: str, column: str, frames: FrameSelection = None) -> np.ndarray:
        """One column of a block with a fixed row count over ``frames`` as a new array of
        shape ``(frames, rows, *trailing)`` (see :meth:`block_array` for the rules)."""
        b, rows, starts = self._fixed_block(block, frames)
        if column not in b.spec.columns:
            raise InvalidValueError(f"({block!r}, {column!r}) is not a declared column")
        arr = self._block_column(b, column, starts, rows)
        return self._gather([arr], b, starts, rows)[0]  # type: ignore[no-any-return]

    def mask_array(self, block: str, column: str, frames: FrameSelection = None) -> np.ndarray:
        """The validity flags of a column of a block with a fixed row count over ``frames``,
        shape ``(frames, rows)`` (all true when the column has no mask, trajectory §8.4)."""
        b, rows, starts = self._fixed_block(block, frames)
        if column not in b.spec.columns:
            raise InvalidValueError(f"({block!r}, {column!r}) is not a declared column")
        mask = b.masks.get(column)
        if mask is None:
            return np.ones((len(starts), rows), dtype=bool)
        return self._gather([mask], b, starts, rows)[0]  # type: ignore[no-any-return]

    def _stored_rows(self, arr: Array, b: BlockReader, start: int, stop: int, what: str) -> np.ndarray:
        total = b.total
        if not 0 <= start <= stop <= total:
            raise IndexError(f"rows {start}:{stop} outside the {total} committed rows of block {b.name!r}")
        if stop == start:
            return np.empty((0,) + tuple(arr.shape[1:]), arr.dtype)
        return self._gather([arr], b, np.asarray([start], np.int64), stop - start)[0][0]  # type: ignore[no-any-return]

    def column_rows(self, block: str, column: str, start: int, stop: int) -> np.ndarray:
        """Committed rows ``start:stop`` of a column as stored (all updates concatenated, the
        CSR values of a ragged block; :meth:`block_info` gives the offsets), a new array."""
        self._state_layout.refuse_damaged(block, [column])
        b = self._state_layout.blocks.get(block)
        if b is None or column not in b.spec.columns or column not in b.columns:
            raise InvalidValueError(f"({block!r}, {column!r}) is not a stored column")
        return self._stored_rows(b.columns[column], b, start, stop, "column")

    def column_mask_rows(self, block: str, column: str, start: int, stop: int) -> Optional[np.ndarray]:
        """Validity flags of committed rows ``start:stop`` (None: the column has no mask)."""
        b = self._state_layout.blocks.get(block)
        if b is None or column not in b.masks:
            return None
        return self._stored_rows(b.masks[column], b, start, stop, "mask")
