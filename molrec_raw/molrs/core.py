"""``molrs.core``'s record containers, over molrec_raw's data model (``record/model.py``).

:class:`Frame`, :class:`Block` and :class:`Box` are thin handles on a molrec_raw
``Frame`` / ``Block`` / ``Box``: what a program does through them lands in the molrec_raw
object the record doors write, and what those doors read comes back wrapped.  Typed meta
follows molrs's rules (frame-and-types §4): a plain write infers its tag, a
:class:`MetaValue` states it, reads hand back frozen values (vectors and JSON arrays as
tuples, JSON objects as :class:`MetaDocument`).  Where these differ from molrs:
spec-notes/dropin.md.
"""
from __future__ import annotations

import copy as _copy
from collections.abc import ItemsView, Iterator, KeysView, Mapping, Sequence, ValuesView
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import numpy as np

from molrec_raw.errors import MolrecError
from molrec_raw.record import model as raw
from molrec_raw.record import typed_json
from molrec_raw.record.columns import COLUMN_NUMPY, VOCABULARY, column_dtype_of
from molrec_raw.record.frame_io import is_target_syntax
from molrec_raw.record.precision import check_precision

__all__ = ["BlockDtypeError", "MetaValue", "MetaDocument", "FrameMeta", "Cell", "Box", "Block", "Frame", "Trajectory"]

ArrayLike = Any


class BlockDtypeError(TypeError):
    """A column value a Block cannot hold (object, None-bearing or ragged arrays)."""


# ---------------------------------------------------------------------------------- meta
def _normalized(tag: str, value: Any) -> Any:
    """``value`` as a read of the record would give it back under ``tag`` (§4.2): the
    writer's encoding followed by the reader's decoding; a refusal is molrs's error type."""
    try:
        return typed_json.decode_value(tag, typed_json.encode_value(tag, value))
    except MolrecError as exc:
        if tag in ("i32", "i64", "u32", "u64") and isinstance(value, int):
            raise OverflowError("number too large to fit in target type") from exc
        raise ValueError(str(exc)) from exc


def _freeze(value: Any) -> Any:
    """A JSON value as ``frame.meta`` hands it out: arrays as tuples, objects as documents."""
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return MetaDocument(value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, MetaDocument):
        return value.copy()
    if isinstance(value, (list, tuple)):
        return [_thaw(v) for v in value]
    return value


def _json_value(value: Any) -> bool:
    if value is None or isinstance(value, (bool, str)):
        return True
    if isinstance(value, (int, float)) and type(value).__module__ == "builtins":
        return True
    if isinstance(value, (list, tuple)):
        return all(_json_value(v) for v in value)
    if isinstance(value, (dict, MetaDocument)):
        return all(isinstance(k, str) and _json_value(v) for k, v in value.items())
    return False


def _infer(value: Any) -> Tuple[str, Any]:
    """(tag, value) of an untagged meta write, as molrs infers it: bool, int (i64, else u64),
    float, str; a list or tuple of 3, 6 or 9 numbers is ``f64x3/x6/x9``; other JSON is ``json``."""
    if isinstance(value, MetaValue):
        return value.dtype, value.value
    if isinstance(value, bool):
        return "bool", value
    if type(value) is int:
        if -(2**63) <= value < 2**63:
            return "i64", value
        if value < 2**64:
            return "u64", value
        raise TypeError("integer metadata does not fit i64/u64")
    if isinstance(value, float):
        return "f64", float(value)
    if isinstance(value, str):
        return "string", str(value)
    if isinstance(value, (list, tuple)) and len(value) in (3, 6, 9) and all(
            isinstance(v, (bool, int, float)) and type(v).__module__ == "builtins" for v in value):
        return f"f64x{len(value)}", tuple(float(v) for v in value)
    if not _json_value(value):
        raise TypeError(f"metadata value is not JSON-serializable: {value!r}")
    return "json", _thaw(value)


