"""``CollectionReader`` / ``read_collection``: a collection read at random (lmdb.md).

Opening checks the binding (``meta`` present, ``layout``, ``layout_version``, counts), the
collection document (``units``, ``molrec_version``), the declaration, the index (its four
binding columns, its prefix sums) and the force field.  A record is read when asked:
``c[r].system``, ``c[r].trajectory[k]`` (carry-forward resolved inside the record), the
reader's view ``c[r].frame(k)``; ``c.batch(records)`` gathers many records' frames into
flat arrays.

Copies and views: every call of a ``CollectionReader`` and of its ``Record`` returns data the
caller owns — each value is copied out of LMDB's map once (one ``memcpy``), its arrays are
writable views of that copy — because the map is only stable while the read transaction that
returned it is open.  ``c.batch`` concatenates straight out of the map inside one transaction
(the concatenation is the one copy).  Only :meth:`CollectionReader.view` hands out views *into
the map*: a context manager holding one read transaction, whose records' arrays are
read-only, valid until the ``with`` block ends (use them there, copy what you keep).
"""
from __future__ import annotations

import bisect
import operator
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import orjson

from molrec_raw.errors import CorruptDataError, InvalidValueError, MolrecError, SpecViolationError, StoreError, brief
from molrec_raw.record import documents, typed_json
from molrec_raw.record.columns import COLUMN_NUMPY, column_dtype_of
from molrec_raw.record.forcefield import ForceFieldSection, check_forcefield
from molrec_raw.record.frame_io import canonical_violation, check_block_shape, check_targets
from molrec_raw.record.model import Block, Box, Frame, MetaValue
from molrec_raw.record.trajectory.meta import META_STORAGE
from molrec_raw.record.trajectory.references import check_resolved
from molrec_raw.record.trajectory.schema import ColumnSpec, SequenceSchema
from molrec_raw.record.violations import Violation, refuse
from molrec_raw.collection import binding
from molrec_raw.collection.binding import FF_KEY, FRAME, INDEX_BLOCK, INDEX_KEY, META_KEY, RECORD_META, SYSTEM, key, key_name
from molrec_raw.collection.frame_bytes import DecodedFrame, decode_frame, header_of
from molrec_raw.collection.model import BINDING_COLUMNS, C1, C2, C3, C9, C10, C11, check_units

__all__ = ["CollectionReader", "CollectionView", "Record", "RecordTrajectory", "read_collection"]

L5, L7, L8, L14, L15, L16 = "lmdb#L5", "lmdb#L7", "lmdb#L8", "lmdb#L14", "lmdb#L15", "lmdb#L16"
_BINDING_DTYPES = {"first_frame": "u64", "n_frames": "u64", "n_atoms": "u64", "has_trajectory": "bool"}
_RESOLVED_RULES = {"trajectory#R16": C11, "trajectory#R17": "trajectory#R17"}


def read_collection(path: Any) -> "CollectionReader":
    """Open a collection (``*.mrec.lmdb``) for reading: ``CollectionReader(path)``."""
    return CollectionReader(path)


class _Reading:
    """One read transaction.  ``copy``: each value is copied out of the map (the arrays made
    from it outlive the transaction); else values are views into the map."""

    __slots__ = ("txn", "copy", "path")

    def __init__(self, env: Any, copy: bool, path: str) -> None:
        self.txn = env.begin(buffers=True)
        self.copy, self.path = copy, path

    def get(self, k: bytes) -> Any:
        value = self.txn.get(k)
        if value is None or not self.copy:
            return value
        return bytearray(value)

    def close(self) -> None:
        self.txn.abort()


def _fail(error: type, message: str, store: str, k: Optional[bytes], node: str, rule: str) -> MolrecError:
    return error(message, store=store, key=None if k is None else key_name(k), node=node, rule=rule)  # type: ignore[no-any-return]


