"""``CollectionWriter``: many records streamed into one ``*.mrec.lmdb`` (collection.md,
lmdb.md).

Each ``add_record`` checks the record against the collection's declaration and, frame by
frame, turns its trajectory into sparse updates (a block is written at the frames where it
changes; carry-forward never crosses a record, lmdb#L8); a record is added whole or not at
all.  Values wait in memory until a write transaction commits them — every
``commit_every`` records, or sooner when ``commit_bytes`` of values are waiting — so memory
does not grow with the number of records (except by each record's index row).  ``close``
writes the last records, then the index, the force field and, last of all in that same
transaction, ``meta`` (lmdb#L3); then it syncs the file.  A file without ``meta`` is not a
collection: a reader refuses one whose writer has not finished.

The map grows by itself: a transaction that would not fit is retried after the map is
doubled (LMDB's MapFullError never reaches the caller).  One writer at a time
(``safety#lock``): the writer holds the exclusive writer lock of the file (record/locking.py)
from before its first look at the path until it is closed; LMDB's own lock serializes write
transactions only.  An existing collection is replaced only with ``overwrite=True``
(``safety#overwrite``).  The first I/O failure — of the seam (creating, removing the file) or
of LMDB's own I/O (a failed write transaction or sync) — poisons the writer
(``safety#poison``): every later call raises naming it (spec-notes/safety.md).
"""
from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Mapping, NoReturn, Optional, Sequence, Set, Tuple

import numpy as np
import orjson

from molrec_raw.errors import (InvalidValueError, IOFailureError, MolrecError, NodeExistsError, RecordExistsError,
                               SpecViolationError, StoreError, brief)
from molrec_raw.record import typed_json
from molrec_raw.record.forcefield import ForceFieldSection, prepare_forcefield
from molrec_raw.record.frame_io import prepare_frame
from molrec_raw.record.locking import lock_writer
from molrec_raw.record.model import Block, Frame, MetaValue
from molrec_raw.record.precision import round_to_precision
from molrec_raw.record.trajectory.blocks import SAME, BlockWriter, Update, compare, prepare_update
from molrec_raw.record.trajectory.cell import Cell, prepare_cell
from molrec_raw.record.trajectory.common import I64, is_int
from molrec_raw.record.trajectory.references import SystemCounterparts, check_resolved
from molrec_raw.record.trajectory.schema import SKIPPED_FRAME_META_KEYS, BlockSpec, MetaSpec, SequenceSchema
from molrec_raw.collection import binding
from molrec_raw.collection.binding import FF_KEY, FRAME, INDEX_BLOCK, INDEX_KEY, META_KEY, RECORD_META, SYSTEM, SUFFIX, key
from molrec_raw.collection.frame_bytes import EncodeCache, encode_frame, encode_planned, header_rest, made_block
from molrec_raw.zarr.fileops import FileOps, PoisonGuard
from molrec_raw.collection.model import (C2, C3, C4, C7, C8, C9, C10, C11, C13, IndexColumns,
                                         IndexValues, check_record_meta, collection_document)

__all__ = ["CollectionWriter"]

DEFAULT_COMMIT_EVERY = 1000
DEFAULT_COMMIT_BYTES = 64 << 20
DEFAULT_MAP_SIZE = 1 << 28  # the first reservation of address space; doubled whenever a commit needs more
_MISSING = object()
_FRAME_PLAN = object()  # the start of a trajectory frame's encoding-plan key
_SYSTEM_REST = header_rest(meta={})  # a system value's members after its blocks
_NO_INDEX_VALUES = IndexValues({}, {})  # a record's, when the index has no columns of its own
_EXACT_INT = 2**53  # an i64 step within ±2^53 is its own typed JSON form
_MAX_F64 = float(np.finfo(np.float64).max)
_ERRNO_BY_TEXT = {code: os.strerror(code) for code in errno.errorcode}  # LMDB names a system error by its text
_LMDB_MAGIC = (0xBEEFC0DE).to_bytes(4, "little")  # at offset 16 of an LMDB data file's first meta page
# trajectory-rule -> collection-rule for what a record breaks against the collection's declaration
_GIVEN_RULES = {"trajectory#W18": C2, "trajectory#W22": C3, "trajectory#8.8": C9, "trajectory#W28": C11}
_DERIVED_RULES = {**_GIVEN_RULES, **{f"trajectory#W{n}": C4 for n in (18, 19, 20, 21, 25, 26)}}


class _Draft:
    """One record being added: everything that changes only once the record is accepted."""

    __slots__ = ("number", "first_frame", "frames", "last", "cell", "defined", "last_step", "timed", "meta",
                 "counterparts", "system_blocks", "checked", "n_atoms", "values", "undo")

    def __init__(self, number: int, first_frame: int, system_blocks: Dict[str, Block]) -> None:
        self.number, self.first_frame, self.frames = number, first_frame, 0
        self.last: Dict[str, Update] = {}
        self.cell: Optional[Cell] = None
        self.defined: Optional[bool] = None
        self.last_step: Optional[int] = None
        self.timed: Optional[bool] = None
        self.meta: Optional[Dict[str, MetaSpec]] = None
        self.counterparts: Optional[SystemCounterparts] = None
        self.system_blocks = system_blocks
        self.checked: Set[str] = set()
        self.n_atoms: Optional[int] = None
        self.values: List[Tuple[bytes, bytes]] = []
        self.undo: Optional[Tuple[SequenceSchema, Optional[Dict[str, MetaSpec]]]] = None

    def rows_of(self, section: str, block: str) -> Optional[int]:
        """Rows of ``/<section>/<block>`` as :func:`_system_rows` sees them."""
        rows: Optional[int] = _system_rows(self.system_blocks)(section, block)
        return rows


