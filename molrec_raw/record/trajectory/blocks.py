"""Blocks of a trajectory (trajectory §6, §8): the updates a writer buffers, their bitwise
change detection, validation against the pin, and how a reader finds the committed updates
(regular markers or CSR ``step_index``/``offset``).
"""
from __future__ import annotations

from math import prod
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from molrec_raw.errors import InvalidValueError, SpecViolationError
from molrec_raw.record.columns import VOCABULARY, ZARR_TO_COLUMN, as_column, column_dtype_of
from molrec_raw.record.model import Block
from molrec_raw.record.precision import round_to_precision
from molrec_raw.record.trajectory.common import spec_error
from molrec_raw.record.trajectory.schema import BlockSpec
from molrec_raw.record.trajectory.storage import prefix_below
from molrec_raw.zarr import Array, Group


class Update:
    __slots__ = ("ordinal", "rows", "columns", "masks")

    def __init__(self, ordinal: int, rows: int, columns: Dict[str, np.ndarray], masks: Dict[str, np.ndarray]) -> None:
        self.ordinal, self.rows, self.columns, self.masks = ordinal, rows, columns, masks


def same_content(a: Update, b: Update) -> bool:
    """Bitwise equality (§6, ``trajectory#I15``): rows, values, masks (absent = all-true)."""
    if a.rows != b.rows or a.columns.keys() != b.columns.keys():
        return False
    for c, x in a.columns.items():
        y = b.columns[c]
        if x.dtype != y.dtype or x.shape != y.shape:
            return False
        if x.dtype == object:
            if x.ravel().tolist() != y.ravel().tolist():
                return False
        else:
            fx, fy = x.ravel(), y.ravel()  # moving coordinates differ at once: test one value first
            if fx[:1].tobytes() != fy[:1].tobytes() or fx.tobytes() != fy.tobytes():
                return False
    for c in set(a.masks) | set(b.masks):
        ma, mb = a.masks.get(c), b.masks.get(c)
        if ma is None and mb is None:
            continue
        ma = np.ones(a.rows, bool) if ma is None else ma
        mb = np.ones(b.rows, bool) if mb is None else mb
        if not np.array_equal(ma, mb):
            return False
    return True


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

    @property
    def nullable(self) -> List[str]:
        return [c for c, s in self.spec.columns.items() if s.nullable]

    def stays_regular(self, ups: List[Update]) -> bool:
        if self.mode == "indexed" or not self.spec.columns:
            return False  # a block without columns always keeps its index
        n = self.uniform_rows if self.mode == "regular" else ups[0].rows
        return n > 0 and all(u.ordinal == self.n_updates + k and u.rows == n for k, u in enumerate(ups))


def prepare_update(state: BlockWriter, blk: Block, ordinal: int) -> Update:
    """Validate one presented block against the pin; the stored (rounded) content."""
    name, spec = state.name, state.spec
    node = f"/trajectory/{name}"
    where = f"trajectory frame {ordinal}: block {name!r}"
    if not isinstance(blk, Block):
        raise InvalidValueError(f"{where} is not a Block")
    for column in blk.columns:
        if column not in spec.columns:
            raise spec_error("W18", f"{where}: column {column!r} is not declared in the sequence schema", f"{node}/{column}")
    missing = [c for c in spec.columns if c not in blk.columns]
    if missing:
        raise spec_error("W20", f"{where} lacks declared column(s) {missing}; a present block carries every column", node)
    columns: Dict[str, np.ndarray] = {}
    for column, cspec in spec.columns.items():
        cnode = f"{node}/{column}"
        try:
            values = as_column(column, blk.columns[column], cnode)
        except SpecViolationError as exc:
            raise spec_error("W19", f"{where}: {exc.message}", cnode) from None
        dtype = column_dtype_of(values)
        if dtype != cspec.dtype or tuple(values.shape[1:]) != tuple(cspec.trailing):
            raise spec_error("W19", f"sequence schema mismatch: {where}, column {column!r}: expected {cspec.dtype} "
                             f"with trailing {list(cspec.trailing)}, found {dtype} with trailing {list(values.shape[1:])}", cnode)
        stated = blk.precision.get(column)
        if stated is not None and (cspec.precision is None or float(stated) != cspec.precision):
            raise spec_error("W25", f"{where}: column {column!r} states precision {stated!r} but the pin has "
                             f"{cspec.precision!r}", cnode)
        if cspec.precision is not None:
            values = round_to_precision(values, cspec.precision)
        target = blk.targets.get(column)
        if target is not None and target != spec.targets.get(column):
            raise spec_error("W26", f"{where}: column {column!r} states target {target!r} but the pin has "
                             f"{spec.targets.get(column)!r}", cnode)
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
    return Update(ordinal, rows, columns, masks)


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
        return "indexed", ordinals, offsets, None
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
        lengths = [columns[c].shape[0] if c in columns else 0 for c in spec.columns]
        n = min(min(lengths) // uniform, nstep)  # the SHORTEST column (decision 4)
        return ("regular", np.arange(n, dtype=np.int64),
                np.arange(n + 1, dtype=np.int64) * uniform, uniform)
    return "none", np.zeros(0, np.int64), np.zeros(1, np.int64), None


class BlockReader:
    """Reader state of one block: its arrays and its committed updates (``kind`` as
    ``block_layout`` found them: ``none``, ``regular`` or ``indexed``)."""

    def __init__(self, name: str, spec: BlockSpec) -> None:
        self.name, self.spec = name, spec
        self.kind = "none"
        self.columns: Dict[str, Array] = {}
        self.masks: Dict[str, Array] = {}
        self.ordinals = np.zeros(0, np.int64)
        self.offsets = np.zeros(1, np.int64)

    def update_at(self, i: int) -> Optional[int]:
        j = int(np.searchsorted(self.ordinals, i, side="right")) - 1
        return None if j < 0 else j

    def rows(self, j: int) -> Tuple[int, int]:
        return int(self.offsets[j]), int(self.offsets[j + 1])