class MetaValue:
    """A meta value with its dtype stated (one of the 16 tags of frame-and-types §4.1)."""

    __slots__ = ("_dtype", "_value")

    def __init__(self, dtype: str, value: Any) -> None:
        if not isinstance(dtype, str) or dtype not in typed_json.TAGS:
            raise TypeError(f"unknown metadata dtype {dtype!r}")
        self._dtype = dtype
        self._value = _normalized(dtype, _thaw(value))

    @property
    def dtype(self) -> str:
        return self._dtype

    @property
    def value(self) -> Any:
        """The payload: fixed-length vectors as tuples, a ``json`` payload plain."""
        return self._value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MetaValue) and (self._dtype, self._value) == (other._dtype, other._value)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"MetaValue(dtype={self._dtype!r}, value={self._value!r})"


def _stored(value: Any) -> Any:
    """What molrec_raw's ``Frame.meta`` holds for a caller's value: a ``MetaValue`` of its tag."""
    tag, payload = _infer(value)
    if not isinstance(value, MetaValue):
        payload = _normalized(tag, payload)
    return raw.MetaValue(tag, payload)


def _tag_of(stored: Any) -> str:
    if isinstance(stored, raw.MetaValue):
        return typed_json.normalize_tag(stored.tag, allow_legacy=True)
    return typed_json.infer_tag(stored)


def _handed_out(stored: Any) -> Any:
    return _freeze(stored.value if isinstance(stored, raw.MetaValue) else stored)


class MetaDocument(Mapping[str, Any]):
    """A frozen JSON object read from ``frame.meta``; :meth:`copy` is a deep plain dict."""

    __slots__ = ("_doc",)

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self._doc = {k: _freeze(v) for k, v in doc.items()}

    def __getitem__(self, key: str) -> Any:
        return self._doc[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._doc)

    def __len__(self) -> int:
        return len(self._doc)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MetaDocument) and self._doc == other._doc

    __hash__ = None  # type: ignore[assignment]

    def copy(self) -> Dict[str, Any]:
        return {k: _thaw(v) for k, v in self._doc.items()}

    def __repr__(self) -> str:
        return f"MetaDocument({self._doc!r})"


class FrameMeta:
    """The live ``frame.meta`` mapping: writes land in the frame, reads are frozen values;
    ``dtype(key)`` is the tag of the value stored now (None for an absent key)."""

    __slots__ = ("_meta",)

    def __init__(self, meta: Dict[str, Any]) -> None:
        self._meta = meta

    def __getitem__(self, key: object) -> Any:
        if not isinstance(key, str) or key not in self._meta:
            raise KeyError(key)
        return _handed_out(self._meta[key])

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise TypeError(f"argument 'key': {type(key).__name__!r} object is not an instance of 'str'")
        self._meta[key] = _stored(value)

    def __delitem__(self, key: object) -> None:
        if not isinstance(key, str) or key not in self._meta:
            raise KeyError(key)
        del self._meta[key]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self._meta

    def __len__(self) -> int:
        return len(self._meta)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._meta))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrameMeta):
            other = other.copy()
        return isinstance(other, Mapping) and self.copy() == dict(other)

    __hash__ = None  # type: ignore[assignment]

    def dtype(self, key: str) -> Optional[str]:
        return _tag_of(self._meta[key]) if key in self._meta else None

    def keys(self) -> KeysView[str]:
        return KeysView(self.copy())

    def values(self) -> ValuesView[Any]:
        return ValuesView(self.copy())

    def items(self) -> ItemsView[str, Any]:
        return ItemsView(self.copy())

    def get(self, key: object, default: Any = None) -> Any:
        return self[key] if key in self else default

    def pop(self, key: object, *default: Any) -> Any:
        if key not in self:
            if default:
                return default[0]
            raise KeyError(key)
        value = self[key]
        del self[key]
        return value

    def popitem(self) -> Tuple[str, Any]:
        if not self._meta:
            raise KeyError("popitem(): frame meta is empty")
        key = list(self._meta)[-1]
        return key, self.pop(key)

    def clear(self) -> None:
        self._meta.clear()

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, other: Any = None, **kwargs: Any) -> None:
        pairs = other.items() if isinstance(other, (Mapping, FrameMeta)) else (other or ())
        for key, value in list(pairs) + list(kwargs.items()):
            self[key] = value

    def copy(self) -> Dict[str, Any]:
        return {key: _handed_out(value) for key, value in self._meta.items()}

    def typed(self) -> Dict[str, MetaValue]:
        return {key: MetaValue(_tag_of(value), _thaw(_handed_out(value))) for key, value in self._meta.items()}

    def __or__(self, other: Any) -> Dict[str, Any]:
        return {**self.copy(), **dict(other)}

    def __ror__(self, other: Any) -> Dict[str, Any]:
        return {**dict(other), **self.copy()}

    def __ior__(self, other: Any) -> "FrameMeta":
        self.update(other)
        return self

    def __repr__(self) -> str:
        return f"FrameMeta({self.copy()!r})"


