"""Streaming trajectory writer and reader (trajectory §2–§11).

``MrecWriter`` buffers frames and commits them by the protocol of §10: chunk bytes first
(positional writes into shards whose index sits at the start), then each touched array's
``zarr.json`` by atomic replace, an fsync when durable, and LAST the ``trajectory/`` group's
``zarr.json`` carrying the new ``nstep`` and the step/time progressions (``trajectory#I7``).
A reader reads logical lengths only (arrays may be longer: an uncommitted tail,
``trajectory#N1``); a reopening writer shrinks every array back to its logical shape (§11)
and continues.

Layout: blocks are regular (``uniform_rows`` + ``dense_updates`` markers, §8.3) until the
first irregular update, then CSR (``step_index`` + ``offset``, §8.1); the cell is held as
``box/`` attributes while fixed from ordinal 0, else as arrays (§7); per-step meta keys are
``meta/<key>`` arrays tagged ``meta_dtype`` (§5).  Arrays that appear in the middle of a run
(index arrays, a ``step``/``time`` array, box arrays) are *born complete*: their chunk bytes
land before their first ``zarr.json``, so a crash never leaves one half-filled.  Within a
commit a block's index arrays precede its rows, and ``box/vectors`` follows the other box
arrays: what a reader goes by is always written last.
"""
from __future__ import annotations

import math
import os
import struct
from collections import OrderedDict
from math import prod
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from molrec_raw.errors import (
    InvalidValueError, MolrecError, SpecViolationError, StoreError,
)
import orjson

from molrec_raw.record import documents, typed_json
from molrec_raw.record.columns import COLUMN_DTYPES, VOCABULARY, ZARR_TO_COLUMN, as_column, column_dtype_of
from molrec_raw.record.doors import check_record_path, replace_record
from molrec_raw.record.model import Block, Box, Frame, MetaValue
from molrec_raw.record.precision import round_to_precision
from molrec_raw.record.trajectory import extents as ext
from molrec_raw.record.trajectory.schema import RESERVED_BLOCK_NAMES, BlockSpec, MetaSpec, SequenceSchema
from molrec_raw.zarr import Array, Group, open_group

__all__ = ["MrecWriter", "MrecReader", "write_mrec_trajectory", "read_mrec_trajectory", "Trajectory"]

PathLike = Union[str, "os.PathLike[str]"]
TRAJ = "trajectory"
I64 = (-(2**63), 2**63 - 1)
_PROGRESSIONS = ("step_progression", "time_progression")


def _err(rule: str, message: str, node: str = "/trajectory") -> SpecViolationError:
    return SpecViolationError(message, node=node, rule=f"trajectory#{rule}")


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def _np_dtype(tag: str) -> Any:
    return str if tag == "string" else np.dtype(COLUMN_DTYPES[tag])


# ============================================================================ progressions
class _Series:
    """``step`` (exact integers) or ``time`` (binary64, bitwise) over ordinals (§3.1)."""

    def __init__(self, name: str, is_float: bool) -> None:
        self.name, self.is_float = name, is_float
        self.start: Any = None
        self.stride: Any = None
        self.prog = True  # still a progression
        self.n = 0  # values known (committed + pending)
        self.committed = 0
        self.pending: List[Any] = []
        self.array: Optional[Array] = None  # attached on-disk array (array form)
        self.last: Any = None

    def value(self, i: int) -> Any:
        if i == 0:
            return self.start
        return self.start + float(i) * self.stride if self.is_float else self.start + i * self.stride

    def _same(self, a: Any, b: Any) -> bool:
        return _bits(a) == _bits(b) if self.is_float else a == b

    def push(self, v: Any) -> None:
        if self.prog:
            if self.is_float and not math.isfinite(v):
                self.prog = False  # not JSON: always the array form
            elif self.n == 0:
                self.start = v
            elif self.n == 1:
                stride = v - self.start
                if (self.is_float and not math.isfinite(stride)) or not self._same(self.start + 1.0 * stride if self.is_float else self.start + stride, v):
                    self.prog = False
                else:
                    self.stride = stride
            elif not self._same(self.value(self.n), v):
                self.prog = False
        self.pending.append(v)
        self.n += 1
        self.last = v

    def attribute(self) -> Optional[Dict[str, Any]]:
        if not self.prog or self.n == 0:
            return None
        return {"start": self.start} if self.n == 1 else {"start": self.start, "stride": self.stride}

    def commit(self, parent: Group, touched: List[str]) -> None:
        """Land the pending values when the series is (or just became) an array."""
        if self.prog:
            self.committed, self.pending = self.n, []
            return
        dtype = np.float64 if self.is_float else np.int64
        tag = "f64" if self.is_float else "i64"
        if self.array is None:  # materialize: the whole history, born complete
            history = [self.value(i) for i in range(self.committed)]
            self.array = _born(parent, self.name, np.asarray(history + self.pending, dtype=dtype),
                               ext.DENSE_ROWS, ext.DENSE_CHUNKS_PER_SHARD, ext.dense_codecs(tag), touched)
        elif self.pending:
            _grow(self.array, self.committed, np.asarray(self.pending, dtype=dtype), touched)
        self.committed, self.pending = self.n, []


def _check_progression(attrs: Dict[str, Any], name: str, nstep: int, is_float: bool) -> Optional[Tuple[Any, Any]]:
    """(start, stride) of a stored progression, or None when absent (``trajectory#R5``)."""
    raw = attrs.get(name)
    if raw is None and name not in attrs:
        return None
    ok_num = (lambda v: type(v) in (int, float)) if is_float else (lambda v: type(v) is int)
    if type(raw) is not dict or "start" not in raw or set(raw) - {"start", "stride"} or \
            not all(ok_num(v) for v in raw.values()):
        raise _err("R5", f"{name} {raw!r} is not {{start[, stride]}} of numbers")
    if nstep >= 2 and "stride" not in raw:
        raise _err("R5", f"{name} has no stride but {nstep} frames need one")
    start, stride = raw["start"], raw.get("stride", 0)
    return (float(start), float(stride)) if is_float else (start, stride)


def _expand(prog: Tuple[Any, Any], n: int, is_float: bool) -> List[Any]:
    start, stride = prog
    if is_float:
        return [start if i == 0 else start + float(i) * stride for i in range(n)]
    return [start + i * stride for i in range(n)]



# ============================================================================ the cell (§7)
_IDENTITY = np.eye(3)
_ALL_TRUE = (True, True, True)


class _Cell:
    __slots__ = ("ordinal", "vectors", "origin", "boundary", "defined")

    def __init__(self, ordinal: int, vectors: np.ndarray, origin: np.ndarray, boundary: Tuple[bool, ...], defined: bool) -> None:
        self.ordinal, self.vectors, self.origin, self.boundary, self.defined = ordinal, vectors, origin, boundary, defined

    def same(self, other: "_Cell") -> bool:
        return (self.defined == other.defined and self.boundary == other.boundary
                and self.vectors.tobytes() == other.vectors.tobytes() and self.origin.tobytes() == other.origin.tobytes())

    def box(self) -> Box:
        return Box(self.vectors.copy(), self.origin.copy(), self.boundary, self.defined)


def _prepare_cell(box: Any, ordinal: int, defined_before: Optional[bool]) -> _Cell:
    """A presented cell, checked (``trajectory#W29``); an undefined cell is stored with
    identity vectors and all-false boundary (§7)."""
    where = f"trajectory frame {ordinal}: the cell"
    if not isinstance(box, Box):
        raise InvalidValueError(f"{where} is not a Box")
    vectors, origin = np.asarray(box.vectors), np.asarray(box.origin)
    boundary = tuple(bool(b) for b in box.boundary) if len(tuple(box.boundary)) == 3 else None
    if vectors.shape != (3, 3) or origin.shape != (3,) or boundary is None:
        raise _err("W29", f"{where} needs vectors 3x3, origin of 3 and boundary of 3", "/trajectory/box")
    if vectors.dtype.kind not in "fiu" or origin.dtype.kind not in "fiu":
        raise _err("W29", f"{where}: vectors and origin must be real numbers", "/trajectory/box")
    vectors, origin = vectors.astype(np.float64), origin.astype(np.float64)
    defined = bool(box.defined)
    if not defined and any(boundary):
        raise _err("W29", f"{where}: an undefined cell cannot be periodic in any direction", "/trajectory/box")
    if defined_before is not None and defined != defined_before:
        raise _err("W29", f"{where}: cell_defined is one flag for the whole box section; this cell is "
                   f"{'defined' if defined else 'undefined'} but earlier cells are not", "/trajectory/box")
    if not defined:
        vectors = _IDENTITY.copy()
    return _Cell(ordinal, vectors, origin, boundary, defined)


