"""The collection model (collection.md "Model"): the collection document with its ``units``,
the index block's columns, and the rules every record of a collection keeps.

A collection is many records under one declaration: ``meta`` (the collection document; it
carries ``units``), one ``sequence_schema`` every record's trajectory uses, an ``index`` of
per-record columns, an optional force field, and the records (``meta`` + ``system`` and/or
``trajectory``).  Nothing here touches storage: the LMDB binding (``binding.py``) stores what
these functions check and build.

Rule ids (``collection#C1`` .. ``C13``; the binding's are ``lmdb#L1`` .. ``L17``; the catalogue
``molrec_raw/rules/collection.py`` and ``lmdb.py`` defines them):

- ``C1``  the collection document carries ``units``: an object of quantity → unit string.
- ``C2``  a record presents a subset of the declared blocks and nothing outside the
  declaration (no undeclared block, column or per-step meta key).
- ``C3``  a record's per-step ``meta`` declaration is the collection's exactly; a record's own
  ``schema``, when given, is the collection's (or, when the collection's is derived, agrees
  with it).
- ``C4``  a derived declaration is the union of the records' blocks, which agree on every
  column of a block they share (dtype, trailing shape, precision, target, structural shape,
  the column set itself).
- ``C5``  the four binding columns ``first_frame``, ``n_frames``, ``n_atoms``,
  ``has_trajectory`` are not a collection's own index columns.
- ``C6``  every record's index values are of the index's declared columns (dtype, trailing
  shape; a missing or ``None`` value only for a nullable column); a reader hands them back
  as written.
- ``C7``  a collection has at most one force field; a record carries none of its own.
- ``C8``  a record is ``meta`` plus a ``system`` and/or a ``trajectory``: not neither.
- ``C9``  a trajectory block that shares a name with a ``system`` block holds exactly that
  block's rows in every update (aligned 1:1 by row order).
- ``C10`` a column is not in both the ``system`` block and the trajectory block of one name.
- ``C11`` an aligned trajectory block never shares a name with a ``system`` block, and holds
  its target's row count at every resolved frame.
- ``C12`` record order is the order the writer appended them in.
- ``C13`` many records given as columns (``add_records``): per block, one row count per
  record; each column the records' rows concatenated; per-record columns one value each.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from molrec_raw.errors import InvalidValueError, MolrecError, SpecViolationError, brief
from molrec_raw.record import documents
from molrec_raw.record.columns import COLUMN_DTYPES, COLUMN_NUMPY, VOCABULARY, as_column, column_dtype_of
from molrec_raw.record.precision import check_precision, round_to_precision
from molrec_raw.record.trajectory.schema import ColumnSpec
from molrec_raw.record.violations import refuse
from molrec_raw.zarr import is_valid_node_name

__all__ = [
    "BINDING_COLUMNS", "ColumnSpec", "IndexColumns", "collection_document", "check_units", "check_record_meta",
    "index_column_spec",
]

C1, C2, C3, C4, C5, C6, C7, C8, C9, C10, C11, C12, C13 = (f"collection#C{n}" for n in range(1, 14))

#: The index columns the binding owns (lmdb.md "index"); a collection's own may not take them (C5).
BINDING_COLUMNS: Tuple[str, ...] = ("first_frame", "n_frames", "n_atoms", "has_trajectory")
_RESERVED_INDEX_NAMES = BINDING_COLUMNS + ("_validity",)
_CHUNK_ROWS = 1 << 14  # index rows held per in-memory piece while a writer streams
_RECENT_ROWS = 1 << 10  # binding rows held as tuples before they join the pieces


def check_units(units: Any, where: str) -> Dict[str, str]:
    """``units`` of a collection document (``C1``): an object mapping each quantity to a unit
    string (pint-parseable by the spec's wording; the string is carried, not parsed)."""
    if units is None:
        raise SpecViolationError("a collection must declare its units: a map of quantity to unit string "
                                 "(e.g. {'length': 'angstrom', 'energy': 'eV', 'force': 'eV/angstrom'})",
                                 node=where, rule=C1)
    if not isinstance(units, Mapping):
        raise SpecViolationError(f"units must be an object of quantity -> unit string, found {brief(units)}",
                                 node=where, rule=C1)
    out: Dict[str, str] = {}
    for quantity, unit in units.items():
        if not isinstance(quantity, str) or not isinstance(unit, str) or not unit:
            raise SpecViolationError(f"units entry {brief(quantity)}: {brief(unit)} is not quantity -> unit string",
                                     node=where, rule=C1)
        out[quantity] = unit
    return out


def collection_document(meta: Optional[Mapping[str, Any]], units: Any) -> Dict[str, Any]:
    """The collection document a writer stores: ``molrec_version`` stamped over any caller
    value (lmdb#L5, README decision 1), ``units`` checked (``C1``), the caller's other keys
    kept in their order.  ``units`` given twice (argument and ``meta``) must agree."""
    where = "/meta/collection"
    if meta is None:
        meta = {}
    if not isinstance(meta, Mapping):
        raise SpecViolationError(f"the collection meta must be a JSON object, found {brief(meta)}", node=where, rule=C1)
    if "units" in meta and units is not None and meta["units"] != units:
        raise SpecViolationError("units given twice (the units argument and meta['units']) and they differ",
                                 node=where, rule=C1)
    stated = check_units(units if units is not None else meta.get("units"), where)
    doc: Dict[str, Any] = {"molrec_version": documents.CURRENT_VERSION, "units": stated}
    doc.update((k, v) for k, v in meta.items() if k not in ("molrec_version", "units"))
    refuse(documents.check_finite_json(doc, where, "frame-and-types#14.41"))
    return doc


def check_record_meta(meta: Any, where: str) -> Dict[str, Any]:
    """A record's ``meta`` document (an ordinary record's, frame-and-types §11): plain finite
    JSON, its named keys well formed; it carries no ``molrec_version`` (the collection's
    covers every record, lmdb#L5)."""
    if meta is None:
        return {}
    if not isinstance(meta, Mapping):
        raise SpecViolationError(f"a record's meta must be a JSON object, found {brief(meta)}",
                                 node=where, rule="frame-and-types#11.1")
    if "molrec_version" in meta:
        raise SpecViolationError("a record of a collection carries no molrec_version of its own: the "
                                 "collection's covers every record", node=where, rule="lmdb#L5")
    doc = dict(meta)
    refuse(documents.check_meta(doc, where, writing=True))
    refuse(documents.check_finite_json(doc, where, "frame-and-types#14.41"))
    return doc


# -- the index -----------------------------------------------------------------------------------
def index_column_spec(name: Any, raw: Any, where: str) -> ColumnSpec:
    """One declared index column (``index_schema`` entry): a ``ColumnSpec``, a dtype name, or
    an object ``{dtype, trailing (or shape), precision, nullable}``.  Refuses a reserved name
    (``C5``), a dtype outside the 13, a malformed trailing shape, a canonical key at another
    dtype (frame-and-types#14.38), a precision on a non-f64 column or out of range."""
    at = f"{where}/{name}"
    if not isinstance(name, str) or not is_valid_node_name(name):
        raise SpecViolationError(f"{brief(name)} cannot name an index column", node=where, rule=C6)
    if name in _RESERVED_INDEX_NAMES:
        raise SpecViolationError(f"index column {name!r} is reserved for the binding (reserved: "
                                 f"{', '.join(BINDING_COLUMNS)})", node=at, rule=C5)
    if isinstance(raw, ColumnSpec):
        spec = raw
    elif isinstance(raw, str):
        spec = ColumnSpec(raw)
    elif isinstance(raw, Mapping):
        unknown = [k for k in raw if k not in ("dtype", "trailing", "shape", "precision", "nullable")]
        if unknown or "dtype" not in raw:
            raise SpecViolationError(f"index column {name!r}: an entry is {{dtype, trailing, precision, nullable}}, "
                                     f"got {brief(dict(raw))}", node=at, rule=C6)
        trailing = raw.get("trailing", raw.get("shape", ()))
        if not isinstance(trailing, (list, tuple)) or not all(
                isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1 for n in trailing):
            raise SpecViolationError(f"index column {name!r}: trailing shape {brief(trailing)} is not integers >= 1",
                                     node=at, rule=C6)
        nullable = raw.get("nullable", False)
        if not isinstance(nullable, bool):
            raise SpecViolationError(f"index column {name!r}: nullable {brief(nullable)} is not a bool", node=at, rule=C6)
        spec = ColumnSpec(raw["dtype"], tuple(int(n) for n in trailing), nullable, raw.get("precision"))
    else:
        raise SpecViolationError(f"index column {name!r}: {brief(raw)} is not a ColumnSpec, a dtype or an object",
                                 node=at, rule=C6)
    if not isinstance(spec.dtype, str) or spec.dtype not in COLUMN_DTYPES:
        raise SpecViolationError(f"index column {name!r}: dtype {brief(spec.dtype)} is not one of the 13 column "
                                 f"dtypes ({', '.join(COLUMN_DTYPES)})", node=at, rule="frame-and-types#14.37")
    canonical = VOCABULARY.get(name)
    if canonical is not None and (canonical != spec.dtype or spec.trailing):
        raise SpecViolationError(f"index column {name!r} is a canonical key: {canonical}[N], not {spec.dtype} with "
                                 f"trailing {list(spec.trailing)}", node=at, rule="frame-and-types#14.38")
    if spec.precision is not None:
        for violation in check_precision(spec.precision, spec.dtype, at, write=True):
            raise SpecViolationError(f"index column {name!r}: {violation.message}", node=at, rule=violation.rule)
        spec = ColumnSpec(spec.dtype, tuple(spec.trailing), spec.nullable, float(spec.precision))
    return ColumnSpec(spec.dtype, tuple(int(n) for n in spec.trailing), bool(spec.nullable), spec.precision)


def _inferred_spec(name: str, value: Any, where: str) -> ColumnSpec:
    """The column a first record's index value declares (no ``index_schema``): its dtype as a
    one-row column would be stored (canonical keys at their dtype), its trailing shape."""
    at = f"{where}/{name}"
    if value is None:
        raise SpecViolationError(f"index column {name!r}: a None value cannot declare a column; declare it nullable "
                                 "in index_schema", node=at, rule=C6)
    column = as_column(name, np.asarray([value], dtype=object if isinstance(value, str) else None), at)
    dtype = column_dtype_of(column)
    assert dtype is not None, "as_column returned a column dtype"
    return index_column_spec(name, ColumnSpec(dtype, tuple(column.shape[1:])), where)


_INT_RANGES = {name: (int(np.iinfo(COLUMN_NUMPY[name]).min), int(np.iinfo(COLUMN_NUMPY[name]).max))
               for name in ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")}


def _coerced(spec: ColumnSpec, value: Any, at: str) -> Any:
    """``value`` held exactly to ``spec`` (C6): the right kind, in range, of the trailing
    shape; a real or complex value only where the stored one is exactly it."""
    array = np.asarray(value, dtype=object if spec.dtype == "string" else None)
    if array.shape != tuple(spec.trailing):
        raise SpecViolationError(f"index value of shape {array.shape} for a column of trailing shape "
                                 f"{list(spec.trailing)}", node=at, rule=C6)
    if spec.dtype == "string":
        if not all(isinstance(v, str) for v in array.ravel().tolist()):
            raise SpecViolationError(f"index value {brief(value)} is not a string", node=at, rule=C6)
        return array if array.ndim else str(array[()])
    kind = array.dtype.kind
    allowed = {"bool": "b", "f64": "fiu", "c64": "fiuc", "c128": "fiuc"}.get(spec.dtype, "iu")
    if kind not in allowed:
        raise SpecViolationError(f"index value {brief(value)} cannot be stored as {spec.dtype}", node=at, rule=C6)
    if spec.dtype in _INT_RANGES and array.size:
        lo, hi = _INT_RANGES[spec.dtype]
        if int(array.min()) < lo or int(array.max()) > hi:
            raise SpecViolationError(f"index value {brief(value)} is out of range for {spec.dtype}", node=at, rule=C6)
    stored = array.astype(COLUMN_NUMPY[spec.dtype])
    if kind in "fc" or spec.dtype[0] in "fc":
        back = stored.astype(array.dtype) if kind == "c" or spec.dtype[0] != "c" else stored.real.astype(array.dtype)
        if not np.array_equal(back, array, equal_nan=kind in "fc"):
            raise SpecViolationError(f"index value {brief(value)} is not exactly a {spec.dtype}", node=at, rule=C6)
    return stored


class _ColumnStore:
    """One index column, held in pieces of ``_CHUNK_ROWS`` rows while a writer streams."""

    def __init__(self, spec: ColumnSpec) -> None:
        self.spec = spec
        self.pieces: List[np.ndarray] = []
        self.masks: List[np.ndarray] = []
        self.strings: List[Any] = []
        self.valid: List[bool] = []
        self.used = 0
        self._piece: Optional[np.ndarray] = None
        self._mask: Optional[np.ndarray] = None

    def append(self, value: Any, valid: bool) -> None:
        if self.spec.dtype == "string":
            self.strings.append(value if valid else (np.full(self.spec.trailing, "", object) if self.spec.trailing else ""))
            self.valid.append(valid)
            return
        if self._piece is None or self.used == _CHUNK_ROWS:
            if self._piece is not None:
                self.pieces.append(self._piece)
                self.masks.append(self._mask)  # type: ignore[arg-type]
            self._piece = np.zeros((_CHUNK_ROWS,) + tuple(self.spec.trailing), COLUMN_NUMPY[self.spec.dtype])
            self._mask = np.ones(_CHUNK_ROWS, bool)
            self.used = 0
        if valid:
            self._piece[self.used] = value
        else:
            assert self._mask is not None
            self._mask[self.used] = False
        self.used += 1

    def column(self) -> Tuple[np.ndarray, np.ndarray]:
        """(values, validity) over every row appended."""
        if self.spec.dtype == "string":
            values = np.empty((len(self.strings),) + tuple(self.spec.trailing), dtype=object)
            for i, v in enumerate(self.strings):
                values[i] = v
            return values, np.asarray(self.valid, dtype=bool)
        pieces = list(self.pieces) + ([] if self._piece is None else [self._piece[:self.used]])
        masks = list(self.masks) + ([] if self._mask is None else [self._mask[:self.used]])
        empty = np.zeros((0,) + tuple(self.spec.trailing), COLUMN_NUMPY[self.spec.dtype])
        values = np.concatenate(pieces) if pieces else empty
        if self.spec.precision is not None:
            values = round_to_precision(values, self.spec.precision)
        return values, (np.concatenate(masks) if masks else np.ones(0, bool))


@dataclass
class IndexValues:
    """One record's checked index values (``(value, valid)`` per column) and the columns they
    are of."""

    values: Dict[str, Tuple[Any, bool]]
    specs: Dict[str, ColumnSpec]


@dataclass
class IndexRow:
    """One record's binding columns (lmdb.md "index")."""

    n_frames: int
    n_atoms: int
    has_trajectory: bool


class IndexColumns:
    """The index block a writer builds record by record (``C5``, ``C6``).

    Columns are ``index_schema``'s when given (an empty collection still has them; a record
    gives only those, a missing one only when it is nullable).  Without one, the records
    declare them: a column's dtype and trailing shape are those of the first value given for
    it (as the column would be stored: canonical keys at their dtype), every later value
    agrees, and a record that gives no value for a column — or a record before the first
    that gave one — holds null there (the column is then nullable).  Memory: per record, its
    index row (the binding's 24 bytes and the collection's own columns) — the one thing a
    streaming writer holds for every record.
    """

    def __init__(self, index_schema: Optional[Mapping[str, Any]], where: str = "/index/records") -> None:
        self.where = where
        self.declared = index_schema is not None
        self.specs: Dict[str, ColumnSpec] = {}
        if index_schema is not None:
            if not isinstance(index_schema, Mapping):
                raise InvalidValueError(f"index_schema must be a mapping of column -> spec, got "
                                        f"{type(index_schema).__name__}", node=where, rule=C6)
            for name, raw in index_schema.items():
                self.specs[name] = index_column_spec(name, raw, where)
        self._stores: Dict[str, _ColumnStore] = {n: _ColumnStore(s) for n, s in self.specs.items()}
        self._pieces: List[np.ndarray] = []
        self._recent: List[Tuple[int, int, int]] = []  # binding rows since the last piece (< _RECENT_ROWS)
        self.rows = 0

    def prepare(self, values: Optional[Mapping[str, Any]], record: int) -> "IndexValues":
        """One record's index values, checked (``C6``) and coerced; nothing is kept yet (a
        derived index grows by the columns this record is the first to give)."""
        where = f"{self.where}[{record}]"
        if values is not None and not isinstance(values, Mapping):
            raise InvalidValueError(f"index must be a mapping of column -> value, got {type(values).__name__}",
                                    node=where, rule=C6)
        given = dict(values or {})
        specs = self.specs
        extra = [name for name in given if name not in specs]
        if extra:
            reserved = [n for n in extra if n in _RESERVED_INDEX_NAMES]
            if reserved:
                raise SpecViolationError(f"index column {reserved[0]!r} is reserved for the binding (reserved: "
                                         f"{', '.join(BINDING_COLUMNS)})", node=f"{where}/{reserved[0]}", rule=C5)
            if self.declared:
                raise SpecViolationError(f"index column(s) {extra} are not among the columns index_schema declared "
                                         f"({list(specs)})", node=where, rule=C6)
            specs = dict(specs)
            for name in extra:
                if given[name] is not None:
                    specs[name] = _inferred_spec(name, given[name], self.where)
        out: Dict[str, Tuple[Any, bool]] = {}
        for name, spec in specs.items():
            value = given.get(name)
            at = f"{where}/{name}"
            if value is None:
                if not spec.nullable and self.declared:
                    raise SpecViolationError(f"record {record} gives no value for index column {name!r}, which is not "
                                             "nullable", node=at, rule=C6)
                out[name] = (None, False)
                continue
            try:
                out[name] = (_coerced(spec, value, at), True)
            except MolrecError:
                raise
            except (TypeError, ValueError, OverflowError) as exc:
                raise SpecViolationError(f"index value {brief(value)} cannot be stored as {spec.dtype}: {exc}",
                                         node=at, rule=C6) from None
        return IndexValues(out, specs)

    def append(self, row: IndexRow, prepared: "IndexValues") -> None:
        """Keep one record's row (after the record was accepted)."""
        self.add(row.n_frames, row.n_atoms, row.has_trajectory, prepared)

    def add(self, n_frames: int, n_atoms: int, has_trajectory: bool, prepared: "IndexValues") -> None:
        """:meth:`append` of the row's three binding values."""
        recent = self._recent
        recent.append((n_frames, n_atoms, 1 if has_trajectory else 0))
        if len(recent) == _RECENT_ROWS:  # (held as numpy: 24 bytes a record)
            self._pieces.append(np.array(recent, np.uint64))
            recent.clear()
        if not (prepared.specs or self._stores):  # no index columns of the collection's own
            self.rows += 1
            return
        for name, spec in prepared.specs.items():
            if name not in self._stores:  # a derived column first given now: the rows before hold null
                store = self._stores[name] = _ColumnStore(ColumnSpec(spec.dtype, spec.trailing, self.rows > 0,
                                                                     spec.precision))
                for _ in range(self.rows):
                    store.append(None, False)
        self.specs = {name: store.spec for name, store in self._stores.items()}
        for name, store in self._stores.items():
            value, valid = prepared.values.get(name, (None, False))
            if not valid and not store.spec.nullable:  # derived: a column without a value here is nullable
                store.spec = ColumnSpec(store.spec.dtype, store.spec.trailing, True, store.spec.precision)
                self.specs[name] = store.spec
            store.append(value, valid)
        self.rows += 1

    def columns(self) -> Tuple[Dict[str, np.ndarray], Dict[str, np.ndarray]]:
        """Every column of the ``records`` block in order (the binding's four first), and the
        masks of the nullable ones (always written for a nullable column, so a reader of an
        empty collection still sees it nullable)."""
        pieces = self._pieces + [np.array(self._recent, np.uint64).reshape(-1, 3)]
        binding = np.concatenate(pieces)
        n_frames = np.ascontiguousarray(binding[:, 0])
        first = np.zeros(len(n_frames), np.uint64)
        if len(n_frames) > 1:
            np.cumsum(n_frames[:-1], out=first[1:])
        columns: Dict[str, np.ndarray] = {
            "first_frame": first, "n_frames": n_frames, "n_atoms": np.ascontiguousarray(binding[:, 1]),
            "has_trajectory": binding[:, 2].astype(bool)}
        masks: Dict[str, np.ndarray] = {}
        for name, store in self._stores.items():
            values, valid = store.column()
            columns[name] = values
            if store.spec.nullable:
                masks[name] = valid
        return columns, masks