# ---------------------------------------------------------------------------------- box
def _vector3(value: ArrayLike, what: str, dtype: Any = np.float64) -> np.ndarray:
    out = np.asarray(value, dtype=dtype)
    if out.shape != (3,):
        raise ValueError(f"{what} must have 3 entries, got shape {list(out.shape)}")
    return out


def _lengths_refused(lengths: np.ndarray) -> ValueError:
    return ValueError(f"cell edge lengths must be positive and finite, got {lengths.tolist()}; a box without "
                      "a cell is Cell::Undefined")


class Cell:
    """The geometry of a cell, one constructor per kind; checked where a :class:`Box` uses it."""

    __slots__ = ("_matrix", "_lengths")

    def __init__(self, matrix: Optional[np.ndarray], lengths: Optional[np.ndarray] = None) -> None:
        self._matrix, self._lengths = matrix, lengths

    @staticmethod
    def matrix(h: ArrayLike) -> "Cell":
        """The ``(3, 3)`` cell matrix (Å), lattice vectors as columns."""
        m = np.array(h, dtype=np.float64)
        if m.shape != (3, 3):
            raise TypeError(f"a cell matrix is (3, 3), got shape {list(m.shape)}")
        return Cell(m)

    @staticmethod
    def lengths(lengths: ArrayLike) -> "Cell":
        """An orthorhombic cell with edge lengths ``[a, b, c]`` (Å)."""
        return Cell(None, _vector3(lengths, "lengths"))

    @staticmethod
    def lengths_tilts(lengths: ArrayLike, tilts: ArrayLike) -> "Cell":
        """Restricted triclinic from ``[lx, ly, lz]`` and tilts ``[xy, xz, yz]`` (Å)."""
        lx, ly, lz = _vector3(lengths, "lengths")
        xy, xz, yz = _vector3(tilts, "tilts")
        return Cell(np.array([[lx, xy, xz], [0.0, ly, yz], [0.0, 0.0, lz]]))

    @staticmethod
    def undefined() -> "Cell":
        """No geometric cell."""
        return Cell(None)

    def resolve(self) -> Optional[np.ndarray]:
        """The checked matrix (None: undefined); ``ValueError`` for a cell that is none."""
        if self._lengths is not None:
            if not (np.all(np.isfinite(self._lengths)) and np.all(self._lengths > 0)):
                raise _lengths_refused(self._lengths)
            return np.diag(self._lengths)
        if self._matrix is None:
            return None
        if not np.all(np.isfinite(self._matrix)):
            raise ValueError("the cell matrix holds a non-finite entry")
        if np.linalg.det(self._matrix) == 0.0:
            raise ValueError("the cell matrix is singular")
        return self._matrix.copy()