class CollectionReader:
    """Read a collection: ``len(c)``, ``c[r]`` (a :class:`Record`), iteration, ``c.meta``,
    ``c.units``, ``c.schema``, ``c.index``, ``c.index_schema``, ``c.forcefield``,
    ``c.batch(records, frame=0)``, ``c.view()``.  Many processes may read one file at once,
    each with its own environment; a reader carried into a ``fork`` child reopens the file
    there (its first use in the child), and pickles as its path (a ``DataLoader`` worker
    started with ``spawn`` reopens it too)."""

    def __init__(self, path: Any) -> None:
        self._lmdb = binding.import_lmdb()
        self._path = Path(os.fspath(path))
        self._where = str(self._path)
        self._handle: Optional[binding.Handle] = binding.acquire(self._path)
        try:
            self._load()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ opening
    def _env(self) -> Any:
        handle = self._handle
        if handle is None:
            raise InvalidValueError("the collection reader is closed", store=self._where)
        if handle.env is None or handle.inherited:  # a fork child: this process opens the file anew
            self._handle = None
            self._handle = binding.acquire(self._path)
            handle = self._handle
        return handle.env

    @contextmanager
    def _reading(self) -> Iterator[_Reading]:
        reading = _Reading(self._env(), True, self._where)
        try:
            yield reading
        finally:
            reading.close()

    def _load(self) -> None:
        where = self._where
        with self._reading() as reading:
            meta_raw, index_raw, ff_raw = (reading.get(k) for k in (META_KEY, INDEX_KEY, FF_KEY))
        doc = binding.read_meta_value(None if meta_raw is None else bytes(meta_raw), where)
        collection = doc["collection"]
        if type(collection) is not dict:
            raise _fail(SpecViolationError, f"the collection document is not a JSON object: {brief(collection)}",
                        where, META_KEY, "/meta/collection", C1)
        try:
            check_units(collection.get("units"), "/meta/collection")
            documents.meta_version(collection)
        except SpecViolationError as exc:
            rule = L5 if exc.rule == "frame-and-types#14.23" else exc.rule
            raise _fail(SpecViolationError, exc.message, where, META_KEY, "/meta/collection", rule or C1) from None
        try:
            self._schema = SequenceSchema.from_json(doc["sequence_schema"])
        except MolrecError as exc:
            raise exc.add_context(store=where, key="meta") from None
        self._meta = collection
        self._n_records, self._n_frames = int(doc["n_records"]), int(doc["n_frames"])
        self._load_index(index_raw)
        self._forcefield = None if ff_raw is None else self._load_forcefield(ff_raw)
        self._meta_tags = {k: t for k, t in self._schema.meta_keys()}
        self._aligned = {b for b in self._schema.block_names() if self._schema.aligned_with(b) is not None}
        self._resolved_check = any(self._schema.targets(b) or self._schema.aligned_with(b)
                                   for b in self._schema.block_names())

    def _load_index(self, raw: Any) -> None:
        where, node = self._where, f"/index/{INDEX_BLOCK}"
        if raw is None:
            raise _fail(SpecViolationError, "no 'index' key: a collection's index is written with its meta",
                        where, INDEX_KEY, "/index", L7)
        try:
            decoded = decode_frame(raw, "/index")
        except MolrecError as exc:
            raise exc.add_context(store=where, key="index") from None
        if list(decoded.blocks) != [INDEX_BLOCK] or decoded.meta or decoded.has_step or decoded.has_time or decoded.box:
            raise _fail(SpecViolationError, f"the index is one block {INDEX_BLOCK!r} and nothing else, found blocks "
                        f"{list(decoded.blocks)}", where, INDEX_KEY, "/index", L7)
        block = decoded.blocks[INDEX_BLOCK]
        if block.nrows != self._n_records:
            raise _fail(SpecViolationError, f"the index has {block.nrows} rows for meta's n_records "
                        f"{self._n_records}", where, INDEX_KEY, node, L7)
        binding_columns = {}
        for name, dtype in _BINDING_DTYPES.items():
            values = block.columns.get(name)
            if values is None or column_dtype_of(values) != dtype or values.ndim != 1 or name in block.masks:
                found = "missing" if values is None else f"{column_dtype_of(values)}{list(values.shape)}"
                raise _fail(SpecViolationError, f"binding column {name!r} must be {dtype}[R] without a mask, found "
                            f"{found}", where, INDEX_KEY, f"{node}/{name}", L7)
            binding_columns[name] = np.array(values)
        n_frames = binding_columns["n_frames"].astype(np.uint64)
        first = binding_columns["first_frame"]
        expected = np.zeros(len(n_frames), np.uint64)
        with np.errstate(over="ignore"):
            if len(n_frames) > 1:
                np.cumsum(n_frames[:-1], out=expected[1:])
            total = int(n_frames.sum(dtype=np.uint64)) if len(n_frames) else 0
        if not np.array_equal(first, expected):
            bad = int(np.flatnonzero(first != expected)[0])
            raise _fail(SpecViolationError, f"first_frame is not the exclusive prefix sum of n_frames (record {bad}: "
                        f"{int(first[bad])}, expected {int(expected[bad])})", where, INDEX_KEY, f"{node}/first_frame", L7)
        if total != self._n_frames or (len(n_frames) and int(n_frames.max()) > self._n_frames):
            raise _fail(SpecViolationError, f"the records' frames add up to {total}, meta's n_frames is "
                        f"{self._n_frames}", where, INDEX_KEY, f"{node}/n_frames", L7)
        lone = np.flatnonzero(~binding_columns["has_trajectory"] & (n_frames > 0))
        if lone.size:
            raise _fail(SpecViolationError, f"record {int(lone[0])} has frames but no trajectory (has_trajectory "
                        "false)", where, INDEX_KEY, f"{node}/has_trajectory", L7)
        self._first = first.astype(np.int64)
        self._count = n_frames.astype(np.int64)
        self._n_atoms = binding_columns["n_atoms"]
        self._has_trajectory = binding_columns["has_trajectory"]
        own = Block({c: np.array(v) for c, v in block.columns.items() if c not in BINDING_COLUMNS},
                    {c: np.array(m) for c, m in block.masks.items() if c not in BINDING_COLUMNS},
                    {c: p for c, p in block.precision.items() if c not in BINDING_COLUMNS},
                    {c: t for c, t in block.targets.items() if c not in BINDING_COLUMNS}, None, dict(block.attrs),
                    block.nrows)
        problems = list(_block_problems(own, node))
        if problems:
            raise _fail(SpecViolationError, problems[0].message, where, INDEX_KEY, problems[0].node, problems[0].rule)
        self._index_schema = {c: ColumnSpec(column_dtype_of(v) or "", tuple(v.shape[1:]), c in own.masks,
                                            own.precision.get(c)) for c, v in own.columns.items()}
        own.masks = {c: m for c, m in own.masks.items() if not m.all()}
        self._index = own

    def _load_forcefield(self, raw: Any) -> ForceFieldSection:
        where = self._where
        try:
            decoded = decode_frame(raw, "/ff")
        except MolrecError as exc:
            raise exc.add_context(store=where, key="ff") from None
        if decoded.meta_types is not None or decoded.has_step or decoded.has_time or decoded.box is not None:
            raise _fail(SpecViolationError, "the force-field frame holds its document and style tables only (no "
                        "meta_types, step, time or box)", where, FF_KEY, "/ff", L15)
        tables = {name: _owned(block) for name, block in decoded.blocks.items()}
        problems = [p for name, b in tables.items() for p in _block_problems(b, f"/ff/{name}")]
        problems += list(check_forcefield(decoded.meta, tables, "/ff"))
        if problems:
            raise _fail(SpecViolationError, problems[0].message, where, FF_KEY, problems[0].node, problems[0].rule)
        return ForceFieldSection(decoded.meta, tables)

    # ------------------------------------------------------------------ the collection
    @property
    def path(self) -> Path:
        """The collection file."""
        return self._path

    def __len__(self) -> int:
        return self._n_records

    @property
    def n_frames(self) -> int:
        """Trajectory frames over every record."""
        return self._n_frames

    @property
    def meta(self) -> Dict[str, Any]:
        """The collection document as stored (``units``, ``molrec_version``, the other keys); a copy."""
        return orjson.loads(orjson.dumps(self._meta))  # type: ignore[no-any-return]

    @property
    def units(self) -> Dict[str, str]:
        """Quantity → unit, for every record and column (``collection#C1``)."""
        return dict(self._meta["units"])

    @property
    def schema(self) -> SequenceSchema:
        """The ``sequence_schema`` every record's trajectory uses (a copy)."""
        return self._schema.copy()

    @property
    def index(self) -> Block:
        """The collection's own index columns, ``R`` rows in record order, as written (the
        binding's four columns are not part of it: :meth:`binding_index`)."""
        return _owned(self._index)

    @property
    def index_schema(self) -> Dict[str, ColumnSpec]:
        """The declared index columns (dtype, trailing shape, nullable, precision) — there even
        when the collection has no record."""
        return dict(self._index_schema)

    def binding_index(self) -> Dict[str, np.ndarray]:
        """The binding's columns (lmdb.md "index"): ``first_frame``, ``n_frames``, ``n_atoms``,
        ``has_trajectory`` (copies)."""
        return {"first_frame": self._first.astype(np.uint64), "n_frames": self._count.astype(np.uint64),
                "n_atoms": self._n_atoms.copy(), "has_trajectory": self._has_trajectory.copy()}

    @property
    def forcefield(self) -> Optional[ForceFieldSection]:
        """The collection's force field (``collection#C7``), or None."""
        return self._forcefield

    def _number(self, r: Any) -> int:
        try:
            n = operator.index(r)
        except TypeError:
            raise TypeError(f"records are numbered by integers, not {type(r).__name__}") from None
        if n < 0:
            n += self._n_records
        if not 0 <= n < self._n_records:
            raise IndexError(f"record {r} of a collection of {self._n_records}")
        return n

    def __getitem__(self, r: int) -> "Record":
        return Record(self, self._number(r), None)

    def __iter__(self) -> Iterator["Record"]:
        for r in range(self._n_records):
            yield Record(self, r, None)

    # ------------------------------------------------------------------ decoding records
    def _record_meta(self, reading: _Reading, r: int) -> Dict[str, Any]:
        k = key(RECORD_META, r)
        raw = reading.get(k)
        if raw is None:
            return {}
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise _fail(CorruptDataError, f"record meta is not UTF-8 JSON: {exc}", self._where, k,
                        f"/records/{r}/meta", "lmdb#L2") from None
        if type(doc) is not dict:
            raise _fail(SpecViolationError, f"record meta is not a JSON object: {brief(doc)}", self._where, k,
                        f"/records/{r}/meta", "frame-and-types#11.1")
        return doc

    def _system_value(self, reading: _Reading, r: int) -> Optional[DecodedFrame]:
        k = key(SYSTEM, r)
        raw = reading.get(k)
        if raw is None:
            return None
        node = f"/records/{r}/system"
        try:
            decoded = decode_frame(raw, node)
        except MolrecError as exc:
            raise exc.add_context(store=self._where, key=key_name(k)) from None
        if decoded.has_step or decoded.has_time or decoded.box is not None:
            raise _fail(SpecViolationError, "a system frame carries no step, time or box (they appear only on "
                        "trajectory updates)", self._where, k, node, L16)
        return decoded

    def _system(self, reading: _Reading, r: int) -> Optional[Frame]:
        decoded = self._system_value(reading, r)
        if decoded is None:
            return None
        k, node = key(SYSTEM, r), f"/records/{r}/system"
        blocks = decoded.blocks
        problems = [p for name, b in blocks.items() for p in _block_problems(b, f"{node}/{name}")]
        rows = _rows_of(blocks)
        problems += [p for name, b in blocks.items() for p in check_targets(b, blocks, f"{node}/{name}", rows)]
        if problems:
            raise _fail(SpecViolationError, problems[0].message, self._where, k, problems[0].node, problems[0].rule)
        aligned = [name for name in blocks if name in self._aligned]
        if aligned:
            raise _fail(SpecViolationError, f"aligned block {aligned[0]!r} shares its name with a system block",
                        self._where, k, f"{node}/{aligned[0]}", C11)
        attrs = dict(decoded.meta)
        if typed_json.META_TYPES_KEY in attrs:
            raise _fail(SpecViolationError, f"a meta key may not be named {typed_json.META_TYPES_KEY!r}", self._where, k,
                        node, "frame-and-types#14.33")
        if decoded.meta_types is not None:
            attrs[typed_json.META_TYPES_KEY] = decoded.meta_types
        try:
            meta = typed_json.decode_document(attrs, node)
        except MolrecError as exc:
            raise exc.add_context(store=self._where, key=key_name(k)) from None
        for block in blocks.values():
            block.masks = {c: m for c, m in block.masks.items() if not m.all()}
        return Frame(meta, blocks, None)

    def _update(self, reading: _Reading, r: int, j: int, k: int) -> "_Update":
        """The trajectory update at global ordinal ``j`` (frame ``k`` of record ``r``),
        checked against the declaration (lmdb#L8)."""
        fk = key(FRAME, j)
        raw = reading.get(fk)
        node = f"/records/{r}/trajectory"
        if raw is None:
            raise _fail(CorruptDataError, f"frame {k} of record {r} (key {key_name(fk)}) is missing", self._where, fk,
                        node, L8)
        try:
            decoded = decode_frame(raw, node)
            return self._checked_update(decoded, r, k, node)
        except MolrecError as exc:
            raise exc.add_context(store=self._where, key=key_name(fk)) from None

    def _checked_update(self, decoded: DecodedFrame, r: int, k: int, node: str) -> "_Update":
        schema = self._schema
        if decoded.meta_types is not None:
            raise SpecViolationError("a trajectory update carries no meta_types (its keys are typed by the "
                                     "sequence_schema)", node=node, rule=L15)
        if not decoded.has_step:
            raise SpecViolationError(f"trajectory frame {k} has no step", node=node, rule=L8)
        step = typed_json.decode_value("i64", decoded.step, f"{node}/step")
        time = typed_json.decode_value("f64", decoded.time, f"{node}/time") if decoded.has_time else None
        for name, block in decoded.blocks.items():
            at = f"{node}/{name}"
            if not schema.has_block(name):
                raise SpecViolationError(f"trajectory frame {k}: block {name!r} is not in the sequence schema",
                                         node=at, rule=C2)
            spec = schema.block_spec(name)
            if block.columns.keys() != spec.columns.keys():
                raise SpecViolationError(f"trajectory frame {k}: block {name!r} has columns {list(block.columns)}, the "
                                         f"declaration {list(spec.columns)}", node=at, rule=C2)
            if block.precision:
                raise SpecViolationError("a trajectory frame's columns carry no precision (the sequence_schema "
                                         "declares it)", node=at, rule=L14)
            if block.attrs:
                raise SpecViolationError("a trajectory block carries no attributes", node=at, rule=L16)
            if block.targets and block.targets != spec.targets:
                raise SpecViolationError(f"block targets {block.targets} differ from the declaration's "
                                         f"{spec.targets}", node=at, rule=C2)
            for column, values in block.columns.items():
                cspec = spec.columns[column]
                if column_dtype_of(values) != cspec.dtype or values.shape[1:] != cspec.trailing:
                    raise SpecViolationError(f"column {column!r} is {column_dtype_of(values)} with trailing "
                                             f"{list(values.shape[1:])}; the declaration says {cspec.dtype} with "
                                             f"trailing {list(cspec.trailing)}", node=f"{at}/{column}", rule=C2)
                if column in block.masks and not cspec.nullable:
                    raise SpecViolationError(f"column {column!r} is not nullable but carries a mask",
                                             node=f"{at}/{column}", rule=C2)
            shape = spec.structural_shape
            if shape is not None and block.nrows != int(np.prod(shape)):
                raise SpecViolationError(f"block {name!r} has {block.nrows} rows; its structural shape {list(shape)} "
                                         "needs their product", node=at, rule="trajectory#R12")
            block.masks = {c: m for c, m in block.masks.items() if not m.all()}
            block.precision = {c: s.precision for c, s in spec.columns.items() if s.precision is not None}
            block.targets = dict(spec.targets)
            block.structural_shape = shape
        meta = decoded.meta
        if meta.keys() != self._meta_tags.keys():
            missing = [m for m in self._meta_tags if m not in meta]
            extra = [m for m in meta if m not in self._meta_tags]
            raise SpecViolationError(f"trajectory frame {k} carries meta keys {list(meta)}: every declared key, nothing "
                                     f"else (missing {missing}, undeclared {extra})", node=f"{node}/meta",
                                     rule=L8 if missing else C2)
        return _Update(k, decoded.blocks, meta, step, time, decoded.box)

    def _meta_values(self, raw: Dict[str, Any], node: str) -> Dict[str, Any]:
        attrs = dict(raw)
        attrs[typed_json.META_TYPES_KEY] = self._meta_tags
        return typed_json.decode_document(attrs, f"{node}/meta")

    # ------------------------------------------------------------------ batches
    def batch(self, records: Iterable[int], frame: Optional[int] = 0) -> Dict[str, np.ndarray]:
        """Many records' frame ``frame`` (negative counts from each record's end; ``None``: the
        systems alone) as flat arrays, the reader's view (system and trajectory blocks sharing
        a name are one block): ``"<block>/<column>"`` concatenated over the records (a column
        a record's block lacks is refused), ``"<block>/_validity/<column>"`` for masked
        columns, ``"n_<block>"`` rows per record, one array per declared per-step meta key,
        ``"step"``, ``"time"`` (when every record has times), ``"box/vectors"``,
        ``"box/origin"``, ``"box/boundary"``, ``"box/cell_defined"`` (when a record has a
        cell; one without reads as an undefined cell) and ``"record"``.  Every array is new
        (the one copy out of the map); nothing refers to the map afterwards."""
        numbers = [self._number(r) for r in (records.tolist() if isinstance(records, np.ndarray) else records)]
        reading = _Reading(self._env(), False, self._where)
        try:
            return _Batch(self, numbers, frame).gather(reading)
        finally:
            reading.close()

    # ------------------------------------------------------------------ views
    @contextmanager
    def view(self) -> Iterator["CollectionView"]:
        """A read transaction held open: ``with c.view() as v: v[r].system ...`` — arrays are
        read-only views into LMDB's map (no copy), valid only inside the ``with`` block."""
        view = CollectionView(self)
        try:
            yield view
        finally:
            view.close()

    # ------------------------------------------------------------------ the file
    def close(self) -> None:
        """Release the file (the environment closes with its last user in this process)."""
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.release()

    def __enter__(self) -> "CollectionReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __reduce__(self) -> Tuple[Any, Tuple[str]]:
        return (CollectionReader, (self._where,))

    def __repr__(self) -> str:
        return f"CollectionReader({self._where!r}, {self._n_records} records, {self._n_frames} frames)"