class _WBox:
    """Writer state of ``box/``: ``form`` is ``none``, ``attrs`` (fixed cell from ordinal 0)
    or ``arrays``."""

    def __init__(self) -> None:
        self.form = "none"
        self.group: Optional[Group] = None
        self.defined: Optional[bool] = None
        self.arrays: Dict[str, Array] = {}
        self.n_updates = 0
        self.pending: List[_Cell] = []
        self.last: Optional[_Cell] = None
        self.attr_cell: Optional[_Cell] = None

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
            if cell.boundary != _ALL_TRUE:
                attrs["boundary"] = list(cell.boundary)
            self.group = tgroup.create_group("box", attributes=attrs, overwrite=True)
            touched.append(f"{self.group.path}/zarr.json")
            self.form, self.attr_cell = "attrs", cell
        else:
            history: List[_Cell] = [self.attr_cell] if self.form == "attrs" else []
            if self.group is None:
                self.group = tgroup.create_group("box", attributes={} if ups[0].defined else {"cell_defined": False},
                                                 overwrite=True)
            self._land(history, ups, touched)
            if self.form == "attrs":  # migrated: the cell attributes are withdrawn
                self.group.attrs.put({} if self.attr_cell.defined else {"cell_defined": False})
                touched.append(f"{self.group.path}/zarr.json")
            self.form = "arrays"
        self.n_updates += len(ups)
        self.last = ups[-1]
        self.pending = []

    def _land(self, history: List["_Cell"], ups: List["_Cell"], touched: List[str]) -> None:
        """Auxiliary arrays first (born complete or grown), ``vectors`` last: its presence
        and length are what a reader goes by."""
        n = self.n_updates
        dense = (ext.DENSE_ROWS, ext.DENSE_CHUNKS_PER_SHARD)
        cells = history + ups  # history is the attribute cell when migrating
        first = n - len(history)  # row of cells[0]
        total = n + len(ups)
        g = self.group

        def put(name: str, values: np.ndarray, tag: str, backfill: Any) -> None:
            arr = self.arrays.get(name)
            if arr is None:
                if first:
                    values = np.concatenate([np.broadcast_to(backfill, (first,) + values.shape[1:]), values])
                self.arrays[name] = _born(g, name, values, *dense, ext.dense_codecs(tag), touched)
            else:
                _grow(arr, n, values[len(history):], touched)

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
            return tuple(raw)
        value = np.asarray(raw, dtype=np.float64)
        flat = raw if name != "vectors" else [x for row in raw for x in row] if type(raw) is list and all(type(r) is list for r in raw) else None
        if value.shape != shape or flat is None or not all(type(x) in (int, float) for x in flat):
            raise ValueError
        return value
    except (ValueError, TypeError):
        raise _err("R15", f"box attribute {name} {raw!r} is malformed (vectors 3x3, origin/boundary 3 values)",
                   "/trajectory/box") from None


class _RBox:
    """The committed cells of ``box/`` (all held in memory: one row per change)."""

    def __init__(self, tgroup: Group, nstep: int) -> None:
        self.ordinals = np.zeros(0, np.int64)
        self.cells: List[_Cell] = []
        g = tgroup.get("box")
        if not isinstance(g, Group) or nstep == 0:
            return
        attrs = dict(g.attrs)
        defined = attrs.get("cell_defined", True)
        if type(defined) is not bool:
            raise _err("R15", f"cell_defined {defined!r} is not a JSON boolean", "/trajectory/box")
        vec = g.get("vectors")
        if isinstance(vec, Array):
            si = g.get("step_index")
            if isinstance(si, Array):
                raw = si[...].astype(np.int64) if si.shape[0] else np.zeros(0, np.int64)
                ordinals = raw[:_prefix_below(raw, nstep)]
                _check_index(ordinals, "box")
            else:
                ordinals = np.zeros(1 if vec.shape[0] else 0, np.int64)
            n = len(ordinals)
            if vec.shape[1:] != (3, 3) or vec.shape[0] < n:
                raise _err("R15", f"box/vectors of shape {vec.shape} cannot hold {n} cells", "/trajectory/box/vectors")
            vectors = vec[0:n] if n else np.zeros((0, 3, 3))
            origin_arr, bound_arr = g.get("origin"), g.get("boundary")
            origins = np.zeros((n, 3))
            if isinstance(origin_arr, Array):
                if origin_arr.shape[1:] != (3,) or origin_arr.shape[0] < n:
                    raise _err("R15", "box/origin is not [n][3]", "/trajectory/box/origin")
                origins = origin_arr[0:n] if n else origins
            bounds = np.full((n, 3), defined)
            if isinstance(bound_arr, Array):
                if bound_arr.metadata.dtype.name != "bool" or bound_arr.shape[1:] != (3,) or bound_arr.shape[0] < n:
                    raise _err("R15", "box/boundary is not bool[n][3]", "/trajectory/box/boundary")
                bounds = bound_arr[0:n] if n else bounds
            rows = [(vectors[j], origins[j], tuple(bool(b) for b in bounds[j])) for j in range(n)]
        elif "vectors" in attrs:
            ordinals = np.zeros(1, np.int64)
            v = _box_attr_values(attrs, "vectors", (3, 3), "f64")
            o = _box_attr_values(attrs, "origin", (3,), "f64") if "origin" in attrs else np.zeros(3)
            b = _box_attr_values(attrs, "boundary", (3,), "bool") if "boundary" in attrs else (defined,) * 3
            rows = [(v, o, b)]
        else:
            return
        for j, (v, o, b) in enumerate(rows):
            if not defined and any(b):
                raise _err("R15", "a periodic flag on an undefined cell", "/trajectory/box")
            self.cells.append(_Cell(int(ordinals[j]), _IDENTITY.copy() if not defined else np.asarray(v, np.float64),
                                    np.asarray(o, np.float64), b, defined))
        self.ordinals = ordinals

    def at(self, i: int) -> Optional[Box]:
        j = int(np.searchsorted(self.ordinals, i, side="right")) - 1
        return None if j < 0 else self.cells[j].box()


# ============================================================================ per-step meta (§5)
_META_STORAGE: Dict[str, Tuple[Any, Tuple[int, ...]]] = {
    "bool": (np.bool_, ()), "i32": (np.int32, ()), "i64": (np.int64, ()), "u32": (np.uint32, ()),
    "u64": (np.uint64, ()), "f64": (np.float64, ()), "string": (object, ()), "json": (object, ()),
    "bool3": (np.bool_, (3,)), "i32x3": (np.int32, (3,)), "i64x3": (np.int64, (3,)), "u32x3": (np.uint32, (3,)),
    "u64x3": (np.uint64, (3,)), "f64x3": (np.float64, (3,)), "f64x6": (np.float64, (6,)), "f64x9": (np.float64, (9,)),
}
_ZARR_OF = {np.bool_: "bool", np.int32: "int32", np.int64: "int64", np.uint32: "uint32", np.uint64: "uint64",
            np.float64: "float64", object: "string"}


def _meta_cell(tag: str, key: str, value: Any) -> Any:
    """One step's stored value for ``tag`` (exact coercion or ``trajectory#W23``)."""
    where = f"/trajectory/meta/{key}"
    if isinstance(value, MetaValue):
        value = value.value  # re-read through the declared tag's typed-JSON form
    try:
        encoded = typed_json.encode_value(tag, value, where)
        decoded = typed_json.decode_value(tag, encoded, where)
    except MolrecError as exc:
        raise _err("W23", f"meta key {key!r} ({tag}): {value!r} is not exactly a {tag} value: {exc.message}", where) from None
    if tag == "json":
        return orjson.dumps(encoded).decode()
    return list(decoded) if isinstance(decoded, tuple) else decoded


def _meta_value(tag: str, raw: Any, where: str) -> Any:
    """A stored meta element back as the caller's value (plain or ``MetaValue``)."""
    if tag == "json":
        try:
            value = orjson.loads(raw)
        except (orjson.JSONDecodeError, TypeError):
            raise _err("R10", f"meta json value {raw!r} is not a JSON document", where) from None
    elif isinstance(raw, np.ndarray):
        value = tuple(x.item() for x in raw)
    else:
        value = raw.item() if isinstance(raw, np.generic) else raw
    if tag == "f64" or tag.startswith("f64x"):
        value = tuple(float(x) for x in value) if isinstance(value, tuple) else float(value)
    try:
        plain = typed_json.infer_tag(value) == tag
    except MolrecError:
        plain = False
    return value if plain else MetaValue(tag, value)