class Box:
    """A cell (lattice vectors as the matrix's columns), an origin and per-axis periodicity."""

    __slots__ = ("_raw",)

    def __init__(self, cell: Union[Cell, ArrayLike], origin: ArrayLike = (0.0, 0.0, 0.0),
                 pbc: ArrayLike = (True, True, True)) -> None:
        matrix = (cell if isinstance(cell, Cell) else Cell.matrix(cell)).resolve()
        where = _vector3(origin, "origin")
        periodic = tuple(bool(p) for p in _vector3(pbc, "pbc", bool))
        if matrix is None:
            self._raw = raw.Box(np.eye(3), where, periodic, False)  # type: ignore[arg-type]
        else:
            self._raw = raw.Box(matrix, where, periodic, True)  # type: ignore[arg-type]

    @classmethod
    def _wrap(cls, box: raw.Box) -> "Box":
        self = cls.__new__(cls)
        self._raw = box
        return self

    @staticmethod
    def cube(a: float, origin: ArrayLike = (0.0, 0.0, 0.0), pbc: ArrayLike = (True, True, True)) -> "Box":
        """A cubic box of edge ``a`` (Å)."""
        return Box(Cell.lengths([a, a, a]), origin, pbc)

    @staticmethod
    def ortho(lengths: ArrayLike, origin: ArrayLike = (0.0, 0.0, 0.0), pbc: ArrayLike = (True, True, True)) -> "Box":
        """An orthorhombic box with edge lengths ``[a, b, c]`` (Å)."""
        return Box(Cell.lengths(lengths), origin, pbc)

    @staticmethod
    def from_lengths_tilts(lengths: ArrayLike, tilts: ArrayLike, origin: ArrayLike = (0.0, 0.0, 0.0),
                           pbc: ArrayLike = (True, True, True)) -> "Box":
        """A restricted-triclinic box from ``[lx, ly, lz]`` and tilts ``[xy, xz, yz]`` (Å)."""
        return Box(Cell.lengths_tilts(lengths, tilts), origin, pbc)

    @property
    def is_cell_defined(self) -> bool:
        return bool(self._raw.defined)

    @property
    def is_free(self) -> bool:
        return not any(self._raw.boundary)

    @property
    def style(self) -> str:
        if not self._raw.defined or not any(self._raw.boundary):
            return "free"
        m = np.asarray(self._raw.vectors)
        return "orthogonal" if np.count_nonzero(m - np.diag(np.diagonal(m))) == 0 else "triclinic"

    def volume(self) -> float:
        """``|det(matrix)|`` by cofactor expansion along the first row (molrs's arithmetic)."""
        if not self._raw.defined:
            return 0.0
        m = np.asarray(self._raw.vectors, dtype=np.float64).tolist()
        det = (m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
               + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]))
        return abs(float(det))

    def lattice(self, index: int) -> np.ndarray:
        return np.array(np.asarray(self._raw.vectors, dtype=np.float64)[:, index])

    @property
    def matrix(self) -> np.ndarray:
        return np.array(self._raw.vectors, dtype=np.float64)

    @property
    def origin(self) -> np.ndarray:
        return np.array(self._raw.origin, dtype=np.float64)

    @property
    def pbc(self) -> np.ndarray:
        return np.array(self._raw.boundary, dtype=bool)

    @property
    def lengths(self) -> np.ndarray:
        return np.asarray(np.linalg.norm(self.matrix, axis=0))

    def approx_eq(self, other: "Box", tol: float) -> bool:
        return (self.is_cell_defined == other.is_cell_defined and bool(np.all(self.pbc == other.pbc))
                and bool(np.all(np.abs(self.matrix - other.matrix) <= tol))
                and bool(np.all(np.abs(self.origin - other.origin) <= tol)))

    def __repr__(self) -> str:
        return f'Box(style="{self.style}", volume={self.volume():.2f})'


# ---------------------------------------------------------------------------------- block
_DTYPE_NAMES = {
    "float64": "float", "int64": "i64", "int32": "int", "int16": "i16", "int8": "i8", "uint64": "uint",
    "uint32": "u32", "uint16": "u16", "uint8": "u8", "bool": "bool", "complex128": "c128", "complex64": "c64",
}
ColumnKey = str