class CollectionView:
    """A collection read inside one open read transaction (``CollectionReader.view()``):
    ``v[r]`` gives records whose arrays are read-only views into LMDB's map, valid until the
    view closes; ``v.batch(...)`` as ``CollectionReader.batch``."""

    def __init__(self, reader: CollectionReader) -> None:
        self._reader = reader
        self._reading: Optional[_Reading] = _Reading(reader._env(), False, reader._where)
        self._pid = os.getpid()

    def _open(self) -> _Reading:
        if self._reading is None:
            raise InvalidValueError("the view is closed: its arrays were views into the map, valid only while it "
                                    "was open", store=self._reader._where)
        if os.getpid() != self._pid:
            raise StoreError("a view is never used across fork (its transaction belongs to the parent)",
                             store=self._reader._where, rule="lmdb#L1")
        return self._reading

    def __len__(self) -> int:
        return len(self._reader)

    def __getitem__(self, r: int) -> "Record":
        return Record(self._reader, self._reader._number(r), self)

    def batch(self, records: Iterable[int], frame: Optional[int] = 0) -> Dict[str, np.ndarray]:
        """``CollectionReader.batch`` inside this view's transaction (the arrays are new)."""
        numbers = [self._reader._number(r) for r in (records.tolist() if isinstance(records, np.ndarray) else records)]
        return _Batch(self._reader, numbers, frame).gather(self._open())

    def close(self) -> None:
        """End the transaction; the view's arrays are no longer valid."""
        reading, self._reading = self._reading, None
        if reading is not None and os.getpid() == self._pid:
            reading.close()


