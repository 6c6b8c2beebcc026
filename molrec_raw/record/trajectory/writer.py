"""The streaming trajectory writer (trajectory §2–§11).

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

The run's lifecycle goes into the record's ``status`` document (documents §2; unless
``status=False``): ``running`` at creation and reopening, ``succeeded`` after the last
commit of ``close()``, ``failed`` / ``cancelled`` when a ``with`` block exits by an
exception (record/live.py) — what a reader following the run stops on.

A ``*.mrec.zip`` target is built in a hidden directory beside it (the packed record already
there extracted into it) and packed over it by ``close()``, or when a ``with`` block exits by
an exception after a commit (the committed frames, as a directory keeps them; before any
commit the build is dropped); a crash, ``abort()`` or a poisoned writer leave the target as
it was and the directory (doors.PackedBuild).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Set, Tuple, Union, overload

import numpy as np

from molrec_raw.errors import InvalidValueError, MolrecError, SpecViolationError, StoreError
from molrec_raw.record import documents, live
from molrec_raw.record.doors import (check_record_path, packed_build, replace_record, settle_swap, target_name,
                                     write_sections)
from molrec_raw.record.locking import lock_writer
from molrec_raw.record.model import Frame
from molrec_raw.record.trajectory import extents as ext
from molrec_raw.record.trajectory import recovery
from molrec_raw.record.trajectory.blocks import (CHANGED, MARKERS, SAME, TENTATIVE, BlockWriter, Update,
                                                 block_layout, check_column_array, compare, prepare_update)
from molrec_raw.record.trajectory.cell import BoxReader, BoxWriter, prepare_cell
from molrec_raw.record.trajectory.common import I64, TRAJ, is_int, numpy_dtype, spec_error
from molrec_raw.record.trajectory.meta import MetaWriter, open_meta_array
from molrec_raw.record.trajectory.progressions import Series, check_progression
from molrec_raw.record.trajectory.reader import Trajectory
from molrec_raw.record.trajectory.references import (SystemCounterparts, check_resolved, refuse_aligned_system_names,
                                                     section_rows)
from molrec_raw.record.trajectory.schema import SequenceSchema
from molrec_raw.record.units import refuse_units_in_meta
from molrec_raw.record.trajectory.storage import (align_tails, born, delete_node, grow, land_all, read_nstep,
                                                  relay_tails, tail_shards)
from molrec_raw.zarr import Array, DirectoryStore, Group, PathLike, open_group
from molrec_raw.zarr.array import EncodeScratch
from molrec_raw.zarr.fileops import FileOps, PoisonGuard

__all__ = ["MrecWriter", "write_mrec_trajectory", "FrameSequence", "frame_sequence", "write_frame_sequence"]

# No Python thread pool for encoding: a streaming commit encodes ~K small inner chunks per
# column, and measured on 2 cores a pool made appends 20-25 % slower (GIL hand-offs outweigh
# parallel zstd).  A commit's chunks go through zstandard's batch API instead, which threads
# inside C (COMMIT_THREADS), every column of a block in one call (spec-notes/trajectory.md,
# "Append performance").
WRITE_THREADS = 1
COMMIT_THREADS = 2


class MrecWriter:
    """Streaming trajectory writer (trajectory §10): ``append`` buffers, a flush commits.

    ``flush_every`` (None = automatic cadence K, §14) commits non-durably when that many
    frames are buffered; ``flush()`` and ``close()`` are durable unless ``durable=False``.
    ``status`` (default True): record the run's state in the ``status`` document (see the
    module docstring); False leaves ``status/`` to the caller.
    """

    def __init__(self, path: PathLike, schema: SequenceSchema, *, flush_every: Optional[int] = None,
                 compression: Optional[str] = None, durable: bool = True,
                 meta: Optional[Dict[str, Any]] = None, fileops: Optional[FileOps] = None,
                 status: bool = True, lock: Optional[bool] = None) -> None:
        """Create the trajectory at ``path`` (see the class docstring).  ``lock`` (default:
        unless ``MOLREC_RAW_LOCKING=off``): hold the record's trajectory lock for the writer's
        whole life, taken before anything is read (record/locking.py); False when the caller
        coordinates writers itself."""
        if not isinstance(schema, SequenceSchema):
            raise InvalidValueError(f"schema must be a SequenceSchema, got {type(schema).__name__}")
        refuse_units_in_meta(meta, str(path))  # at creation: never on the append path
        self._init_common(flush_every, durable, status)
        self._compression = ext.parse_compression(compression)
        self._schema = schema.copy()
        target = check_record_path(path)
        self._take_lock(target, lock, fileops)
        try:
            self._packed = packed_build(target, self._guard)
            self._create(target if self._packed is None else self._packed.directory, meta)
        except BaseException as exc:  # no writer: the lock goes; an I/O failure is named as such
            if self._packed is not None:
                self._packed.discard()
            self._lock.release()
            self._guard.fail(exc)

    def _create(self, target: Path, meta: Optional[Dict[str, Any]]) -> None:
        settle_swap(target.absolute(), self._guard)  # under the lock: the record a reader sees
        durable = self._durable
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
            refuse_aligned_system_names(self._schema, existing, "W13")
            old_meta = existing.get("meta")
            if meta is None and isinstance(old_meta, Group):  # adding a trajectory to a record
                meta = dict(old_meta.attrs)
        stamped = documents.stamp_meta(meta)
        from molrec_raw.record.violations import refuse
        refuse(documents.check_finite_json(stamped, "/meta", "frame-and-types#14.41"))
        refuse(documents.check_meta(stamped, writing=True))
        # root zarr.json first; every file mutation through the writer's guard of ``fileops``
        self._root = open_group(DirectoryStore(target, fileops=self._guard), mode="a", threads=WRITE_THREADS)
        self._root.create_group("meta", attributes=stamped, overwrite=True)
        self._tgroup = self._root.create_group(TRAJ, attributes={"sequence_schema": self._schema.to_json()},
                                               overwrite=True)
        self._path = target
        self._setup_state()
        if self._status:
            live.record_state(self._root, live.RUNNING, durable=durable)
        if durable:  # the created record, with its first checkpoint (0 frames)
            self._first_durable_point()
        refuse_aligned_system_names(self._schema, self._root, "W13")
        self._section_rows = section_rows(self._root)
        self._set_system(SystemCounterparts(self._schema, self._root))

    # ------------------------------------------------------------------ construction
    def _init_common(self, flush_every: Optional[int], durable: bool, status: bool) -> None:
        if flush_every is not None and (not is_int(flush_every) or flush_every < 1):
            raise spec_error("W15", f"flush_every must be a positive integer, got {flush_every!r}")
        self._flush_every_arg = None if flush_every is None else int(flush_every)
        self._flush_every: Optional[int] = self._flush_every_arg
        self._durable = bool(durable)
        self._status = bool(status)
        self._dirty = False  # automatic commits since the last durable point
        self._grown: Set[str] = set()  # shards landed in since the last durable point (their tails get aligned)
        self._closed = False
        self._nstep = 0  # committed
        self._buffered = 0
        self._timed: Optional[bool] = None
        self._packed = None  # the build of a *.mrec.zip target (packed_build)
        self._scratch: Optional[EncodeScratch] = EncodeScratch()  # a commit's byte shuffles land here

    def _setup_state(self) -> None:
        self._blocks = {name: BlockWriter(name, self._schema.block_spec(name)) for name in self._schema.block_names()}
        self._step = Series("step", False)
        self._time = Series("time", True)
        self._box = BoxWriter()
        self._meta = {key: MetaWriter(key, self._schema.meta_spec(key)) for key, _ in self._schema.meta_keys()}
        self._mgroup: Optional[Group] = None
        self._needs_resolved_check = any(
            self._schema.targets(b) or self._schema.aligned_with(b) for b in self._schema.block_names())

    def _set_system(self, system: SystemCounterparts) -> None:
        """The ``/system/`` counterparts an update is checked against (§8.8), and the names of
        the blocks that have one (a set: an append asks once per block)."""
        self._system = system
        self._aligned = frozenset(name for name in self._schema.block_names() if name in system)

    def _take_lock(self, target: Path, lock: Optional[bool], fileops: Optional[FileOps]) -> None:
        """The trajectory lock first (record/locking.py), then the guard every mutation goes
        through: it remembers the first I/O failure, which poisons the writer."""
        self._lock = lock_writer(target, "trajectory", writer="MrecWriter", lock=lock, fileops=fileops)
        self._guard = PoisonGuard(fileops, what=f"the trajectory writer of {target}")

    @classmethod
    def open(cls, path: PathLike, *, flush_every: Optional[int] = None, durable: bool = True,
             fileops: Optional[FileOps] = None, status: bool = True, lock: Optional[bool] = None) -> "MrecWriter":
        """Reopen a trajectory for append (§11): shrink every array back to its logical
        length, rebuild the change-detection state, continue numbering; the run is
        ``running`` again (``status``).  This is also how a writer poisoned by an I/O error
        is recovered: the state is read from the disk, never from the old writer's memory.
        ``lock`` as for the constructor (the trajectory lock, taken before anything is read)."""
        self = cls.__new__(cls)
        self._init_common(flush_every, durable, status)
        self._compression = None
        target = check_record_path(path)
        self._take_lock(target, lock, fileops)
        try:
            self._reopen(target)
        except BaseException as exc:  # no writer: the lock goes; an I/O failure is named as such
            self._lock.release()
            self._guard.fail(exc)
        return self

    def _reopen(self, target: Path) -> None:
        settle_swap(target.absolute(), self._guard)  # under the lock: the record a reader sees
        durable = self._durable
        if target.suffix == ".zip" or not target.is_dir():
            raise StoreError("only a directory record can be reopened for append (a packed record: unpack it, "
                             "append, pack it again)", store=str(target))
        root = open_group(DirectoryStore(target, fileops=self._guard), mode="r+", threads=WRITE_THREADS)
        meta = root.get("meta")
        doc = dict(meta.attrs) if isinstance(meta, Group) else {}
        from molrec_raw.record.violations import refuse
        refuse(documents.check_meta(doc))
        # an unstamped record is current (README#decision-1): reopened like ours, its meta left
        # as stored (spec-notes/record.md); one stamped 1 is an older generation
        if "molrec_version" in doc and doc["molrec_version"] != documents.CURRENT_VERSION:
            raise spec_error("W14", f"the store is a molrec_version {doc['molrec_version']} record; "
                             f"appending would mix version {documents.CURRENT_VERSION} frames into it")
        if root.store.size(recovery.CHECKPOINT) is not None:  # not closed: what a crash damaged goes back first
            recovery.recover_in_place(root)
        tgroup = root.get(TRAJ)
        if not isinstance(tgroup, Group):
            raise spec_error("W14", "the record has no trajectory section to append to")
        if tgroup.get("frames") is not None:
            raise spec_error("W14", "legacy layout (trajectory/frames/, written by molrs <= 0.13); re-write it")
        attrs = dict(tgroup.attrs)
        if "sequence_schema" not in attrs:
            raise spec_error("W14", "the trajectory carries no sequence_schema attribute; a writer needs the pin")
        self._schema = SequenceSchema.from_json(attrs["sequence_schema"])
        self._root, self._tgroup, self._path = root, tgroup, target
        self._setup_state()
        refuse_aligned_system_names(self._schema, root, "W13")
        self._section_rows = section_rows(root)
        self._set_system(SystemCounterparts(self._schema, root))
        nstep = read_nstep(tgroup, attrs)
        self._nstep = nstep
        self._reopen_series(attrs, nstep)
        for block in self._blocks.values():
            self._reopen_block(block, nstep)
        self._reopen_box(nstep)
        self._reopen_meta(nstep)
        if self._status:
            live.record_state(root, live.RUNNING, durable=durable)
        if durable:  # the reopened state (arrays maybe shrunk) is the new durable point
            # its tails may be durable and end inside a sector (a record written before issue 23,
            # by a durable=False writer, or by another tool): rewritten aligned, never written into;
            # one whose chunks share the index page's sectors (molrs's layout) laid out again first,
            # unless the commit manifest records where its index ends (a layout it relies on)
            tails = [(arr, key) for arr, rows in self._committed_arrays() for key in tail_shards(arr, rows)]
            manifest = recovery.Manifest.from_attrs(dict(tgroup.attrs))
            named = {f"{TRAJ}/{rel}/{key}" for rel, ends in (manifest.index_ends if manifest else {}).items()
                     for key in ends}
            relay_tails(root.store, [(key, arr.pipeline.sharding) for arr, key in tails
                                     if key not in named and arr.pipeline.sharding is not None])
            align_tails(root.store, [key for _, key in tails], rewrite=True)
            self._sync_data()
            self._durable_point()

    def _reopen_box(self, nstep: int) -> None:
        try:
            committed = BoxReader(self._tgroup, nstep)
        except SpecViolationError as exc:
            raise spec_error("W14", f"cannot reopen: {exc.message}", "/trajectory/box") from None
        if not committed.cells:
            return  # a stale box/ (interrupted first commit) is replaced at the next one
        box = self._box
        group = self._tgroup.get("box")
        assert isinstance(group, Group), "BoxReader found committed cells in it"
        box.group = group
        n = len(committed.cells)
        box.n_updates, box.last, box.defined = n, committed.cells[-1], committed.cells[0].defined
        if isinstance(group.get("vectors"), Array):
            box.form = "arrays"
            for name in ("step_index", "origin", "boundary", "vectors"):
                arr = group.get(name)
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
                arr = open_meta_array(arr, key, m.spec.tag, nstep)
            except SpecViolationError as exc:
                raise spec_error("W14", f"cannot reopen: {exc.message}", exc.node or "/trajectory/meta") from None
            if arr is not None:
                if arr.shape[0] > nstep:
                    arr.resize((nstep,) + arr.shape[1:], reset_stale=False)
                m.array, m.committed = arr, nstep

    def _reopen_series(self, attrs: Dict[str, Any], nstep: int) -> None:
        for series in (self._step, self._time):
            prog = check_progression(attrs, f"{series.name}_progression", nstep, series.is_float)
            arr = self._tgroup.get(series.name)
            if nstep == 0 or prog is not None:
                if isinstance(arr, Array):  # stale: from an interrupted materialization
                    delete_node(self._tgroup, series.name)
            if nstep == 0:
                continue
            if prog is not None:
                series.start, series.stride = prog[0], (prog[1] if nstep >= 2 else None)
                series.n = series.committed = nstep
                series.last = series.value(nstep - 1)
            elif isinstance(arr, Array):
                if arr.shape[0] < nstep:
                    raise spec_error("R6", f"{series.name} has {arr.shape[0]} values for {nstep} frames")
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

    def _reopen_block(self, block: BlockWriter, nstep: int) -> None:
        group = self._tgroup.get(block.name)
        if not isinstance(group, Group):
            return
        block.group = group
        for column, spec in block.spec.columns.items():
            arr = group.get(column)
            if isinstance(arr, Array):
                check_column_array(arr, block.name, column, spec.dtype, spec.trailing, "W14")
                block.columns[column] = arr
        validity = group.get("_validity")
        for column in block.nullable:
            arr = validity.get(column) if isinstance(validity, Group) else None
            if isinstance(arr, Array):
                block.masks[column] = arr
        try:
            kind, ordinals, offsets, uniform = block_layout(group, block.name, block.spec, block.columns, nstep)
        except SpecViolationError as exc:
            raise spec_error("W14", f"cannot reopen: {exc.message}", exc.node or "/trajectory") from None
        n, total = len(ordinals), int(offsets[-1])
        self._ensure_block(block)  # arrays missing after a crash during creation
        for arr in list(block.columns.values()) + list(block.masks.values()):
            if arr.shape[0] < total:
                raise spec_error("W14", f"cannot reopen: block {block.name!r}: {arr.path} has {arr.shape[0]} rows, "
                                 f"its updates claim {total}")
        arrays = [(a, total) for a in list(block.columns.values()) + list(block.masks.values())]
        attrs = dict(group.attrs)
        if kind == "indexed":
            step_index, offset = group.get("step_index"), group.get("offset")
            assert isinstance(step_index, Array) and isinstance(offset, Array), "block_layout checked both"
            block.step_index, block.offset = step_index, offset
            arrays += [(step_index, n), (offset, n + 1)]
            if "uniform_rows" in attrs or "dense_updates" in attrs:  # crash mid-switch: the arrays win
                group.attrs.put({k: v for k, v in attrs.items() if k not in MARKERS})
        else:
            for name in ("step_index", "offset"):  # stale, from an interrupted first index
                delete_node(group, name)
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
            block.last = Update(int(ordinals[n - 1]), hi - lo, cols, masks)

    # ------------------------------------------------------------------ properties
    @property
    def committed(self) -> int:
        """Frames committed (the ``nstep`` on disk)."""
        return self._nstep

    @property
    def flush_every(self) -> int:
        """Frames buffered before an automatic commit: the caller's ``flush_every``, else the
        reference cadence K derived from the frame size at the first append (README#decision-3)."""
        if self._flush_every is None:
            self._flush_every = self._derive_cadence()
        return self._flush_every

    @property
    def schema(self) -> SequenceSchema:
        """A copy of the pinned declaration this writer appends under (it never changes,
        trajectory#I13)."""
        return self._schema.copy()

    def _frame_rows(self, block: BlockWriter) -> int:
        rows = self._schema.rows(block.name)
        if rows == 0 and block.last is not None:
            rows = block.last.rows  # reopened: the pin carries no row hint
        return rows

    def _block_plan(self, block: BlockWriter) -> Tuple[int, List[int], int]:
        sizes = [ext.row_bytes(s.dtype, s.trailing) for s in block.spec.columns.values()]
        rows = self._frame_rows(block)
        if block.columns:  # extents frozen: off the existing arrays
            r = next(iter(block.columns.values())).chunks[0]
        else:
            r = ext.block_rows_per_chunk(rows, sizes)
        return rows, sizes, r

    def _derive_cadence(self) -> int:
        return ext.flush_cadence(self._block_plan(b) for b in self._blocks.values())

    @property
    def poisoned(self) -> Optional[BaseException]:
        """The failure that poisoned this writer (an :class:`~molrec_raw.errors.IOFailureError`
        naming the operation and the path, or whatever interrupted a commit), None while it is
        sound.  A poisoned writer refuses every call (``PoisonedWriterError`` naming it);
        ``close()`` releases it without writing; ``MrecWriter.open`` recovers the record."""
        return self._guard.poisoned

    # ------------------------------------------------------------------ append
    def _check_open(self) -> None:
        self._guard.check()
        if self._closed:
            raise InvalidValueError("writer is closed (trajectory#W30)")

    def _guarded_commit(self, durable: bool, closing: bool = False) -> None:
        """A commit; a failure in it poisons the writer (spec-notes/safety.md): what reached
        the disk is then unknown to this writer's memory.  An I/O failure is raised as the
        guard's :class:`~molrec_raw.errors.IOFailureError` (operation, path, errno)."""
        try:
            self._commit(durable=durable, closing=closing)
        except BaseException as exc:
            self._guard.fail(exc)

    def _release(self) -> None:
        """Let go of the lock and of every descriptor, writing nothing."""
        self._closed = True
        try:
            store = getattr(self, "_root", None)
            if store is not None:
                store.store.close()
        finally:
            self._lock.release()

    def abort(self) -> None:
        """Drop the buffered frames and release the writer without writing anything — what
        a killed process leaves, without killing it: committed frames stay, the lock goes.
        Idempotent; never raises for a poisoned writer."""
        if not self._closed or self._lock.held:
            self._release()

    def append(self, frame: Frame, step: Optional[int] = None, time: Optional[float] = None) -> None:
        """Buffer one frame (validated against the pin first: a refused frame changes
        nothing, ``trajectory#W16``–``#W29``); commit when ``flush_every`` are buffered."""
        if self._closed or self._guard.poisoned is not None:
            self._check_open()
        if type(frame) is not Frame and not isinstance(frame, Frame):
            raise InvalidValueError(f"append needs a Frame, got {type(frame).__name__}")
        ordinal = self._nstep + self._buffered
        # -- step / time (W16, W17)
        steps = self._step
        if step is None:
            step = 0 if steps.n == 0 else steps.last + 1
        elif type(step) is not int:
            if not is_int(step):
                raise spec_error("W16", f"step {step!r} is not an integer in the i64 range")
            step = int(step)
        if not I64[0] <= step <= I64[1]:
            raise spec_error("W16", f"step {step!r} is not an integer in the i64 range")
        if steps.n and step <= steps.last:
            raise spec_error("W16", f"step numbers must increase strictly: {step} follows {steps.last}")
        if time is not None and type(time) is not float:
            if isinstance(time, (bool, np.bool_)) or not isinstance(time, (int, float, np.integer, np.floating)):
                raise InvalidValueError(f"time must be a number, got {time!r}")
            time = float(time)
        timed = time is not None
        if self._timed is not None and timed != self._timed:
            raise spec_error("W17", 'the "time" array is all-or-nothing across a run: '
                             + ("this frame has no time" if self._timed else "this frame adds a time to a time-less run"))
        cell = None
        if frame.box is not None:  # the cell: W29; unchanged cells write nothing
            cell = prepare_cell(frame.box, ordinal, self._box.defined)
            last_cell = self._box.pending[-1] if self._box.pending else self._box.last
            if last_cell is not None and last_cell.same(cell):
                cell = None
        meta_values = self._meta_values(frame.meta, ordinal) if self._meta or frame.meta else ()
        # -- blocks
        updates: List[Tuple[BlockWriter, Update, bool]] = []
        for name, blk in frame.blocks.items():
            state = self._blocks.get(name)
            if state is None:
                raise spec_error("W18", f"trajectory frame {ordinal}: block {name!r} is not declared in the "
                                 "sequence schema", f"/trajectory/{name}")
            update = prepare_update(state, blk, ordinal)
            base = state.pending[-1] if state.pending else state.last
            verdict = CHANGED if base is None else compare(base, update, state.precise)
            if verdict != SAME:  # a tentative update is checked as a changed one
                if name in self._aligned:
                    self._system.check(name, update.rows, update.columns.get("id"), f"trajectory frame {ordinal}")
                updates.append((state, update, verdict == TENTATIVE))
        # -- the resolved frame: references and alignments (W27, W28)
        if self._needs_resolved_check:
            resolved: Dict[str, Update] = {}
            changed = {state.name: update for state, update, _ in updates}
            for name, state in self._blocks.items():
                u = changed.get(name) or state.base()
                if u is not None:
                    resolved[name] = u
            check_resolved(self._schema, {n: u.rows for n, u in resolved.items()},
                           lambda b, c: (resolved[b].columns[c], resolved[b].masks.get(c)),
                           self._section_rows, ordinal, writing=True)
        # -- accept (nothing above mutated state)
        if not self._buffered:
            self._reserve()
        for state, update, tentative in updates:
            state.accept(update, tentative)
        if cell is not None:
            self._box.pending.append(cell)
            self._box.defined = cell.defined
        for m, value in meta_values:
            m.pending.append(value)
        steps.push(step)
        if timed:
            self._time.push(time)
        self._timed = timed
        self._buffered += 1
        if self._buffered >= (self._flush_every or self.flush_every):
            self._guarded_commit(False)

    def _meta_values(self, given: Dict[str, Any], ordinal: int) -> List[Tuple[MetaWriter, Any]]:
        """Each declared key's stored value for this frame (its fill when omitted), checked
        (``trajectory#W18``, ``#W22``, ``#W23``); nothing is buffered here."""
        declared = self._meta
        if given.keys() != declared.keys():  # else every key is declared and none omitted
            for key in given:
                if key not in declared and key not in ("step", "time"):
                    raise spec_error("W18", f"trajectory frame {ordinal}: meta key {key!r} is not declared in the "
                                     "sequence schema", f"/trajectory/meta/{key}")
        values: List[Tuple[MetaWriter, Any]] = []
        for key, m in declared.items():
            if key in given:
                values.append((m, m.cell(given[key])))
            elif m.spec.has_fill:
                values.append((m, m.cell(m.spec.fill)))
            else:
                raise spec_error("W22", f"trajectory frame {ordinal} omits meta key {key!r}, which is declared "
                                 "without a fill", f"/trajectory/meta/{key}")
        return values

    # ------------------------------------------------------------------ commit
    def _ensure_block(self, block: BlockWriter) -> None:
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
                    column, shape=(0,) + tr, dtype=numpy_dtype(spec.dtype), chunks=(r,) + tr,
                    shards=(r * k,) + tr, codecs=ext.column_codecs(spec.dtype, spec.precision is not None, self._compression),
                    shard_index_location="start", overwrite=True)
            if spec.nullable and column not in block.masks:
                validity = group.require_group("_validity")
                k = ext.safe_chunks_per_shard(r, 1)
                mask = validity.create_array(column, shape=(0,), dtype=bool, chunks=(r,), shards=(r * k,),
                                             codecs=ext.dense_codecs("bool"), shard_index_location="start",
                                             overwrite=True)
                if block.total:  # created late (older store): every committed row valid
                    grow(mask, 0, np.ones(block.total, bool), [])
                block.masks[column] = mask

    def _reserve(self) -> None:
        """Size every block's commit buffers for a full commit (once; they are reused)."""
        cadence = self.flush_every
        for block in self._blocks.values():
            block.reserve(cadence, self._frame_rows(block))

    def _commit_block(self, block: BlockWriter, touched: List[str]) -> None:
        if not block.pending:
            return
        self._ensure_block(block)
        group = block.group
        assert group is not None, "_ensure_block creates it"
        ups, values = block.take_pending()
        lo = block.total
        regular = block.stays_regular(ups) if ups else block.mode != "indexed"
        if ups and not regular:  # the index first, born complete (history backfilled), then rows
            n = block.n_updates
            ordinals = np.asarray([u.ordinal for u in ups], np.uint64)
            ends = lo + np.cumsum([u.rows for u in ups], dtype=np.uint64)
            if block.mode == "indexed":
                assert block.step_index is not None and block.offset is not None, "indexed blocks hold both"
                grow(block.step_index, n, ordinals, touched)
                grow(block.offset, n + 1, ends, touched)
            else:  # first update, or the one-way switch from the markers (§8.3)
                history = np.arange(n + 1, dtype=np.uint64) * np.uint64(block.uniform_rows)
                dense = (ext.DENSE_ROWS, ext.DENSE_CHUNKS_PER_SHARD, ext.dense_codecs("u64"))
                block.offset = born(group, "offset", np.concatenate([history, ends]), *dense, touched)
                block.step_index = born(group, "step_index",
                                        np.concatenate([np.arange(n, dtype=np.uint64), ordinals]), *dense, touched)
        # every column and mask of the block encoded in one batch, landed in order
        rows = sum(u.rows for u in ups)
        lands: List[Tuple[Array, np.ndarray]] = []
        if rows:
            lands = [(arr, values[column]) for column, arr in block.columns.items()]
            for column, arr in block.masks.items():
                lands.append((arr, np.concatenate([u.masks.get(column, np.ones(u.rows, bool)) for u in ups])))
        if lands:
            land_all(lands, lo, touched, COMMIT_THREADS, self._scratch)
        if ups:
            attrs = dict(group.attrs)
            if regular and block.mode == "none":
                attrs.update({"uniform_rows": int(ups[0].rows), "dense_updates": True})
                group.attrs.put(attrs)
                touched.append(f"{group.path}/zarr.json")
                block.uniform_rows = int(ups[0].rows)
            elif not regular and block.mode == "regular":  # withdrawn for good
                group.attrs.put({k: v for k, v in attrs.items() if k not in MARKERS})
                touched.append(f"{group.path}/zarr.json")
            block.mode = "regular" if regular else "indexed"
        block.n_updates += len(ups)
        block.total = lo + rows
        block.clear_pending(ups, values)

    def _committed_arrays(self) -> Iterator[Tuple[Array, int]]:
        """Every array of the committed state with its committed rows."""
        for block in self._blocks.values():
            if block.group is None:
                continue
            for arr in [*block.columns.values(), *block.masks.values()]:
                yield arr, block.total
            if block.mode == "indexed":
                assert block.step_index is not None and block.offset is not None, "indexed blocks hold both"
                yield block.step_index, block.n_updates
                yield block.offset, block.n_updates + 1
        if self._box.group is not None:
            for arr in self._box.arrays.values():
                yield arr, self._box.n_updates
        if self._mgroup is not None:
            for m in self._meta.values():
                if m.array is not None:
                    yield m.array, m.committed
        for series in (self._step, self._time):
            if not series.prog and series.array is not None:
                yield series.array, series.committed

    def _manifest(self, nstep: Optional[int] = None) -> recovery.Manifest:
        """What the committed state (of ``nstep`` frames, default the committed ones)
        relies on (recovery.py): every group and array with its committed rows, paths
        relative to ``trajectory/``, and (a durable writer) the end of the index of every
        shard landed in since the last durable point."""
        manifest = recovery.Manifest(self._nstep if nstep is None else nstep)
        cut = len(TRAJ) + 1
        for block in self._blocks.values():
            if block.group is not None:
                manifest.groups.append(block.group.path[cut:])
                if block.masks:
                    manifest.groups.append(f"{block.group.path[cut:]}/_validity")
        if self._box.group is not None:
            manifest.groups.append("box")
        if self._mgroup is not None:
            manifest.groups.append("meta")
        for arr, rows in self._committed_arrays():
            manifest.arrays[arr.path[cut:]] = rows
            if self._durable:  # the index pages a power cut may leave older than the marker
                ends = {key[len(arr.path) + 1:]: end for key, end in arr.landed_ends.items() if key in self._grown}
                if ends:
                    manifest.index_ends[arr.path[cut:]] = ends
        return manifest

    def _sync_data(self) -> None:
        """§10 step 2: every file written since the last durable point (once) and the
        directories — all but the marker, which is about to be replaced.  Each shard landed
        in since then first ends at a sector boundary (``align_tails``: a durable point
        leaves no sector that a later write shares)."""
        store = self._root.store
        align_tails(store, sorted(self._grown))
        store.sync_all(skip=[f"{TRAJ}/zarr.json"])
        self._grown.clear()

    def _first_durable_point(self) -> None:
        """Creation: nothing older to protect, so the first checkpoint is written plainly and
        synced with everything else, in one pass."""
        store = self._root.store
        recovery.write_checkpoint(store, self._manifest(), durable=False)
        store.sync_all()
        self._dirty = False

    def _durable_point(self, closing: bool = False) -> None:
        """Make the committed state durable once its data is (recovery.py): unless
        ``closing`` (a closed record needs none), its checkpoint, durably when it replaces
        an older one (which protects the state until then); last the marker and the
        directory holding both (§10 step 4)."""
        store = self._root.store
        if not closing:
            first = store.size(recovery.CHECKPOINT) is None
            recovery.write_checkpoint(store, self._manifest(), durable=not first)
        store.sync_all()
        self._dirty = False

    def _commit(self, durable: bool, closing: bool = False) -> None:
        if self._buffered == 0:
            if durable and self._dirty:  # automatic commits since the last durable point
                self._sync_data()
                self._durable_point(closing)
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
        self._grown.update(key for key in touched if not key.endswith("zarr.json"))
        if durable:
            self._sync_data()
        nstep = self._nstep + self._buffered
        attrs: Dict[str, Any] = {"sequence_schema": self._schema.to_json(), "nstep": nstep}
        for series in (self._step, self._time):
            prog = series.attribute()
            if prog is not None:
                attrs[f"{series.name}_progression"] = prog
        manifest = self._manifest(nstep)
        attrs[recovery.MANIFEST] = manifest.to_json()
        self._tgroup.attrs.put(attrs)  # the commit marker: last write of the commit
        self._nstep, self._buffered = nstep, 0
        if durable:
            self._durable_point(closing)
        else:
            self._dirty = True

    def flush(self) -> None:
        """Commit every buffered frame (durable unless ``durable=False``).  A flush that
        fails poisons the writer (``poisoned``)."""
        self._check_open()
        self._guarded_commit(self._durable)

    def close(self) -> None:
        """The last durable flush, then the run's ``succeeded`` state, then the lock is
        released; idempotent.  A close that fails poisons the writer, releases it and raises;
        closing a poisoned writer releases it without writing and raises the refusal (every
        time: its data did not all reach the disk)."""
        if self._guard.poisoned is not None:  # every call after the failure names it, close() too
            self._release()
            self._guard.check()
        if self._closed and not self._lock.held:
            return
        try:
            self._commit(durable=self._durable, closing=True)
            if self._durable:  # closed and durable as it stands: the checkpoint has done its work
                self._root.store.delete(recovery.CHECKPOINT)
            else:  # whoever makes it durable later (write_mrec_trajectory's swap) gets aligned tails
                align_tails(self._root.store, sorted(self._grown))
                self._grown.clear()
            if self._status:  # after the last commit: a reader that sees it then sees every frame
                live.record_state(self._root, live.SUCCEEDED, durable=self._durable)
            if self._packed is not None:
                self._packed.pack()
        except BaseException as exc:
            self._release()
            self._guard.fail(exc)
        self._release()

    def _end(self, exc: BaseException) -> None:
        """Closed by an exception: ``cancelled`` for a KeyboardInterrupt, else ``failed``
        with the error, unless the writer is poisoned (then nothing is written); a failure to
        record it never hides the exception itself; the lock is released either way."""
        try:
            if self._status and self._guard.poisoned is None and not self._closed:
                state = live.CANCELLED if isinstance(exc, KeyboardInterrupt) else live.FAILED
                try:
                    live.record_state(self._root, state, error=exc, durable=self._durable)
                except (MolrecError, OSError):
                    pass
            if self._packed is not None and self._guard.poisoned is None and not self._closed:
                if self._nstep == 0:  # nothing committed: the target stays as it was
                    self._packed.discard()
                else:
                    try:  # the committed frames, packed as a directory target keeps them
                        self._packed.pack()
                    except (MolrecError, OSError):  # the build directory stays: nothing is lost
                        pass
        finally:
            self._release()

    def __enter__(self) -> "MrecWriter":
        return self

    def __exit__(self, exc_type: Any, exc: Any, *rest: Any) -> None:
        if exc_type is None:
            self.close()
        elif not self._closed or self._lock.held:  # committed frames stay committed; the buffer is dropped
            self._end(exc if isinstance(exc, BaseException) else RuntimeError(getattr(exc_type, "__name__", "error")))