def _column(key: str, values: Any) -> np.ndarray:
    """A caller's column as the block stores it: float widths to float64 (molrs's one float),
    text to a numpy ``str`` array; object, None-bearing and ragged values refused."""
    if isinstance(values, np.ndarray):
        arr = values
    elif isinstance(values, Sequence) and not isinstance(values, str) and len(values) and all(
            isinstance(v, str) for v in values):
        arr = np.array(list(values), dtype=str)
    else:
        try:
            arr = np.asarray(values)
        except ValueError as exc:
            raise BlockDtypeError(f"column {key!r}: ragged or mixed values ({exc})") from None
    if arr.dtype.kind == "O":
        if arr.size and all(isinstance(v, str) for v in arr.ravel()):
            arr = arr.astype(str)
        else:
            why = "None-bearing" if any(v is None for v in arr.ravel()) else "mixed"
            raise BlockDtypeError(f"column {key!r} has unsupported dtype 'object'; the object array is {why}. "
                                  "Coerce to a numpy float/int/bool/str column or drop the column")
    if arr.ndim == 0:
        raise ValueError(f"column {key!r}: a scalar is not a column (give one value per row)")
    if arr.dtype.kind == "f" and arr.dtype != np.float64:
        arr = arr.astype(np.float64)
    if arr.dtype.kind not in "fiubcU" or (arr.dtype.kind == "c" and arr.dtype.itemsize not in (8, 16)):
        raise BlockDtypeError(f"column {key!r} has unsupported dtype {str(arr.dtype)!r}")
    return np.array(arr, copy=True)


def _dtype_name(array: np.ndarray) -> str:
    return "string" if array.dtype.kind == "U" else _DTYPE_NAMES.get(array.dtype.name, array.dtype.name)


def _canonical(key: str, arr: np.ndarray, adopt: bool) -> np.ndarray:
    """A canonical key's column at its vocabulary dtype (frame-and-types §3): ``insert``
    refuses another dtype, item assignment converts a numeric column to it."""
    wanted = VOCABULARY.get(key)
    if wanted is None or column_dtype_of(arr) == wanted:
        return arr
    target = np.dtype(str) if wanted == "string" else COLUMN_NUMPY[wanted].newbyteorder("=")
    if adopt and arr.dtype.kind in "fiub" and target.kind in "fiub":
        return arr.astype(target)
    name = "string" if wanted == "string" else _DTYPE_NAMES[target.name]
    raise ValueError(f"column {key!r} is declared {name!r} by the Frame schema, got {_dtype_name(arr)!r}")


def _mask(key: str, validity: Any, rows: int) -> Optional[np.ndarray]:
    if isinstance(validity, np.ndarray):
        ok = validity.dtype == np.bool_ and validity.ndim == 1
    else:
        ok = isinstance(validity, Sequence) and all(isinstance(v, (bool, np.bool_)) for v in validity)
    if not ok:
        raise TypeError(f"validity for column {key!r} must be a 1-D bool array or a sequence of bools")
    mask = np.array(validity, dtype=bool)
    if mask.shape[0] != rows:
        raise ValueError(f"validity mask for key {key!r} has {mask.shape[0]} entr(ies) but the column has "
                         f"{rows} row(s)")
    return None if mask.all() else mask


def _from_store(values: np.ndarray) -> np.ndarray:
    """A column as molrec_raw read it, as molrs hands it out: text as a numpy ``str`` array."""
    if values.dtype.kind == "O":
        return values.astype(str) if values.size else np.array([], dtype=str).reshape(values.shape)
    return values