class _WMeta:
    def __init__(self, key: str, spec: MetaSpec) -> None:
        self.key, self.spec = key, spec
        self.array: Optional[Array] = None
        self.pending: List[Any] = []
        self.committed = 0

    def ensure(self, mgroup: Group) -> None:
        if self.array is None:
            dtype, trailing = _META_STORAGE[self.spec.tag]
            self.array = mgroup.create_array(
                self.key, shape=(0,) + trailing, dtype=str if dtype is object else dtype,
                chunks=(ext.DENSE_ROWS,) + trailing, shards=(ext.DENSE_ROWS * ext.DENSE_CHUNKS_PER_SHARD,) + trailing,
                codecs=ext.dense_codecs("string" if dtype is object else "u64"), attributes={"meta_dtype": self.spec.tag},
                shard_index_location="start", overwrite=True)

    def commit(self, touched: List[str]) -> None:
        if self.pending:
            dtype, trailing = _META_STORAGE[self.spec.tag]
            values = np.empty((len(self.pending),) + trailing, dtype=dtype)
            for j, v in enumerate(self.pending):
                values[j] = v
            _grow(self.array, self.committed, values, touched)
            self.committed += len(self.pending)
            self.pending = []


def _open_meta_array(arr: Any, key: str, tag: str, nstep: int) -> Array:
    where = f"/trajectory/meta/{key}"
    if not isinstance(arr, Array):
        if nstep:
            raise _err("R6", f"meta key {key!r} is declared but has no array for its {nstep} steps", where)
        return None
    stored = arr.attrs.get("meta_dtype")
    if stored is None:
        raise _err("R10", f"meta array {key!r} has no meta_dtype attribute", where)
    if stored in typed_json.LEGACY_TAGS:
        stored = typed_json.LEGACY_TAGS[stored]
    if stored not in _META_STORAGE:
        raise _err("R10", f"meta array {key!r}: unknown meta_dtype {stored!r}", where)
    if stored != tag:
        raise _err("R10", f"meta array {key!r} is tagged {stored!r} but pinned {tag!r}", where)
    dtype, trailing = _META_STORAGE[tag]
    if arr.metadata.dtype.name != _ZARR_OF[dtype] or tuple(arr.shape[1:]) != trailing:
        raise _err("R10", f"meta array {key!r}: stored {arr.metadata.dtype.name}{list(arr.shape[1:])} does not "
                   f"hold tag {tag}", where)
    if arr.shape[0] < nstep:
        raise _err("R6", f"meta array {key!r} has {arr.shape[0]} values for {nstep} steps", where)
    return arr


# ============================================================================ block state
class _Update:
    __slots__ = ("ordinal", "rows", "columns", "masks")

    def __init__(self, ordinal: int, rows: int, columns: Dict[str, np.ndarray], masks: Dict[str, np.ndarray]) -> None:
        self.ordinal, self.rows, self.columns, self.masks = ordinal, rows, columns, masks


def _same_content(a: _Update, b: _Update) -> bool:
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
        elif x.tobytes() != y.tobytes():
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


class _WBlock:
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
        self.pending: List[_Update] = []
        self.last: Optional[_Update] = None

    @property
    def nullable(self) -> List[str]:
        return [c for c, s in self.spec.columns.items() if s.nullable]

    def stays_regular(self, ups: List[_Update]) -> bool:
        if self.mode == "indexed" or not self.spec.columns:
            return False  # a block without columns always keeps its index
        n = self.uniform_rows if self.mode == "regular" else ups[0].rows
        return n > 0 and all(u.ordinal == self.n_updates + k and u.rows == n for k, u in enumerate(ups))