def _refuse_existing_sequence(target: Path) -> None:
    """``trajectory#W12``: never create over an existing sequence (store left unchanged)."""
    root = open_group(target, mode="r")
    tgroup = root.get(TRAJ)
    if isinstance(tgroup, Group) and ("nstep" in tgroup.attrs or tgroup.get("step") is not None):
        raise spec_error("W12", 'a frame sequence already exists at "/trajectory"; refusing to overwrite it')


class FrameSequence(NamedTuple):
    """A whole frame sequence ready to write: frames, their numbering, the derived pin."""

    frames: List[Frame]
    steps: Optional[List[int]]
    times: Optional[List[float]]
    schema: SequenceSchema


def frame_sequence(frames: Union[Trajectory, Iterable[Frame]], steps: Optional[Sequence[int]] = None,
                   times: Optional[Sequence[float]] = None) -> FrameSequence:
    """``frames`` (a :class:`Trajectory`, whose numbering is used unless ``steps`` /
    ``times`` are given, or any iterable of :class:`Frame`) checked and pinned: one step and
    one time per frame, the schema derived from the frames."""
    given_steps: Any = steps
    given_times: Any = times
    if isinstance(frames, Trajectory):  # a whole Trajectory carries its own numbering
        given_steps = frames.step if steps is None else steps
        given_times = frames.time if times is None else times
        frames = frames.frames
    frame_list = list(frames)
    for i, frame in enumerate(frame_list):
        if not isinstance(frame, Frame):
            raise InvalidValueError(f"trajectory frame {i} is a {type(frame).__name__}, not a Frame")
    step_list = None if given_steps is None else [int(v) for v in given_steps]
    time_list = None if given_times is None else [float(v) for v in given_times]
    if step_list is not None and len(step_list) != len(frame_list):
        raise InvalidValueError(f"{len(step_list)} steps for {len(frame_list)} frames")
    if time_list is not None and len(time_list) != len(frame_list):
        raise InvalidValueError(f"{len(time_list)} times for {len(frame_list)} frames")
    return FrameSequence(frame_list, step_list, time_list, SequenceSchema.from_frames(frame_list))