class Record:
    """Record ``r`` of a collection: ``meta``, ``system`` (a ``Frame`` or None),
    ``trajectory`` (None or a :class:`RecordTrajectory`), ``frame(k)`` (the reader's view),
    ``index`` (its row of the collection's own index columns), ``n_frames``, ``n_atoms``."""

    __slots__ = ("_c", "number", "_view")

    def __init__(self, reader: CollectionReader, number: int, view: Optional[CollectionView]) -> None:
        self._c, self.number, self._view = reader, number, view

    @contextmanager
    def _reading(self) -> Iterator[_Reading]:
        if self._view is not None:
            yield self._view._open()
        else:
            with self._c._reading() as reading:
                yield reading

    @property
    def meta(self) -> Dict[str, Any]:
        """The record's meta document (``{}`` when it has none)."""
        with self._reading() as reading:
            return self._c._record_meta(reading, self.number)

    @property
    def system(self) -> Optional[Frame]:
        """The record's system, or None."""
        with self._reading() as reading:
            return self._c._system(reading, self.number)

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
        if not self.has_trajectory:
            return None
        return RecordTrajectory(self._c, self.number, self._view)

    def frame(self, k: int) -> Frame:
        """The reader's view of frame ``k``: the system's blocks and trajectory frame ``k``'s,
        a block of both names presented as one (columns united, rows aligned 1:1,
        ``collection#C9``/``#C10``); meta the system's then the frame's per-step keys; the
        frame's cell.  A record without a trajectory has only ``frame(0)``, its system."""
        with self._reading() as reading:
            system = self._c._system(reading, self.number)
            if not self.has_trajectory:
                if k not in (0, -1):
                    raise IndexError(f"record {self.number} has no trajectory: frame(0) is its system")
                return system if system is not None else Frame()
            trajectory = RecordTrajectory(self._c, self.number, self._view)
            own = trajectory._resolve(reading, trajectory._ordinal(k))
        return _merged(system, own, self._c._where, self.number)

    def __repr__(self) -> str:
        return f"Record({self.number}, {self.n_frames} frames)"