# ============================================================================ writer
class MrecWriter:
    """Streaming trajectory writer (trajectory §10): ``append`` buffers, a flush commits.

    ``flush_every`` (None = automatic cadence K, §14) commits non-durably when that many
    frames are buffered; ``flush()`` and ``close()`` are durable unless ``durable=False``.
    """

    def __init__(self, path: PathLike, schema: SequenceSchema, *, flush_every: Optional[int] = None,
                 compression: Optional[str] = None, durable: bool = True,
                 meta: Optional[Dict[str, Any]] = None) -> None:
        if not isinstance(schema, SequenceSchema):
            raise InvalidValueError(f"schema must be a SequenceSchema, got {type(schema).__name__}")
        self._init_common(flush_every, durable)
        self._compression = ext.parse_compression(compression)
        self._schema = schema.copy()
        target = check_record_path(path)
        if target.suffix == ".zip" or target.is_file():
            raise StoreError("a record being written is a directory; zip archives are read-only",
                             store=str(target))
        if target.exists():
            if not target.is_dir():
                raise StoreError("refusing to create: the path exists and is not a directory", store=str(target))
            if any(target.iterdir()):
                if not (target / "zarr.json").is_file():
                    raise StoreError("refusing to create: the directory is neither empty nor a record",
                                     store=str(target))
                _refuse_existing_sequence(target)
        if target.is_dir() and (target / "zarr.json").is_file():
            existing = open_group(target, mode="r")
            _refuse_aligned_system_names(self._schema, existing, "W13")
            old_meta = existing.get("meta")
            if meta is None and isinstance(old_meta, Group):  # adding a trajectory to a record
                meta = dict(old_meta.attrs)
        stamped = documents.stamp_meta(meta)
        from molrec_raw.record.violations import refuse
        refuse(documents.check_finite_json(stamped, "/meta", "frame-and-types#14.41"))
        refuse(documents.check_meta(stamped, writing=True))
        self._root = open_group(target, mode="a", threads=1)  # root zarr.json first
        self._root.create_group("meta", attributes=stamped, overwrite=True)
        self._tgroup = self._root.create_group(TRAJ, attributes={"sequence_schema": self._schema.to_json()},
                                               overwrite=True)
        if durable:
            store = self._root.store
            store.sync(["zarr.json", "meta/zarr.json", f"{TRAJ}/zarr.json"])
        self._path = target
        self._setup_state()
        _refuse_aligned_system_names(self._schema, self._root, "W13")
        self._section_rows = _section_rows(self._root)

    # ------------------------------------------------------------------ construction
    def _init_common(self, flush_every: Optional[int], durable: bool) -> None:
        if flush_every is not None and (not _is_int(flush_every) or flush_every < 1):
            raise _err("W15", f"flush_every must be a positive integer, got {flush_every!r}")
        self._flush_every_arg = None if flush_every is None else int(flush_every)
        self._flush_every: Optional[int] = self._flush_every_arg
        self._durable = bool(durable)
        self._closed = False
        self._nstep = 0  # committed
        self._buffered = 0
        self._timed: Optional[bool] = None

    def _setup_state(self) -> None:
        self._blocks = {name: _WBlock(name, self._schema.block_spec(name)) for name in self._schema.block_names()}
        self._step = _Series("step", False)
        self._time = _Series("time", True)
        self._box = _WBox()
        self._meta = {key: _WMeta(key, self._schema.meta_spec(key)) for key, _ in self._schema.meta_keys()}
        self._mgroup: Optional[Group] = None
        self._needs_resolved_check = any(
            self._schema.targets(b) or self._schema.aligned_with(b) for b in self._schema.block_names())

    @classmethod
    def open(cls, path: PathLike, *, flush_every: Optional[int] = None, durable: bool = True) -> "MrecWriter":
        """Reopen a trajectory for append (§11): shrink every array back to its logical
        length, rebuild the change-detection state, continue numbering."""
        self = cls.__new__(cls)
        self._init_common(flush_every, durable)
        self._compression = None
        target = check_record_path(path)
        if target.suffix == ".zip" or not target.is_dir():
            raise StoreError("only a directory record can be reopened for append", store=str(target))
        root = open_group(target, mode="r+", threads=1)
        meta = root.get("meta")
        doc = dict(meta.attrs) if isinstance(meta, Group) else {}
        from molrec_raw.record.violations import refuse
        refuse(documents.check_meta(doc))
        if doc.get("molrec_version") != documents.CURRENT_VERSION:
            raise _err("W14", f"the store is a molrec_version {doc.get('molrec_version')} record; "
                       f"appending would mix version {documents.CURRENT_VERSION} frames into it")
        tgroup = root.get(TRAJ)
        if not isinstance(tgroup, Group):
            raise _err("W14", "the record has no trajectory section to append to")
        if tgroup.get("frames") is not None:
            raise _err("W14", "legacy layout (trajectory/frames/, written by molrs <= 0.13); re-write it")
        attrs = dict(tgroup.attrs)
        if "sequence_schema" not in attrs:
            raise _err("W14", "the trajectory carries no sequence_schema attribute; a writer needs the pin")
        self._schema = SequenceSchema.from_json(attrs["sequence_schema"])
        self._root, self._tgroup, self._path = root, tgroup, target
        self._setup_state()
        _refuse_aligned_system_names(self._schema, root, "W13")
        self._section_rows = _section_rows(root)
        nstep = _read_nstep(tgroup, attrs)
        self._nstep = nstep
        self._reopen_series(attrs, nstep)
        for block in self._blocks.values():
            self._reopen_block(block, nstep)
        self._reopen_box(nstep)
        self._reopen_meta(nstep)
        return self

    def _reopen_box(self, nstep: int) -> None:
        try:
            committed = _RBox(self._tgroup, nstep)
        except SpecViolationError as exc:
            raise _err("W14", f"cannot reopen: {exc.message}", "/trajectory/box") from None
        if not committed.cells:
            return  # a stale box/ (interrupted first commit) is replaced at the next one
        box = self._box
        box.group = self._tgroup["box"]
        n = len(committed.cells)
        box.n_updates, box.last, box.defined = n, committed.cells[-1], committed.cells[0].defined
        if isinstance(box.group.get("vectors"), Array):
            box.form = "arrays"
            for name in ("step_index", "origin", "boundary", "vectors"):
                arr = box.group.get(name)
                if isinstance(arr, Array):
                    if arr.shape[0] > n:
                        arr.resize((n,) + arr.shape[1:], reset_stale=False)
                    box.arrays[name] = arr
        else:
            box.form, box.attr_cell = "attrs", committed.cells[0]

    def _reopen_meta(self, nstep: int) -> None:
        mgroup = self._tgroup.get("meta")
        self._mgroup = mgroup if isinstance(mgroup, Group) else None
        for key, m in self._meta.items():
            arr = self._mgroup.get(key) if self._mgroup is not None else None
            try:
                arr = _open_meta_array(arr, key, m.spec.tag, nstep)
            except SpecViolationError as exc:
                raise _err("W14", f"cannot reopen: {exc.message}", exc.node or "/trajectory/meta") from None
            if arr is not None:
                if arr.shape[0] > nstep:
                    arr.resize((nstep,) + arr.shape[1:], reset_stale=False)
                m.array, m.committed = arr, nstep

    def _reopen_series(self, attrs: Dict[str, Any], nstep: int) -> None:
        for series in (self._step, self._time):
            prog = _check_progression(attrs, f"{series.name}_progression", nstep, series.is_float)
            arr = self._tgroup.get(series.name)
            if nstep == 0 or prog is not None:
                if isinstance(arr, Array):  # stale: from an interrupted materialization
                    _delete_node(self._tgroup, series.name)
            if nstep == 0:
                continue
            if prog is not None:
                series.start, series.stride = prog[0], (prog[1] if nstep >= 2 else None)
                series.n = series.committed = nstep
                series.last = series.value(nstep - 1)
            elif isinstance(arr, Array):
                if arr.shape[0] < nstep:
                    raise _err("R6", f"{series.name} has {arr.shape[0]} values for {nstep} frames")
                if arr.shape[0] > nstep:
                    arr.resize((nstep,), reset_stale=False)
                series.prog, series.array = False, arr
                series.n = series.committed = nstep
                series.last = arr[nstep - 1].item()
            elif series.name == "step":
                series.start, series.stride = 0, 1  # a store without numbering: 0..n-1
                series.n = series.committed = nstep
                series.last = nstep - 1
        if nstep:
            self._timed = self._time.n > 0

    def _reopen_block(self, block: _WBlock, nstep: int) -> None:
        group = self._tgroup.get(block.name)
        if not isinstance(group, Group):
            return
        block.group = group
        for column, spec in block.spec.columns.items():
            arr = group.get(column)
            if isinstance(arr, Array):
                _check_column_array(arr, block.name, column, spec.dtype, spec.trailing, "W14")
                block.columns[column] = arr
        validity = group.get("_validity")
        for column in block.nullable:
            arr = validity.get(column) if isinstance(validity, Group) else None
            if isinstance(arr, Array):
                block.masks[column] = arr
        try:
            kind, ordinals, offsets, uniform = _layout(group, block.name, block.spec, block.columns, nstep)
        except SpecViolationError as exc:
            raise _err("W14", f"cannot reopen: {exc.message}", exc.node or "/trajectory") from None
        n, total = len(ordinals), int(offsets[-1])
        self._ensure_block(block)  # arrays missing after a crash during creation
        for arr in list(block.columns.values()) + list(block.masks.values()):
            if arr.shape[0] < total:
                raise _err("W14", f"cannot reopen: block {block.name!r}: {arr.path} has {arr.shape[0]} rows, "
                           f"its updates claim {total}")
        arrays = [(a, total) for a in list(block.columns.values()) + list(block.masks.values())]
        attrs = dict(group.attrs)
        if kind == "indexed":
            block.step_index, block.offset = group["step_index"], group["offset"]
            arrays += [(block.step_index, n), (block.offset, n + 1)]
            if "uniform_rows" in attrs or "dense_updates" in attrs:  # crash mid-switch: the arrays win
                group.attrs.put({k: v for k, v in attrs.items() if k not in _MARKERS})
        else:
            for name in ("step_index", "offset"):  # stale, from an interrupted first index
                _delete_node(group, name)
        for arr, length in arrays:  # shrink back to the logical lengths (metadata only, §11)
            if arr.shape[0] > length:
                arr.resize((length,) + arr.shape[1:], reset_stale=False)
        block.mode = kind
        block.uniform_rows = uniform or 0
        block.n_updates, block.total = n, total
        if n:
            lo, hi = int(offsets[-2]), total
            cols = {c: a[lo:hi] for c, a in block.columns.items()}
            masks = {c: a[lo:hi] for c, a in block.masks.items()}
            block.last = _Update(int(ordinals[n - 1]), hi - lo, cols, masks)

    # ------------------------------------------------------------------ properties
    @property
    def committed(self) -> int:
        """Frames committed (the ``nstep`` on disk)."""
        return self._nstep

    @property
    def flush_every(self) -> int:
        if self._flush_every is None:
            self._flush_every = self._derive_cadence()
        return self._flush_every

    @property
    def schema(self) -> SequenceSchema:
        return self._schema.copy()

    def _frame_rows(self, block: _WBlock) -> int:
        rows = self._schema.rows(block.name)
        if rows == 0 and block.last is not None:
            rows = block.last.rows  # reopened: the pin carries no row hint
        return rows

    def _block_plan(self, block: _WBlock) -> Tuple[int, List[int], int]:
        sizes = [ext.row_bytes(s.dtype, s.trailing) for s in block.spec.columns.values()]
        rows = self._frame_rows(block)
        if block.columns:  # extents frozen: off the existing arrays
            r = next(iter(block.columns.values())).chunks[0]
        else:
            r = ext.block_rows_per_chunk(rows, sizes)
        return rows, sizes, r

    def _derive_cadence(self) -> int:
        return ext.flush_cadence(self._block_plan(b) for b in self._blocks.values())

    # ------------------------------------------------------------------ append
    def _check_open(self) -> None:
        if self._closed:
            raise InvalidValueError("writer is closed (trajectory#W30)")

    def append(self, frame: Frame, step: Optional[int] = None, time: Optional[float] = None) -> None:
        """Buffer one frame (validated against the pin first: a refused frame changes
        nothing, ``trajectory#W16``–``#W29``); commit when ``flush_every`` are buffered."""
        self._check_open()
        if not isinstance(frame, Frame):
            raise InvalidValueError(f"append needs a Frame, got {type(frame).__name__}")
        ordinal = self._nstep + self._buffered
        # -- step / time (W16, W17)
        if step is None:
            step = 0 if self._step.n == 0 else self._step.last + 1
        if not _is_int(step) or not I64[0] <= int(step) <= I64[1]:
            raise _err("W16", f"step {step!r} is not an integer in the i64 range")
        step = int(step)
        if self._step.n and step <= self._step.last:
            raise _err("W16", f"step numbers must increase strictly: {step} follows {self._step.last}")
        if time is not None:
            if isinstance(time, (bool, np.bool_)) or not isinstance(time, (int, float, np.integer, np.floating)):
                raise InvalidValueError(f"time must be a number, got {time!r}")
            time = float(time)
        timed = time is not None
        if self._timed is not None and timed != self._timed:
            raise _err("W17", 'the "time" array is all-or-nothing across a run: '
                       + ("this frame has no time" if self._timed else "this frame adds a time to a time-less run"))
        cell = None
        if frame.box is not None:  # the cell: W29; unchanged cells write nothing
            cell = _prepare_cell(frame.box, ordinal, self._box.defined)
            base = self._box.pending[-1] if self._box.pending else self._box.last
            if base is not None and base.same(cell):
                cell = None
        meta_values: List[Tuple[_WMeta, Any]] = []
        for key in frame.meta:
            if key not in self._meta and key not in ("step", "time"):
                raise _err("W18", f"trajectory frame {ordinal}: meta key {key!r} is not declared in the "
                           "sequence schema", f"/trajectory/meta/{key}")
        for key, m in self._meta.items():
            if key in frame.meta:
                meta_values.append((m, _meta_cell(m.spec.tag, key, frame.meta[key])))
            elif m.spec.has_fill:
                meta_values.append((m, _meta_cell(m.spec.tag, key, m.spec.fill)))
            else:
                raise _err("W22", f"trajectory frame {ordinal} omits meta key {key!r}, which is declared "
                           "without a fill", f"/trajectory/meta/{key}")
        # -- blocks
        updates: List[Tuple[_WBlock, _Update]] = []
        for name, blk in frame.blocks.items():
            state = self._blocks.get(name)
            if state is None:
                raise _err("W18", f"trajectory frame {ordinal}: block {name!r} is not declared in the "
                           "sequence schema", f"/trajectory/{name}")
            update = _prepare_update(state, blk, ordinal)
            base = state.pending[-1] if state.pending else state.last
            if base is None or not _same_content(base, update):
                updates.append((state, update))
        # -- the resolved frame: references and alignments (W27, W28)
        resolved: Dict[str, _Update] = {}
        changed = {state.name: update for state, update in updates}
        for name, state in self._blocks.items():
            u = changed.get(name) or (state.pending[-1] if state.pending else state.last)
            if u is not None:
                resolved[name] = u
        if self._needs_resolved_check:
            _check_resolved(self._schema, {n: u.rows for n, u in resolved.items()},
                            lambda b, c: (resolved[b].columns[c], resolved[b].masks.get(c)),
                            self._section_rows, ordinal, writing=True)
        # -- accept (nothing above mutated state)
        for state, update in updates:
            state.pending.append(update)
        if cell is not None:
            self._box.pending.append(cell)
            self._box.defined = cell.defined
        for m, value in meta_values:
            m.pending.append(value)
        self._step.push(step)
        if timed:
            self._time.push(time)
        self._timed = timed
        self._buffered += 1
        if self._buffered >= self.flush_every:
            self._commit(durable=False)

    # ------------------------------------------------------------------ commit
    def _ensure_block(self, block: _WBlock) -> None:
        """Create the block group and its zero-length columns and masks (extents frozen here).
        Index arrays are born later, complete, when the block first needs them."""
        if block.group is None:
            attrs: Dict[str, Any] = {}
            if block.spec.structural_shape is not None:
                attrs["structural_shape"] = list(block.spec.structural_shape)
            block.group = self._tgroup.create_group(block.name, attributes=attrs, overwrite=True)
        group = block.group
        rows, sizes, r = self._block_plan(block)
        for (column, spec), size in zip(block.spec.columns.items(), sizes):
            if column not in block.columns:
                k = ext.safe_chunks_per_shard(r, size)
                tr = tuple(spec.trailing)
                block.columns[column] = group.create_array(
                    column, shape=(0,) + tr, dtype=_np_dtype(spec.dtype), chunks=(r,) + tr,
                    shards=(r * k,) + tr, codecs=ext.column_codecs(spec.dtype, spec.precision is not None, self._compression),
                    shard_index_location="start", overwrite=True)
            if spec.nullable and column not in block.masks:
                validity = group.require_group("_validity")
                k = ext.safe_chunks_per_shard(r, 1)
                mask = validity.create_array(column, shape=(0,), dtype=bool, chunks=(r,), shards=(r * k,),
                                             codecs=ext.dense_codecs("bool"), shard_index_location="start",
                                             overwrite=True)
                if block.total:  # created late (older store): every committed row valid
                    _grow(mask, 0, np.ones(block.total, bool), [])
                block.masks[column] = mask

    def _commit_block(self, block: _WBlock, touched: List[str]) -> None:
        if not block.pending:
            return
        self._ensure_block(block)
        ups = block.pending
        lo = block.total
        regular = block.stays_regular(ups)
        if not regular:  # the index first, born complete (history backfilled), then rows
            n = block.n_updates
            ordinals = np.asarray([u.ordinal for u in ups], np.uint64)
            ends = lo + np.cumsum([u.rows for u in ups], dtype=np.uint64)
            if block.mode == "indexed":
                _grow(block.step_index, n, ordinals, touched)
                _grow(block.offset, n + 1, ends, touched)
            else:  # first update, or the one-way switch from the markers (§8.3)
                history = np.arange(n + 1, dtype=np.uint64) * np.uint64(block.uniform_rows)
                dense = (ext.DENSE_ROWS, ext.DENSE_CHUNKS_PER_SHARD, ext.dense_codecs("u64"))
                block.offset = _born(block.group, "offset", np.concatenate([history, ends]), *dense, touched)
                block.step_index = _born(block.group, "step_index",
                                         np.concatenate([np.arange(n, dtype=np.uint64), ordinals]), *dense, touched)
        for column, arr in block.columns.items():
            values = [u.columns[column] for u in ups]
            if sum(v.shape[0] for v in values):
                _grow(arr, lo, np.concatenate(values), touched)
        for column, arr in block.masks.items():
            values = [u.masks.get(column, np.ones(u.rows, bool)) for u in ups]
            if sum(v.shape[0] for v in values):
                _grow(arr, lo, np.concatenate(values), touched)
        attrs = dict(block.group.attrs)
        if regular and block.mode == "none":
            attrs.update({"uniform_rows": int(ups[0].rows), "dense_updates": True})
            block.group.attrs.put(attrs)
            touched.append(f"{block.group.path}/zarr.json")
            block.uniform_rows = int(ups[0].rows)
        elif not regular and block.mode == "regular":  # withdrawn for good
            block.group.attrs.put({k: v for k, v in attrs.items() if k not in _MARKERS})
            touched.append(f"{block.group.path}/zarr.json")
        block.mode = "regular" if regular else "indexed"
        block.n_updates += len(ups)
        block.total = lo + sum(u.rows for u in ups)
        block.last = ups[-1]
        block.pending = []

    def _commit(self, durable: bool) -> None:
        if self._buffered == 0:
            return
        touched: List[str] = []
        for block in self._blocks.values():
            if block.group is None:  # every declared block exists from the first commit on
                self._ensure_block(block)
            self._commit_block(block, touched)
        self._box.commit(self._tgroup, touched)
        if self._meta:
            if self._mgroup is None:
                self._mgroup = self._tgroup.create_group("meta", overwrite=True)
            for m in self._meta.values():
                m.ensure(self._mgroup)
                m.commit(touched)
        self._time.commit(self._tgroup, touched)
        self._step.commit(self._tgroup, touched)
        store = self._root.store
        if durable:
            store.sync(touched)
        nstep = self._nstep + self._buffered
        attrs: Dict[str, Any] = {"sequence_schema": self._schema.to_json(), "nstep": nstep}
        for series in (self._step, self._time):
            prog = series.attribute()
            if prog is not None:
                attrs[f"{series.name}_progression"] = prog
        self._tgroup.attrs.put(attrs)  # the commit marker: last write of the commit
        if durable:
            store.sync([f"{TRAJ}/zarr.json"])
        self._nstep, self._buffered = nstep, 0

    def flush(self) -> None:
        """Commit every buffered frame (durable unless ``durable=False``)."""
        self._check_open()
        self._commit(durable=self._durable)

    def close(self) -> None:
        """The last durable flush; idempotent."""
        if self._closed:
            return
        self._commit(durable=self._durable)
        self._closed = True

    def __enter__(self) -> "MrecWriter":
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None:
            self.close()
        else:  # frames already committed stay committed; the buffer is dropped
            self._closed = True