def write_frame_sequence(root: Group, sequence: FrameSequence, meta: Optional[Dict[str, Any]] = None) -> None:
    """Write ``sequence`` as the trajectory of the record being built under ``root`` (a
    private directory a door holds the lock of, doors.replace_record): through
    ``MrecWriter``, one commit, no run state (a finished sequence, not a run)."""
    store = root.store
    assert isinstance(store, DirectoryStore), "replace_record builds in a directory"
    frames, steps, times = sequence.frames, sequence.steps, sequence.times
    with MrecWriter(store.root, sequence.schema, flush_every=max(1, len(frames)), meta=meta, durable=False,
                    fileops=store.fileops, status=False, lock=False) as writer:
        for i, frame in enumerate(frames):
            writer.append(frame, None if steps is None else steps[i], None if times is None else times[i])


@overload
def write_mrec_trajectory(path: PathLike, frames: Iterable[Frame], steps: Optional[Sequence[int]] = None,
                          times: Optional[Sequence[float]] = None, meta: Optional[Dict[str, Any]] = None, *,
                          system: Optional[Frame] = None, fileops: Optional[FileOps] = None,
                          overwrite: bool = False) -> Path: ...


@overload
def write_mrec_trajectory(path: bytearray, frames: Iterable[Frame], steps: Optional[Sequence[int]] = None,
                          times: Optional[Sequence[float]] = None, meta: Optional[Dict[str, Any]] = None, *,
                          system: Optional[Frame] = None, fileops: Optional[FileOps] = None,
                          overwrite: bool = False) -> bytearray: ...


