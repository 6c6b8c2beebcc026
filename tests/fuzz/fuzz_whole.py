"""Fuzz targets over whole records and collections (the doors a user calls), beside the
parser-level targets of fuzz_targets.py:

- ``documents``: the zarr.json of every group and array of the seed record outside its
  trajectory and metrics (meta, status, method, observables, force field, system, frame) and
  its small stored values, one replaced by a mutated copy; ``read_mrec`` then reads every
  section and ``validate`` checks every rule.
- ``trajectory_layout``: the same over the trajectory's nodes (its ``zarr.json`` with the
  sequence schema and the commit marker, every block's and column's metadata and chunks):
  the layout ``MrecReader`` loads, then every frame read.
- ``collection_values``: a collection's ``meta`` document, its per-record values and the other
  keys (index, force field, systems, updates), one replaced in a copy of a small collection,
  which ``read_collection`` then reads whole (every record, system, frame, a batch).
- ``lmdb_file``: a whole ``*.mrec.lmdb`` file (the small collection, and one with a branch
  level and overflow values) damaged as copies are — cut short (at random offsets, at page
  boundaries, inside the meta pages), a page zeroed, meta-page bits flipped, page numbers
  overwritten in branch, leaf and overflow pages, a few bytes changed — read the same way in a
  child process: every failure must be a ``MolrecError`` naming the file, a file cut short or
  pointing past its end is refused under lmdb#L18 / lmdb#L19, and a death of the child is an
  escape (``Crash``).  :class:`LmdbTally` counts the outcomes by kind of edit.

Oracles beyond "only MolrecErrors" (fuzz_targets.outcome): a record that ``read_mrec`` refuses
must not be called valid by ``validate`` (``Disagreement``), and a collection's error must name
its file (``Unnamed``).
"""
from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path
from random import Random
from typing import Any, Dict, List, Sequence, Tuple

import orjson

from fuzz_mutators import Mutant, edit_json, edit_lmdb_file, edit_zarr_json, mutate_bytes
from molrec_raw.errors import MolrecError
from molrec_raw.record.molrec import read_mrec, validate
from molrec_raw.zarr import MemoryStore

__all__ = ["whole_targets", "Disagreement", "Unnamed", "Crash", "LmdbTally", "write_tree_collection"]

_SMALL_VALUE = 4096  # stored values larger than this are the codec targets' business


class Disagreement(Exception):
    """``validate`` called a record valid that ``read_mrec`` (or reading its sections) refused."""


class Unnamed(Exception):
    """A collection's failure that does not name the collection's file."""


# -- records: read_mrec and validate --------------------------------------------------------

def _touch_block(block: Any) -> None:
    for values in block.columns.values():
        values.tolist() if values.dtype == object else values.sum()


def _touch_frame(frame: Any) -> None:
    if frame is not None:
        for block in frame.blocks.values():
            _touch_block(block)


def _read_everything(store: MemoryStore) -> None:
    """``read_mrec`` and every section it hands out: system, frame, force field tables,
    observables, status, method, and every frame of the trajectory (by index and iterated)."""
    rec = read_mrec(store)
    _touch_frame(rec.system)
    _touch_frame(rec.frame)
    if rec.forcefield is not None:
        for table in rec.forcefield.tables.values():
            _touch_block(table)
    for observable in (rec.observables or {}).values():
        observable.data.sum() if observable.data.dtype != object else observable.data.tolist()
    orjson.dumps([rec.meta, rec.status, rec.method], option=orjson.OPT_SERIALIZE_NUMPY, default=repr)
    trajectory = rec.trajectory
    if trajectory is not None:
        with trajectory:
            n = len(trajectory)
            if n:
                _touch_frame(trajectory[0])
                _touch_frame(trajectory[n - 1])
                trajectory.step, trajectory.time
            for frame in trajectory.iter_frames():
                _touch_frame(frame)