def _refuse_existing_sequence(target: Path) -> None:
    """``trajectory#W12``: never create over an existing sequence (store left unchanged)."""
    root = open_group(target, mode="r")
    tgroup = root.get(TRAJ)
    if isinstance(tgroup, Group) and ("nstep" in tgroup.attrs or tgroup.get("step") is not None):
        raise _err("W12", 'a frame sequence already exists at "/trajectory"; refusing to overwrite it')


def _prepare_update(state: _WBlock, blk: Block, ordinal: int) -> _Update:
    """Validate one presented block against the pin; the stored (rounded) content."""
    name, spec = state.name, state.spec
    node = f"/trajectory/{name}"
    where = f"trajectory frame {ordinal}: block {name!r}"
    if not isinstance(blk, Block):
        raise InvalidValueError(f"{where} is not a Block")
    for column in blk.columns:
        if column not in spec.columns:
            raise _err("W18", f"{where}: column {column!r} is not declared in the sequence schema", f"{node}/{column}")
    missing = [c for c in spec.columns if c not in blk.columns]
    if missing:
        raise _err("W20", f"{where} lacks declared column(s) {missing}; a present block carries every column", node)
    columns: Dict[str, np.ndarray] = {}
    for column, cspec in spec.columns.items():
        cnode = f"{node}/{column}"
        try:
            values = as_column(column, blk.columns[column], cnode)
        except SpecViolationError as exc:
            raise _err("W19", f"{where}: {exc.message}", cnode) from None
        dtype = column_dtype_of(values)
        if dtype != cspec.dtype or tuple(values.shape[1:]) != tuple(cspec.trailing):
            raise _err("W19", f"sequence schema mismatch: {where}, column {column!r}: expected {cspec.dtype} "
                       f"with trailing {list(cspec.trailing)}, found {dtype} with trailing {list(values.shape[1:])}", cnode)
        stated = blk.precision.get(column)
        if stated is not None and (cspec.precision is None or float(stated) != cspec.precision):
            raise _err("W25", f"{where}: column {column!r} states precision {stated!r} but the pin has "
                       f"{cspec.precision!r}", cnode)
        if cspec.precision is not None:
            values = round_to_precision(values, cspec.precision)
        target = blk.targets.get(column)
        if target is not None and target != spec.targets.get(column):
            raise _err("W26", f"{where}: column {column!r} states target {target!r} but the pin has "
                       f"{spec.targets.get(column)!r}", cnode)
        columns[column] = values
    for column in blk.targets:
        if column not in spec.columns:
            raise _err("W26", f"{where}: target stated for undeclared column {column!r}", node)
    lengths = {v.shape[0] for v in columns.values()}
    if len(lengths) > 1:
        raise _err("W19", f"{where}: columns disagree on the row count ({sorted(lengths)})", node)
    rows = lengths.pop() if lengths else blk.nrows
    if blk.count is not None and int(blk.count) != rows:
        raise _err("W19", f"{where}: count {blk.count} but the columns have {rows} rows", node)
    if spec.structural_shape is not None and rows != prod(spec.structural_shape):
        raise _err("W21", f"{where} has {rows} rows; its structural shape {list(spec.structural_shape)} "
                   f"needs {prod(spec.structural_shape)} rows", node)
    if blk.structural_shape is not None and tuple(blk.structural_shape) != spec.structural_shape:
        raise _err("W21", f"{where} states structural shape {list(blk.structural_shape)}, the pin "
                   f"{spec.structural_shape}", node)
    masks: Dict[str, np.ndarray] = {}
    for column, mask in blk.masks.items():
        cnode = f"{node}/_validity/{column}"
        cspec = spec.columns.get(column)
        if cspec is None:
            raise _err("W18", f"{where}: mask for undeclared column {column!r}", cnode)
        if not cspec.nullable:
            raise _err("W24", f"{where}: column {column!r} of block {name!r} is non-nullable in the pin "
                       "and cannot carry a mask", cnode)
        mask = np.asarray(mask)
        if mask.dtype != np.bool_ or mask.shape != (rows,):
            raise _err("W24", f"{where}: mask of {column!r} must be bool[{rows}], got {mask.dtype}{list(mask.shape)}", cnode)
        masks[column] = mask.copy()
    return _Update(ordinal, rows, columns, masks)


