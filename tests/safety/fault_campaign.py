"""The fault-injection campaign (issue 23 item 3; spec-notes/safety.md "The fault campaign").
Shared by ``tests/safety/test_faults.py`` (a bounded, fixed-seed share) and ``bench/faults.py``
(every case).

Through the FileOps seam (``zarr/fileops.py``: ``FaultInjector``) the k-th call of one kind —
``write pwrite fsync rename exchange truncate open mkdir unlink`` — fails with EIO, ENOSPC or
EDQUOT, for every k the clean run of the workload makes, over the standard workloads:

- **trajectory**: ``MrecWriter`` with ragged blocks (3 then 4 atoms: the switch to CSR; a
  nullable masked column; bonds changing every third frame; a changing cell), automatic
  commits every 3 frames, durable flushes, close; then ``MrecWriter.open``, more frames, a
  flush, close (the workload of the power-cut simulator, ``tests/powercut``).
- **metrics**: ``MetricsWriter`` of a record: log, flush (densify), close.
- **write_mrec_frame**, **write_mrec**, **write_mrec_trajectory**: the whole-record doors over
  an existing record (build beside, swap in).
- **pack**: ``pack_mrec_zip(remove_source=True)``.
- **repair**: ``repair_mrec`` of a crashed record (a writer that committed frames, flushed
  some, and was dropped without closing; a metrics WAL not yet densified).
- **collection**: ``CollectionWriter`` replacing an existing collection (``overwrite=True``):
  the seam reaches its lock, the file's creation and the old file's removal; LMDB writes its
  pages itself (beside the seam) — see :func:`lmdb_cases` (``strace -e inject=``).

Each case checks: the writer raised a ``MolrecError`` or finished correctly (a swallowed
write/pwrite/fsync/truncate failure is a violation even when the result reads back); a
long-lived writer was poisoned by its first error (every later call raises
``PoisonedWriterError`` naming it, and makes no further call through the seam); no lock file
outlives the writer; a reader then sees at least the last durable commit, every frame equal to
what was appended (never more frames than appended); ``MrecWriter.open`` / ``repair_mrec``
give a writable record (the rest appended from ``committed`` reads back whole) and
``validate`` is clean.
"""
from __future__ import annotations

import errno
import os
import random
import shutil
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

import molrec_raw as mr
from molrec_raw.errors import IOFailureError, MolrecError, PoisonedWriterError
from molrec_raw.record.locking import LOCK_SUFFIX
from molrec_raw.zarr.fileops import FaultInjector

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "powercut"))
from powercut_workloads import (TrajectoryWorkload, door_frame, metric_value, same_frame, traj_frame,  # noqa: E402
                                traj_schema, traj_step, traj_time)

KINDS = ("write", "pwrite", "fsync", "rename", "exchange", "truncate", "open", "mkdir", "unlink")
ERRNOS = (errno.EIO, errno.ENOSPC, errno.EDQUOT)
SWALLOW_IS_LOSS = ("write", "pwrite", "fsync", "truncate")  # a failure of these never goes unnoticed
RECORD = "r.mrec"


@dataclass
class Run:
    """What a workload did under faults: the long-lived writer whose call raised (None: a
    one-shot door, or it failed while being made), the first error, how many frames (or
    events) the caller appended and how many were durable when it stopped, and the later
    calls of the writer that must be refused."""

    writer: Any = None
    error: Optional[BaseException] = None
    appended: int = 0
    durable: int = 0
    refusals: List[Callable[[], Any]] = field(default_factory=list)


class Workload:
    """One standard workload: ``setup`` writes the starting tree (no faults), ``run`` writes
    through the injector and returns a :class:`Run`, ``check`` judges the tree afterwards
    (violations as strings; it may recover and write, with no faults)."""

    name = ""

    def setup(self, root: Path) -> None:
        """The starting tree."""

    def run(self, root: Path, ops: FaultInjector) -> Run:
        raise NotImplementedError

    def check(self, root: Path, run: Run) -> List[str]:
        raise NotImplementedError


def _attempt(run: Run, body: Callable[[], None]) -> Run:
    try:
        body()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # anything: a foreign exception is a finding, judged later
        run.error = exc
    return run


# -- trajectory ---------------------------------------------------------------------------------
TRAJ_FIRST, TRAJ_ALL = 10, 13  # frames by the first writer; in all (the reopened writer adds the rest)


