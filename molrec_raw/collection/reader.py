"""``CollectionReader`` / ``read_collection``: a collection read at random (lmdb.md).

Opening checks the binding (``meta`` present, ``layout``, ``layout_version``, counts), the
collection document (``units``, ``molrec_version``), the declaration, the index (its four
binding columns, its prefix sums) and the force field.  A record is read when asked:
``c[r].system``, ``c[r].trajectory[k]`` (carry-forward resolved inside the record), the
reader's view ``c[r].frame(k)``; ``c.batch(records)`` gathers many records' frames into
flat arrays.  Every value read is checked as it is decoded (frame bytes, the declaration,
typed meta): hostile bytes give a ``MolrecError`` naming the file, the key and the rule.

Copies and views: every call of a ``CollectionReader`` and of its ``Record`` returns data the
caller owns — each value is copied out of LMDB's map once (one ``memcpy``), its arrays are
writable views of that copy — because the map is only stable while the read transaction that
returned it is open.  ``c.batch`` concatenates straight out of the map inside one transaction
(the concatenation is the one copy).  Only :meth:`CollectionReader.view` hands out views *into
the map*: a context manager holding one read transaction, whose records' arrays are
read-only, valid until the ``with`` block ends (use them there, copy what you keep).

The records and their trajectories are ``records.py``; ``c.batch`` is ``batch.py``; one read
transaction is ``transaction.py``.
"""
from __future__ import annotations

import math
import operator
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Set, Tuple

import numpy as np
import orjson

from molrec_raw.errors import CorruptDataError, InvalidValueError, MolrecError, SpecViolationError, StoreError, brief
from molrec_raw.record import documents, typed_json
from molrec_raw.record.columns import COLUMN_NUMPY, VOCABULARY, column_dtype_of
from molrec_raw.record.forcefield import ForceFieldSection, check_forcefield
from molrec_raw.record.frame_io import canonical_violation, check_block_shape, check_targets
from molrec_raw.record.model import Block, Box, Frame, MetaValue
from molrec_raw.record.trajectory.schema import ColumnSpec, SequenceSchema
from molrec_raw.record.violations import Violation
from molrec_raw.collection import binding
from molrec_raw.collection.binding import FF_KEY, FRAME, INDEX_BLOCK, INDEX_KEY, META_KEY, RECORD_META, SYSTEM, key, key_name
from molrec_raw.collection.frame_bytes import _OBJECT, DecodedFrame, decode_frame, read_box
from molrec_raw.collection.layout_cache import LayoutCache
from molrec_raw.collection.model import BINDING_COLUMNS, C1, C2, C9, C10, C11, check_units
from molrec_raw.collection.batch import _NO_META, _Batch
from molrec_raw.collection.records import Record, RecordTrajectory, _Update, _frame
from molrec_raw.collection.transaction import L8, Getter, _fail, _Reading

__all__ = ["CollectionReader", "CollectionView", "read_collection"]

L5, L7, L14, L15, L16 = "lmdb#L5", "lmdb#L7", "lmdb#L14", "lmdb#L15", "lmdb#L16"
_BINDING_DTYPES = {"first_frame": "u64", "n_frames": "u64", "n_atoms": "u64", "has_trajectory": "bool"}


def read_collection(path: Any, *, check_structure: bool = True) -> "CollectionReader":
    """Open a collection (``*.mrec.lmdb``) for reading: ``CollectionReader(path)``.  The file's
    LMDB structure is checked before it is mapped (lmdb#L18, lmdb#L19);
    ``check_structure=False`` skips that for a file known good."""
    return CollectionReader(path, check_structure=check_structure)