# ============================================================================ reader helpers
def _read_nstep(tgroup: Group, attrs: Dict[str, Any]) -> int:
    if "nstep" in attrs:
        n = attrs["nstep"]
        if type(n) is not int or n < 0:
            raise _err("R3", f"nstep {n!r} is not a non-negative integer")
        return n
    if any(k in attrs for k in _PROGRESSIONS):
        raise _err("R4", "a progression attribute without nstep: the commit marker is missing")
    step = tgroup.get("step")
    return int(step.shape[0]) if isinstance(step, Array) else 0


def _check_index(ordinals: np.ndarray, block: str) -> None:
    if ordinals.size > 1 and not np.all(ordinals[1:] > ordinals[:-1]):
        raise _err("R7", f"block {block!r}: step_index must increase strictly", f"/trajectory/{block}/step_index")


def _check_offsets(offsets: np.ndarray, block: str) -> None:
    node = f"/trajectory/{block}/offset"
    if offsets.size == 0 or offsets[0] != 0:
        raise _err("R8", f"block {block!r}: offset must start at 0", node)
    if offsets.size > 1 and not np.all(offsets[1:] >= offsets[:-1]):
        raise _err("R8", f"block {block!r}: offset is non-monotonic", node)


def _check_column_array(arr: Array, block: str, column: str, dtype: str, trailing: Sequence[int], rule: str) -> None:
    node = f"/trajectory/{block}/{column}"
    stored = ZARR_TO_COLUMN.get(arr.metadata.dtype.name)
    if stored is None:
        raise _err("R12", f"column {column!r} of block {block!r} is stored as {arr.metadata.dtype.name}, "
                   "not one of the 13 column dtypes (narrow floats are not read; F = f64)", node)
    canonical = VOCABULARY.get(column)
    if rule == "R12" and canonical is not None and stored != canonical:
        raise _err("R13", f"column {column!r} of block {block!r} is stored as {stored}; the canonical key "
                   f"is {canonical}, and a store is not converted on read", node)
    if stored != dtype or tuple(arr.shape[1:]) != tuple(trailing):
        raise _err(rule, f"sequence schema mismatch at {node}: expected {dtype} with trailing {list(trailing)}, "
                   f"found {stored} with trailing {list(arr.shape[1:])}", node)


_MARKERS = ("uniform_rows", "dense_updates")


def _grow(arr: Array, start: int, values: np.ndarray, touched: List[str]) -> None:
    """Land ``values`` at row ``start`` (positional shard writes), then publish the shape."""
    stop = start + values.shape[0]
    shape = (stop,) + arr.shape[1:]
    touched.extend(arr.land(slice(start, stop), values, shape=shape, positional=True))
    touched.append(arr.publish(shape))


def _delete_node(group: Group, name: str) -> None:
    """Remove a child node, its zarr.json first (never a node claiming half-gone chunks)."""
    store, prefix = group.store, f"{group.path}/{name}/"
    keys = list(store.list(prefix))
    if prefix + "zarr.json" in keys:
        store.delete(prefix + "zarr.json")
    for key in keys:
        if key != prefix + "zarr.json":
            store.delete(key)


def _born(group: Group, name: str, values: np.ndarray, rows: int, per_shard: int,
          codecs: List[Dict[str, Any]], touched: List[str]) -> Array:
    """A new sharded array that appears complete: its chunk bytes land BEFORE its first
    zarr.json, so no reader ever sees it half-filled (a stale node is removed first)."""
    from molrec_raw.zarr.group import build_array_metadata
    trailing = tuple(values.shape[1:])
    dtype = str if values.dtype == object else values.dtype
    metadata, pipeline = build_array_metadata(
        shape=values.shape, dtype=dtype, chunks=(rows,) + trailing, shards=(rows * per_shard,) + trailing,
        codecs=codecs, fill_value=None, attributes=None, dimension_names=None, chunk_key_encoding=None,
        shard_index_location="start", limits=group.limits)
    _delete_node(group, name)
    arr = Array(group.store, f"{group.path}/{name}", metadata, pipeline=pipeline, threads=1, limits=group.limits)
    if values.shape[0]:
        touched.extend(arr.land(slice(0, values.shape[0]), values, positional=True))
    touched.append(arr.publish())
    return arr


def _prefix_below(ordinals: np.ndarray, nstep: int) -> int:
    """Length of the prefix of ``ordinals`` with entries < nstep (§11)."""
    beyond = np.flatnonzero(ordinals >= nstep)
    return int(beyond[0]) if beyond.size else int(ordinals.size)