class _Update:
    __slots__ = ("k", "blocks", "meta", "step", "time", "box")

    def __init__(self, k: int, blocks: Dict[str, Block], meta: Dict[str, Any], step: int, time: Optional[float],
                 box: Optional[Box]) -> None:
        self.k, self.blocks, self.meta, self.step, self.time, self.box = k, blocks, meta, step, time, box


class RecordTrajectory:
    """A record's trajectory: ``len``, ``[k]`` (a ``Frame`` of the trajectory's own blocks,
    each resolved to its latest update at or before ``k`` inside the record — present,
    empty or absent), iteration in order, ``step`` (int64 array) and ``time`` (float64 array,
    or None).  Random access reads the headers of frames ``0..k`` once (kept), then only the
    updates frame ``k`` resolves to."""

    def __init__(self, reader: CollectionReader, number: int, view: Optional[CollectionView]) -> None:
        self._c, self.number, self._view = reader, number, view
        self._first = int(reader._first[number])
        self._n = int(reader._count[number])
        self._updates: Dict[str, List[int]] = {}
        self._box_updates: List[int] = []
        self._steps: List[int] = []
        self._times: List[Optional[float]] = []

    def __len__(self) -> int:
        return self._n

    def _ordinal(self, k: Any) -> int:
        n = operator.index(k)
        if n < 0:
            n += self._n
        if not 0 <= n < self._n:
            raise IndexError(f"frame {k} of a trajectory of {self._n} frames (record {self.number})")
        return n

    @contextmanager
    def _reading(self) -> Iterator[_Reading]:
        if self._view is not None:
            yield self._view._open()
        else:
            with self._c._reading() as reading:
                yield reading

    def __getitem__(self, k: int) -> Frame:
        with self._reading() as reading:
            return self._resolve(reading, self._ordinal(k))

    def __iter__(self) -> Iterator[Frame]:
        """Every frame in order, carry-forward kept from frame to frame (one transaction per frame)."""
        state: Dict[str, Block] = {}
        box: Optional[Box] = None
        for k in range(self._n):
            with self._reading() as reading:
                update = self._c._update(reading, self.number, self._first + k, k)
            state.update(update.blocks)
            if update.box is not None:
                box = update.box
            self._check(state, k)
            yield Frame(self._c._meta_values(update.meta, f"/records/{self.number}/trajectory"), dict(state), box)

    def _scan(self, reading: _Reading, upto: int) -> None:
        """Headers of the frames not yet scanned, up to ``upto`` (inclusive): which blocks and
        whether a cell each one updates, its step and time."""
        c = self._c
        for k in range(len(self._steps), upto + 1):
            fk = key(FRAME, self._first + k)
            raw = reading.txn.get(fk)
            node = f"/records/{self.number}/trajectory"
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

    def _resolve(self, reading: _Reading, k: int) -> Frame:
        c = self._c
        if k == 0:  # the first frame holds every block present there
            update = c._update(reading, self.number, self._first, 0)
            blocks, box = update.blocks, update.box
        else:
            self._scan(reading, k)
            where_from: Dict[int, List[str]] = {}
            for name, ordinals in self._updates.items():
                i = bisect.bisect_right(ordinals, k) - 1
                if i >= 0:
                    where_from.setdefault(ordinals[i], []).append(name)
            i = bisect.bisect_right(self._box_updates, k) - 1
            box_at = self._box_updates[i] if i >= 0 else None
            wanted = set(where_from) | {k} | ({box_at} if box_at is not None else set())
            updates = {u: c._update(reading, self.number, self._first + u, u) for u in sorted(wanted)}
            update = updates[k]
            blocks = {name: updates[u].blocks[name] for u, names in where_from.items() for name in names}
            blocks = {name: blocks[name] for name in c._schema.block_names() if name in blocks}
            box = updates[box_at].box if box_at is not None else None
        self._check(blocks, k)
        return Frame(c._meta_values(update.meta, f"/records/{self.number}/trajectory"), blocks, box)

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

    @property
    def step(self) -> np.ndarray:
        """Each frame's step number (int64)."""
        with self._reading() as reading:
            if self._n:
                self._scan(reading, self._n - 1)
        return np.asarray(self._steps, dtype=np.int64)

    @property
    def time(self) -> Optional[np.ndarray]:
        """Each frame's time (float64), or None when the trajectory has none."""
        with self._reading() as reading:
            if self._n:
                self._scan(reading, self._n - 1)
        if not self._times or self._times[0] is None:
            return None
        return np.asarray(self._times, dtype=np.float64)

    def __repr__(self) -> str:
        return f"RecordTrajectory(record {self.number}, {self._n} frames)"


