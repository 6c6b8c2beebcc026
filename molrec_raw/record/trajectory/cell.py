"""The cell of a trajectory (trajectory §7): attribute form while one fixed cell from
ordinal 0, array form (``step_index``, ``origin``, ``boundary``, ``vectors`` last) otherwise.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from molrec_raw.errors import InvalidValueError
from molrec_raw.record.model import Box
from molrec_raw.record.trajectory import extents as ext
from molrec_raw.record.trajectory.blocks import check_index
from molrec_raw.record.trajectory.common import spec_error
from molrec_raw.record.trajectory.storage import born, grow, prefix_below
from molrec_raw.zarr import Array, Group

IDENTITY = np.eye(3)
Flags = Tuple[bool, bool, bool]


def three_flags(values: Any) -> Flags:
    """Three periodic flags as plain bools (the caller has checked there are three)."""
    x, y, z = (bool(b) for b in values)
    return (x, y, z)
ALL_PERIODIC = (True, True, True)


class Cell:
    __slots__ = ("ordinal", "vectors", "origin", "boundary", "defined")

    def __init__(self, ordinal: int, vectors: np.ndarray, origin: np.ndarray, boundary: Flags, defined: bool) -> None:
        self.ordinal, self.vectors, self.origin, self.boundary, self.defined = ordinal, vectors, origin, boundary, defined

    def same(self, other: "Cell") -> bool:
        return (self.defined == other.defined and self.boundary == other.boundary
                and self.vectors.tobytes() == other.vectors.tobytes() and self.origin.tobytes() == other.origin.tobytes())

    def box(self) -> Box:
        return Box(self.vectors.copy(), self.origin.copy(), self.boundary, self.defined)


def prepare_cell(box: Any, ordinal: int, defined_before: Optional[bool]) -> Cell:
    """A presented cell, checked (``trajectory#W29``); an undefined cell is stored with
    identity vectors and all-false boundary (§7)."""
    where = f"trajectory frame {ordinal}: the cell"
    if not isinstance(box, Box):
        raise InvalidValueError(f"{where} is not a Box")
    vectors, origin = np.asarray(box.vectors), np.asarray(box.origin)
    flags = tuple(bool(b) for b in box.boundary)
    if vectors.shape != (3, 3) or origin.shape != (3,) or len(flags) != 3:
        raise spec_error("W29", f"{where} needs vectors 3x3, origin of 3 and boundary of 3", "/trajectory/box")
    if vectors.dtype.kind not in "fiu" or origin.dtype.kind not in "fiu":
        raise spec_error("W29", f"{where}: vectors and origin must be real numbers", "/trajectory/box")
    vectors, origin = vectors.astype(np.float64), origin.astype(np.float64)
    boundary = three_flags(flags)
    defined = bool(box.defined)
    if not defined and any(boundary):
        raise spec_error("W29", f"{where}: an undefined cell cannot be periodic in any direction", "/trajectory/box")
    if defined_before is not None and defined != defined_before:
        raise spec_error("W29", f"{where}: cell_defined is one flag for the whole box section; this cell is "
                         f"{'defined' if defined else 'undefined'} but earlier cells are not", "/trajectory/box")
    if not defined:
        vectors = IDENTITY.copy()
    return Cell(ordinal, vectors, origin, boundary, defined)


class BoxWriter:
    """Writer state of ``box/``: ``form`` is ``none``, ``attrs`` (fixed cell from ordinal 0)
    or ``arrays``."""

    def __init__(self) -> None:
        self.form = "none"
        self.group: Optional[Group] = None
        self.defined: Optional[bool] = None
        self.arrays: Dict[str, Array] = {}
        self.n_updates = 0
        self.pending: List[Cell] = []
        self.last: Optional[Cell] = None
        self.attr_cell: Optional[Cell] = None

    def commit(self, tgroup: Group, touched: List[str]) -> None:
        if not self.pending:
            return
        ups = self.pending
        if self.form == "none" and len(ups) == 1 and ups[0].ordinal == 0:
            cell = ups[0]
            attrs: Dict[str, Any] = {} if cell.defined else {"cell_defined": False}
            attrs["vectors"] = cell.vectors.tolist()
            if np.any(cell.origin != 0) or np.signbit(cell.origin).any():
                attrs["origin"] = cell.origin.tolist()
            if cell.boundary != ALL_PERIODIC:
                attrs["boundary"] = list(cell.boundary)
            self.group = tgroup.create_group("box", attributes=attrs, overwrite=True)
            touched.append(f"{self.group.path}/zarr.json")
            self.form, self.attr_cell = "attrs", cell
        else:
            history: List[Cell] = [self.attr_cell] if self.attr_cell is not None and self.form == "attrs" else []
            if self.group is None:
                self.group = tgroup.create_group("box", attributes={} if ups[0].defined else {"cell_defined": False},
                                                 overwrite=True)
            self._land(history, ups, touched)
            if history:  # migrated from the attribute form: the cell attributes are withdrawn
                self.group.attrs.put({} if history[0].defined else {"cell_defined": False})
                touched.append(f"{self.group.path}/zarr.json")
            self.form = "arrays"
        self.n_updates += len(ups)
        self.last = ups[-1]
        self.pending = []

    def _land(self, history: List["Cell"], ups: List["Cell"], touched: List[str]) -> None:
        """Auxiliary arrays first (born complete or grown), ``vectors`` last: its presence
        and length are what a reader goes by."""
        n = self.n_updates
        dense = (ext.DENSE_ROWS, ext.DENSE_CHUNKS_PER_SHARD)
        cells = history + ups  # history is the attribute cell when migrating
        first = n - len(history)  # row of cells[0]
        total = n + len(ups)
        g = self.group
        assert g is not None, "commit() creates box/ before landing arrays"

        def put(name: str, values: np.ndarray, tag: str, backfill: Any) -> None:
            arr = self.arrays.get(name)
            if arr is None:
                if first:
                    values = np.concatenate([np.broadcast_to(backfill, (first,) + values.shape[1:]), values])
                self.arrays[name] = born(g, name, values, *dense, ext.dense_codecs(tag), touched)
            else:
                grow(arr, n, values[len(history):], touched)

        ordinals = np.asarray([c.ordinal for c in cells], np.uint64)
        if "step_index" in self.arrays or not (total == 1 and ordinals[0] == 0):
            put("step_index", ordinals, "u64", np.uint64(0))
        origins = np.stack([c.origin for c in cells])
        if "origin" in self.arrays or np.any(origins != 0) or np.signbit(origins).any():
            put("origin", origins, "f64", 0.0)
        bounds = np.asarray([c.boundary for c in cells], bool)
        if "boundary" in self.arrays or not bounds.all():
            put("boundary", bounds, "bool", True)
        put("vectors", np.stack([c.vectors for c in cells]), "f64", 0.0)


def _box_attr_values(attrs: Dict[str, Any], name: str, shape: Tuple[int, ...], kind: str) -> Any:
    raw = attrs.get(name)
    try:
        if kind == "bool":
            if type(raw) is not list or len(raw) != 3 or not all(type(b) is bool for b in raw):
                raise ValueError
            return three_flags(raw)
        value = np.asarray(raw, dtype=np.float64)
        flat = raw if name != "vectors" else [x for row in raw for x in row] if type(raw) is list and all(type(r) is list for r in raw) else None
        if value.shape != shape or flat is None or not all(type(x) in (int, float) for x in flat):
            raise ValueError
        return value
    except (ValueError, TypeError):
        raise spec_error("R15", f"box attribute {name} {raw!r} is malformed (vectors 3x3, origin/boundary 3 values)",
                         "/trajectory/box") from None


class BoxReader:
    """The committed cells of ``box/`` (all held in memory: one row per change)."""

    def __init__(self, tgroup: Group, nstep: int) -> None:
        self.ordinals = np.zeros(0, np.int64)
        self.cells: List[Cell] = []
        self.lengths: Dict[str, int] = {}  # path -> committed rows of each box array read
        g = tgroup.get("box")
        if not isinstance(g, Group) or nstep == 0:
            return
        attrs = dict(g.attrs)
        defined = attrs.get("cell_defined", True)
        if type(defined) is not bool:
            raise spec_error("R15", f"cell_defined {defined!r} is not a JSON boolean", "/trajectory/box")
        vec = g.get("vectors")
        if isinstance(vec, Array):
            si = g.get("step_index")
            if isinstance(si, Array):
                raw = si[...].astype(np.int64) if si.shape[0] else np.zeros(0, np.int64)
                ordinals = raw[:prefix_below(raw, nstep)]
                check_index(ordinals, "box")
            else:
                ordinals = np.zeros(1 if vec.shape[0] else 0, np.int64)
            n = len(ordinals)
            if vec.shape[1:] != (3, 3) or vec.shape[0] < n:
                raise spec_error("R15", f"box/vectors of shape {vec.shape} cannot hold {n} cells", "/trajectory/box/vectors")
            vectors = vec[0:n] if n else np.zeros((0, 3, 3))
            origin_arr, bound_arr = g.get("origin"), g.get("boundary")
            origins = np.zeros((n, 3))
            if isinstance(origin_arr, Array):
                if origin_arr.shape[1:] != (3,) or origin_arr.shape[0] < n:
                    raise spec_error("R15", "box/origin is not [n][3]", "/trajectory/box/origin")
                origins = origin_arr[0:n] if n else origins
            bounds = np.full((n, 3), defined)
            if isinstance(bound_arr, Array):
                if bound_arr.metadata.dtype.name != "bool" or bound_arr.shape[1:] != (3,) or bound_arr.shape[0] < n:
                    raise spec_error("R15", "box/boundary is not bool[n][3]", "/trajectory/box/boundary")
                bounds = bound_arr[0:n] if n else bounds
            rows = [(vectors[j], origins[j], three_flags(bounds[j])) for j in range(n)]
            for arr in (si, vec, origin_arr, bound_arr):
                if isinstance(arr, Array):
                    self.lengths[arr.path] = n
        elif "vectors" in attrs:
            ordinals = np.zeros(1, np.int64)
            v = _box_attr_values(attrs, "vectors", (3, 3), "f64")
            o = _box_attr_values(attrs, "origin", (3,), "f64") if "origin" in attrs else np.zeros(3)
            b = _box_attr_values(attrs, "boundary", (3,), "bool") if "boundary" in attrs else (defined, defined, defined)
            rows = [(v, o, b)]
        else:
            return
        for j, (v, o, b) in enumerate(rows):
            if not defined and any(b):
                raise spec_error("R15", "a periodic flag on an undefined cell", "/trajectory/box")
            self.cells.append(Cell(int(ordinals[j]), IDENTITY.copy() if not defined else np.asarray(v, np.float64),
                                   np.asarray(o, np.float64), b, defined))
        self.ordinals = ordinals

    @classmethod
    def empty(cls) -> "BoxReader":
        """The cell of a trajectory without one (no frame has a cell)."""
        self = cls.__new__(cls)
        self.ordinals, self.cells, self.lengths = np.zeros(0, np.int64), [], {}
        return self

    def at(self, i: int) -> Optional[Box]:
        """The cell in effect at frame ``i`` (None before the first), arrays of its own."""
        j = int(np.searchsorted(self.ordinals, i, side="right")) - 1
        return None if j < 0 else self.cells[j].box()

    def updates_at(self, frames: np.ndarray) -> np.ndarray:
        """The cell update in effect at each frame (-1 before the first), vectorised."""
        return np.searchsorted(self.ordinals, frames, side="right") - 1