def _append(w: mr.MrecWriter, i: int) -> None:
    w.append(traj_frame(i), step=traj_step(i), time=traj_time(i))


def _writer_refusals(w: mr.MrecWriter) -> List[Callable[[], Any]]:
    return [lambda: w.append(traj_frame(99), step=10 ** 6), w.flush, w.close]


class TrajectoryFaults(Workload):
    """Create, 7 frames (commits every 3), durable flush, 3 more (the 4-atom frames: CSR), close; reopen, 3 more
    (commits every 2), close."""

    name = "trajectory"

    def run(self, root: Path, ops: FaultInjector) -> Run:
        path, run = root / RECORD, Run()

        def body() -> None:
            w = mr.MrecWriter(path, traj_schema(), flush_every=3, fileops=ops)
            run.writer, run.refusals = w, _writer_refusals(w)
            for i in range(TRAJ_FIRST):
                _append(w, i)
                run.appended = i + 1
                if i == 6:
                    w.flush()
                    run.durable = run.appended
            w.close()
            run.durable = run.appended
            run.writer = None
            w = mr.MrecWriter.open(path, flush_every=2, fileops=ops)
            run.writer, run.refusals = w, _writer_refusals(w)
            for i in range(TRAJ_FIRST, TRAJ_ALL):
                _append(w, i)
                run.appended = i + 1
            w.close()
            run.durable = run.appended
        return _attempt(run, body)

    def check(self, root: Path, run: Run) -> List[str]:
        return check_trajectory(root / RECORD, run, created=run.durable > 0 or run.writer is not None)


def check_trajectory(path: Path, run: Run, created: bool, total: int = TRAJ_ALL, repair: bool = False) -> List[str]:
    """A reader sees at least the durable frames, each equal to what was appended; then
    ``MrecWriter.open`` (after ``repair_mrec`` when ``repair``) gives a writable record: the
    rest appended from ``committed`` reads back whole; ``validate`` is clean."""
    if not created and not (path / "zarr.json").is_file():
        return []  # failed before the record existed: nothing was promised, nothing is there
    out = []
    if created:  # before recovery: what a reader sees now (the torn tail invisible)
        verdict, _ = TrajectoryWorkload._frames(path, run.durable, run.appended)
        if verdict is not None:
            out.append(f"reader: {verdict[0]}: {verdict[1]}")
    try:
        if repair:
            mr.repair_mrec(path)
        with mr.MrecWriter.open(path) as again:
            committed = again.committed
            if committed < run.durable or committed > run.appended:
                out.append(f"recovery: {committed} frames committed, {run.durable} durable, {run.appended} appended")
            for i in range(committed, total):
                _append(again, i)
    except MolrecError as exc:
        if created:
            return out + [f"recovery failed: {type(exc).__name__}: {exc}"]
        return out  # the constructor failed while creating: the record never existed
    except Exception as exc:
        return out + [f"recovery failed (foreign): {type(exc).__name__}: {exc}"]
    verdict, n = TrajectoryWorkload._frames(path, total, total)
    if verdict is not None or n != total:
        out.append(f"after recovery: {verdict}")
    out += _validate(path)
    return out


def _validate(path: Path) -> List[str]:
    try:
        found = mr.validate(path)
    except Exception as exc:
        return [f"validate raised {type(exc).__name__}: {exc}"]
    return [f"validate: {len(found)} violation(s), first {found[0]}"] if found else []


# -- metrics ------------------------------------------------------------------------------------
METRIC_STEPS = 24