class Block:
    """Named columns sharing their rows; optional per-column validity mask, precision (f64)
    and row-reference target (u64).  A block taken from a frame is a handle on it."""

    __slots__ = ("_raw",)

    def __init__(self, data: Optional[Mapping[ColumnKey, ArrayLike]] = None) -> None:
        if isinstance(data, Block):
            raise TypeError("Block(block) does not copy a block: use block.copy()")
        self._raw = raw.Block()
        for key, values in (data or {}).items():
            self[key] = values

    @classmethod
    def _wrap(cls, block: raw.Block) -> "Block":
        self = cls.__new__(cls)
        self._raw = block
        for key, values in list(block.columns.items()):
            block.columns[key] = _from_store(np.asarray(values))
        return self

    def _rows(self) -> int:
        return self._raw.nrows

    def _declarations(self) -> List[Dict[str, Any]]:
        """Everything a block keys by column name: values, masks, precision, targets."""
        raw_block = self._raw
        return [raw_block.columns, raw_block.masks, raw_block.precision, raw_block.targets]

    def _has(self, key: str) -> None:
        if key not in self._raw.columns:
            raise KeyError(f'no column "{key}"; available: {", ".join(self._raw.columns)}')

    def insert(self, key: ColumnKey, values: Any, validity: Optional[Any] = None) -> None:
        """Store a column, optionally with its validity mask (an all-True mask is dropped).  A
        canonical key (``x``, ``id``, ``element``... frame-and-types §3) at another dtype is
        refused."""
        arr = _canonical(key, _column(key, values), adopt=False)
        others = [k for k in self._raw.columns if k != key]
        if others and arr.shape[0] != self._rows():
            raise ValueError(f"array for key {key!r} has axis-0 length {arr.shape[0]} but block expects "
                             f"{self._rows()}")
        mask = None if validity is None else _mask(key, validity, arr.shape[0])
        for declared in (self._raw.masks, self._raw.precision, self._raw.targets):
            declared.pop(key, None)
        self._raw.columns[key] = arr
        self._raw.count = arr.shape[0]
        if not others:
            self._raw.structural_shape = None
        if mask is not None:
            self._raw.masks[key] = mask

    def set_validity(self, key: ColumnKey, mask: Any) -> None:
        self._has(key)
        found = _mask(key, mask, self._rows())
        self._raw.masks.pop(key, None)
        if found is not None:
            self._raw.masks[key] = found

    def validity(self, key: ColumnKey) -> Optional[np.ndarray]:
        """The column's mask (True: a value), or None when every row holds one."""
        self._has(key)
        mask = self._raw.masks.get(key)
        return None if mask is None else np.array(mask, dtype=bool)

    def set_precision(self, key: ColumnKey, precision: Optional[float]) -> None:
        """Declare (None: withdraw) the absolute precision of a float64 column (frame-and-types §7)."""
        self._has(key)
        if precision is None:
            self._raw.precision.pop(key, None)
            return
        for problem in check_precision(precision, self._raw.columns[key].dtype, key, write=True):
            raise ValueError(f"column {key!r}: {problem.message} ({problem.rule})")
        self._raw.precision[key] = float(precision)

    def precision(self, key: ColumnKey) -> Optional[float]:
        self._has(key)
        return self._raw.precision.get(key)

    def set_target(self, key: ColumnKey, target: Optional[str]) -> None:
        """Declare (None: withdraw) that a u64 column holds row indices into ``target``
        (``"<block>"`` or ``"/<section>/<block>"``, never a trajectory block; frame-and-types §9)."""
        self._has(key)
        if target is None:
            self._raw.targets.pop(key, None)
            return
        if self._raw.columns[key].dtype != np.uint64:
            raise ValueError(f"column {key!r} is {self.dtype(key)}; a row reference is a u64 column")
        if not is_target_syntax(target):
            raise ValueError(f"column {key!r}: row-reference target {target!r} is neither `<block>` nor "
                             "`/<section>/<block>` (a trajectory block is never a target: its row count is not "
                             "fixed; frame-and-types §9)")
        self._raw.targets[key] = target

    def target(self, key: ColumnKey) -> Optional[str]:
        self._has(key)
        return self._raw.targets.get(key)

    def targets(self) -> Dict[str, str]:
        return dict(self._raw.targets)

    @property
    def coords(self) -> np.ndarray:
        for axis in "xyz":
            self._has(axis)
        return np.column_stack([np.asarray(self._raw.columns[a], dtype=np.float64) for a in "xyz"])

    @coords.setter
    def coords(self, value: ArrayLike) -> None:
        arr = np.asarray(value, dtype=np.float64)
        if arr.ndim != 2 or arr.shape[1] != 3:
            raise ValueError(f"coords must be (N, 3), got shape {list(arr.shape)}")
        for i, axis in enumerate("xyz"):
            self.insert(axis, arr[:, i])

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            self._has(key)
            return self._raw.columns[key]
        if isinstance(key, (list, tuple)):
            for k in key:
                self._has(k)
            return np.column_stack([self._raw.columns[k] for k in key])
        rows = np.arange(self._rows())[key]
        out = Block()
        for name, values in self._raw.columns.items():
            mask = self._raw.masks.get(name)
            out.insert(name, values[rows], None if mask is None else mask[rows])
        return out

    def __setitem__(self, key: Any, value: ArrayLike) -> None:
        if isinstance(key, (list, tuple)):
            arr = np.asarray(value)
            if arr.ndim != 2 or arr.shape[1] != len(key):
                raise ValueError(f"{len(key)} columns need an (N, {len(key)}) array, got shape {list(arr.shape)}")
            for i, k in enumerate(key):
                self[k] = arr[:, i]
            return
        self.insert(key, _canonical(key, _column(key, value), adopt=True))

    def __delitem__(self, key: ColumnKey) -> None:
        self._has(key)
        for declared in self._declarations():
            declared.pop(key, None)
        if not self._raw.columns:
            self._raw.count, self._raw.structural_shape = 0, None

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._raw.columns))

    def __len__(self) -> int:
        return len(self._raw.columns)

    def __contains__(self, key: object) -> bool:
        return key in self._raw.columns

    @property
    def n_rows(self) -> int:
        return self._rows()

    @property
    def shape(self) -> List[int]:
        if self._raw.structural_shape is not None:
            return list(self._raw.structural_shape)
        return [self._rows()] if self._raw.columns else []

    @property
    def structural_shape(self) -> Optional[List[int]]:
        shape = self._raw.structural_shape
        return None if shape is None else list(shape)

    def set_shape(self, shape: Sequence[int]) -> None:
        """Declare the block's structural shape (frame-and-types §8): its product is the row count."""
        dims = [int(d) for d in shape]
        if int(np.prod(dims)) != self._rows():
            raise ValueError(f"shape {dims} has {int(np.prod(dims))} cells but the block has {self._rows()} rows")
        self._raw.structural_shape = tuple(dims)

    def keys(self) -> List[str]:
        return list(self._raw.columns)

    def rename(self, old_key: ColumnKey, new_key: ColumnKey) -> None:
        self._has(old_key)
        for declared in self._declarations():
            if old_key in declared:  # in place: the column keeps its position
                items = [(new_key if k == old_key else k, v) for k, v in declared.items()]
                declared.clear()
                declared.update(items)

    def copy(self) -> "Block":
        """Deep copy: no buffer shared with this block."""
        return Block._wrap(_copy.deepcopy(self._raw))

    def dtype(self, key: ColumnKey) -> str:
        """molrs's name of a column's dtype (``"float"``, ``"i64"``, ``"uint"``, ``"string"``, ...)."""
        self._has(key)
        return _dtype_name(self._raw.columns[key])

    def __repr__(self) -> str:
        return f"Block(n_rows={self._rows()}, keys={self.keys()})"