class _BlockPlan:
    """What a declared trajectory block's update must hold, precomputed for the read path."""

    __slots__ = ("names", "dtypes", "trailing", "nullable", "rows", "precision", "targets", "shape")

    def __init__(self, schema: SequenceSchema, name: str) -> None:
        spec = schema.block_spec(name)
        self.names = frozenset(spec.columns)
        self.dtypes = {c: (_OBJECT if s.dtype == "string" else COLUMN_NUMPY[s.dtype]) for c, s in spec.columns.items()}
        self.trailing = {c: tuple(s.trailing) for c, s in spec.columns.items()}
        self.nullable = frozenset(c for c, s in spec.columns.items() if s.nullable)
        self.shape = spec.structural_shape
        self.rows = None if spec.structural_shape is None else math.prod(spec.structural_shape)
        self.precision = {c: s.precision for c, s in spec.columns.items() if s.precision is not None}
        self.targets = dict(spec.targets)


class CollectionReader:
    """Read a collection: ``len(c)``, ``c[r]`` (a :class:`Record`), iteration, ``c.meta``,
    ``c.units``, ``c.schema``, ``c.index``, ``c.index_schema``, ``c.forcefield``,
    ``c.batch(records, frame=0)``, ``c.view()``.  Many processes may read one file at once,
    each with its own environment; a reader carried into a ``fork`` child reopens the file
    there (at its first use in the child), and pickles as its path (a ``DataLoader`` worker
    started with ``spawn`` reopens it too)."""

    @binding.lmdb_errors(lambda self: self._where)
    def __init__(self, path: Any, *, check_structure: bool = True) -> None:
        self._lmdb = binding.import_lmdb()
        self._path = Path(os.fspath(path))
        self._where = str(self._path)
        self._check_structure = check_structure  # lmdb#L18, lmdb#L19 before each open (also in a fork child)
        self._handle: Optional[binding.Handle] = binding.acquire(self._path, check_structure=check_structure)
        self._layouts = LayoutCache()  # the systems'
        self._frame_layouts = LayoutCache()  # the trajectory updates'
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
            self._handle = handle = binding.acquire(self._path, check_structure=self._check_structure)
        return handle.env

    def _reading(self) -> _Reading:
        """A read transaction whose values are copied out of the map (a ``with`` ends it)."""
        return _Reading(self._env(), True)

    def _get(self, k: bytes) -> Optional[bytearray]:
        """One value copied out of the map, in a transaction of its own (py-lmdb's errors as
        :func:`binding.read_failure` names them)."""
        try:
            handle = self._handle
            env = self._env() if handle is None or handle.env is None or handle.inherited else handle.env
            txn = env.begin(buffers=True)
            try:
                value = txn.get(k)
                return None if value is None else bytearray(value)
            finally:
                txn.abort()
        except Exception as exc:
            if binding.is_lmdb_error(exc):
                raise binding.read_failure(exc, self._where) from None
            raise

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
        schema = self._schema
        self._meta_tags = {k: t for k, t in schema.meta_keys()}
        self._plans = {b: _BlockPlan(schema, b) for b in schema.block_names()}
        self._extras = {b: (plan.precision, plan.targets, plan.shape) for b, plan in self._plans.items()}
        self._aligned = {b for b in schema.block_names() if schema.aligned_with(b) is not None}
        self._resolved_check = any(schema.targets(b) or schema.aligned_with(b) for b in schema.block_names())
        self._strings_in_frames = any(spec.dtype == "string" for b in schema.block_names()
                                      for spec in schema.columns(b).values())
        self._pairs_checked: Set[Tuple[Any, Any]] = set()

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
        for array in [*own.columns.values(), *own.masks.values()]:
            array.flags.writeable = False  # shared by every ``index`` call: read-only, never copied again
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
        """The number of records."""
        return self._n_records

    @property
    def n_frames(self) -> int:
        """Trajectory frames over every record."""
        return self._n_frames

    @property
    def meta(self) -> Dict[str, Any]:
        """The collection document as stored (``units``, ``molrec_version``, the other keys); a copy."""
        doc: Dict[str, Any] = orjson.loads(orjson.dumps(self._meta))
        return doc

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
        binding's four columns are not part of it: :meth:`binding_index`).  The arrays are
        read-only and shared by every call (copy one to change it)."""
        index = self._index
        return Block(dict(index.columns), dict(index.masks), dict(index.precision), dict(index.targets), None,
                     dict(index.attrs), index.nrows)

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
        if type(r) is not int:
            try:
                r = operator.index(r)
            except TypeError:
                raise TypeError(f"records are numbered by integers, not {type(r).__name__}") from None
        n: int = r + self._n_records if r < 0 else r
        if not 0 <= n < self._n_records:
            raise IndexError(f"record {r} of a collection of {self._n_records}")
        return n

    def __getitem__(self, r: int) -> "Record":
        """Record ``r`` (negative counts from the end; IndexError outside)."""
        if type(r) is int and 0 <= r < self._n_records:
            return Record(self, r, None)
        return Record(self, self._number(r), None)

    def __iter__(self) -> Iterator["Record"]:
        """Every record, in record order."""
        for r in range(self._n_records):
            yield Record(self, r, None)

    # ------------------------------------------------------------------ decoding records
    def _record_meta(self, raw: Any, r: int) -> Dict[str, Any]:
        if raw is None:
            return {}
        k, node = key(RECORD_META, r), f"/records/{r}/meta"
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise _fail(CorruptDataError, f"record meta is not UTF-8 JSON: {exc}", self._where, k, node,
                        "lmdb#L2") from None
        if type(doc) is not dict:
            raise _fail(SpecViolationError, f"record meta is not a JSON object: {brief(doc)}", self._where, k, node,
                        "frame-and-types#11.1")
        return doc

    def _system_blocks(self, raw: Any, r: int) -> Optional[DecodedFrame]:
        """Record ``r``'s system frame decoded and its blocks checked (frame-and-types §14 reader
        refusals, ``collection#C11``); meta not yet decoded."""
        if raw is None:
            return None
        node = f"/records/{r}/system"
        k = SYSTEM + r.to_bytes(8, "big")
        try:
            decoded = decode_frame(raw, node, self._layouts, True)
        except MolrecError as exc:
            raise exc.add_context(store=self._where, key=key_name(k)) from None
        if decoded.has_step or decoded.has_time or decoded.box is not None:
            raise _fail(SpecViolationError, "a system frame carries no step, time or box (they appear only on "
                        "trajectory updates)", self._where, k, node, L16)
        blocks = decoded.blocks
        layout = decoded.layout
        if layout is None or not layout.checked.get("system"):  # what depends on the layout alone, once
            for problem in _system_problems(blocks, node):
                raise _fail(SpecViolationError, problem.message, self._where, k, problem.node, problem.rule)
            for name in blocks:
                if name in self._aligned:
                    raise _fail(SpecViolationError, f"aligned block {name!r} shares its name with a system block",
                                self._where, k, f"{node}/{name}", C11)
            if layout is not None:
                layout.checked["system"] = True
                if layout.plain:  # its values are read by LayoutCache.quick and this
                    layout.makers["system"] = layout.maker()
        for name, block in blocks.items():
            if block.targets:
                for problem in check_targets(block, blocks, f"{node}/{name}", _rows_of(blocks)):
                    raise _fail(SpecViolationError, problem.message, self._where, k, problem.node, problem.rule)
            if block.masks:
                block.masks = {c: m for c, m in block.masks.items() if not m.all()}
        return decoded

    def _system(self, raw: Any, r: int) -> Optional[Frame]:
        """Record ``r``'s system as a ``Frame``.  A value whose header matches a checked
        layout's text (:meth:`LayoutCache.quick`: every frame-bytes rule holds) of a layout
        this reader has checked as a system's, without step, time or cell, is read without
        parsing or checking its blocks again; anything else by :meth:`_system_blocks`, which
        names what is wrong."""
        if raw is None:
            return None
        hit = self._layouts.quick(raw)
        if hit is not None:
            layout, head, strings, payload = hit
            make = layout.makers.get("system")
            if make is not None:
                if head == _NO_META or not head:
                    return _frame({}, make(raw, payload, strings), None)
                if head.get("step") is None and head.get("time") is None and head.get("box") is None:
                    return self._system_frame(head.get("meta") or {}, head.get("meta_types"),
                                              make(raw, payload, strings), r)
        decoded = self._system_blocks(raw, r)
        assert decoded is not None, "a value decodes or refuses"
        return self._system_frame(decoded.meta, decoded.meta_types, decoded.blocks, r)

    def _system_frame(self, raw_meta: Dict[str, Any], meta_types: Any, blocks: Dict[str, Block], r: int) -> Frame:
        """A system's ``Frame``: its meta decoded by its ``meta_types`` (frame-and-types §11)."""
        meta: Dict[str, Any] = {}
        if raw_meta or meta_types:
            k, node = key(SYSTEM, r), f"/records/{r}/system"
            attrs = dict(raw_meta)
            if typed_json.META_TYPES_KEY in attrs:
                raise _fail(SpecViolationError, f"a meta key may not be named {typed_json.META_TYPES_KEY!r}",
                            self._where, k, node, "frame-and-types#14.33")
            if meta_types is not None:
                attrs[typed_json.META_TYPES_KEY] = meta_types
            try:
                meta = typed_json.decode_document(attrs, node)
            except MolrecError as exc:
                raise exc.add_context(store=self._where, key=key_name(k)) from None
        return _frame(meta, blocks, None)

    def _update(self, get: Getter, r: int, k: int) -> "_Update":
        """The trajectory update of frame ``k`` of record ``r``, checked against the
        declaration (lmdb#L8)."""
        fk = FRAME + (self._first.item(r) + k).to_bytes(8, "big")
        raw = get(fk)
        if raw is None:
            raise _fail(CorruptDataError, f"frame {k} of record {r} (key {key_name(fk)}) is missing", self._where, fk,
                        f"/records/{r}/trajectory", L8)
        hit = self._frame_layouts.quick(raw)
        if hit is not None and "trajectory" in hit[0].makers:
            blocks, meta, step, time, box = self._quick_update(raw, hit, r, k, fk)
            return _Update(k, blocks, meta, step, time, box, hit[0])
        try:
            return self._checked_update(decode_frame(raw, f"/records/{r}/trajectory", self._frame_layouts,
                                                     self._strings_in_frames), r, k)
        except MolrecError as exc:
            raise exc.add_context(store=self._where, key=key_name(fk)) from None

    def _quick_update(self, raw: Any, hit: Tuple[Any, Dict[str, Any], Any, int], r: int, k: int,
                      fk: bytes) -> Tuple[Dict[str, Block], Dict[str, Any], int, Optional[float], Optional[Box]]:
        """A trajectory update whose header matched a layout checked as a trajectory's
        (:meth:`LayoutCache.quick`: every frame-bytes rule holds): what :func:`decode_frame`
        and :meth:`_checked_update` check of the value itself, in their order (the cell, the
        step, time and meta keys), then its blocks."""
        layout, head, strings, payload = hit
        meta = head.get("meta") or {}
        step = head.get("step")
        if len(head) == 2 and "meta" in head and type(step) is int and -(2**53) <= step <= 2**53 and \
                meta.keys() == self._meta_tags.keys():
            return layout.makers["trajectory"](raw, payload, strings), meta, step, None, None  # meta, step: no more
        try:
            raw_box = head.get("box")
            box = None if raw_box is None else read_box(raw_box, f"/records/{r}/trajectory/box")
            step, time = self._update_fields(head.get("meta_types"), step, head.get("time"), meta, k, r)
        except MolrecError as exc:
            raise exc.add_context(store=self._where, key=key_name(fk)) from None
        return layout.makers["trajectory"](raw, payload, strings), meta, step, time, box

    def _update_fields(self, meta_types: Any, raw_step: Any, raw_time: Any, meta: Dict[str, Any], k: int,
                       r: int) -> Tuple[int, Optional[float]]:
        """A trajectory update's header fields (lmdb#L8, #L15): no ``meta_types``, a step,
        every declared meta key and nothing else; its step and time decoded."""
        if type(raw_step) is int and -(2**53) <= raw_step <= 2**53 and meta_types is None and (
                raw_time is None or type(raw_time) is float) and meta.keys() == self._meta_tags.keys():
            return raw_step, raw_time  # (the common case: nothing to decode)
        node = f"/records/{r}/trajectory"
        if meta_types is not None:
            raise SpecViolationError("a trajectory update carries no meta_types (its keys are typed by the "
                                     "sequence_schema)", node=node, rule=L15)
        if raw_step is None:
            raise SpecViolationError(f"trajectory frame {k} has no step", node=node, rule=L8)
        step = raw_step if type(raw_step) is int and -(2**53) <= raw_step <= 2**53 else \
            typed_json.decode_value("i64", raw_step, f"{node}/step")
        time = None
        if raw_time is not None:
            time = raw_time if type(raw_time) is float else typed_json.decode_value("f64", raw_time, f"{node}/time")
        if meta.keys() != self._meta_tags.keys():
            missing = [m for m in self._meta_tags if m not in meta]
            extra = [m for m in meta if m not in self._meta_tags]
            raise SpecViolationError(f"trajectory frame {k} carries meta keys {list(meta)}: every declared key, nothing "
                                     f"else (missing {missing}, undeclared {extra})", node=f"{node}/meta",
                                     rule=L8 if missing else C2)
        return step, time

    def _header_update(self, header: Dict[str, Any], layout: Any, r: int, k: int,
                       node: str) -> Tuple[Dict[str, Any], int, Optional[float], Optional[Box]]:
        """What a batch keeps of a trajectory update's header (meta, step, time, cell), checked
        as :meth:`_checked_update` checks it."""
        meta = header.get("meta") or {}
        step, time = self._update_fields(header.get("meta_types"), header.get("step"), header.get("time"), meta, k, r)
        raw_box = header.get("box")
        return meta, step, time, None if raw_box is None else read_box(raw_box, f"{node}/box")

    def _check_layout_pair(self, system: Any, update: Any, r: int) -> None:
        """A system layout and a trajectory layout read as one frame: blocks of one name have
        one row count (``C9``) and no shared column (``C10``) — checked once per pair."""
        if (system, update) in self._pairs_checked:
            return
        columns = {b.name: (b.count, {c.name for c in system.flat() or () if c.block == b.name})
                   for b in system.blocks}
        for b in update.blocks:
            base = columns.get(b.name)
            if base is None:
                continue
            node = f"/records/{r}/trajectory/{b.name}"
            if base[0] != b.count:
                raise SpecViolationError(f"trajectory block {b.name!r} has {b.count} rows, the system block of that "
                                         f"name {base[0]}: they are aligned 1:1 by row order", store=self._where,
                                         node=node, rule=C9)
            shared = sorted(base[1] & {c.name for c in update.flat() or () if c.block == b.name})
            if shared:
                raise SpecViolationError(f"column {shared[0]!r} is in both the system and the trajectory block "
                                         f"{b.name!r}", store=self._where, node=node, rule=C10)
        self._pairs_checked.add((system, update))

    def _checked_update(self, decoded: DecodedFrame, r: int, k: int) -> "_Update":
        node = f"/records/{r}/trajectory"
        step, time = self._update_fields(decoded.meta_types, decoded.step, decoded.time, decoded.meta, k, r)
        plans = self._plans
        layout = decoded.layout
        if layout is None or not layout.checked.get("trajectory"):  # what depends on the layout alone, once
            self._check_update_layout(decoded.blocks, k, node)
            if layout is not None:
                layout.checked["trajectory"] = True
                if layout.plain:  # its values are read by LayoutCache.quick and this
                    layout.makers["trajectory"] = layout.maker(self._extras)
        for name, block in decoded.blocks.items():
            plan = plans[name]
            if block.masks:
                block.masks = {c: m for c, m in block.masks.items() if not m.all()}
            if plan.precision:
                block.precision = dict(plan.precision)
            if plan.targets:
                block.targets = dict(plan.targets)
            block.structural_shape = plan.shape
        return _Update(k, decoded.blocks, decoded.meta, step, time, decoded.box, decoded.layout)

    def _check_update_layout(self, blocks: Dict[str, Block], k: int, node: str) -> None:
        """A trajectory update's blocks against the declaration (``collection#C2``, lmdb#L14,
        #L16): declared blocks with exactly their columns, dtypes and trailing shapes, masks on
        nullable columns only, no precision or attributes, the structural shape's rows."""
        plans = self._plans
        for name, block in blocks.items():
            plan = plans.get(name)
            if plan is None:
                raise SpecViolationError(f"trajectory frame {k}: block {name!r} is not in the sequence schema",
                                         node=f"{node}/{name}", rule=C2)
            columns = block.columns
            if columns.keys() != plan.names:
                raise SpecViolationError(f"trajectory frame {k}: block {name!r} has columns {list(columns)}, the "
                                         f"declaration {sorted(plan.names)}", node=f"{node}/{name}", rule=C2)
            if block.precision or block.attrs or (block.targets and block.targets != plan.targets):
                what = "a precision" if block.precision else ("attributes" if block.attrs else "other targets")
                raise SpecViolationError(f"a trajectory update's block {name!r} carries {what} (the sequence_schema "
                                         "declares a block's precision and targets; its attributes are its "
                                         "section's)", node=f"{node}/{name}", rule=L14 if block.precision else L16)
            dtypes, trailing = plan.dtypes, plan.trailing
            for column, values in columns.items():
                if values.dtype != dtypes[column] or values.shape[1:] != trailing[column]:
                    raise SpecViolationError(f"column {column!r} is {column_dtype_of(values)} with trailing "
                                             f"{list(values.shape[1:])}; the declaration says "
                                             f"{self._schema.columns(name)[column].dtype} with trailing "
                                             f"{list(trailing[column])}", node=f"{node}/{name}/{column}", rule=C2)
            bad = [c for c in block.masks if c not in plan.nullable]
            if bad:
                raise SpecViolationError(f"column {bad[0]!r} is not nullable but carries a mask",
                                         node=f"{node}/{name}/{bad[0]}", rule=C2)
            if plan.rows is not None and block.nrows != plan.rows:
                raise SpecViolationError(f"block {name!r} has {block.nrows} rows; its structural shape "
                                         f"{list(plan.shape or ())} needs {plan.rows}", node=f"{node}/{name}",
                                         rule="trajectory#R12")

    def _meta_values(self, raw: Dict[str, Any], r: int) -> Dict[str, Any]:
        """Per-step meta in typed JSON form, decoded by the declared tags (plain values, or a
        ``MetaValue`` where the tag is not what the value would infer)."""
        out: Dict[str, Any] = {}
        for name, tag in self._meta_tags.items():
            value = raw[name]
            if tag == "f64" and type(value) is float:
                out[name] = value
                continue
            decoded = typed_json.decode_value(tag, value, f"/records/{r}/trajectory/meta/{name}")
            try:
                plain = typed_json.infer_tag(decoded) == tag
            except MolrecError:
                plain = False
            out[name] = decoded if plain else MetaValue(tag, decoded)
        return out

    # ------------------------------------------------------------------ batches
    @binding.lmdb_errors(lambda self: self._where)
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
        numbers = self._numbers(records)
        reading = _Reading(self._env(), False)
        try:
            return _Batch(self, numbers, frame).gather(reading)
        finally:
            reading.close()

    def _numbers(self, records: Iterable[int]) -> List[int]:
        items = records.tolist() if isinstance(records, np.ndarray) else records
        if type(items) is list and items and set(map(type, items)) == {int} and 0 <= min(items) and \
                max(items) < self._n_records:
            return list(items)  # (record numbers already: each one as _number would give it)
        return [self._number(r) for r in items]

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
        """The reader itself (``with`` closes it)."""
        return self

    def __exit__(self, *exc: Any) -> None:
        """Close the reader."""
        self.close()

    def __reduce__(self) -> Tuple[Any, Tuple[str, bool]]:
        """Pickled as its path (and ``check_structure``): unpickling (in another process) opens
        the file again."""
        return (_reopen, (self._where, self._check_structure))

    def __repr__(self) -> str:
        return f"CollectionReader({self._where!r}, {self._n_records} records, {self._n_frames} frames)"