class MetricsFaults(Workload):
    """A record's MetricsWriter: log two series, a durable flush every 8 steps, close."""

    name = "metrics"

    def setup(self, root: Path) -> None:
        mr.write_mrec_frame(root / RECORD, mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(2)})}), durable=False)

    def run(self, root: Path, ops: FaultInjector) -> Run:
        run = Run()

        def body() -> None:
            m = mr.MetricsWriter(root / RECORD, fileops=ops)
            run.writer = m
            run.refusals = [lambda: m.log("a", 0.0, step=10 ** 6), m.flush, m.close]
            for step in range(METRIC_STEPS):
                m.log_many({"a": metric_value("a", step), "b": metric_value("b", step)}, step=step,
                           wall_time=1.0e9 + step)
                run.appended = step + 1
                if step % 8 == 7:
                    m.flush()
                    run.durable = run.appended
            m.close()
            run.durable = run.appended
        return _attempt(run, body)

    def check(self, root: Path, run: Run) -> List[str]:
        path = root / RECORD
        try:
            mr.MetricsWriter(path).close()  # the next writer cuts what the failure tore, and densifies
            got = mr.read_metrics(path)
        except Exception as exc:
            return [f"recovery failed: {type(exc).__name__}: {exc}"]
        out = []
        for name in ("a", "b"):
            series = got.get(name)
            steps = [] if series is None else [int(s) for s in series.steps]
            values = [] if series is None else [float(v) for v in series.values]
            if steps != list(range(len(steps))) or len(steps) > run.appended:
                out.append(f"series {name}: steps {steps} are not a prefix of the {run.appended} logged")
            elif len(steps) < run.durable:
                out.append(f"series {name}: {len(steps)} events read back, {run.durable} were durable")
            elif values != [metric_value(name, s) for s in steps]:
                out.append(f"series {name}: values differ from those logged")
        return out + _validate(path)


# -- whole-record doors -------------------------------------------------------------------------
class DoorFaults(Workload):
    """A whole-record door over an existing record (version 1 → version 2): afterwards the
    old record or the new one, never a mix, never none; the new one once the door returned."""

    def __init__(self, name: str) -> None:
        self.name = name

    def setup(self, root: Path) -> None:
        self._write(root / RECORD, 1, None)

    def _write(self, path: Path, version: int, ops: Optional[FaultInjector]) -> None:
        frame = door_frame(version)
        if self.name == "write_mrec_frame":
            mr.write_mrec_frame(path, frame, overwrite=True, fileops=ops)
        elif self.name == "write_mrec":
            system = mr.Frame({}, {"atoms": mr.Block({"mass": np.arange(40.0) + version})})
            mr.write_mrec(path, mr.MolRec(system=system, meta={"title": f"version {version}"}), overwrite=True,
                          fileops=ops)
        else:
            mr.write_mrec_trajectory(path, [frame, door_frame(version + 10)], overwrite=True, fileops=ops)

    def _version(self, path: Path) -> int:
        """Which version the record at ``path`` is (0: neither)."""
        if self.name == "write_mrec":
            rec = mr.read_mrec(path)
            mass = np.asarray(rec.system.blocks["atoms"].columns["mass"]) if rec.system is not None else None
            for version in (1, 2):
                if mass is not None and mass.tolist() == (np.arange(40.0) + version).tolist():
                    return version
            return 0
        if self.name == "write_mrec_frame":
            frame = mr.read_mrec_frame(path)
            return next((v for v in (1, 2) if same_frame(frame, door_frame(v))), 0)
        with mr.MrecReader(path) as r:
            frames = [r[i] for i in range(len(r))]
        return next((v for v in (1, 2) if len(frames) == 2 and same_frame(frames[0], door_frame(v))
                     and same_frame(frames[1], door_frame(v + 10))), 0)

    def run(self, root: Path, ops: FaultInjector) -> Run:
        run = Run()
        return _attempt(run, lambda: self._write(root / RECORD, 2, ops))

    def check(self, root: Path, run: Run) -> List[str]:
        path = root / RECORD
        try:
            version = self._version(path)
        except Exception as exc:
            return [f"the record is gone or unreadable: {type(exc).__name__}: {exc}"]
        if version == 0:
            return ["a mix of the old and the new record"]
        if version == 1 and run.error is None:
            return ["the door returned but the old record is there"]
        out = _validate(path)
        try:  # the next writer (it settles what a failed swap left) gives a writable record
            self._write(path, 3, None)
            if self._version_is(path, 3) is False:
                out.append("the next writer's record does not read back")
        except Exception as exc:
            return out + [f"the next writer failed: {type(exc).__name__}: {exc}"]
        left = sorted(p.name for p in root.iterdir() if ".molrec-" in p.name and not p.name.endswith(LOCK_SUFFIX))
        if left:
            out.append(f"names left behind after the next writer: {', '.join(left)}")
        return out + _validate(path)

    def _version_is(self, path: Path, version: int) -> bool:
        if self.name == "write_mrec_frame":
            return same_frame(mr.read_mrec_frame(path), door_frame(version))
        if self.name == "write_mrec":
            rec = mr.read_mrec(path)
            return rec.system is not None and \
                np.asarray(rec.system.blocks["atoms"].columns["mass"]).tolist() == (np.arange(40.0) + version).tolist()
        with mr.MrecReader(path) as r:
            return len(r) == 2 and same_frame(r[0], door_frame(version))