def _run_record(context: Tuple[Dict[str, bytes], str], payload: bytes) -> None:
    """The seed record with the value at ``key`` replaced: ``validate`` lists violations (or
    raises a MolrecError); reading it all either works or raises a MolrecError, and a record
    read refuses is never one ``validate`` calls valid."""
    files, key = context
    store = MemoryStore({**files, key: payload}, read_only=True)
    try:
        violations = validate(store)
    except MolrecError:
        violations = None  # refused outright: nothing to compare
    try:
        _read_everything(store)
    except MolrecError as exc:
        if violations == []:
            raise Disagreement(f"validate found nothing in what a read refused: {exc}") from exc
        raise


def _record_slots(files: Dict[str, bytes], keep: Any) -> List[Any]:
    from fuzz_targets import Slot
    slots = []
    for key in sorted(files):
        if keep(key) and (key.endswith("zarr.json") or len(files[key]) <= _SMALL_VALUE):
            slots.append(Slot(key, (files, key), [files[key]]))
    return slots


def _edit_stored(rng: Random, data: bytes, slot: Any, donors: Sequence[bytes]) -> bytes:
    """A zarr.json edited as metadata (or JSON), a stored value as bytes."""
    if slot.label.endswith("zarr.json"):
        return edit_zarr_json(rng, data, donors) if b'"array"' in data[:4096] else edit_json(rng, data, donors)
    return mutate_bytes(rng, data, donors)


# -- collections: read_collection over a changed copy ----------------------------------------

def _read_collection_whole(path: Path) -> None:
    """``read_collection`` and everything it hands out: meta, index, force field, every record
    (meta, system, index values, every frame), a batch of every record."""
    import molrec_raw as mr
    with mr.read_collection(path) as c:
        c.meta, c.units, c.schema, c.index, c.forcefield
        for record in c:
            record.meta, record.index
            _touch_frame(record.system)
            for k in range(record.n_frames):
                _touch_frame(record.frame(k))
        if len(c):
            c.batch(range(len(c)))


def _named(path: Path, exc: MolrecError) -> None:
    if exc.store is None or Path(exc.store).name != path.name:
        raise Unnamed(f"the error does not name {path.name}: {exc}") from exc