def _layout(group: Group, name: str, spec: BlockSpec, columns: Dict[str, Array], nstep: int
            ) -> Tuple[str, np.ndarray, np.ndarray, Optional[int]]:
    """How a block's committed updates are found (§8.1, §8.3, §11): ``(kind, ordinals,
    offsets, uniform_rows)`` with ``kind`` in ``none``/``regular``/``indexed``.  Index arrays
    beside markers win (a crash mid-switch, ``trajectory#N7``); an ``offset`` without
    ``step_index`` is an interrupted first index (no update)."""
    node = f"/trajectory/{name}"
    attrs = dict(group.attrs)
    si, off = group.get("step_index"), group.get("offset")
    if isinstance(si, Array):
        if not isinstance(off, Array):
            raise _err("R8", f"block {name!r} has a step_index but no offset", node)
        if si.ndim != 1 or off.ndim != 1:
            raise _err("R8", f"block {name!r}: index arrays must be one-dimensional", node)
        raw = si[...].astype(np.int64) if si.shape[0] else np.zeros(0, np.int64)
        n = _prefix_below(raw, nstep)
        ordinals = raw[:n]
        _check_index(ordinals, name)
        if off.shape[0] < n + 1:
            raise _err("R8", f"block {name!r}: offsets missing for its {n} updates", f"{node}/offset")
        offsets = off[0:n + 1].astype(np.int64)
        _check_offsets(offsets, name)
        return "indexed", ordinals, offsets, None
    markers = [k for k in _MARKERS if k in attrs]
    if markers:
        uniform, dense = attrs.get("uniform_rows"), attrs.get("dense_updates")
        if len(markers) != 2:
            raise _err("R9", f"block {name!r}: elision marker {markers[0]!r} without its pair", node)
        if type(uniform) is not int or uniform <= 0:
            raise _err("R9", f"block {name!r}: uniform_rows {uniform!r} is not a positive integer", node)
        if dense is not True:
            raise _err("R9", f"block {name!r}: dense_updates {dense!r} is not true", node)
        if not spec.columns:
            raise _err("R9", f"block {name!r} has no columns, so it cannot carry elision markers", node)
        lengths = [columns[c].shape[0] if c in columns else 0 for c in spec.columns]
        n = min(min(lengths) // uniform, nstep)  # the SHORTEST column (decision 4)
        return ("regular", np.arange(n, dtype=np.int64),
                np.arange(n + 1, dtype=np.int64) * uniform, uniform)
    return "none", np.zeros(0, np.int64), np.zeros(1, np.int64), None


_SECTIONS_WITH_BLOCKS = ("frame", "system")
_CACHED_CHUNKS = 2


def _section_rows(root: Group) -> Any:
    """Row counts of frame-shaped sections' blocks for absolute targets ``/<section>/<block>``:
    None when the section is absent (not checked), -1 when it lacks the block."""
    cache: Dict[Tuple[str, str], Optional[int]] = {}

    def rows(section: str, block: str) -> Optional[int]:
        if (section, block) not in cache:
            value: Optional[int] = None
            sec = root.get(section) if section in _SECTIONS_WITH_BLOCKS else None
            if isinstance(sec, Group):
                node = sec.get(block)
                count = node.attrs.get("count") if isinstance(node, Group) else None
                value = count if type(count) is int else -1
            cache[(section, block)] = value
        return cache[(section, block)]
    return rows


def _check_resolved(schema: SequenceSchema, rows: Dict[str, int], values: Any, section_rows: Any,
                    ordinal: int, writing: bool, only: Optional[Dict[str, List[str]]] = None) -> None:
    """Row references (§8.6, ``#W27``/``#R17``) and alignments (§8.7, ``#W28``/``#R16``) on
    one resolved frame.  ``rows``: block -> resolved row count (absent blocks missing);
    ``values(block, column)`` -> (values, mask or None) of a resolved block's column."""
    rt, ra = ("W27", "W28") if writing else ("R17", "R16")
    for name in schema.block_names():
        if name not in rows:
            continue
        spec = schema.block_spec(name)
        if spec.aligned_with is not None:
            target = spec.aligned_with
            if target not in rows:
                raise _err(ra, f"trajectory frame {ordinal}: block {name!r} is aligned with {target!r}, "
                           "which is absent", f"/trajectory/{name}")
            if rows[target] != rows[name]:
                raise _err(ra, f"trajectory frame {ordinal}: block {name!r} has {rows[name]} rows but its "
                           f"alignment target {target!r} has {rows[target]} (restate {name!r} when "
                           f"{target!r} changes its row count)", f"/trajectory/{name}")
        if not rows[name]:
            continue
        for column, target in spec.targets.items():
            if only is not None and column not in only.get(name, ()):
                continue
            node = f"/trajectory/{name}/{column}"
            if target.startswith("/"):
                _, section, block = target.split("/")
                limit = section_rows(section, block)
                if limit is None:
                    continue  # the section is absent: not checked
            else:
                limit = rows.get(target, -1)
            if limit < 0:
                raise _err(rt, f"trajectory frame {ordinal}: column {column!r} of block {name!r} references "
                           f"{target!r}, which is missing", node)
            vals, mask = values(name, column)
            live = vals if mask is None else vals[np.asarray(mask, bool)]
            if live.size and int(live.max()) >= limit:
                raise _err(rt, f"trajectory frame {ordinal}: column {column!r} of block {name!r} holds row "
                           f"{int(live.max())}, not below the {limit} rows of {target!r}", node)


def _refuse_aligned_system_names(schema: SequenceSchema, root: Group, rule_id: str) -> None:
    """An aligned block never shares a name with a ``system/`` block (``#W13``/``#R16``)."""
    system = root.get("system")
    if not isinstance(system, Group):
        return
    for name in schema.block_names():
        if schema.aligned_with(name) is not None and isinstance(system.get(name), Group):
            raise _err(rule_id, f"aligned block {name!r} shares its name with a system block "
                       f"(/system/{name})", f"/trajectory/{name}")


class _RBlock:
    def __init__(self, name: str, spec: BlockSpec) -> None:
        self.name, self.spec = name, spec
        self.columns: Dict[str, Array] = {}
        self.masks: Dict[str, Array] = {}
        self.ordinals = np.zeros(0, np.int64)
        self.offsets = np.zeros(1, np.int64)

    def update_at(self, i: int) -> Optional[int]:
        j = int(np.searchsorted(self.ordinals, i, side="right")) - 1
        return None if j < 0 else j

    def rows(self, j: int) -> Tuple[int, int]:
        return int(self.offsets[j]), int(self.offsets[j + 1])


class Trajectory:
    """A whole trajectory in memory: ``frames``, ``step`` (i64 array), ``time`` (f64 array or None)."""

    def __init__(self, frames: List[Frame], step: Optional[np.ndarray] = None, time: Optional[np.ndarray] = None) -> None:
        self.frames, self.step, self.time = frames, step, time

    def __len__(self) -> int:
        return len(self.frames)

    def __getitem__(self, i: int) -> Frame:
        return self.frames[i]


# ============================================================================ reader
class MrecReader:
    """Random access over a committed trajectory (§9): ``len``, ``[i]``, iteration."""

    def __init__(self, path: PathLike) -> None:
        self._root = _open_root(path, "r")  # R1 version check
        tgroup = self._root.get(TRAJ)
        self._blocks: Dict[str, _RBlock] = {}
        self._schema = SequenceSchema()
        self._nstep = 0
        self._steps: List[int] = []
        self._times: Optional[List[float]] = None
        self._box = _RBox.__new__(_RBox)
        self._box.ordinals, self._box.cells = np.zeros(0, np.int64), []
        self._meta: Dict[str, Tuple[str, Optional[Array]]] = {}
        self._needs_check = False
        self._cache: Dict[str, "OrderedDict[int, np.ndarray]"] = {}
        if not isinstance(tgroup, Group):
            return
        if tgroup.get("frames") is not None:
            raise _err("R2", "legacy layout (trajectory/frames/, written by molrs <= 0.13); re-write it with 0.13")
        attrs = dict(tgroup.attrs)
        nstep = _read_nstep(tgroup, attrs)
        if "sequence_schema" in attrs:
            self._schema = SequenceSchema.from_json(attrs["sequence_schema"])
        else:
            self._schema = _derive_schema(tgroup)
        self._nstep = nstep
        self._needs_check = any(self._schema.targets(b) or self._schema.aligned_with(b)
                                for b in self._schema.block_names())
        self._steps = self._series(tgroup, attrs, "step", False, nstep)
        self._times = self._series(tgroup, attrs, "time", True, nstep)
        if self._times is None and nstep and "time_progression" not in attrs and tgroup.get("time") is None:
            self._times = None
        for name in self._schema.block_names():
            group = tgroup.get(name)
            if isinstance(group, Group):
                self._blocks[name] = self._open_block(name, group, nstep)
        _refuse_aligned_system_names(self._schema, self._root, "R16")
        self._section_rows = _section_rows(self._root)
        self._box = _RBox(tgroup, nstep)
        mgroup = tgroup.get("meta")
        for key, tag in self._schema.meta_keys():
            arr = mgroup.get(key) if isinstance(mgroup, Group) else None
            self._meta[key] = (tag, _open_meta_array(arr, key, tag, nstep))

    @staticmethod
    def _series(tgroup: Group, attrs: Dict[str, Any], name: str, is_float: bool, nstep: int) -> Optional[List[Any]]:
        prog = _check_progression(attrs, f"{name}_progression", nstep, is_float)
        if prog is not None:
            return _expand(prog, nstep, is_float)
        arr = tgroup.get(name)
        if isinstance(arr, Array):
            if arr.shape[0] < nstep:
                raise _err("R6", f"trajectory claims {nstep} committed frames but carries {arr.shape[0]} {name} values")
            return arr[0:nstep].tolist()
        if name == "step":
            return list(range(nstep))
        return None

    def _open_block(self, name: str, group: Group, nstep: int) -> _RBlock:
        spec = self._schema.block_spec(name)
        b = _RBlock(name, spec)
        for column, cspec in spec.columns.items():
            arr = group.get(column)
            if isinstance(arr, Array):
                _check_column_array(arr, name, column, cspec.dtype, cspec.trailing, "R12")
                b.columns[column] = arr
        validity = group.get("_validity")
        if isinstance(validity, Group):
            for column in spec.columns:
                arr = validity.get(column)
                if isinstance(arr, Array):
                    if arr.metadata.dtype.name != "bool" or arr.ndim != 1:
                        raise _err("R14", f"mask of {column!r} in block {name!r} is not bool[rows]",
                                   f"/trajectory/{name}/_validity/{column}")
                    b.masks[column] = arr
        kind, ordinals, offsets, _ = _layout(group, name, spec, b.columns, nstep)
        total = int(offsets[-1])
        if len(ordinals) and len(b.columns) < len(spec.columns):
            missing = [c for c in spec.columns if c not in b.columns]
            raise _err("R6", f"block {name!r} has updates but no array for column(s) {missing}", f"/trajectory/{name}")
        for arr in list(b.columns.values()):
            if arr.shape[0] < total:
                raise _err("R6", f"block {name!r}: {arr.basename} has {arr.shape[0]} rows, offsets claim {total}",
                           f"/trajectory/{name}/{arr.basename}")
        for arr in b.masks.values():
            if arr.shape[0] < total:
                raise _err("R14", f"block {name!r}: mask {arr.basename} is shorter than its {total} rows",
                           f"/trajectory/{name}/_validity/{arr.basename}")
        b.ordinals, b.offsets = ordinals, offsets
        return b

    # ------------------------------------------------------------------ API
    def __len__(self) -> int:
        return self._nstep

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
        if not _is_int(i):
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
        if not _is_int(i) or not -self._nstep <= i < self._nstep:
            return None
        return self._box.at(int(i) % self._nstep)

    def read_frame(self, i: int) -> Frame:
        return self._frame(self._index(i), None)

    def read_columns(self, i: int, pairs: Iterable[Tuple[str, str]]) -> Frame:
        """Frame ``i`` with only the named ``(block, column)`` pairs decoded."""
        wanted: Dict[str, List[str]] = {}
        for block, column in pairs:
            if not self._schema.has_block(block) or column not in self._schema.column_names(block):
                raise InvalidValueError(f"({block!r}, {column!r}) is not a declared column")
            wanted.setdefault(block, []).append(column)
        return self._frame(self._index(i), wanted)

    def _frame(self, i: int, wanted: Optional[Dict[str, List[str]]]) -> Frame:
        blocks: Dict[str, Block] = {}
        for name, b in self._blocks.items():
            if wanted is not None and name not in wanted:
                continue
            j = b.update_at(i)
            if j is None:
                continue
            lo, hi = b.rows(j)
            names = list(b.spec.columns) if wanted is None else [c for c in b.spec.columns if c in wanted[name]]
            columns = {c: self._rows(b.columns[c], lo, hi) for c in names}
            masks = {}
            for c in names:
                if c in b.masks:
                    m = self._rows(b.masks[c], lo, hi)
                    if not m.all():
                        masks[c] = m
            precision = {c: b.spec.columns[c].precision for c in names if b.spec.columns[c].precision is not None}
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
            _check_resolved(self._schema, rows, lambda bn, c: (blocks[bn].columns[c], blocks[bn].masks.get(c)),
                            self._section_rows, i, writing=False, only=only)
        meta: Dict[str, Any] = {}
        for key, (tag, arr) in self._meta.items():
            if arr is not None:
                meta[key] = _meta_value(tag, arr[i], f"/trajectory/meta/{key}")
        return Frame(meta, blocks, self._box.at(i))

    def _rows(self, arr: Array, lo: int, hi: int) -> np.ndarray:
        """Rows ``lo:hi`` through a small cache of decoded inner chunks (2 per array, as the
        reference): consecutive frames usually share a chunk."""
        size = arr.chunks[0]
        first, last = lo // size, (hi - 1) // size
        if hi <= lo or last - first >= _CACHED_CHUNKS:
            return arr[lo:hi]
        cache = self._cache.setdefault(arr.path, OrderedDict())
        parts = []
        for c in range(first, last + 1):
            chunk = cache.get(c)
            if chunk is None:
                chunk = arr[c * size:min((c + 1) * size, arr.shape[0])]
                cache[c] = chunk
                if len(cache) > _CACHED_CHUNKS:
                    cache.popitem(last=False)
            else:
                cache.move_to_end(c)
            parts.append(chunk[max(lo - c * size, 0):min(hi, (c + 1) * size) - c * size])
        return (parts[0] if len(parts) == 1 else np.concatenate(parts)).copy()

    def __getitem__(self, i: int) -> Frame:
        return self.read_frame(i)

    def __iter__(self) -> Iterator[Frame]:
        for i in range(self._nstep):
            yield self._frame(i, None)

    def close(self) -> None:
        self._root.store.close()

    def __enter__(self) -> "MrecReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _open_root(path: PathLike, mode: str) -> Group:
    """The record root (one thread per array read: frames are small, a pool per read costs
    more than it saves) with its version checked (``trajectory#R1``)."""
    from molrec_raw.record.violations import refuse
    root = open_group(check_record_path(path), mode=mode, threads=1)
    meta = root.get("meta")
    refuse(documents.check_meta(dict(meta.attrs) if isinstance(meta, Group) else {}))
    return root


def _derive_schema(tgroup: Group) -> SequenceSchema:
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
                raise _err("R12", f"column {column!r} of block {name!r} is stored as {arr.metadata.dtype.name}",
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
                if tag not in _META_STORAGE:
                    raise _err("R10", f"meta array {key!r} has no valid meta_dtype ({tag!r})", f"/trajectory/meta/{key}")
                schema.declare_meta(key, tag)
    return schema


# ============================================================================ doors
def write_mrec_trajectory(path: PathLike, frames: Iterable[Frame], steps: Optional[Sequence[int]] = None,
                          times: Optional[Sequence[float]] = None, meta: Optional[Dict[str, Any]] = None) -> Path:
    """Write a whole trajectory through ``MrecWriter`` (schema derived from the frames).
    An existing record at ``path`` is replaced only when it holds no trajectory sequence."""
    if isinstance(frames, Trajectory):  # a whole Trajectory carries its own numbering
        steps = frames.step if steps is None else steps
        times = frames.time if times is None else times
        frames = frames.frames
    frames = list(frames)
    steps = None if steps is None else [int(v) for v in steps]
    times = None if times is None else [float(v) for v in times]
    if steps is not None and len(steps) != len(frames):
        raise InvalidValueError(f"{len(steps)} steps for {len(frames)} frames")
    if times is not None and len(times) != len(frames):
        raise InvalidValueError(f"{len(times)} times for {len(frames)} frames")
    schema = SequenceSchema.from_frames(frames)

    def build(root: Group) -> None:  # written beside the target, then swapped in (doors.replace_record)
        staging = Path(root.store.root)
        with MrecWriter(staging, schema, flush_every=max(1, len(frames)), meta=meta, durable=False) as writer:
            for i, frame in enumerate(frames):
                writer.append(frame, None if steps is None else steps[i], None if times is None else times[i])

    return replace_record(path, build)


def read_mrec_trajectory(path: PathLike) -> Trajectory:
    """The whole trajectory (0 frames when the record has no trajectory section)."""
    with MrecReader(path) as reader:
        frames = list(reader)
        times = reader.time
        return Trajectory(frames, np.asarray(reader.step, dtype=np.int64),
                          None if times is None else np.asarray(times, dtype=np.float64))