# -- pack -----------------------------------------------------------------------------------------
PACK_FRAMES = 6


class PackFaults(Workload):
    """``pack_mrec_zip(remove_source=True)``: afterwards the zip under its final name is
    complete, or there is none and the directory reads whole."""

    name = "pack"

    def setup(self, root: Path) -> None:
        mr.write_mrec_trajectory(root / RECORD, [traj_frame(i) for i in range(PACK_FRAMES)],
                                 steps=[traj_step(i) for i in range(PACK_FRAMES)],
                                 times=[traj_time(i) for i in range(PACK_FRAMES)])

    def run(self, root: Path, ops: FaultInjector) -> Run:
        return _attempt(Run(), lambda: mr.pack_mrec_zip(root / RECORD, remove_source=True, fileops=ops))

    @staticmethod
    def _reads(path: Path) -> Optional[str]:
        try:
            with mr.MrecReader(path) as r:
                if len(r) != PACK_FRAMES or not all(same_frame(r[i], traj_frame(i)) for i in range(PACK_FRAMES)):
                    return f"{len(r)} frames, not those written"
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    def check(self, root: Path, run: Run) -> List[str]:
        directory, archive = root / RECORD, root / f"{RECORD}.zip"
        if archive.exists():
            problem = self._reads(archive)
            if problem is not None:
                return [f"a broken zip under its final name: {problem}"]
        elif run.error is None:
            return ["pack returned but there is no zip"]
        if directory.exists():
            problem = self._reads(directory)
            if problem is not None:
                return [f"the source record is damaged: {problem}"]
            out = _validate(directory)
            try:  # the source stays writable
                mr.MrecWriter.open(directory).close()
            except Exception as exc:
                out.append(f"the source cannot be reopened: {type(exc).__name__}: {exc}")
            return out
        if not archive.exists():
            return ["the record is lost: neither the zip nor the directory"]
        left = sorted(p.name for p in root.iterdir() if p.name not in (RECORD, f"{RECORD}.zip")
                      and not p.name.endswith(LOCK_SUFFIX))
        return [f"names left behind: {', '.join(left)}"] if left and run.error is None else []


# -- repair ---------------------------------------------------------------------------------------
REPAIR_COMMITTED, REPAIR_DURABLE = 10, 6


class RepairFaults(Workload):
    """``repair_mrec`` of a crashed record: 10 frames committed (6 of them by a durable flush),
    the writer dropped without closing (its checkpoint and ``running`` status stay); a metrics
    WAL logged and flushed but not densified, with a torn line after it (repair cuts it: a
    truncate)."""

    name = "repair"

    def setup(self, root: Path) -> None:
        path = root / RECORD
        w = mr.MrecWriter(path, traj_schema(), flush_every=2)
        for i in range(REPAIR_COMMITTED):
            _append(w, i)
            if i + 1 == REPAIR_DURABLE:
                w.flush()
        w.abort()  # as a kill leaves it: committed frames, a checkpoint, no close
        m = mr.MetricsWriter(path)
        for step in range(5):
            m.log("a", metric_value("a", step), step=step, wall_time=1.0e9 + step)
        m.flush()
        m.abort()
        with open(path / "metrics" / "metrics.jsonl", "ab") as wal:  # a torn line past the last flush: cut
            wal.write(b'{"k":"a","s":9,"v":')

    def run(self, root: Path, ops: FaultInjector) -> Run:
        return _attempt(Run(), lambda: mr.repair_mrec(root / RECORD, fileops=ops))

    def check(self, root: Path, run: Run) -> List[str]:
        crashed = Run(appended=REPAIR_COMMITTED, durable=REPAIR_DURABLE)
        out = check_trajectory(root / RECORD, crashed, created=True, total=REPAIR_COMMITTED + 3, repair=True)
        try:
            series = mr.read_metrics(root / RECORD).get("a")
            steps = [] if series is None else [int(s) for s in series.steps]
            if steps != list(range(5)):
                out.append(f"metrics after recovery: steps {steps}, the 5 flushed expected")
        except Exception as exc:
            out.append(f"metrics unreadable after recovery: {type(exc).__name__}: {exc}")
        return out