# -- helpers ---------------------------------------------------------------------------------
def _owned(block: Block) -> Block:
    """A block whose arrays are its own (copies)."""
    return Block({c: np.array(v) for c, v in block.columns.items()}, {c: np.array(m) for c, m in block.masks.items()},
                 dict(block.precision), dict(block.targets), block.structural_shape, dict(block.attrs), block.nrows)


def _rows_of(blocks: Dict[str, Block]) -> Callable[[str, str], Optional[int]]:
    def rows(section: str, name: str) -> Optional[int]:
        if section != "system":
            return None
        found = blocks.get(name)
        return -1 if found is None else found.nrows
    return rows


def _block_problems(block: Block, node: str) -> Iterator[Violation]:
    """What a frame-shaped block read from frame bytes may not be (frame-and-types §14 reader
    refusals that do not depend on Zarr: shapes and masks, canonical keys, reserved names)."""
    if node.rsplit("/", 1)[-1] == "box":
        yield Violation("frame-and-types#14.31", node, "a block may not be named 'box' (the cell's reserved name)")
    yield from check_block_shape(block, node)
    for column, values in block.columns.items():
        if column == "_validity":
            yield Violation("frame-and-types#14.32", f"{node}/{column}", "a column may not be named '_validity'")
        problem = canonical_violation(column, column_dtype_of(values) or "", values.shape, f"{node}/{column}")
        if problem is not None:
            yield problem


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
        node = f"/records/{r}/trajectory/{name}"
        if base.nrows != block.nrows:
            raise SpecViolationError(f"trajectory block {name!r} has {block.nrows} rows, the system block of that name "
                                     f"{base.nrows}: they are aligned 1:1 by row order", store=where, node=node, rule=C9)
        shared = [c for c in block.columns if c in base.columns]
        if shared:
            raise SpecViolationError(f"column {shared[0]!r} is in both the system and the trajectory block {name!r}",
                                     store=where, node=node, rule=C10)
        blocks[name] = Block({**base.columns, **block.columns}, {**base.masks, **block.masks},
                             {**base.precision, **block.precision}, {**base.targets, **block.targets},
                             base.structural_shape if base.structural_shape is not None else block.structural_shape,
                             dict(base.attrs), base.nrows)
    return Frame({**system.meta, **own.meta}, blocks, own.box)