_PLAIN = frozenset(np.dtype(t) for t in ("f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "?", "c8", "c16", "O"))


def _plain_shape(system: Frame) -> Optional[Tuple[Any, ...]]:
    """The shape of a system whose checks depend on its shape alone (no meta, blocks without
    masks, precision, targets, attributes or a structural shape; native arrays): block names,
    counts, column names, dtypes and shapes.  None for any other system (checked whole)."""
    if system.meta or len(system.blocks) > 8:
        return None
    key: List[Any] = []
    for name, block in system.blocks.items():
        if type(block) is not Block or block.masks or block.precision or block.targets or block.attrs or \
                block.column_attrs or block.structural_shape is not None or type(block.count) is not int:
            return None
        key += (name, block.count)
        for column, values in block.columns.items():
            if type(values) is not np.ndarray or values.dtype not in _PLAIN:
                return None
            key += (column, values.dtype, values.shape)
        key.append(None)
    return tuple(key)


def _system_rows(blocks: Dict[str, Block]) -> Any:
    """Absolute targets ``/<section>/<block>`` of a collection record: ``/system/...`` rows
    of its own system; any other section is absent (not checked, frame-and-types §9)."""
    def rows(section: str, block: str) -> Optional[int]:
        if section != "system":
            return None
        found = blocks.get(block)
        return -1 if found is None else found.nrows
    return rows


class CollectionWriter:
    """Write a collection: ``with CollectionWriter(path, units={...}) as w: w.add_record(...)``.

    ``units`` (required, ``collection#C1``): quantity → unit string, for every record and
    column.  ``schema``: the ``SequenceSchema`` every record's trajectory uses; ``None``
    derives it (the union of the records' blocks, agreeing on shared columns, and the one
    per-step meta declaration every record has, ``collection#C4``).  ``forcefield``: a
    ``ForceFieldSection`` every record links into (``collection#C7``).  ``meta``: the
    collection document's other keys.  ``index_schema``: ``{column: spec}`` of the
    collection's own index columns (``ColumnSpec``, a dtype, or ``{dtype, trailing,
    precision, nullable}``); ``None`` lets the first record's ``index`` declare them.

    ``commit_every`` records (or ``commit_bytes`` of waiting values) per write transaction;
    ``map_size`` the first address-space reservation (it grows by itself); ``durable``
    (default) makes every commit and the close fsync (LMDB ``sync``/``metasync``), else only
    the close syncs.  A ``with`` block left by an exception removes the unfinished file (it
    has no ``meta``: it is not a collection); call :meth:`close` to finish, :meth:`abort` to
    drop it.

    ``lock`` (``safety#lock``): the exclusive writer lock of the file is held for the
    writer's whole life, taken before anything is read; a second writer (any process) is
    refused (``WriterLockedError`` naming the holder); False (or ``MOLREC_RAW_LOCKING=off``)
    when the caller coordinates writers.  ``overwrite`` (``safety#overwrite``): an existing
    collection (an LMDB file at ``path``) is refused (``RecordExistsError``) unless True —
    then it is removed, with its LMDB lock file, before the new one is created (so a
    replacement that fails leaves none); anything else at ``path`` is never replaced.
    ``fileops``: the seam the file's creation and removal go through (LMDB writes its pages
    itself).  ``poisoned``: the first I/O failure (``safety#poison``).
    """

    def __init__(self, path: Any, units: Optional[Mapping[str, str]] = None, schema: Optional[SequenceSchema] = None,
                 forcefield: Optional[ForceFieldSection] = None, meta: Optional[Mapping[str, Any]] = None,
                 index_schema: Optional[Mapping[str, Any]] = None, *, commit_every: int = DEFAULT_COMMIT_EVERY,
                 commit_bytes: int = DEFAULT_COMMIT_BYTES, map_size: int = DEFAULT_MAP_SIZE,
                 durable: bool = True, overwrite: bool = False, lock: Optional[bool] = None,
                 fileops: Optional[FileOps] = None) -> None:
        self._lmdb = binding.import_lmdb()
        self._path = Path(os.fspath(path))
        where = str(self._path)
        if not self._path.name.endswith(SUFFIX):
            raise SpecViolationError(f"a collection file is named '*{SUFFIX}'", store=where, rule="lmdb#L1")
        for name, value in (("commit_every", commit_every), ("commit_bytes", commit_bytes), ("map_size", map_size)):
            if not is_int(value) or int(value) < 1:
                raise InvalidValueError(f"{name} must be a positive integer, got {value!r}", store=where)
        self._document = _located(lambda: collection_document(meta, units), where)
        if schema is not None and not isinstance(schema, SequenceSchema):
            raise InvalidValueError(f"schema must be a SequenceSchema or None, got {type(schema).__name__}", store=where)
        self._derived = schema is None
        self._schema = SequenceSchema() if schema is None else schema.copy()
        self._meta_specs: Optional[Dict[str, MetaSpec]] = None if schema is None else {
            k: self._schema.meta_spec(k) for k, _ in self._schema.meta_keys()}
        self._ff_value: Optional[bytes] = None
        if forcefield is not None:
            tables = _located(lambda: prepare_forcefield(forcefield, "/ff"), where)  # TypeError for a plain dict
            self._ff_value = encode_frame(tables, meta=dict(forcefield.document))
        self._index = _located(lambda: IndexColumns(index_schema), where)
        self._commit_every, self._commit_bytes, self._durable = int(commit_every), int(commit_bytes), bool(durable)
        self._states: Dict[str, BlockWriter] = {}
        self._encodes = EncodeCache(4096)  # encoding plans by the shape of a frame's blocks
        # plain system shapes checked whole (_plain_shape), each with its encoding plan's key
        self._system_shapes: Dict[Tuple[Any, ...], object] = {}
        self._version = 0  # of the declaration's states (_refresh_states)
        # _check_system_names by declaration and system shape: the names checked, the counterparts
        self._names_passed: Dict[Tuple[int, Any], Tuple[frozenset[str], Optional[SystemCounterparts]]] = {}
        self._resolved_check = False
        self._refresh_states()
        self._closed = False
        self._handle: Optional[binding.Handle] = None
        # the writer lock first (safety#lock), then the guard every file mutation goes through
        self._lock = lock_writer(self._path, writer="CollectionWriter", lock=lock, fileops=fileops)
        self._guard = PoisonGuard(fileops, what=f"the collection writer of {where}")
        self._created = False
        try:
            self._create(bool(overwrite), int(map_size))
        except BaseException as exc:  # no writer: what it created goes, the lock goes
            self._closed = True
            self._release()
            if self._created:
                self._remove_file()
            self._guard.fail(exc)
        self._records = 0
        self._frames = 0
        self._pending: List[Tuple[bytes, bytes]] = []
        self._pending_records = 0
        self._pending_bytes = 0
        self._stale_frames = 0  # f keys committed by a record later refused: deleted at close unless reused
        self._draft: Optional[_Draft] = None

    def _create(self, overwrite: bool, map_size: int) -> None:
        """Under the lock: claim the path (safety#overwrite), create the file exclusively
        through the guard, open the LMDB environment."""
        where = str(self._path)
        if os.path.lexists(where):
            _claim_collection(self._path, overwrite)
            for name in (where, f"{where}-lock"):  # the old LMDB lock file too: its readers keep theirs
                try:
                    self._guard.unlink(name)
                except FileNotFoundError:
                    pass
        try:
            fd = self._guard.open(where, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:  # (only without the lock: another writer created it meanwhile)
            raise NodeExistsError("refusing to overwrite: the file exists (a collection is written once, by one "
                                  "writer)", store=where, rule="lmdb#L1") from None
        self._created = True
        self._guard.close(fd)
        try:
            self._handle = binding.acquire(self._path, writable=True, map_size=map_size, durable=self._durable)
        except StoreError as exc:  # LMDB's first writes (its meta pages) failed: an I/O failure, named so
            failure = self._io_failure("open", exc.message)
            if failure.errno is None:
                raise
            raise failure from None

    # ------------------------------------------------------------------ properties
    @property
    def path(self) -> Path:
        """The collection file."""
        return self._path

    @property
    def n_records(self) -> int:
        """Records added so far."""
        return self._records

    @property
    def n_frames(self) -> int:
        """Trajectory frames added so far (over every record)."""
        return self._frames

    @property
    def schema(self) -> SequenceSchema:
        """The declaration (a copy): as given, or as derived from the records so far."""
        return self._schema.copy()

    @property
    def poisoned(self) -> Optional[BaseException]:
        """The failure that poisoned this writer (an :class:`~molrec_raw.errors.IOFailureError`
        naming the operation and the file), None while it is sound (``safety#poison``): every
        later ``add_record``/``close`` raises ``PoisonedWriterError`` naming it."""
        return self._guard.poisoned

    # ------------------------------------------------------------------ adding a record
    def add_record(self, meta: Optional[Mapping[str, Any]] = None, system: Optional[Frame] = None,
                   frames: Optional[Iterable[Frame]] = None, steps: Optional[Iterable[int]] = None,
                   times: Optional[Iterable[float]] = None, schema: Optional[SequenceSchema] = None,
                   index: Optional[Mapping[str, Any]] = None) -> int:
        """Add one record; its number (``collection#C12``: the order of the calls).

        ``meta``: the record's meta document.  ``system``: a ``Frame`` (its topology; no
        cell, which rides on trajectory frames, lmdb#L16) or None.  ``frames``: the
        trajectory — an iterable of ``Frame`` (``[]`` is a trajectory of zero frames), or
        None for none; ``steps`` (default 0, 1, …) and ``times`` (all or none) go with them.
        ``schema``: the record's own declaration (must be the collection's, ``#C3``).
        ``index``: ``{column: value}`` of the collection's own index columns.  Refused records
        change nothing."""
        self._check_open()
        where = f"/records/{self._records}"
        try:
            return self._add(meta, system, frames, steps, times, schema, index, where)
        except MolrecError as exc:
            raise _relocated(exc, str(self._path), where, _DERIVED_RULES if self._derived else _GIVEN_RULES) from None

    def add_records(self, rows: Mapping[str, Any], system: Optional[Mapping[str, Mapping[str, Any]]] = None,
                    frame: Optional[Mapping[str, Mapping[str, Any]]] = None,
                    frame_meta: Optional[Mapping[str, Any]] = None, meta: Optional[Sequence[Any]] = None,
                    index: Optional[Mapping[str, Any]] = None) -> range:
        """Add many records given as columns (``collection#C13``); their numbers.

        ``rows``: ``{block: per-record row counts}`` (R non-negative integers: R records).
        ``system`` / ``frame``: ``{block: {column: values}}``, each column the records' rows
        concatenated in record order along its first axis (``sum(rows[block])`` rows) — the
        records' systems, and one trajectory frame each (``frame=None``: no trajectory).
        ``frame_meta``: ``{key: R values}``, each record's per-step meta; ``meta``: R record
        meta documents (or None); ``index``: ``{column: R values}``.

        Record ``r`` is exactly ``add_record(meta=meta[r], system=Frame({}, {b: Block({c:
        col[lo:hi]})}), frames=[Frame({k: v[r]}, {...})], index={c: v[r]})`` with ``lo:hi`` its
        rows: the same checks, the same refusals, a byte-identical store.  Input whose columns
        do not hold their records' rows is refused before any record is added (``C13``,
        naming the block or column and the record); a record refused by add_record's checks
        raises naming it, and the records before it stay added (``n_records`` says how many).
        A record of a shape (row counts, dtypes) already accepted under the same declaration
        is encoded straight from the columns, without ``Frame``/``Block`` objects."""
        self._check_open()
        where = str(self._path)
        columns = _RecordColumns(rows, system, frame, frame_meta, meta, index, where)
        first = self._records
        for r in range(columns.n):
            if not self._add_columnar(columns, r):
                self.add_record(**columns.record(r))
        return range(first, self._records)

    def _add_columnar(self, cols: "_RecordColumns", r: int) -> bool:
        """Record ``r`` of ``cols`` straight from the columns when every check it needs is one
        its shape already passed under this declaration (the memos :meth:`_system`,
        :meth:`_check_system_names` and ``prepare_update`` keep); False (nothing changed) for
        anything else, which :meth:`add_record` then checks whole."""
        if self._resolved_check or self._guard.poisoned is not None:
            return False
        shape = cols.shapes(r)
        plan = cols.fast.get((self._version, shape))
        if plan is None:
            plan = self._columnar_plan(cols, r)
            if plan is None:  # (not kept: add_record checks it now, and the next one of its shape is planned)
                return False
            cols.fast[(self._version, shape)] = plan
        number = self._records
        try:
            system_value = None if plan.system is None else self._columnar_value(plan.system, r, _SYSTEM_REST, {}, None)
            frame_value = None
            if plan.frame is not None:
                assert self._meta_specs is not None
                frame_meta = cols.meta_json(r, self._meta_specs)
                frame_value = self._columnar_value(plan.frame, r, header_rest(meta=frame_meta, step=0), frame_meta, 0)
            doc = b"{}" if cols.meta is None else orjson.dumps(check_record_meta(cols.meta[r], f"/records/{number}/meta"),
                                                              option=orjson.OPT_SERIALIZE_NUMPY)
            values = _NO_INDEX_VALUES if cols.index is None and not self._index.specs else \
                self._index.prepare(None if cols.index is None else cols.index_row(r), number)
        except MolrecError:  # a value its shape does not vouch for: add_record names the rule
            return False
        if frame_value is not None:
            self._pending.append((key(FRAME, self._frames), frame_value))
            self._pending_bytes += len(frame_value)
            if self._pending_bytes >= self._commit_bytes:
                self._commit()
        self._queue(key(RECORD_META, number), doc)
        if system_value is not None:
            self._queue(key(SYSTEM, number), system_value)
        n_frames = 0 if plan.frame is None else 1
        self._index.add(n_frames, plan.n_atoms[r], plan.frame is not None, values)
        self._records += 1
        self._frames += n_frames
        self._pending_records += 1
        if self._pending_records >= self._commit_every:
            self._commit()
        return True

    def _columnar_value(self, plan: "_ColumnarValue", r: int, rest: bytes, meta: Dict[str, Any],
                        step: Optional[int]) -> bytes:
        """One value of record ``r`` (``rest``: the :func:`header_rest` text of ``meta`` and
        ``step``) through its kept encoding plan; through :func:`encode_frame` while the plan
        is not kept yet (the same bytes)."""
        columns = [values[bounds[r]:bounds[r + 1]] for values, bounds in plan.columns]
        given: List[Any] = columns
        if plan.strings:
            given = list(columns)
            try:
                for i, items in plan.strings:  # checked once: every value a str
                    bounds = plan.columns[i][1]
                    given[i] = orjson.dumps(items[bounds[r]:bounds[r + 1]])
            except orjson.JSONEncodeError:  # a string JSON cannot hold: encode_frame names it
                given = []
        value = encode_planned(self._encodes, plan.key, given, rest) if given else None
        if value is not None:
            return value
        blocks: Dict[str, Block] = {}
        i = 0
        for name, names, structural, counts in plan.blocks:
            blocks[name] = made_block(dict(zip(names, columns[i:i + len(names)])), {}, {}, {}, structural, {},
                                      counts[r])
            i += len(names)
        return encode_frame(blocks, meta=meta, step=step, cache=self._encodes, shape=plan.key)

    def _columnar_plan(self, cols: "_RecordColumns", r: int) -> Optional["_Columnar"]:
        """How records of the shape of record ``r`` are encoded, when this declaration already
        checked that shape whole; None when it did not (or the record is of a kind only
        add_record takes)."""
        system: Optional[_ColumnarValue] = None
        if cols.system is not None:
            shape: List[Any] = []
            for name, columns in cols.system.items():
                n = cols.counts[name][r]
                shape += (name, n)
                for column, values in columns.items():
                    shape += (column, values.dtype, (n, *values.shape[1:]))
                shape.append(None)
            system_shape = tuple(shape)
            system_plan = self._system_shapes.get(system_shape)
            passed = self._names_passed.get((self._version, system_shape))
            if system_plan is None or passed is None or passed[1] is None:
                return None
            system = _ColumnarValue(system_plan, [(v, cols.bounds[name]) for name, columns in cols.system.items()
                                                  for v in columns.values()],
                                    [(name, list(columns), None, cols.counts[name]) for name, columns in cols.system.items()],
                                    cols.strings)
        else:
            passed = self._names_passed.get((self._version, ()))
            if passed is None or passed[1] is None:
                return None
        frame: Optional[_ColumnarValue] = None
        if cols.frame is not None:
            if self._meta_specs is None or cols.frame_meta.keys() != self._meta_specs.keys():
                return None
            frame_plan: Any = _FRAME_PLAN
            picked: List[Tuple[np.ndarray, List[int]]] = []
            blocks: List[Tuple[str, List[str], Any, List[int]]] = []
            for name, columns in cols.frame.items():
                state = self._states.get(name)
                if state is None or len(columns) != len(state.spec.columns):
                    return None
                n = cols.counts[name][r]
                given = []
                for column, spec in state.spec.columns.items():
                    found = columns.get(column)
                    if found is None:
                        return None
                    given.append((column, found.dtype, (n, *found.shape[1:])))
                    # precision columns: rounded whole (per value: each record's rows are its rows rounded)
                    picked.append((found if spec.precision is None else cols.rounded(name, column, spec.precision),
                                   cols.bounds[name]))
                checked = state.shapes.get(tuple(given))
                if checked is None:
                    return None
                structural = state.spec.structural_shape
                frame_plan = (frame_plan, name, checked, structural)
                blocks.append((name, list(state.spec.columns), structural, cols.counts[name]))
            frame = _ColumnarValue(frame_plan, picked, blocks, [])
        n_atoms = cols.counts["atoms"] if "atoms" in cols.counts else [0] * cols.n
        return _Columnar(system, frame, n_atoms)

    def _add(self, meta: Any, system: Any, frames: Any, steps: Any, times: Any, schema: Any, index: Any,
             where: str) -> int:
        number = self._records
        doc = check_record_meta(meta, f"{where}/meta")
        if system is None and frames is None:
            raise SpecViolationError("a record has a system, a trajectory or both; this one has neither",
                                     node=where, rule=C8)
        system_value: Optional[bytes] = None
        system_blocks: Dict[str, Block] = {}
        n_atoms: Optional[int] = None
        shape: Any = ()  # a system's plain shape, checked (() for no system; None: not plain)
        if system is not None:
            if not isinstance(system, Frame):
                raise InvalidValueError(f"system must be a Frame, got {type(system).__name__}", node=f"{where}/system")
            system_value, system_blocks, shape = self._system(system, f"{where}/system")
            if "atoms" in system_blocks:
                n_atoms = system_blocks["atoms"].nrows
        values = _NO_INDEX_VALUES if index is None and not self._index.specs else self._index.prepare(index, number)
        draft = _Draft(number, self._frames, system_blocks)
        self._draft = draft
        try:
            if schema is not None:
                self._record_schema(schema, where)
            self._check_system_names(draft, self._schema.block_names(), where, shape)
            if frames is not None:
                self._trajectory(draft, frames, steps, times, where)
        except BaseException:
            if draft.undo is not None:  # the derived declaration as it was before this record
                self._schema, self._meta_specs = draft.undo
                self._refresh_states()
            if draft.frames:  # some of its frames may already be committed: deleted at close unless reused
                self._stale_frames = max(self._stale_frames, self._frames + draft.frames)
            self._drop_values(draft)
            raise
        finally:
            self._draft = None
        if n_atoms is None:
            n_atoms = draft.n_atoms or 0
        self._queue(key(RECORD_META, number), orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY) if doc else b"{}")
        if system_value is not None:
            self._queue(key(SYSTEM, number), system_value)
        self._index.add(draft.frames, n_atoms, frames is not None, values)
        self._records += 1
        self._frames += draft.frames
        self._pending_records += 1
        if self._pending_records >= self._commit_every:
            self._commit()
        return number

    def _system(self, system: Frame, node: str) -> Tuple[bytes, Dict[str, Block], Any]:
        """A record's system as frame bytes (frame-and-types §14 writer refusals; typed meta with
        ``meta_types``; precision columns rounded, lmdb#L14), its blocks, and its plain shape
        when it has one checked whole (None otherwise)."""
        if system.box is not None:
            raise SpecViolationError("a collection record's system carries no cell: give the box on its trajectory "
                                     "frames (lmdb.md: box appears only on trajectory updates)", node=f"{node}/box",
                                     rule="lmdb#L16")
        shape = _plain_shape(system)
        plan = None if shape is None else self._system_shapes.get(shape)
        if plan is not None:  # this shape was checked whole: its values only
            value = encode_planned(self._encodes, plan, [v for b in system.blocks.values() for v in b.columns.values()],
                                   _SYSTEM_REST)  # (no masks: a plain shape's)
            if value is not None:
                return value, system.blocks, shape
            try:  # the encoder holds object columns to str values (lmdb#L11)
                return encode_frame(system.blocks, meta={}, cache=self._encodes, shape=plan), system.blocks, shape
            except InvalidValueError:
                pass  # a value the shape does not vouch for: the whole check below names its rule
        prepared = prepare_frame(system, node, rows_of=_system_rows(system.blocks))
        if shape is not None and all(prepared.blocks[name].columns[c] is v for name, b in system.blocks.items()
                                     for c, v in b.columns.items()):  # nothing converted: the checks were the shape's
            if len(self._system_shapes) >= 4096:
                self._system_shapes.clear()
            plan = self._system_shapes[shape] = object()  # a key of its own: hashed by identity
        else:
            shape = plan = None
        blocks: Dict[str, Block] = {}
        for name, block in prepared.blocks.items():
            if block.column_attrs:
                column = next(iter(block.column_attrs))
                raise SpecViolationError(f"column {column!r} of block {name!r} has column attributes, which frame bytes "
                                         "cannot carry (only a precision)", node=f"{node}/{name}/{column}",
                                         rule="lmdb#L16")
            columns = {c: round_to_precision(v, block.precision[c]) if c in block.precision else v
                       for c, v in block.columns.items()}
            masks = {c: m for c, m in block.masks.items() if not m.all()}
            blocks[name] = made_block(columns, masks, dict(block.precision), dict(block.targets),
                                      block.structural_shape, dict(block.attrs), block.nrows)
        value = encode_frame(blocks, meta=prepared.meta, meta_types=prepared.meta_types if prepared.meta_types else None,
                             cache=self._encodes, shape=plan)  # a plain shape's plan: the blocks as given
        return value, prepared.blocks, shape

    def _record_schema(self, schema: Any, where: str) -> None:
        """A record's own declaration (``collection#C3``): the collection's when declared; else
        it joins the derived union (agreeing on shared blocks, ``#C4``) and fixes the per-step
        meta when none is fixed yet."""
        if not isinstance(schema, SequenceSchema):
            raise InvalidValueError(f"a record's schema must be a SequenceSchema, got {type(schema).__name__}",
                                    node=where)
        if not self._derived:
            if schema != self._schema:
                raise SpecViolationError("the record's sequence schema differs from the collection's (a collection has "
                                         f"one declaration): {schema!r} != {self._schema!r}",
                                         node=f"{where}/trajectory", rule=C3)
            return
        self._before_change()
        for name in schema.block_names():
            self._join_block(name, schema.block_spec(name), where)
        for name in schema.block_names():
            target = schema.aligned_with(name)
            if target is not None and self._schema.aligned_with(name) is None:
                self._schema.declare_aligned(name, target)
        self._join_meta({k: schema.meta_spec(k) for k, _ in schema.meta_keys()}, where)
        self._refresh_states()

    def _before_change(self) -> None:
        """Keep the derived declaration as it was before the record being added changes it
        (restored if the record is refused)."""
        draft = self._draft
        if draft is not None and draft.undo is None:
            draft.undo = (self._schema.copy(), self._meta_specs)

    def _join_block(self, name: str, spec: BlockSpec, where: str) -> None:
        """Add a block to the derived union, or check that it agrees with the union's (C4)."""
        node = f"{where}/trajectory/{name}"
        if self._schema.has_block(name):
            have = self._schema.block_spec(name)
            ours = {c: (s.dtype, s.trailing, s.precision) for c, s in have.columns.items()}
            theirs = {c: (s.dtype, s.trailing, s.precision) for c, s in spec.columns.items()}
            if ours != theirs or have.structural_shape != spec.structural_shape or have.targets != spec.targets \
                    or (spec.aligned_with is not None and have.aligned_with not in (None, spec.aligned_with)):
                raise SpecViolationError(f"block {name!r} is declared differently by an earlier record (a derived "
                                         f"declaration is a union whose blocks agree): {theirs} vs {ours}",
                                         node=node, rule=C4)
            for column, s in spec.columns.items():
                if s.nullable and not have.columns[column].nullable:
                    self._schema.declare_nullable(name, column)
            return
        self._schema.declare_block(name)
        for column, s in spec.columns.items():
            self._schema.declare_column(name, column, s.dtype, s.trailing)
            if s.nullable:
                self._schema.declare_nullable(name, column)
            if s.precision is not None:
                self._schema.declare_precision(name, column, s.precision)
        for column, target in spec.targets.items():
            self._schema.declare_target(name, column, target)
        if spec.structural_shape is not None:
            self._schema.declare_structural_shape(name, spec.structural_shape)

    def _join_meta(self, specs: Dict[str, MetaSpec], where: str) -> None:
        """The per-step meta declaration of a record (C3): the collection's exactly."""
        if self._meta_specs is None:
            self._before_change()
            for key_name, spec in specs.items():
                if spec.has_fill:
                    self._schema.declare_meta_with_fill(key_name, spec.fill, spec.tag)
                else:
                    self._schema.declare_meta(key_name, spec.tag)
            self._meta_specs = {k: self._schema.meta_spec(k) for k, _ in self._schema.meta_keys()}
        elif specs != self._meta_specs:
            show = {k: s.tag for k, s in specs.items()}
            have = {k: s.tag for k, s in self._meta_specs.items()}
            raise SpecViolationError(f"the record's per-step meta {show} is not the collection's {have} (every record "
                                     "declares the same per-step meta)", node=f"{where}/trajectory/meta", rule=C3)

    def _refresh_states(self) -> None:
        """Per declared block, what ``prepare_update`` checks against (rebuilt when the derived
        declaration grows)."""
        schema = self._schema
        for name in schema.block_names():
            spec = schema.block_spec(name)
            state = self._states.get(name)
            if state is None or state.spec != spec:
                self._states[name] = BlockWriter(name, spec)
        for name in [n for n in self._states if not schema.has_block(n)]:
            del self._states[name]
        self._resolved_check = any(schema.targets(b) or schema.aligned_with(b) for b in schema.block_names())
        self._version += 1

    def _check_system_names(self, draft: _Draft, names: Iterable[str], where: str, shape: Any = None) -> None:
        """A trajectory block named like one of the record's system blocks: not aligned with
        another block (C11) and sharing no column with it (C10).  ``shape``: the system's
        plain shape (its block and column names) when ``names`` are every declared block —
        a shape that passed under this declaration passes again (the checks are names only),
        with the same counterparts when they hold no ``id`` (then they are its row counts)."""
        memo = None if shape is None else (self._version, shape)
        if memo is not None:
            passed = self._names_passed.get(memo)
            if passed is not None:
                draft.checked.update(passed[0])
                draft.counterparts = passed[1] or SystemCounterparts.of_blocks(self._schema, draft.system_blocks)
                return
        for name in names:
            if name in draft.checked or name not in draft.system_blocks:
                continue
            draft.checked.add(name)
            node = f"{where}/trajectory/{name}"
            if self._schema.aligned_with(name) is not None:
                raise SpecViolationError(f"aligned block {name!r} shares its name with a system block "
                                         f"({where}/system/{name})", node=node, rule=C11)
            shared = [c for c in self._schema.column_names(name) if c in draft.system_blocks[name].columns]
            if shared:
                raise SpecViolationError(f"column {shared[0]!r} is in both the system block {name!r} and the trajectory "
                                         "block of that name (a reader presents them as one block)", node=node, rule=C10)
        draft.counterparts = SystemCounterparts.of_blocks(self._schema, draft.system_blocks)
        if memo is not None:
            if len(self._names_passed) >= 4096:
                self._names_passed.clear()
            held = [draft.system_blocks[n] for n in self._schema.block_names() if n in draft.system_blocks]
            self._names_passed[memo] = (frozenset(draft.checked), None if any("id" in b.columns for b in held)
                                        else draft.counterparts)

    # ------------------------------------------------------------------ a record's trajectory
    def _trajectory(self, draft: _Draft, frames: Iterable[Frame], steps: Any, times: Any, where: str) -> None:
        if isinstance(frames, Frame):
            raise InvalidValueError("frames is an iterable of Frame (a one-frame trajectory is [frame])", node=where)
        step_iter: Optional[Iterator[Any]] = None if steps is None else iter(steps)
        time_iter: Optional[Iterator[Any]] = None if times is None else iter(times)
        known = len(frames) if isinstance(frames, (list, tuple)) else None  # no look-ahead: a producer may
        for k, frame in enumerate(frames):                                 # reuse its arrays in place
            step = None if step_iter is None else _next(step_iter, "steps", k, where)
            time = None if time_iter is None else _next(time_iter, "times", k, where)
            value = self._frame(draft, k, frame, None if step is _MISSING else step, None if time is _MISSING else time,
                                where, known is None or k + 1 < known)
            draft.values.append((key(FRAME, draft.first_frame + k), value))
            self._pending_bytes += len(value)
            draft.frames = k + 1
            if self._pending_bytes >= self._commit_bytes:  # a long record: its frames so far go to disk
                self._pending.extend(draft.values)
                draft.values = []
                self._commit()
        given = () if step_iter is None and time_iter is None else (("steps", step_iter), ("times", time_iter))
        for name, it in given:
            if it is not None and next(it, _MISSING) is not _MISSING:
                raise InvalidValueError(f"{name} has more values than the record has frames ({draft.frames})", node=where)
        if self._meta_specs is None and draft.meta is not None:  # the first record with frames declares them
            self._join_meta(draft.meta, where)
        self._pending.extend(draft.values)
        draft.values = []

    def _frame(self, draft: _Draft, k: int, frame: Any, step: Any, time: Any, where: str, more: bool) -> bytes:
        """Trajectory frame ``k`` of the record as the update frame bytes hold (lmdb#L8);
        ``more``: frames follow (this one's blocks become the base they are compared with)."""
        if not isinstance(frame, Frame):
            raise InvalidValueError(f"trajectory frame {k} is not a Frame ({type(frame).__name__})", node=where)
        # -- step and time (trajectory#W16, #W17)
        if step is None:
            step = 0 if draft.last_step is None else draft.last_step + 1
        if type(step) is not int and is_int(step):
            step = int(step)
        if type(step) is not int or not I64[0] <= step <= I64[1]:
            raise SpecViolationError(f"step {step!r} of trajectory frame {k} is not an integer in the i64 range",
                                     node=f"{where}/trajectory", rule="trajectory#W16")
        if draft.last_step is not None and step <= draft.last_step:
            raise SpecViolationError(f"step numbers increase strictly within a record: {step} follows "
                                     f"{draft.last_step}", node=f"{where}/trajectory", rule="trajectory#W16")
        if time is not None:
            if isinstance(time, (bool, np.bool_)) or not isinstance(time, (int, float, np.integer, np.floating)):
                raise InvalidValueError(f"time must be a number, got {time!r}", node=f"{where}/trajectory")
            time = float(time)
        if draft.timed is not None and (time is not None) != draft.timed:
            raise SpecViolationError("a record's times are all-or-nothing: " + (
                f"frame {k} has none" if draft.timed else f"frame {k} adds one to a time-less trajectory"),
                node=f"{where}/trajectory", rule="trajectory#W17")
        # -- per-step meta (C3, trajectory#W23)
        meta = self._frame_meta(draft, k, frame.meta, where)
        # -- blocks
        changed: Dict[str, Update] = {}
        states = self._states
        for name, blk in frame.blocks.items():
            state = states.get(name)
            if state is None or (name not in draft.checked and name in draft.system_blocks) or (
                    self._derived and isinstance(blk, Block) and blk.masks):
                state = self._state_for(draft, name, blk, k, where)
            if blk.attrs or blk.column_attrs:
                raise SpecViolationError(f"trajectory frame {k}: block {name!r} carries attributes; a trajectory "
                                         "block's attributes are its section's, not one update's",
                                         node=f"{where}/trajectory/{name}", rule="lmdb#L16")
            update = prepare_update(state, blk, k)
            for column in state.precise:
                update.columns[column] = round_to_precision(update.columns[column], state.spec.columns[column].precision)
            base = draft.last.get(name)
            if base is None or compare(base, update) != SAME:
                assert draft.counterparts is not None
                draft.counterparts.check(name, update.rows, update.columns.get("id"), f"trajectory frame {k}")
                changed[name] = update
        if self._resolved_check:
            resolved = {**draft.last, **changed}
            check_resolved(self._schema, {n: u.rows for n, u in resolved.items()},
                           lambda b, c: (resolved[b].columns[c], resolved[b].masks.get(c)), draft.rows_of, k,
                           writing=True)
        cell = None
        if frame.box is not None:
            cell = prepare_cell(frame.box, k, draft.defined)
            if draft.cell is not None and draft.cell.same(cell):
                cell = None
        # -- accept and encode (frames of one shape through one kept plan: the same bytes)
        shape: Any = _FRAME_PLAN
        for name, u in changed.items():
            if u.shape is None or u.masks:
                shape = None
                break
            shape = (shape, name, u.shape, states[name].spec.structural_shape)
        step_json = step if -_EXACT_INT <= step <= _EXACT_INT else typed_json.encode_value("i64", step)
        time_json = typed_json.encode_value("f64", time) if time is not None else None
        box = cell.box() if cell is not None else None
        value = None
        if shape is not None:  # a kept plan: the columns as they are (the same bytes encode_frame gives)
            value = encode_planned(self._encodes, shape, [v for u in changed.values() for v in u.columns.values()],
                                   header_rest(meta=meta, step=step_json, time=time_json, box=box))
        if value is None:
            blocks = {name: made_block(u.columns, u.masks, {}, {}, states[name].spec.structural_shape, {}, u.rows)
                      for name, u in changed.items()}
            value = encode_frame(blocks, meta=meta, step=step_json, time=time_json, box=box, cache=self._encodes,
                                 shape=shape)
        if more:
            for name, u in changed.items():  # the base of the next frame: our own copy, never the caller's arrays
                draft.last[name] = Update(k, u.rows, {c: v.copy() for c, v in u.columns.items()},
                                          {c: m.copy() for c, m in u.masks.items()})
        if cell is not None:
            draft.cell, draft.defined = cell, cell.defined
        if draft.n_atoms is None and "atoms" in changed:
            draft.n_atoms = changed["atoms"].rows
        draft.last_step, draft.timed = step, time is not None
        return value

    def _frame_meta(self, draft: _Draft, k: int, given: Mapping[str, Any], where: str) -> Dict[str, Any]:
        """Every declared per-step key in typed JSON form, fills materialized (lmdb#L8)."""
        node = f"{where}/trajectory/meta"
        specs = draft.meta if draft.meta is not None else self._meta_specs
        if specs is None:  # a derived collection whose first trajectory frame this is: the frame declares them
            specs = {}
            for name, value in given.items():
                if name in SKIPPED_FRAME_META_KEYS:
                    continue
                try:
                    tag = value.tag if isinstance(value, MetaValue) else typed_json.infer_tag(value)
                    specs[name] = MetaSpec(typed_json.normalize_tag(tag, where=f"{node}/{name}", rule="trajectory#W5"))
                except MolrecError as exc:
                    raise SpecViolationError(f"meta key {name!r}: {exc.message}", node=f"{node}/{name}",
                                             rule="trajectory#W5") from None
        draft.meta = specs
        for name in given:
            if name not in specs and name not in SKIPPED_FRAME_META_KEYS:
                raise SpecViolationError(f"trajectory frame {k}: meta key {name!r} is not in the collection's per-step "
                                         "meta declaration", node=f"{node}/{name}", rule=C3)
        out: Dict[str, Any] = {}
        for name, spec in specs.items():
            value = given.get(name, _MISSING)
            if value is _MISSING:
                if not spec.has_fill:
                    raise SpecViolationError(f"trajectory frame {k} omits meta key {name!r}, which is declared without "
                                             "a fill", node=f"{node}/{name}", rule=C3)
                out[name] = spec.fill_json
                continue
            if type(value) is float and spec.tag == "f64" and -_MAX_F64 <= value <= _MAX_F64:
                out[name] = value  # a finite float is its own typed JSON form (trajectory#W23)
                continue
            if isinstance(value, MetaValue):
                value = value.value
            try:
                out[name] = typed_json.encode_value(spec.tag, value, f"{node}/{name}")
            except MolrecError as exc:
                raise SpecViolationError(f"meta key {name!r} ({spec.tag}): {exc.message}", node=f"{node}/{name}",
                                         rule="trajectory#W23") from None
        return out

    def _state_for(self, draft: _Draft, name: str, blk: Any, k: int, where: str) -> BlockWriter:
        """The declared block ``name`` (a derived declaration grows by a block first seen, and
        a column first masked becomes nullable)."""
        state = self._states.get(name)
        if self._derived and isinstance(blk, Block):
            if state is None:
                self._before_change()
                try:
                    derived = SequenceSchema.from_frames([Frame({}, {name: blk})])
                except MolrecError as exc:
                    raise exc.add_context(node=f"{where}/trajectory/{name}") from None
                self._join_block(name, derived.block_spec(name), where)
                self._refresh_states()
                state = self._states[name]
            elif any(c in state.spec.columns and not state.spec.columns[c].nullable for c in blk.masks):
                self._before_change()
                for column in blk.masks:
                    if column in state.spec.columns and not state.spec.columns[column].nullable:
                        self._schema.declare_nullable(name, column)
                self._refresh_states()
                state = self._states[name]
        if state is None:
            raise SpecViolationError(f"trajectory frame {k}: block {name!r} is not in the collection's sequence schema",
                                     node=f"{where}/trajectory/{name}", rule=C2)
        if name not in draft.checked:
            self._check_system_names(draft, [name], where)
        return state

    # ------------------------------------------------------------------ transactions
    def _queue(self, k: bytes, value: bytes) -> None:
        self._pending.append((k, value))
        self._pending_bytes += len(value)

    def _drop_values(self, draft: _Draft) -> None:
        for _, value in draft.values:
            self._pending_bytes -= len(value)
        draft.values = []

    def _check_open(self) -> None:
        self._guard.check()
        if self._closed:
            raise InvalidValueError("the collection writer is closed", store=str(self._path))
        if self._handle is None or self._handle.inherited:
            raise StoreError("a collection writer is not carried across fork: write from the process that opened it",
                             store=str(self._path), rule="lmdb#L1")

    def _commit(self, final: Optional[List[Tuple[bytes, bytes]]] = None, deletes: Sequence[bytes] = ()) -> None:
        """One write transaction of everything waiting (and ``final``, last); a transaction
        that does not fit the map is retried after the map has grown."""
        items = self._pending + (final or [])
        if not items and not deletes:
            return
        assert self._handle is not None and self._handle.env is not None
        env = self._handle.env
        lmdb = self._lmdb
        need = sum(len(k) + len(v) for k, v in items)
        try:
            self._reserve(env, need)
            while True:
                try:
                    with env.begin(write=True) as txn:
                        with txn.cursor() as cursor:
                            cursor.putmulti(items)
                        for k in deletes:
                            txn.delete(k)
                    break
                except lmdb.MapFullError:
                    env.set_mapsize(env.info()["map_size"] * 2)
        except BaseException as exc:  # LMDB's own I/O failed (or the commit was interrupted): poisoned
            self._fail("write transaction", exc)
        self._pending, self._pending_records, self._pending_bytes = [], 0, 0

    def _fail(self, operation: str, exc: BaseException) -> NoReturn:
        """Poison the writer by the failure of a call that had begun changing the file and
        raise it (``safety#poison``): an LMDB error as an
        :class:`~molrec_raw.errors.IOFailureError` naming the operation, the file and the
        errno LMDB reported (LMDB does its own I/O, beside the seam)."""
        if isinstance(exc, self._lmdb.Error):
            exc = self._io_failure(operation, str(exc))
        raise self._guard.poison(exc)

    def _io_failure(self, operation: str, text: str) -> IOFailureError:
        """LMDB's report of a failed system call as an IOFailureError (the errno read from the
        system's words LMDB ends its message with; None when it names none)."""
        code = next((c for c in _ERRNO_BY_TEXT if text.endswith(_ERRNO_BY_TEXT[c])), None)
        name = f" ({errno.errorcode[code]})" if code is not None else ""
        return IOFailureError(f"LMDB {operation} failed on {self._path}: {text}{name}", operation=operation,
                              path=str(self._path), errno=code, store=str(self._path), rule="safety#poison")

    @staticmethod
    def _reserve(env: Any, need: int) -> None:
        """Grow the map before a commit that would not fit (LMDB needs room for the new
        pages and the old ones a reader may still hold: twice the data, plus slack)."""
        info = env.info()
        used = (info["last_pgno"] + 1) * env.stat()["psize"]
        want = used + 2 * need + (1 << 20)
        size = info["map_size"]
        if want > size:
            while size < want:
                size *= 2
            env.set_mapsize(size)

    # ------------------------------------------------------------------ closing
    def close(self) -> None:
        """Commit what waits, then the index, the force field and ``meta`` last in that same
        transaction (lmdb#L3); sync; release the file and the lock.  Idempotent.  A poisoned
        writer is released without writing and raises ``PoisonedWriterError`` (every time)."""
        if self._guard.poisoned is not None:  # released without writing; raised every time
            self._closed = True
            self._release()
            self._guard.check()
        if self._closed:
            return
        self._check_open()
        columns, masks = self._index.columns()
        index = encode_frame({INDEX_BLOCK: Block(columns, masks, {c: s.precision for c, s in self._index.specs.items()
                                                                  if s.precision is not None}, count=self._records)})
        final: List[Tuple[bytes, bytes]] = [(INDEX_KEY, index)]
        if self._ff_value is not None:
            final.append((FF_KEY, self._ff_value))
        final.append((META_KEY, binding.meta_value(self._document, self._schema.to_json(), self._records, self._frames)))
        deletes = [key(FRAME, j) for j in range(self._frames, self._stale_frames)]
        try:
            self._commit(final, deletes)
            assert self._handle is not None and self._handle.env is not None
            try:
                self._handle.env.sync(True)
            except BaseException as exc:  # never retried (an fsync that failed proves nothing after)
                self._fail("sync", exc)
        finally:
            self._closed = True
            self._release()

    def abort(self) -> None:
        """Drop the unfinished collection: the file is removed (it has no ``meta``), the lock
        released; never raises for a file it cannot remove."""
        if self._closed:
            return
        self._closed = True
        self._release()
        self._remove_file()

    def _release(self) -> None:
        """Let go of the LMDB environment and of the writer lock, writing nothing."""
        handle, self._handle = self._handle, None
        try:
            if handle is not None:
                handle.release()
        finally:
            self._lock.release()

    def _remove_file(self) -> None:
        """Remove the unfinished file and LMDB's lock file of it (a poisoned writer too: a name
        goes, no data is written)."""
        ops = self._guard if self._guard.poisoned is None else self._guard.inner
        for name in (str(self._path), f"{self._path}-lock"):
            try:
                ops.unlink(name)
            except OSError:  # gone already, or cannot go: a file without meta is no collection
                pass

    def __enter__(self) -> "CollectionWriter":
        """The writer itself: leaving the ``with`` block closes it, or aborts it on an exception."""
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        """``close()``, or ``abort()`` when the block raised."""
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"CollectionWriter({str(self._path)!r}, {self._records} records, {self._frames} frames, {state})"


class _ColumnarValue:
    """How one value of a record given as columns is encoded: ``key`` the encoding plan's
    key, ``columns`` each column's array and its block's row bounds (the header's order),
    ``blocks`` each block's name, column names, structural shape and row counts;
    ``strings`` the 1-D string columns (their place in ``columns``) listed whole, every value
    a ``str``."""

    __slots__ = ("key", "columns", "blocks", "strings")

    def __init__(self, key: Any, columns: List[Tuple[np.ndarray, List[int]]],
                 blocks: List[Tuple[str, List[str], Any, List[int]]], strings: List[Tuple[int, List[str]]]) -> None:
        self.key, self.columns, self.blocks, self.strings = key, columns, blocks, strings


class _Columnar:
    """A checked shape of records given as columns: their system value, their frame value
    (either None), every record's ``n_atoms``."""

    __slots__ = ("system", "frame", "n_atoms")

    def __init__(self, system: Optional[_ColumnarValue], frame: Optional[_ColumnarValue], n_atoms: List[int]) -> None:
        self.system, self.frame, self.n_atoms = system, frame, n_atoms


class _RecordColumns:
    """The input of :meth:`CollectionWriter.add_records`, checked to hold its records' rows
    (``collection#C13``), and each record's part of it."""

    def __init__(self, rows: Any, system: Any, frame: Any, frame_meta: Any, meta: Any, index: Any,
                 where: str) -> None:
        def refuse(message: str, node: str, rule: str = C13) -> NoReturn:
            raise SpecViolationError(message, store=where, node=node, rule=rule)

        if not isinstance(rows, Mapping) or not rows:
            refuse(f"rows must map each block to its records' row counts, got {brief(rows)}", "/records")
        if system is None and frame is None:
            refuse("records have a system, a trajectory or both: add_records was given neither", "/records", C8)
        self.counts: Dict[str, List[int]] = {}
        self.bounds: Dict[str, List[int]] = {}
        n: Optional[int] = None
        for name, raw in rows.items():
            counts = np.asarray(raw)
            if counts.ndim != 1 or counts.dtype.kind not in "iu":
                refuse(f"rows[{name!r}] must be one integer row count per record, got {counts.dtype}"
                       f"{list(counts.shape)}", f"/records/{name}")
            if n is not None and len(counts) != n:
                refuse(f"rows[{name!r}] holds {len(counts)} counts, rows[{next(iter(rows))!r}] {n} (one per record)",
                       f"/records/{name}")
            n = len(counts)
            negative = np.flatnonzero(counts < 0)
            if len(negative):
                r = int(negative[0])
                refuse(f"rows[{name!r}] of record {r} is {int(counts[r])}, not a row count", f"/records/{r}/{name}")
            self.counts[name] = counts.tolist()
            self.bounds[name] = [0, *np.cumsum(counts, dtype=np.int64).tolist()]
        assert n is not None
        self.n = n
        used: Set[str] = set()
        self.system = None if system is None else self._blocks(system, "system", used, refuse)
        self.frame = None if frame is None else self._blocks(frame, "trajectory", used, refuse)
        unused = [name for name in self.counts if name not in used]
        if unused:
            refuse(f"rows names block {unused[0]!r}, which no system or frame column uses", f"/records/{unused[0]}")
        self.frame_meta: Dict[str, List[Any]] = {}
        if frame_meta is not None:
            if frame is None:
                refuse("frame_meta is per-step meta: it needs a frame", "/records/trajectory/meta")
            for name, values in frame_meta.items():
                listed = values.tolist() if isinstance(values, np.ndarray) else list(values)
                self._one_each(listed, f"frame_meta[{name!r}]", f"/records/trajectory/meta/{name}", refuse)
                self.frame_meta[name] = listed
        self.meta = None if meta is None else list(meta)
        if self.meta is not None:
            self._one_each(self.meta, "meta", "/records/meta", refuse)
        self.index: Optional[Dict[str, Any]] = None
        if index is not None:
            self.index = dict(index)
            for name, values in self.index.items():
                self._one_each(values, f"index[{name!r}]", f"/index/records/{name}", refuse)
        self.strings: List[Tuple[int, List[str]]] = []  # the system's 1-D string columns of str, listed
        for i, values in enumerate(v for columns in (self.system or {}).values() for v in columns.values()):
            if values.dtype.kind == "O" and values.ndim == 1:
                items = values.tolist()
                try:
                    "".join(items)  # a C loop that fails on any element that is not a str
                except TypeError:
                    continue
                self.strings.append((i, items))
        self.fast: Dict[Any, Any] = {}  # (declaration, row counts) -> _columnar_plan
        self._rounded: Dict[Tuple[str, str, float], np.ndarray] = {}
        self._shapes = list(self.counts.values())

    def _blocks(self, given: Any, section: str, used: Set[str], refuse: Any) -> Dict[str, Dict[str, np.ndarray]]:
        """``{block: {column: array}}`` of one section, each column holding its block's rows."""
        if not isinstance(given, Mapping):
            refuse(f"{section} must map block -> column -> values, got {brief(given)}", f"/records/{section}")
        out: Dict[str, Dict[str, np.ndarray]] = {}
        for name, columns in given.items():
            node = f"/records/{section}/{name}"
            if name not in self.counts:
                refuse(f"block {name!r} has no row counts: rows[{name!r}] is missing", node)
            if not isinstance(columns, Mapping):
                refuse(f"block {name!r} must map column -> values, got {brief(columns)}", node)
            used.add(name)
            total, bounds = self.bounds[name][-1], self.bounds[name]
            out[name] = {}
            for column, raw in columns.items():
                values = np.asarray(raw)
                if values.dtype.kind == "U":  # strings: a string column's object array
                    values = values.astype(object)
                values = np.ascontiguousarray(values)
                if values.ndim == 0 or len(values) != total:
                    have = 0 if values.ndim == 0 else len(values)
                    r = next((r for r in range(self.n) if bounds[r + 1] > have), self.n - 1)
                    refuse(f"column {column!r} of block {name!r} has {have} rows; the records' counts sum to "
                           f"{total} (record {r}'s rows are {bounds[r]}:{bounds[r + 1]})", f"{node}/{column}")
                out[name][column] = values
        return out

    def _one_each(self, values: Any, what: str, node: str, refuse: Any) -> None:
        if not hasattr(values, "__len__") or len(values) != self.n:
            have = len(values) if hasattr(values, "__len__") else brief(values)
            refuse(f"{what} must hold one value per record ({self.n}), got {have}", node)

    def shapes(self, r: int) -> Tuple[int, ...]:
        """Record ``r``'s row counts, block by block."""
        return tuple([counts[r] for counts in self._shapes])

    def rounded(self, block: str, column: str, precision: float) -> np.ndarray:
        """A trajectory column rounded to ``precision`` whole (rounding is per value: each
        record's rows are its rows rounded)."""
        found = self._rounded.get((block, column, precision))
        if found is None:
            assert self.frame is not None
            found = self._rounded[(block, column, precision)] = round_to_precision(self.frame[block][column], precision)
        return found

    def meta_json(self, r: int, specs: Dict[str, MetaSpec]) -> Dict[str, Any]:
        """Record ``r``'s per-step meta in typed JSON form (the keys are ``specs``'s)."""
        out: Dict[str, Any] = {}
        for name, spec in specs.items():
            value = self.frame_meta[name][r]
            if type(value) is float and spec.tag == "f64" and -_MAX_F64 <= value <= _MAX_F64:
                out[name] = value  # a finite float is its own typed JSON form (trajectory#W23)
                continue
            if isinstance(value, MetaValue):
                value = value.value
            out[name] = typed_json.encode_value(spec.tag, value, f"/trajectory/meta/{name}")
        return out

    def index_row(self, r: int) -> Dict[str, Any]:
        assert self.index is not None
        return {name: values[r] for name, values in self.index.items()}

    def record(self, r: int) -> Dict[str, Any]:
        """Record ``r`` as :meth:`CollectionWriter.add_record`'s arguments."""
        def blocks(section: Dict[str, Dict[str, np.ndarray]]) -> Dict[str, Block]:
            return {name: Block({c: v[self.bounds[name][r]:self.bounds[name][r + 1]] for c, v in columns.items()})
                    for name, columns in section.items()}
        frame_meta = {name: values[r] for name, values in self.frame_meta.items()}
        return {"meta": None if self.meta is None else self.meta[r],
                "system": None if self.system is None else Frame({}, blocks(self.system)),
                "frames": None if self.frame is None else [Frame(frame_meta, blocks(self.frame))],
                "index": None if self.index is None else self.index_row(r)}


def _next(it: Optional[Iterator[Any]], name: str, k: int, where: str) -> Any:
    if it is None:
        return _MISSING
    value = next(it, _MISSING)
    if value is _MISSING:
        raise InvalidValueError(f"{name} has {k} values for more frames", node=where)
    return value


def _located(build: Any, where: str) -> Any:
    try:
        return build()
    except MolrecError as exc:
        raise exc.add_context(store=where) from None


def _relocated(exc: MolrecError, store: str, where: str, rules: Dict[str, str]) -> MolrecError:
    """A refusal of a record's content, named as the collection sees it: the file, the
    record's path (``/records/<r>/trajectory/...`` for a trajectory rule's
    ``/trajectory/...``), the collection rule it breaks."""
    node = exc.node
    if node is not None and node.startswith("/trajectory"):
        exc.node = f"{where}{node}"
    elif node is not None and node.startswith("/system"):
        exc.node = f"{where}{node}"
    if exc.rule in rules:
        exc.message = f"{exc.message} ({exc.rule})"
        exc.rule = rules[exc.rule]
    return exc.add_context(store=store)


def _claim_collection(path: Path, overwrite: bool) -> None:
    """The overwrite policy for a collection file (``safety#overwrite``): an existing
    collection — an LMDB data file, finished or not, or an empty file a writer left — is
    replaced only with ``overwrite``, else :class:`~molrec_raw.errors.RecordExistsError`;
    anything else at the path (a directory, a file that is not LMDB, a symbolic link) never."""
    where = str(path)
    if os.path.islink(where) or not os.path.isfile(where):
        raise StoreError("refusing to replace: the path exists and is not a collection file", store=where,
                         rule="safety#overwrite")
    with open(where, "rb") as handle:
        head = handle.read(20)
    if head and head[16:20] != _LMDB_MAGIC:
        raise StoreError("refusing to replace: the file exists and is not an LMDB collection", store=where,
                         rule="safety#overwrite")
    if not overwrite:
        raise RecordExistsError(f"{where} is an existing collection; refusing to replace it (pass overwrite=True, or "
                                "--force on the command line)", store=where, rule="safety#overwrite")