# -- collection -------------------------------------------------------------------------------------
COLLECTION = "c.mrec.lmdb"
UNITS = {"length": "nm"}
N_RECORDS = 5


def collection_record(r: int, version: int = 2) -> Dict[str, Any]:
    """Record ``r`` of collection version ``version``: ragged (2 + r % 3 atoms), 3 frames."""
    rows = 2 + r % 3
    frames = [mr.Frame({}, {"atoms": mr.Block({"x": np.full(rows, 100.0 * version + 10 * r + i)})}) for i in range(3)]
    return {"meta": {"name": f"v{version}-m{r}"}, "frames": frames}


def write_collection(path: Path, version: int, ops: Any = None, run: Optional[Run] = None) -> None:
    """The collection of ``version`` (its writer replaces any collection at ``path``)."""
    w = mr.CollectionWriter(path, units=UNITS, commit_every=2, overwrite=True, fileops=ops)
    if run is not None:
        run.writer = w
        run.refusals = [lambda: w.add_record(**collection_record(99, version)), w.close]
    for r in range(N_RECORDS):
        w.add_record(**collection_record(r, version))
        if run is not None:
            run.appended = r + 1
    w.close()
    if run is not None:
        run.durable = N_RECORDS


def collection_version(path: Path) -> Optional[int]:
    """Which complete version the collection at ``path`` is; None: no collection there (no
    file, or one without ``meta``: readers refuse it); -1: a collection of neither version."""
    if not path.exists():
        return None
    try:
        c = mr.read_collection(path)
    except MolrecError:
        return None
    with c:
        for version in (1, 2):
            if len(c) == N_RECORDS and all(_same_record(c, r, version) for r in range(N_RECORDS)):
                return version
    return -1


def _same_record(c: Any, r: int, version: int) -> bool:
    want = collection_record(r, version)
    rec = c[r]
    if dict(rec.meta).get("name") != want["meta"]["name"]:
        return False
    got = rec.trajectory
    return len(got) == 3 and all(np.asarray(got[i]["atoms"]["x"]).tolist() ==
                                 np.asarray(want["frames"][i].blocks["atoms"].columns["x"]).tolist() for i in range(3))


def check_collection(path: Path, run: Run) -> List[str]:
    """A collection is whole or absent (no ``meta``: refused by readers): version 2 once close
    returned; then a new writer (overwrite=True) writes it again and it reads back."""
    out = []
    try:
        version = collection_version(path)
    except Exception as exc:
        return [f"reader: {type(exc).__name__}: {exc}"]
    if version == -1:
        out.append("a collection of neither version (a mix, or records not equal to those added)")
    if run.error is None and version != 2:
        out.append(f"the writer finished but the collection reads as {version}")
    try:
        write_collection(path, 3 if version == 2 else 2)
        if collection_version(path) is None:
            out.append("the next writer's collection does not read back")
    except Exception as exc:
        out.append(f"the next writer failed: {type(exc).__name__}: {exc}")
    return out


class CollectionFaults(Workload):
    """``CollectionWriter(overwrite=True)`` over an existing collection: the faults the seam
    reaches (the lock, the creation of the file, the removal of the old one)."""

    name = "collection"

    def setup(self, root: Path) -> None:
        write_collection(root / COLLECTION, 1)

    def run(self, root: Path, ops: FaultInjector) -> Run:
        run = Run()
        return _attempt(run, lambda: write_collection(root / COLLECTION, 2, ops, run))

    def check(self, root: Path, run: Run) -> List[str]:
        return check_collection(root / COLLECTION, run)


WORKLOADS: Dict[str, Callable[[], Workload]] = {
    "trajectory": TrajectoryFaults, "metrics": MetricsFaults,
    "write_mrec_frame": lambda: DoorFaults("write_mrec_frame"), "write_mrec": lambda: DoorFaults("write_mrec"),
    "write_mrec_trajectory": lambda: DoorFaults("write_mrec_trajectory"),
    "pack": PackFaults, "repair": RepairFaults, "collection": CollectionFaults,
}


# -- the driver -------------------------------------------------------------------------------------
@dataclass
class Outcome:
    """One case: ``kind``'s ``k``-th call failed with ``code``; ``result`` raised / finished
    / unreached (the run made fewer calls); ``violations`` what broke a promise."""

    workload: str
    kind: str
    k: int
    code: int
    result: str
    violations: List[str]

    def label(self) -> str:
        return f"{self.workload} {self.kind}#{self.k} {errno.errorcode[self.code]}"