class _Batch:
    """``CollectionReader.batch``: gathers arrays out of one transaction, concatenates once."""

    def __init__(self, reader: CollectionReader, numbers: List[int], frame: Optional[int]) -> None:
        if frame is not None:
            frame = operator.index(frame)
        self.c, self.numbers, self.frame = reader, numbers, frame

    def gather(self, reading: _Reading) -> Dict[str, np.ndarray]:
        c = self.c
        columns: Dict[str, List[np.ndarray]] = {}
        present: Dict[str, List[int]] = {}  # label -> the batch positions that have the column
        masks: Dict[str, Dict[int, np.ndarray]] = {}
        kinds: Dict[str, Tuple[str, Tuple[int, ...]]] = {}
        rows: Dict[str, List[int]] = {}
        meta: Dict[str, List[Any]] = {name: [] for name in c._meta_tags}
        steps: List[int] = []
        times: List[Optional[float]] = []
        boxes: List[Optional[Box]] = []
        n = len(self.numbers)
        for i, r in enumerate(self.numbers):
            frame, step, time = self._frame(reading, r)
            for name, block in frame.blocks.items():
                rows.setdefault(name, [0] * n)[i] = block.nrows
                for column, values in block.columns.items():
                    label = f"{name}/{column}"
                    kind = (column_dtype_of(values) or "", tuple(values.shape[1:]))
                    have = kinds.setdefault(label, kind)
                    if have != kind:
                        raise SpecViolationError(f"batch: column {label} is {kind[0]}{list(kind[1])} in record {r} and "
                                                 f"{have[0]}{list(have[1])} in an earlier one", store=c._where,
                                                 node=f"/records/{r}/{label}", rule=C2)
                    columns.setdefault(label, []).append(values)
                    present.setdefault(label, []).append(i)
                    if column in block.masks:
                        masks.setdefault(label, {})[len(columns[label]) - 1] = block.masks[column]
            if self.frame is not None:
                for name in meta:
                    meta[name].append(frame.meta[name])
                steps.append(step)
                times.append(time)
                boxes.append(frame.box)
        out: Dict[str, np.ndarray] = {}
        for label, pieces in columns.items():
            block, column = label.split("/", 1)
            counts = rows[block]
            if len(pieces) != sum(1 for count in counts if count):
                has = set(present[label])
                lacking = [self.numbers[i] for i, count in enumerate(counts) if count and i not in has]
                if lacking:
                    raise SpecViolationError(f"batch: record {lacking[0]}'s block {block!r} has no column {column!r}, "
                                             "which other records' have", store=c._where,
                                             node=f"/records/{lacking[0]}/{label}", rule=C2)
            out[label] = np.concatenate(pieces)
            if label in masks:
                flags = [masks[label].get(at, np.ones(p.shape[0], bool)) for at, p in enumerate(pieces)]
                out[f"{block}/_validity/{column}"] = np.concatenate(flags)
        for name, counts in rows.items():
            out[f"n_{name}"] = np.asarray(counts, dtype=np.int64)
        if self.frame is not None:
            for name, tag in c._meta_tags.items():
                out[name] = _meta_array(tag, meta[name])
            out["step"] = np.asarray(steps, dtype=np.int64)
            if times and all(t is not None for t in times):
                out["time"] = np.asarray(times, dtype=np.float64)
            if any(b is not None for b in boxes):
                out["box/vectors"] = np.stack([np.eye(3) if b is None else b.vectors for b in boxes])
                out["box/origin"] = np.stack([np.zeros(3) if b is None else b.origin for b in boxes])
                out["box/boundary"] = np.asarray([(False,) * 3 if b is None else b.boundary for b in boxes], bool)
                out["box/cell_defined"] = np.asarray([b is not None and b.defined for b in boxes], bool)
        out["record"] = np.asarray(self.numbers, dtype=np.int64)
        return out

    def _frame(self, reading: _Reading, r: int) -> Tuple[Frame, int, Optional[float]]:
        """Record ``r``'s frame in the reader's view; its per-step meta as stored (typed JSON),
        its step and time."""
        c = self.c
        system = c._system(reading, r)
        if self.frame is None:
            return (system if system is not None else Frame()), 0, None
        count = int(c._count[r])
        k = self.frame + count if self.frame < 0 else self.frame
        if not 0 <= k < count:
            raise InvalidValueError(f"batch: record {r} has {count} frames, no frame {self.frame}", store=c._where,
                                    node=f"/records/{r}/trajectory")
        trajectory = RecordTrajectory(c, r, None)
        if k == 0:
            update = c._update(reading, r, int(c._first[r]), 0)
            own = Frame(update.meta, update.blocks, update.box)
            trajectory._check(own.blocks, 0)
            step, time = update.step, update.time
        else:
            own = trajectory._resolve(reading, k)
            own.meta = c._update(reading, r, int(c._first[r]) + k, k).meta
            step, time = trajectory._steps[k], trajectory._times[k]
        merged = _merged(system, own, c._where, r)
        merged.meta = own.meta
        return merged, step, time


def _meta_array(tag: str, raw: List[Any]) -> np.ndarray:
    """One per-step meta key over a batch (typed JSON forms decoded), shaped by its tag."""
    dtype, trailing = META_STORAGE[tag]
    values = [typed_json.decode_value(tag, v, f"/meta/{tag}") for v in raw]
    if tag in ("json",):
        out = np.empty(len(values), dtype=object)
        for i, v in enumerate(values):
            out[i] = v
        return out
    return np.asarray(values, dtype=dtype).reshape((len(values),) + trailing)