def write_mrec_trajectory(path: Union[PathLike, bytearray], frames: Iterable[Frame],
                          steps: Optional[Sequence[int]] = None, times: Optional[Sequence[float]] = None,
                          meta: Optional[Dict[str, Any]] = None, *, system: Optional[Frame] = None,
                          fileops: Optional[FileOps] = None, overwrite: bool = False) -> Union[Path, bytearray]:
    """Write a whole trajectory through ``MrecWriter`` (schema derived from the frames) as a
    new record; an existing record at ``path`` is replaced only with ``overwrite=True``.  A
    ``*.mrec.zip`` path is written as a packed record, a ``bytearray`` receives one
    (doors.replace_record).  ``system`` (a Frame) is written as the record's ``system``
    section first: where the trajectory's units are stated (its ``units`` meta key,
    frame-and-types §13.5); ``meta`` (the record's provenance document) holding ``units`` is
    refused, naming that place."""
    refuse_units_in_meta(meta, target_name(path))
    sequence = frame_sequence(frames, steps, times)

    def build(root: Group) -> None:
        if system is not None:
            write_sections(root, meta, {"system": system}, extra_sections=["trajectory"])
        write_frame_sequence(root, sequence, None if system is not None else meta)

    return replace_record(path, build, fileops=fileops, overwrite=overwrite)