def _mutations(ops: FaultInjector) -> Dict[str, int]:
    return {kind: ops.calls.get(kind, 0) for kind in KINDS + ("rmdir",)}


def clean_counts(workload: Workload, scratch: Path) -> Dict[str, int]:
    """The calls of each kind the workload makes without faults (and its checks hold)."""
    root = Path(tempfile.mkdtemp(prefix=f"{workload.name}-clean-", dir=scratch))
    try:
        workload.setup(root)
        ops = FaultInjector()
        run = workload.run(root, ops)
        if run.error is not None:
            raise AssertionError(f"{workload.name}: the clean run failed: {run.error!r}")
        problems = workload.check(root, run)
        if problems:
            raise AssertionError(f"{workload.name}: the clean run breaks its checks: {problems}")
        return {kind: ops.calls.get(kind, 0) for kind in KINDS}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_case(workload: Workload, kind: str, k: int, code: int, scratch: Path) -> Outcome:
    """One case in a fresh directory, judged (see the module docstring)."""
    root = Path(tempfile.mkdtemp(prefix=f"{workload.name}-", dir=scratch))
    try:
        workload.setup(root)
        ops = FaultInjector().fail(kind, k, code)
        run = workload.run(root, ops)
        violations: List[str] = []
        if not ops.injected:
            result = "unreached"
        elif run.error is None:
            result = "finished"
            if kind in SWALLOW_IS_LOSS:
                violations.append(f"a failed {kind} went unnoticed (the writer finished)")
        else:
            result = "raised"
            if not isinstance(run.error, MolrecError):
                violations.append(f"foreign exception {type(run.error).__name__}: {run.error}")
            violations += _check_poisoned(run, ops)
        held = sorted(p.name for p in root.iterdir() if p.name.endswith(LOCK_SUFFIX))
        if held:
            violations.append(f"the lock outlived the writer: {', '.join(held)}")
        try:
            violations += workload.check(root, run)
        except Exception as exc:  # a check that cannot even run is a finding too
            violations.append(f"the check raised {type(exc).__name__}: {exc}")
        return Outcome(workload.name, kind, k, code, result, violations)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _check_poisoned(run: Run, ops: FaultInjector) -> List[str]:
    """A long-lived writer whose call raised: poisoned by its first error, every later call
    refused naming it, nothing more through the seam."""
    w = run.writer
    if w is None:
        return []
    first = w.poisoned
    if first is None:
        return [f"not poisoned after {type(run.error).__name__}: {run.error}"]
    out = []
    if isinstance(first, OSError) or not isinstance(first, (MolrecError, KeyboardInterrupt)):
        out.append(f"poisoned by a foreign exception {first!r}")
    seen = _mutations(ops)
    for call in run.refusals:
        try:
            call()
        except PoisonedWriterError as exc:
            if exc.first is not first:
                out.append(f"a refusal names another failure ({exc.first!r}, not {first!r})")
        except Exception as exc:
            out.append(f"a later call raised {type(exc).__name__} instead of the refusal: {exc}")
        else:
            out.append("a later call of the poisoned writer was accepted")
    if _mutations(ops) != seen:
        out.append(f"the poisoned writer touched the disk: {seen} -> {_mutations(ops)}")
    return out


def all_cases(counts: Dict[str, int], rotate: bool = False, kinds: Tuple[str, ...] = KINDS
              ) -> Iterator[Tuple[str, int, int]]:
    """Every (kind, k, errno) of a workload's clean counts; ``rotate``: every (kind, k) once,
    its errno the next of EIO, ENOSPC, EDQUOT in turn (a third of the cases)."""
    for kind in kinds:
        for k in range(1, counts.get(kind, 0) + 1):
            for code in (ERRNOS[(k - 1) % len(ERRNOS)],) if rotate else ERRNOS:
                yield kind, k, code


def sampled_cases(counts: Dict[str, int], rng: random.Random, per_kind: int) -> List[Tuple[str, int, int]]:
    """Up to ``per_kind`` cases of each kind the workload makes, at seeded positions among its
    calls, each with a seeded errno."""
    cases = []
    for kind in KINDS:
        n = counts.get(kind, 0)
        if n:
            cases += [(kind, k, rng.choice(ERRNOS)) for k in sorted(rng.sample(range(1, n + 1), min(per_kind, n)))]
    return cases