class _Scratch:
    """A directory of its own for the collection copies of a process (removed at its exit)."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="molrec-fuzz-lmdb-"))
        self.count = 0
        atexit.register(shutil.rmtree, self.folder, True)

    def path(self) -> Path:
        self.count += 1
        return self.folder / f"c{self.count % 4}.mrec.lmdb"

    def clean(self, path: Path) -> None:
        for leftover in (path, path.with_name(path.name + "-lock")):
            leftover.unlink(missing_ok=True)


@functools.lru_cache(maxsize=1)
def _scratch() -> _Scratch:
    return _Scratch()


def _run_collection_value(context: Tuple[bytes, bytes], payload: bytes) -> None:
    """A copy of the seed collection with the value of one key replaced, read whole."""
    import lmdb
    seed, k = context
    path = _scratch().path()
    path.write_bytes(seed)
    try:
        env = lmdb.open(str(path), subdir=False, lock=False, max_dbs=0, map_size=1 << 26)
        with env.begin(write=True) as txn:
            txn.put(k, payload)
        env.close()
        try:
            _read_collection_whole(path)
        except MolrecError as exc:
            _named(path, exc)
            raise
    finally:
        _scratch().clean(path)


class Crash(Exception):
    """The process reading a collection file died of a signal (py-lmdb's C code on a damaged
    file: a SIGBUS or SIGSEGV)."""


def _serve(conn: Any) -> None:
    """The reading process: read each collection file named on ``conn`` whole, answer what
    happened (``("ok",)``, ``("molrec", type, rule, store, message)`` or ``("foreign", type,
    where, message)``)."""
    import traceback
    while True:
        try:
            path = conn.recv()
        except EOFError:
            return
        try:
            _read_collection_whole(Path(path))
            answer: Tuple[Any, ...] = ("ok",)
        except MolrecError as exc:
            answer = ("molrec", type(exc).__name__, exc.rule, exc.store, exc.message)
        except Exception as exc:
            frames = [f for f in traceback.extract_tb(exc.__traceback__) if "molrec_raw" in f.filename]
            where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "outside molrec_raw"
            answer = ("foreign", type(exc).__name__, where, str(exc)[:300])
        conn.send(answer)


class _Reader:
    """A child process (started with ``spawn``, so the suite never forks) that reads collection
    files for the ``lmdb_file`` target: a crash of py-lmdb's C code kills it, not the campaign,
    and is reported as ``Crash``; the next input starts a new one."""

    def __init__(self) -> None:
        self.process: Any = None
        self.conn: Any = None

    def _start(self) -> None:
        import multiprocessing
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child,), daemon=True)
        self.process.start()
        child.close()

    def _stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.join()
        self.process = None

    def read(self, path: Path) -> Tuple[Any, ...]:
        if self.process is None or not self.process.is_alive():
            self._stop()
            self._start()
        try:
            self.conn.send(str(path))
            return tuple(self.conn.recv())
        except (EOFError, ConnectionError):
            self.process.join()
            code = self.process.exitcode
            self.process = None
            return ("crash", code)
        except BaseException:  # a hang (the campaign's alarm) or an interrupt: the child is stopped
            self._stop()
            raise


@functools.lru_cache(maxsize=1)
def _reader() -> _Reader:
    return _Reader()


class LmdbTally:
    """The ``lmdb_file`` target's outcomes by kind of edit (``Mutant.kind``; ``stacked`` for an
    input of several edits): ``read`` (no error), ``refused <rule>``, ``death (exit code)``,
    ``foreign``."""

    def __init__(self) -> None:
        self.counts: Dict[str, Dict[str, int]] = {}

    def add(self, payload: bytes, answer: Tuple[Any, ...]) -> None:
        kind = getattr(payload, "kind", "stacked")
        what = {"ok": lambda: "read", "molrec": lambda: f"refused {answer[2]}",
                "crash": lambda: f"death ({answer[1]})", "foreign": lambda: "foreign"}[answer[0]]()
        row = self.counts.setdefault(kind, {})
        row[what] = row.get(what, 0) + 1


def _run_lmdb_file(tally: LmdbTally, payload: bytes) -> None:
    """The bytes as a ``*.mrec.lmdb`` file, read whole in the reading process: a MolrecError
    there is raised here as it was (and must name the file), anything else as an escape."""
    from molrec_raw import errors
    path = _scratch().path()
    path.write_bytes(payload)
    try:
        answer = _reader().read(path)
    finally:
        _scratch().clean(path)
    tally.add(payload, answer)
    if answer[0] == "crash":
        crash = Crash(f"the reading process died (exit code {answer[1]})")
        crash.where = f"signal {-answer[1]}" if answer[1] and answer[1] < 0 else f"exit code {answer[1]}"
        raise crash
    if answer[0] == "foreign":
        foreign = type(answer[1], (Exception,), {})(answer[3])
        foreign.where = answer[2]  # the reading process's innermost molrec_raw frame
        raise foreign
    if answer[0] == "molrec":
        try:
            exc = getattr(errors, answer[1])(answer[4], store=answer[3], rule=answer[2])
        except (AttributeError, TypeError):
            exc = MolrecError(answer[4], store=answer[3], rule=answer[2])
        _named(path, exc)
        raise exc


def _edit_file_bytes(rng: Random, data: bytes, slot: Any, donors: Sequence[bytes]) -> bytes:
    """A few bytes of the file changed in place (bits flipped, bytes set, a 2/4/8-byte field
    set to an interesting value): the file keeps its size, as a bad sector or a stray write
    leaves it."""
    while True:
        changed = mutate_bytes(rng, data, ())
        if len(changed) == len(data):
            return Mutant(changed, "byte_edit")


def _edit_lmdb(rng: Random, data: bytes, slot: Any, donors: Sequence[bytes]) -> bytes:
    return edit_lmdb_file(rng, data)


def write_tree_collection(path: Path) -> Path:
    """A collection whose LMDB tree has a branch level and overflow values: 24 records, each
    a small system (inline values) and 2 frames of 120 atoms (values of several KiB, in
    overflow pages)."""
    import numpy as np

    from molrec_raw import Block, CollectionWriter, Frame
    rng = np.random.default_rng(7)
    with CollectionWriter(path, units={"length": "nm"}) as w:
        for r in range(24):
            system = Frame({"smiles": "C" * (r + 1)}, {"atoms": Block({"element": np.array(["C", "O"] * 60, object)})})
            frames = [Frame({}, {"atoms": Block({"x": rng.normal(size=120), "y": rng.normal(size=120),
                                                 "z": rng.normal(size=120)})}) for _ in range(2)]
            w.add_record(system=system, frames=frames)
    return path


@functools.lru_cache(maxsize=1)
def _seed_collection() -> Tuple[bytes, List[bytes]]:
    """The bytes of a small collection written here (3 records of 3 frames: typed meta,
    strings, a nullable column, bonds with targets, cells, an index, a force field; see
    ``fuzz_targets._frame_bytes_seeds``) and its keys."""
    import lmdb

    from fuzz_targets import write_seed_collection
    with tempfile.TemporaryDirectory(prefix="molrec-fuzz-coll-") as tmp:
        path = write_seed_collection(Path(tmp) / "seed.mrec.lmdb")
        env = lmdb.open(str(path), subdir=False, readonly=True, lock=False)
        with env.begin() as txn:
            keys = [bytes(k) for k, _ in txn.cursor()]
        env.close()
        return path.read_bytes(), keys


def whole_targets(record: Dict[str, bytes]) -> List[Any]:
    """The four targets (the collection ones empty of slots when py-lmdb is missing: they
    then run nothing)."""
    from fuzz_targets import Slot, Target
    # each target reads the sections it fuzzes and the root (the metrics: the wal target's)
    documents = {k: v for k, v in record.items() if not k.startswith(("trajectory/", "metrics/"))}
    layout = {k: v for k, v in record.items() if k.startswith("trajectory/") or "/" not in k}
    made = [
        Target("documents", _record_slots(documents, lambda k: True), _run_record,
               edits=(_edit_stored,), structured=0.85),
        Target("trajectory_layout", _record_slots(layout, lambda k: k.startswith("trajectory/")), _run_record,
               edits=(_edit_stored,), structured=0.85),
    ]
    try:
        import lmdb  # noqa: F401  (the [lmdb] extra)
    except ImportError:
        return made
    seed, keys = _seed_collection()
    values = _collection_values(seed, keys)
    made.append(Target("collection_values", [Slot(k.decode(), (seed, k), [values[k]]) for k in keys],
                       _run_collection_value,
                       edits=(lambda rng, data, slot, donors: edit_json(rng, data, donors)
                              if data[:1] == b"{" else mutate_bytes(rng, data, donors),), structured=0.6))
    made.append(Target("lmdb_file", [Slot("file", LmdbTally(), [seed, _tree_collection()])], _run_lmdb_file,
                       slotted=False, edits=(_edit_file_bytes, _edit_lmdb, _edit_lmdb, _edit_lmdb), structured=1.0))
    return made


@functools.lru_cache(maxsize=1)
def _tree_collection() -> bytes:
    with tempfile.TemporaryDirectory(prefix="molrec-fuzz-coll-") as tmp:
        return write_tree_collection(Path(tmp) / "tree.mrec.lmdb").read_bytes()


def _collection_values(seed: bytes, keys: List[bytes]) -> Dict[bytes, bytes]:
    import lmdb
    with tempfile.TemporaryDirectory(prefix="molrec-fuzz-coll-") as tmp:
        path = Path(tmp) / "seed.mrec.lmdb"
        path.write_bytes(seed)
        env = lmdb.open(str(path), subdir=False, readonly=True, lock=False)
        with env.begin() as txn:
            values = {k: bytes(txn.get(k)) for k in keys}
        env.close()
    return values