# ---------------------------------------------------------------------------------- frame
class Frame:
    """Named blocks with an optional ``box`` and typed ``meta``."""

    __slots__ = ("_raw",)

    def __init__(self, blocks: Optional[Mapping[str, Union[Block, Mapping[ColumnKey, ArrayLike]]]] = None, *,
                 meta: Optional[Mapping[str, Any]] = None, box: Optional[Box] = None) -> None:
        if isinstance(blocks, Frame):
            raise TypeError("Frame(frame) does not copy a frame: use frame.copy()")
        self._raw = raw.Frame()
        for name, block in (blocks or {}).items():
            self[name] = block
        if meta is not None:
            self.meta.update(meta)
        self.box = box

    @classmethod
    def _wrap(cls, frame: raw.Frame) -> "Frame":
        """A handle on a frame molrec_raw read (its text columns as numpy ``str`` arrays)."""
        self = cls.__new__(cls)
        self._raw = frame
        for block in frame.blocks.values():
            Block._wrap(block)
        return self

    def __getitem__(self, key: str) -> Block:
        return Block._wrap(self._raw.blocks[key])

    def __setitem__(self, key: str, value: Union[Block, Mapping[ColumnKey, ArrayLike]]) -> None:
        block = value if isinstance(value, Block) else Block(value)
        self._raw.blocks[key] = _copy.deepcopy(block._raw)

    def __delitem__(self, key: str) -> None:
        del self._raw.blocks[key]

    def __contains__(self, key: object) -> bool:
        return key in self._raw.blocks

    def __len__(self) -> int:
        return len(self._raw.blocks)

    def keys(self) -> List[str]:
        return list(self._raw.blocks)

    @property
    def box(self) -> Optional[Box]:
        return None if self._raw.box is None else Box._wrap(_copy.deepcopy(self._raw.box))

    @box.setter
    def box(self, value: Optional[Box]) -> None:
        if value is not None and not isinstance(value, Box):
            raise TypeError(f"a frame's box is a Box or None, not {type(value).__name__}")
        self._raw.box = None if value is None else _copy.deepcopy(value._raw)

    @property
    def meta(self) -> FrameMeta:
        return FrameMeta(self._raw.meta)

    @meta.setter
    def meta(self, value: Any) -> None:
        fresh = FrameMeta({})
        fresh.update(value)
        self._raw.meta.clear()
        self._raw.meta.update(fresh._meta)

    def validate(self) -> None:
        """Refuse (``ValueError``) what a record writer would refuse of this frame."""
        from molrec_raw.molrs._errors import as_molrs
        from molrec_raw.record.frame_io import prepare_frame

        with as_molrs():
            prepare_frame(self._raw, "/frame")

    def copy(self) -> "Frame":
        """Deep copy: blocks (new buffers), box and typed meta."""
        return Frame._wrap(_copy.deepcopy(self._raw))

    @property
    def coords(self) -> np.ndarray:
        return self["atoms"].coords

    @coords.setter
    def coords(self, value: ArrayLike) -> None:
        if "atoms" not in self._raw.blocks:
            self._raw.blocks["atoms"] = raw.Block()
        self["atoms"].coords = value

    def __repr__(self) -> str:
        return f"Frame(blocks={self.keys()}, box={self.box!r})"