# -- LMDB's own I/O (beside the seam): strace -e inject= on a child process -------------------------
LMDB_SYSCALLS = ("pwrite64", "fdatasync")  # what LMDB's commits make here (no writemap): pages, meta, syncs
# (``-P <file>``: only the calls on the collection file are counted and failed, not the lock note's)

_LMDB_CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, {here!r})
    from fault_campaign import Run, write_collection
    from molrec_raw.errors import IOFailureError, PoisonedWriterError
    from pathlib import Path
    run = Run()
    try:
        write_collection(Path({path!r}), 2, None, run)
        print("finished", flush=True)
    except IOFailureError as exc:
        print("raised", exc.operation, exc.errno, flush=True)
        w = run.writer
        refused = 0
        for call in run.refusals:
            try:
                call()
            except PoisonedWriterError as again:
                refused += again.first is w.poisoned
        print("refused", refused, len(run.refusals), flush=True)
    except BaseException as exc:
        print("other", type(exc).__name__, str(exc).replace(chr(10), " "), flush=True)
""")


def strace_runs() -> bool:
    """Whether ``strace`` can trace a child here (installed, ptrace allowed)."""
    if shutil.which("strace") is None:
        return False
    return subprocess.run(["strace", "-f", "-qq", "-e", "trace=none", "true"], capture_output=True).returncode == 0


def lmdb_counts(scratch: Path) -> Dict[str, int]:
    """The LMDB syscalls of the collection workload's writer process, counted by strace."""
    root = Path(tempfile.mkdtemp(prefix="lmdb-clean-", dir=scratch))
    try:
        write_collection(root / COLLECTION, 1)
        log = root / "trace.log"
        code = _LMDB_CHILD.format(here=str(HERE), path=str(root / COLLECTION))
        done = subprocess.run(["strace", "-f", "-qq", "-o", str(log), "-P", str(root / COLLECTION),
                               "-e", "trace=" + ",".join(LMDB_SYSCALLS), sys.executable, "-c", code],
                              capture_output=True, text=True, timeout=300)
        if done.stdout.strip() != "finished":
            raise AssertionError(f"the clean LMDB run failed: {done.stdout} {done.stderr[-2000:]}")
        lines = log.read_text().splitlines()
        return {call: sum(f" {call}(" in f" {line.split(' ', 1)[-1]}" for line in lines) for call in LMDB_SYSCALLS}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_lmdb_case(call: str, k: int, code: int, scratch: Path) -> Outcome:
    """The collection workload in a child process whose ``k``-th ``call`` fails (strace): it
    raised an IOFailureError and refused every later call, or finished; afterwards the file is
    the old collection, the new one, or none (readers refuse it), and a new writer works."""
    root = Path(tempfile.mkdtemp(prefix="lmdb-", dir=scratch))
    try:
        path = root / COLLECTION
        write_collection(path, 1)
        script = _LMDB_CHILD.format(here=str(HERE), path=str(path))
        done = subprocess.run(["strace", "-f", "-qq", "-o", os.devnull, "-P", str(path), "-e", f"trace={call}",
                               "-e", f"inject={call}:error={errno.errorcode[code]}:when={k}",
                               sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
        lines = done.stdout.splitlines()
        violations: List[str] = []
        if done.returncode != 0 or not lines:
            violations.append(f"the writer process failed: {done.stderr[-500:]}")
            result = "raised"
        elif lines[0] == "finished":
            result = "finished"
            violations.append(f"a failed {call} went unnoticed (the writer finished)")
        elif lines[0].startswith("raised"):
            result = "raised"
            refused = lines[1].split() if len(lines) > 1 else []
            if len(refused) != 3 or refused[1] != refused[2]:
                violations.append(f"not poisoned: {lines[1:]}")
        else:
            result = "raised"
            violations.append(f"not an IOFailureError: {lines[0]}")
        held = sorted(p.name for p in root.iterdir() if p.name.endswith(LOCK_SUFFIX))
        if held:
            violations.append(f"the lock outlived the writer: {', '.join(held)}")
        violations += check_collection(path, Run(error=None if result == "finished" else RuntimeError(lines[:1])))
        return Outcome("collection-lmdb", call, k, code, result, violations)
    finally:
        shutil.rmtree(root, ignore_errors=True)
