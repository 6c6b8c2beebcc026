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
"""
from __future__ import annotations

import bisect
import math
import operator
import os
import struct
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
from molrec_raw.record.trajectory.meta import META_STORAGE
from molrec_raw.record.trajectory.references import check_resolved
from molrec_raw.record.trajectory.schema import ColumnSpec, SequenceSchema
from molrec_raw.record.violations import Violation
from molrec_raw.collection import binding
from molrec_raw.collection.binding import FF_KEY, FRAME, INDEX_BLOCK, INDEX_KEY, META_KEY, RECORD_META, SYSTEM, key, key_name
from molrec_raw.collection.frame_bytes import (DecodedFrame, LayoutCache, _strings, decode_frame, frame_layout,
                                              header_of, joined_text, made_block, read_box, string_lists)
from molrec_raw.collection.model import BINDING_COLUMNS, C1, C2, C9, C10, C11, check_units

__all__ = ["CollectionReader", "CollectionView", "Record", "RecordTrajectory", "read_collection"]

L5, L7, L8, L14, L15, L16 = "lmdb#L5", "lmdb#L7", "lmdb#L8", "lmdb#L14", "lmdb#L15", "lmdb#L16"
_BINDING_DTYPES = {"first_frame": "u64", "n_frames": "u64", "n_atoms": "u64", "has_trajectory": "bool"}
_RESOLVED_RULES = {"trajectory#R16": C11}
_OBJECT = np.dtype(object)
_NO_META: Dict[str, Any] = {"meta": {}}  # a system header's members when it has no meta (compared, never handed out)
_UNFILLED = np.empty(0, object)  # a batch column made whole later (never handed out)
_new_frame = Frame.__new__
_KEY = struct.Struct(">cQ").pack  # a record's key: its prefix, a big-endian u64 (binding.key, lmdb#L2)
Getter = Callable[[bytes], Any]


def read_collection(path: Any, *, check_structure: bool = True) -> "CollectionReader":
    """Open a collection (``*.mrec.lmdb``) for reading: ``CollectionReader(path)``.  The file's
    LMDB structure is checked before it is mapped (lmdb#L18, lmdb#L19);
    ``check_structure=False`` skips that for a file known good."""
    return CollectionReader(path, check_structure=check_structure)


class _Reading:
    """One read transaction.  ``copy``: each value is copied out of the map (the arrays made
    from it outlive the transaction); else values are views into the map."""

    __slots__ = ("txn", "copy", "__weakref__")

    def __init__(self, env: Any, copy: bool) -> None:
        self.txn: Any = env.begin(buffers=True)
        self.copy = copy

    def forget(self) -> None:
        """Drop the transaction without ending it (in a ``fork`` child: it is the parent's)."""
        self.txn = None

    def get(self, k: bytes) -> Any:
        value = self.txn.get(k)
        if value is None or not self.copy:
            return value
        return bytearray(value)

    def close(self) -> None:
        if self.txn is not None:
            self.txn.abort()

    def __enter__(self) -> "_Reading":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.txn.abort()


def _fail(error: type, message: str, store: str, k: Optional[bytes], node: str, rule: str) -> MolrecError:
    made: MolrecError = error(message, store=store, key=None if k is None else key_name(k), node=node, rule=rule)
    return made


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
                    frame = _new_frame(Frame)
                    frame.__dict__ = {"meta": {}, "blocks": make(raw, payload, strings), "box": None}
                    return frame
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


# -- helpers ---------------------------------------------------------------------------------
def _frame(meta: Dict[str, Any], blocks: Dict[str, Block], box: Optional[Box]) -> Frame:
    """``Frame(meta, blocks, box)`` without the dataclass's defaulting (one per read)."""
    frame = _new_frame(Frame)
    frame.__dict__ = {"meta": meta, "blocks": blocks, "box": box}
    return frame


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


class _Batch:
    """``CollectionReader.batch``: gathers each record's arrays out of one transaction (views
    into the map, checked as every read is), concatenates once at the end."""

    def __init__(self, reader: CollectionReader, numbers: List[int], frame: Optional[int]) -> None:
        if frame is not None:
            frame = operator.index(frame)
        self.c, self.numbers, self.frame = reader, numbers, frame

    def gather(self, reading: _Reading) -> Dict[str, np.ndarray]:
        if self.frame in (0, None) and not self.c._resolved_check:
            fast = self._by_layout(reading)
            if fast is not None:
                return fast
        return self._one_by_one(reading)

    def _by_layout(self, reading: _Reading) -> Optional[Dict[str, np.ndarray]]:
        """The batch when every record's system and first frame have layouts without bools,
        masks or targets (None otherwise: :meth:`_one_by_one` reads it).  Each value's header
        is checked as a single read checks it (the layout's own checks once per layout, by
        the same code; a value whose header matches a checked layout's text by
        :meth:`LayoutCache.quick`); the payloads of the records sharing a pair of layouts
        are joined into one buffer and each column is one strided copy out of it."""
        c, frame, numbers = self.c, self.frame, self.numbers
        txn_get, where = reading.txn.get, c._where
        s_quick, f_quick = c._layouts.quick, c._frame_layouts.quick
        trajectory = frame is not None
        pairs: Dict[Tuple[Any, Any], List[int]] = {}
        payloads: Tuple[List[Any], List[Any]] = ([], [])
        strings: Tuple[List[Any], List[Any]] = ([], [])
        meta: List[Dict[str, Any]] = []
        steps: List[int] = []
        times: List[Optional[float]] = []
        boxes: List[Optional[Box]] = []
        counts = c._count[numbers].tolist() if trajectory else ()
        firsts = c._first[numbers].tolist() if trajectory else ()
        tags = c._meta_tags.keys()
        update: Tuple[Dict[str, Any], int, Optional[float], Optional[Box]]
        last: Any = None
        group: List[int] = []
        s_raws = [txn_get(_KEY(SYSTEM, r)) for r in numbers]
        s_hits: List[Any] = [None if raw is None else s_quick(raw, False) for raw in s_raws]
        flat = _parse_strings(s_hits)
        f_raws: List[Any] = []
        f_hits: List[Any] = []
        if trajectory:
            f_raws = [txn_get(_KEY(FRAME, first)) for first in firsts]
            f_hits = [None if raw is None else f_quick(raw) for raw in f_raws]
            if numbers and 0 not in counts:
                done = self._uniform(s_raws, s_hits, f_raws, f_hits, flat)
                if done is not None:
                    return done
        for i, r in enumerate(numbers):
            s_layout = f_layout = s_part = f_part = s_strings = f_strings = None
            raw = s_raws[i]
            if raw is not None:
                hit = s_hits[i]
                if hit is not None and "system" in hit[0].makers and (not hit[1] or hit[1] == _NO_META or (
                        hit[1].get("step") is None and hit[1].get("time") is None and hit[1].get("box") is None)):
                    s_layout, _, s_strings, at = hit
                else:
                    s_layout, s_strings, at = self._system_value(raw, r)
                    if s_layout is None:
                        return None
                s_part = raw[at:at + s_layout.need]
            if trajectory:
                if counts[i] == 0:
                    raise InvalidValueError(f"batch: record {r} has 0 frames, no frame {frame}", store=where,
                                            node=f"/records/{r}/trajectory")
                raw = f_raws[i]
                hit = f_hits[i]
                if hit is not None and "trajectory" in hit[0].makers:
                    f_layout, head, f_strings, at = hit
                    step, f_meta = head.get("step"), head.get("meta")
                    if type(step) is int and -(2**53) <= step <= 2**53 and type(f_meta) is dict and \
                            f_meta.keys() == tags and len(head) == 2:  # meta, step: nothing to decode
                        update = (f_meta, step, None, None)
                    else:
                        fk = FRAME + firsts[i].to_bytes(8, "big")
                        try:
                            update = c._header_update(head, f_layout, r, 0, f"/records/{r}/trajectory")
                        except MolrecError as exc:
                            raise exc.add_context(store=where, key=key_name(fk)) from None
                else:
                    f_layout, f_strings, at, update = self._frame_value(raw, r, FRAME + firsts[i].to_bytes(8, "big"),
                                                                        txn_get)
                    if f_layout is None:
                        return None
                f_part = raw[at:at + f_layout.need]
                meta.append(update[0])
                steps.append(update[1])
                times.append(update[2])
                boxes.append(update[3])
            pair = (s_layout, f_layout)
            if pair != last:
                found = pairs.get(pair)
                if found is None:
                    found = pairs[pair] = []
                    if s_layout is not None and f_layout is not None:
                        c._check_layout_pair(s_layout, f_layout, r)
                group, last = found, pair
            group.append(i)
            payloads[0].append(s_part)
            payloads[1].append(f_part)
            strings[0].append(s_strings)
            strings[1].append(f_strings)
        return self._assemble(pairs, payloads, strings, meta, steps, times, boxes, flat)

    def _uniform(self, s_raws: List[Any], s_hits: List[Any], f_raws: List[Any], f_hits: List[Any],
                 flat: Optional[str]) -> Optional[Dict[str, np.ndarray]]:
        """:meth:`_by_layout` of a batch whose systems all matched one layout checked as a
        system's, with one header (``LayoutCache.quick`` hands the same members for the same
        text), and whose first frames all matched one layout checked as a trajectory's, each
        with its step and the declared meta keys only — what the per-record loop does, a
        column of checks at a time.  None when the batch is otherwise."""
        s_hit, f_hit = s_hits[0], f_hits[0]
        if s_hit is None or f_hit is None:
            return None
        s_layout, s_head, f_layout = s_hit[0], s_hit[1], f_hit[0]
        if "system" not in s_layout.makers or "trajectory" not in f_layout.makers or not (
                not s_head or s_head == _NO_META) or not all(
                hit is not None and hit[0] is s_layout and hit[1] is s_head for hit in s_hits) or not all(
                hit is not None and hit[0] is f_layout and len(hit[1]) == 2 for hit in f_hits):
            return None
        heads = [hit[1] for hit in f_hits]
        steps = [head.get("step") for head in heads]
        meta = [head.get("meta") for head in heads]
        tags = self.c._meta_tags.keys()
        if not all(type(step) is int and -(2**53) <= step <= 2**53 for step in steps) or not all(
                type(m) is dict and m.keys() == tags for m in meta):
            return None
        n = len(s_hits)
        need = f_layout.need
        f_parts = [raw[hit[3]:hit[3] + need] for raw, hit in zip(f_raws, f_hits)]
        need = s_layout.need
        s_parts = [raw[hit[3]:hit[3] + need] for raw, hit in zip(s_raws, s_hits)] if need else [b""] * n
        self.c._check_layout_pair(s_layout, f_layout, self.numbers[0])
        nothing: List[Any] = [None] * n
        return self._assemble({(s_layout, f_layout): list(range(n))}, (s_parts, f_parts),
                              ([hit[2] for hit in s_hits], nothing), meta, steps, nothing, nothing, flat)

    def _system_value(self, raw: Any, r: int) -> Tuple[Any, Any, int]:
        """A system value of a batch read through :func:`frame_layout` (a layout not yet
        checked, or a header text not remembered): (its layout, its header, the payload's
        offset) — a layout None when the batch is to be read one by one."""
        c, sk = self.c, SYSTEM + r.to_bytes(8, "big")
        try:
            header, at, layout = frame_layout(raw, f"/records/{r}/system", c._layouts, True)
        except MolrecError as exc:
            raise exc.add_context(store=c._where, key=key_name(sk)) from None
        if not layout.checked.get("system") or len(header) > 1 and (
                header.get("step") is not None or header.get("time") is not None or header.get("box") is not None):
            c._system_blocks(raw, r)  # the single read's checks (they refuse, or mark the layout)
        return (None if layout.flat() is None else layout), header, at

    def _frame_value(self, raw: Any, r: int, fk: bytes,
                     txn_get: Getter) -> Tuple[Any, Any, int, Tuple[Dict[str, Any], int, Optional[float], Optional[Box]]]:
        """A first frame of a batch read through :func:`frame_layout`: (its layout or None as
        :meth:`_system_value`'s, its header, the payload's offset, (meta, step, time, cell))."""
        c = self.c
        if raw is None:
            c._update(txn_get, r, 0)  # refuses: the frame is missing
        node = f"/records/{r}/trajectory"
        try:
            header, at, layout = frame_layout(raw, node, c._frame_layouts, c._strings_in_frames)
            update = c._header_update(header, layout, r, 0, node)
        except MolrecError as exc:
            raise exc.add_context(store=c._where, key=key_name(fk)) from None
        if not layout.checked.get("trajectory"):
            c._update(txn_get, r, 0)  # the single read's checks (they refuse, or mark the layout)
        return (None if layout.flat() is None else layout), header, at, update

    def _assemble(self, pairs: Dict[Tuple[Any, Any], List[int]], payloads: Tuple[List[Any], List[Any]],
                  headers: Tuple[List[Any], List[Any]], meta: List[Dict[str, Any]], steps: List[int],
                  times: List[Optional[float]], boxes: List[Optional[Box]],
                  flat_strings: Optional[str] = None) -> Dict[str, np.ndarray]:
        """The flat arrays of :meth:`_by_layout` (inside the transaction: the parts are views
        into the map; every array made here is new).  ``flat_strings``: every system's string values
        in record order, joined, as :func:`_parse_strings` gives them."""
        c, numbers = self.c, self.numbers
        n = len(numbers)
        rows: Dict[str, np.ndarray] = {}  # block -> rows per batch position
        kinds: Dict[Tuple[str, str], Tuple[Any, Tuple[int, ...]]] = {}
        for (s_layout, f_layout), group in pairs.items():
            for layout in (s_layout, f_layout):
                if layout is None:
                    continue
                for b in layout.blocks:
                    counts = rows.get(b.name)
                    if counts is None:
                        counts = rows[b.name] = np.zeros(n, np.int64)
                    if len(group) == n:
                        counts[:] = b.count
                    else:
                        counts[group] = b.count
                for col in layout.flat():
                    kind = (_OBJECT if col.strings else col.dtype, col.trailing)
                    have = kinds.setdefault((col.block, col.name), kind)
                    if have != kind:
                        r = numbers[group[0]]
                        raise SpecViolationError(f"batch: column {col.block}/{col.name} is {_kind_name(kind)} in record "
                                                 f"{r} and {_kind_name(have)} in another", store=c._where,
                                                 node=f"/records/{r}/{col.block}/{col.name}", rule=C2)
        starts = {name: np.concatenate([[0], np.cumsum(counts)]) for name, counts in rows.items()}
        out: Dict[str, np.ndarray] = {}
        for (block, column), (dtype, trailing) in kinds.items():
            total = int(starts[block][-1])
            out[f"{block}/{column}"] = _UNFILLED if dtype is _OBJECT and len(pairs) == 1 and not trailing else \
                np.empty((total,) + trailing, dtype)  # (a string column of one group: made whole below)
        filled: Dict[str, int] = {}
        for (s_layout, f_layout), group in pairs.items():
            whole = len(group) == n
            for side, layout in ((0, s_layout), (1, f_layout)):
                if layout is None:
                    continue
                flat = layout.flat()
                numeric = [col for col in flat if not col.strings]
                if numeric:
                    width = layout.need
                    parts = payloads[side]
                    joined = np.frombuffer(b"".join(parts if whole else [parts[i] for i in group]), np.uint8).reshape(
                        len(group), width)
                for col in flat:
                    label = f"{col.block}/{col.name}"
                    target = out[label]
                    filled[label] = filled.get(label, 0) + len(group) * col.rows
                    if col.strings:
                        values: List[str] = []
                        if side == 0 and flat_strings is not None:  # (split here: no list of them held long)
                            values = flat_strings.split('","')
                            if not whole:
                                values = [v for i in group for v in values[i * col.count:(i + 1) * col.count]]
                        else:
                            for i in group:  # (a list: the values LayoutCache.quick checked; else the header)
                                held = headers[side][i]
                                values += held if type(held) is list else _string_values(held, col, c._where,
                                                                                         numbers[i], side)
                        source = np.fromiter(values, _OBJECT, len(values))
                        if whole and not col.trailing:
                            out[label] = source
                            continue
                    else:
                        nbytes = col.count * col.dtype.itemsize
                        source = joined[:, col.start:col.start + nbytes].view(col.dtype)
                    source = source.reshape((len(group) * col.rows,) + col.trailing)
                    if whole:
                        target[...] = source
                    else:
                        lo = starts[col.block][group]
                        index = (lo[:, None] + np.arange(col.rows)).ravel()
                        target[index] = source
        for label, target in out.items():
            if filled.get(label, 0) != target.shape[0]:  # some record's block has rows but not this column
                block, column = label.split("/", 1)
                lacking = next(numbers[i] for (s_l, f_l), group in pairs.items() for i in group
                               if rows[block][i] and not any(col.block == block and col.name == column
                                                             for layout in (s_l, f_l) if layout is not None
                                                             for col in layout.flat()))
                raise SpecViolationError(f"batch: record {lacking}'s block {block!r} has no column {column!r}, "
                                         "which other records' have", store=c._where,
                                         node=f"/records/{lacking}/{block}/{column}", rule=C2)
        for name, counts in rows.items():
            out[f"n_{name}"] = counts
        if self.frame is not None:
            _per_step(out, c, meta, steps, times, boxes)
        out["record"] = np.asarray(numbers, dtype=np.int64)
        return out

    def _one_by_one(self, reading: _Reading) -> Dict[str, np.ndarray]:
        c, frame = self.c, self.frame
        get = reading.get
        pieces: Dict[Tuple[str, str], List[np.ndarray]] = {}
        present: Dict[Tuple[str, str], List[int]] = {}  # the batch positions that have the column
        masks: Dict[Tuple[str, str], Dict[int, np.ndarray]] = {}
        kinds: Dict[Tuple[str, str], Tuple[np.dtype, Tuple[int, ...]]] = {}
        rows: Dict[str, List[int]] = {}
        meta: List[Dict[str, Any]] = []
        steps: List[int] = []
        times: List[Optional[float]] = []
        boxes: List[Optional[Box]] = []
        n = len(self.numbers)
        trusted: Set[Any] = set()  # (system layout, frame layout) pairs whose columns were checked in this batch
        for i, r in enumerate(self.numbers):
            system = c._system_blocks(get(key(SYSTEM, r)), r)
            blocks: Dict[str, Block] = {} if system is None else system.blocks
            pair: Any = None
            if frame is not None:
                count = int(c._count[r])
                k = frame + count if frame < 0 else frame
                if not 0 <= k < count:
                    raise InvalidValueError(f"batch: record {r} has {count} frames, no frame {frame}", store=c._where,
                                            node=f"/records/{r}/trajectory")
                if k == 0:
                    update = c._update(get, r, 0)
                    own, box = update.blocks, update.box
                    meta.append(update.meta)
                    steps.append(update.step)
                    times.append(update.time)
                    if c._resolved_check:
                        RecordTrajectory(c, r, None)._check(own, 0)
                    if update.layout is not None:
                        pair = (None if system is None else system.layout, update.layout)
                else:
                    trajectory = RecordTrajectory(c, r, None)
                    resolved = trajectory._resolve(reading, k, meta=False)
                    own, box = resolved.blocks, resolved.box
                    meta.append(resolved.meta)
                    steps.append(trajectory._steps[k])
                    times.append(trajectory._times[k])
                boxes.append(box)
                for name, block in own.items():  # the reader's view (``blocks`` is this decode's own dict)
                    base = blocks.get(name)
                    if base is not None:
                        _check_pair(base, block, c._where, r, name)
                        block = made_block({**base.columns, **block.columns}, {**base.masks, **block.masks}, {}, {},
                                           None, {}, base.nrows)
                    blocks[name] = block
            elif system is not None:
                pair = (system.layout, None)
            checked = pair is not None and pair in trusted
            for name, block in blocks.items():
                counts = rows.get(name)
                if counts is None:
                    counts = rows[name] = [0] * n
                counts[i] = block.nrows
                block_masks = block.masks
                for column, values in block.columns.items():
                    label = (name, column)
                    if not checked:
                        kind = (values.dtype, values.shape[1:])
                        have = kinds.setdefault(label, kind)
                        if have != kind:
                            raise SpecViolationError(f"batch: column {name}/{column} is {column_dtype_of(values)}"
                                                     f"{list(kind[1])} in record {r} and {have[0]}{list(have[1])} in "
                                                     "an earlier one", store=c._where,
                                                     node=f"/records/{r}/{name}/{column}", rule=C2)
                    found = pieces.get(label)
                    if found is None:
                        found = pieces[label] = []
                        present[label] = []
                    if block_masks and column in block_masks:
                        masks.setdefault(label, {})[len(found)] = block_masks[column]
                    found.append(values)
                    present[label].append(i)
            if pair is not None:
                trusted.add(pair)
        out: Dict[str, np.ndarray] = {}
        for label, arrays in pieces.items():
            name, column = label
            counts = rows[name]
            if len(arrays) != n:
                has = set(present[label])
                lacking = [self.numbers[j] for j, count in enumerate(counts) if count and j not in has]
                if lacking:
                    raise SpecViolationError(f"batch: record {lacking[0]}'s block {name!r} has no column {column!r}, "
                                             "which other records' have", store=c._where,
                                             node=f"/records/{lacking[0]}/{name}/{column}", rule=C2)
            out[f"{name}/{column}"] = np.concatenate(arrays)
            if label in masks:
                flags = [masks[label].get(at, np.ones(a.shape[0], bool)) for at, a in enumerate(arrays)]
                out[f"{name}/_validity/{column}"] = np.concatenate(flags)
        for name, counts in rows.items():
            out[f"n_{name}"] = np.asarray(counts, dtype=np.int64)
        if frame is not None:
            _per_step(out, c, meta, steps, times, boxes)
        out["record"] = np.asarray(self.numbers, dtype=np.int64)
        return out


def _parse_strings(hits: List[Any]) -> Optional[str]:
    """The string values of a batch's ``LayoutCache.quick(value, parse=False)`` hits parsed
    and checked (by the layouts' counts): a hit whose values are not ``count`` strings
    becomes None (its value is read the general way, which names what is wrong).  When
    every record is a hit of one count read by :func:`joined_text`: that text (split at
    ``","``, record ``i``'s strings are ``[i * count:(i + 1) * count]``), the hits keep their
    texts."""
    layout = hits[0][0] if hits and hits[0] is not None else None
    if layout is not None and layout.strings_count is not None and all(
            hit is not None and hit[0] is layout for hit in hits):
        flat = joined_text([hit[2] for hit in hits], layout.strings_count)
        if flat is not None:
            return flat
    texts: Dict[int, List[int]] = {}
    for i, hit in enumerate(hits):
        if hit is not None and hit[2] is not None:
            texts.setdefault(hit[0].strings_count, []).append(i)
    for count, where in texts.items():
        for i, values in zip(where, string_lists([hits[i][2] for i in where], count)):
            hit = hits[i]
            hits[i] = None if values is None else (hit[0], hit[1], values, hit[3])
    return None


def _per_step(out: Dict[str, np.ndarray], c: CollectionReader, meta: List[Dict[str, Any]], steps: List[int],
              times: List[Optional[float]], boxes: List[Optional[Box]]) -> None:
    """A batch's per-step arrays: each declared meta key, ``step``, ``time`` (when every
    record has one), the cells (when a record has one)."""
    for name, tag in c._meta_tags.items():
        out[name] = _meta_array(tag, [m[name] for m in meta], name)
    out["step"] = np.asarray(steps, dtype=np.int64)
    if times and all(t is not None for t in times):
        out["time"] = np.asarray(times, dtype=np.float64)
    if any(b is not None for b in boxes):
        out["box/vectors"] = np.stack([np.eye(3) if b is None else b.vectors for b in boxes])
        out["box/origin"] = np.stack([np.zeros(3) if b is None else b.origin for b in boxes])
        out["box/boundary"] = np.asarray([(False,) * 3 if b is None else b.boundary for b in boxes], bool)
        out["box/cell_defined"] = np.asarray([b is not None and b.defined for b in boxes], bool)


def _kind_name(kind: Tuple[Any, Tuple[int, ...]]) -> str:
    return f"{'string' if kind[0] == _OBJECT else column_dtype_of(np.empty(0, kind[0]))}{list(kind[1])}"


def _string_values(header: Dict[str, Any], col: Any, where: str, r: int, side: int) -> List[str]:
    """A string column's header values in a batch, checked as a single read checks them."""
    values: List[str] = header["blocks"][col.block]["columns"][col.name].get("values")
    try:
        good = type(values) is list and len(values) == col.count and type("".join(values)) is str
    except TypeError:  # a non-string among them
        good = False
    if not good:
        node = f"/records/{r}/{'trajectory' if side else 'system'}/{col.block}/{col.name}"
        try:
            _strings(values, col.count, (col.rows,) + col.trailing, node)
        except MolrecError as exc:
            raise exc.add_context(store=where) from None
    return values


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


def _meta_array(tag: str, raw: List[Any], name: str) -> np.ndarray:
    """One per-step meta key over a batch (typed JSON forms decoded), shaped by its tag."""
    dtype, trailing = META_STORAGE[tag]
    if tag == "f64" and set(map(type, raw)) <= {float}:
        return np.asarray(raw, dtype=np.float64)
    values = [typed_json.decode_value(tag, v, f"/meta/{name}") for v in raw]
    if tag == "json":
        out = np.empty(len(values), dtype=object)
        for i, v in enumerate(values):
            out[i] = v
        return out
    return np.asarray(values, dtype=dtype).reshape((len(values),) + trailing)