# ---------------------------------------------------------------------------------- trajectory
def _labels(value: Any, name: str, dtype: Any, what: str, n: int) -> Optional[np.ndarray]:
    if value is None:
        return None
    if not isinstance(value, np.ndarray) or value.ndim != 1 or value.dtype != dtype:
        raise TypeError(f"argument {name!r}: expected a 1-D {what} array, got {type(value).__name__}")
    if value.shape[0] != n:
        raise ValueError(f"{name} has {value.shape[0]} entries for {n} frames")
    return value.copy()


class Trajectory:
    """Frames in memory with optional per-frame ``step`` (int64) and ``time`` (float64) labels."""

    __slots__ = ("_frames", "_step", "_time")

    def __init__(self, frames: Sequence[Frame], step: Optional[np.ndarray] = None,
                 time: Optional[np.ndarray] = None) -> None:
        self._frames = list(frames)
        for frame in self._frames:
            if not isinstance(frame, Frame):
                raise TypeError(f"a trajectory holds Frames, not {type(frame).__name__}")
        self._step = _labels(step, "step", np.int64, "int64", len(self._frames))
        self._time = _labels(time, "time", np.float64, "float64", len(self._frames))

    def __len__(self) -> int:
        return len(self._frames)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            return Trajectory(self._frames[key], None if self._step is None else self._step[key],
                              None if self._time is None else self._time[key])
        return self._frames[key]

    def map(self, func: Callable[[Frame], Frame]) -> "Trajectory":
        return Trajectory([func(f) for f in self._frames], self._step, self._time)

    @property
    def frames(self) -> List[Frame]:
        return list(self._frames)

    @property
    def step(self) -> Optional[np.ndarray]:
        return None if self._step is None else self._step.copy()

    @property
    def time(self) -> Optional[np.ndarray]:
        return None if self._time is None else self._time.copy()

    def __repr__(self) -> str:
        return f"Trajectory(n_frames={len(self._frames)})"