def _reopen(path: str, check_structure: bool) -> CollectionReader:
    """The other side of :meth:`CollectionReader.__reduce__`."""
    return CollectionReader(path, check_structure=check_structure)


class CollectionView:
    """A collection read inside one open read transaction (``CollectionReader.view()``):
    ``v[r]`` gives records whose arrays are read-only views into LMDB's map, valid until the
    view closes; ``v.batch(...)`` as ``CollectionReader.batch``."""

    @binding.lmdb_errors(lambda self: self._reader._where)
    def __init__(self, reader: CollectionReader) -> None:
        self._reader = reader
        self._reading: Optional[_Reading] = _Reading(reader._env(), False)
        assert reader._handle is not None, "_env() opened it"
        reader._handle.held.add(self._reading)  # a fork child forgets it (binding._forget_inherited)
        self._pid = os.getpid()

    def _open(self) -> _Reading:
        if self._reading is None:
            raise InvalidValueError("the view is closed: its arrays were views into the map, valid only while it "
                                    "was open", store=self._reader._where)
        if os.getpid() != self._pid or self._reading.txn is None:
            raise StoreError("a view is never used across fork (its transaction belongs to the parent)",
                             store=self._reader._where, rule="lmdb#L1")
        return self._reading

    def __len__(self) -> int:
        """The number of records."""
        return len(self._reader)

    def __getitem__(self, r: int) -> "Record":
        """Record ``r``, whose arrays are views into the map (valid while the view is open)."""
        return Record(self._reader, self._reader._number(r), self)

    @binding.lmdb_errors(lambda self: self._reader._where)
    def batch(self, records: Iterable[int], frame: Optional[int] = 0) -> Dict[str, np.ndarray]:
        """``CollectionReader.batch`` inside this view's transaction (the arrays are new)."""
        return _Batch(self._reader, self._reader._numbers(records), frame).gather(self._open())

    def close(self) -> None:
        """End the transaction; the view's arrays are no longer valid."""
        reading, self._reading = self._reading, None
        if reading is not None and os.getpid() == self._pid:
            reading.close()


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


def _system_problems(blocks: Dict[str, Block], node: str) -> Iterator[Violation]:
    """``_block_problems`` of a decoded system frame whose row counts the decoder already held
    to ``count`` (its row references depend on the values: checked by the caller)."""
    for name, block in blocks.items():
        at = f"{node}/{name}"
        if name == "box":
            yield Violation("frame-and-types#14.31", at, "a block may not be named 'box' (the cell's reserved name)")
        shape = block.structural_shape
        if shape is not None and math.prod(shape) != block.nrows:
            yield from check_block_shape(block, at)
        for column, values in block.columns.items():
            canonical = VOCABULARY.get(column)
            if canonical is not None and (values.ndim != 1 or values.dtype != (
                    _OBJECT if canonical == "string" else COLUMN_NUMPY[canonical])):
                problem = canonical_violation(column, column_dtype_of(values) or "", values.shape, f"{at}/{column}")
                if problem is not None:
                    yield problem
            elif column == "_validity":
                yield Violation("frame-and-types#14.32", f"{at}/{column}", "a column may not be named '_validity'")
