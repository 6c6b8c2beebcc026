"""The workloads of the power-cut simulator and what must hold in every crash state
(issues 10 and 23).  Shared by ``tests/powercut/test_powercut.py`` and ``bench/powercut.py``.

- **trajectory**: create, automatic commits (``flush_every`` 3, later 2), durable flushes,
  close, reopen and append, a topology change that switches a block to CSR, a cell change
  (the attribute form becomes arrays), step numbers that stop being a progression, close.
- **trajectory-reopen**: ``MrecWriter.open`` of a record with the layout before issue 23
  (no sector alignment), appends, a durable flush, close.
- **metrics**: log, automatic WAL appends (a new wall-clock second writes the buffer),
  flush with densify, close, reopen and log again.
- **doors**: ``write_mrec_frame`` over an existing record (build beside, then swap).
- **doors-renames**: the same where the file system refuses the atomic exchange (the
  two-rename fallback); then the next writer must settle the swap and leave no retired
  record behind.
- **pack**: ``pack_mrec_zip(remove_source=True)`` of a closed trajectory record.

Asserted in every state, after the last durable point (the marks the workload sets once a
durable call returned): reading raises nothing but the library's own errors; the record
opens at ``nstep`` >= that commit, every frame below ``nstep`` equals what was appended
bit for bit, frames past it are invisible; ``MrecWriter.open`` continues and what it
appends reads back; recovery (``repair_mrec``) run twice gives identical bytes; on a sample
of states zarr-python opens the recovered record and reads every trajectory array.
Metrics: every event logged before the last durable flush is read back, none twice — a WAL
line past the watermark that a torn sector garbled is refused by the reader (README
decision 9) and cut by ``repair_mrec``, after which the durable events must read back
(counted as a note, not a violation).
``write_mrec_frame``: the old record or the new one, never a mix and never nothing.
``pack_mrec_zip``: the record stays readable from the directory or the zip, and a zip under
its final name is complete.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

import molrec_raw as mr
from molrec_raw.errors import MolrecError
from molrec_raw.record import live
from molrec_raw.record.precision import round_to_precision
from powercut_sim import (NOTE, PSOW_512, CrashModel, Device, Recorder, State, Tree, check_replay, materialize, snapshot,
                          tree_digest)

Verdict = Optional[Tuple[str, str]]


# -- shared helpers -------------------------------------------------------------------------
def scratch_root() -> str:
    """Where crash states are materialized: tmpfs when there is one (fast, and fsync is free)."""
    for candidate in ("/dev/shm",):
        if os.path.isdir(candidate) and os.access(candidate, os.W_OK):
            return tempfile.mkdtemp(prefix="molrec-powercut-", dir=candidate)
    return tempfile.mkdtemp(prefix="molrec-powercut-")


def where(exc: BaseException) -> str:
    """The kind of file an error names, for grouping violations."""
    key = getattr(exc, "key", None) or ""
    node = getattr(exc, "node", None) or ""
    if key.endswith("zarr.json"):
        return "a zarr.json"
    if "/c/" in key or key.endswith("/c") or "/c/" in f"{key}/":
        return "a shard"
    if key.endswith(".jsonl") or "metrics.jsonl" in str(exc):
        return "the WAL"
    if getattr(exc, "rule", None):
        return f"rule {exc.rule}"  # type: ignore[attr-defined]
    return node or "the store"


def symptom_of(prefix: str, exc: BaseException) -> Tuple[str, str]:
    if not isinstance(exc, MolrecError):
        return "foreign exception", f"{type(exc).__name__}: {exc}"
    return f"{prefix}: {type(exc).__name__} in {where(exc)}", str(exc)


def recover(path: Path) -> Any:
    """The recovery entry point: ``repair_mrec`` (issue 10); before it existed, the only
    recovery was a reopening writer, closed at once."""
    repair = getattr(mr, "repair_mrec", None)
    if repair is not None:
        return repair(path)
    mr.MrecWriter.open(path).close()
    return None


def same_frame(a: mr.Frame, b: mr.Frame) -> bool:
    """Bitwise equality of blocks (columns and masks), cell and meta."""
    if a.blocks.keys() != b.blocks.keys() or a.meta != b.meta:
        return False
    for name, x in a.blocks.items():
        y = b.blocks[name]
        if x.nrows != y.nrows or x.columns.keys() != y.columns.keys():
            return False
        for c in x.columns:
            u, v = np.asarray(x.columns[c]), np.asarray(y.columns[c])
            if u.dtype != v.dtype or u.shape != v.shape:
                return False
            if (u.tolist() != v.tolist()) if u.dtype == object else (u.tobytes() != v.tobytes()):
                return False
        for c in set(x.masks) | set(y.masks):
            if not np.array_equal(x.masks.get(c, np.ones(x.nrows, bool)), y.masks.get(c, np.ones(y.nrows, bool))):
                return False
    if (a.box is None) != (b.box is None):
        return False
    if a.box is not None and b.box is not None:
        if (a.box.vectors.tobytes() != b.box.vectors.tobytes() or a.box.origin.tobytes() != b.box.origin.tobytes()
                or tuple(a.box.boundary) != tuple(b.box.boundary)):
            return False
    return True


def last_mark(marks: List[Tuple[int, str, Any]], label: str, t: int) -> Any:
    """The value of the last ``label`` mark at or before log position ``t`` (None if none)."""
    value = None
    for index, name, v in marks:
        if index > t:
            break
        if name == label:
            value = v
    return value


def count_marks(marks: List[Tuple[int, str, Any]], label: str, t: int) -> int:
    return sum(1 for index, name, _ in marks if name == label and index <= t)


DEEP_READS = [0]  # zarr-python reads done by this process (a test counts them)


def zarr_python_reads(path: Path, section: str = "trajectory") -> Verdict:
    """zarr-python opens the record and reads every array of ``section`` in full.  Callers
    check ``zarr_python_available()`` first: without zarr-python this raises ImportError."""
    import zarr

    DEEP_READS[0] += 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            group = zarr.open_group(str(path), mode="r")[section]
            stack = [group]
            while stack:
                node = stack.pop()
                for _, member in node.members():
                    if isinstance(member, zarr.Group):
                        stack.append(member)
                    else:
                        member[...]
        except Exception as exc:  # any failure of the other reader is the finding
            return "zarr-python cannot read the recovered record", f"{type(exc).__name__}: {exc}"
    return None


# -- workloads ------------------------------------------------------------------------------
class Workload:
    name = ""
    record = "r.mrec"
    exchange = True  # the recorder performs atomic exchanges (False: refused, as some file systems do)

    def setup(self, root: Path) -> None:
        """The initial tree (written without the recorder; taken as durable)."""

    def run(self, root: Path, rec: Recorder) -> None:
        raise NotImplementedError

    def check(self, root: Path, t: int, marks: List[Tuple[int, str, Any]], deep: bool) -> Verdict:
        raise NotImplementedError


# trajectory ----------------------------------------------------------------------------------
PRECISION = 1e-3
TRAJ_FRAMES = 19  # frames the workload appends; the checks append two more


def traj_schema() -> mr.SequenceSchema:
    s = mr.SequenceSchema().declare_block("atoms", rows=3)
    s.declare_column("atoms", "x", "f64").declare_precision("atoms", "x", PRECISION)
    s.declare_column("atoms", "q", "f64").declare_nullable("atoms", "q")
    s.declare_column("bonds", "atomi", "u64")
    s.declare_meta("pe", "f64")
    return s


def traj_frame(i: int) -> mr.Frame:
    """Frame ``i``: 3 atoms until 8, then 4 (the switch to CSR); bonds change every third
    frame; the cell is fixed until 5, then changes at 5 and 9."""
    rng = np.random.default_rng(1000 + i)
    rows = 3 if i < 8 else 4
    masks = {} if i % 3 else {"q": np.arange(rows) != rows - 1}
    atoms = mr.Block({"x": rng.normal(size=rows), "q": rng.normal(size=rows)}, masks=masks)
    bonds = mr.Block({"atomi": np.arange(2, dtype=np.uint64) + np.uint64(i // 3)})
    edge = 10.0 if i < 5 else (11.0 if i < 9 else 12.0)
    return mr.Frame({"pe": float(-i)}, {"atoms": atoms, "bonds": bonds}, mr.Box(np.eye(3) * edge))


def traj_step(i: int) -> int:
    return 10 * i if i < 6 else 10 * i + 3  # stops being a progression at 6


def traj_time(i: int) -> float:
    return 0.5 * i


def traj_expected(i: int) -> mr.Frame:
    f = traj_frame(i)
    f.blocks["atoms"].columns["x"] = round_to_precision(np.asarray(f.blocks["atoms"].columns["x"]), PRECISION)
    return f


class TrajectoryWorkload(Workload):
    name = "trajectory"
    record = "t.mrec"
    frames = TRAJ_FRAMES  # after the last close(): the run's status is "succeeded"

    def run(self, root: Path, rec: Recorder) -> None:
        path = root / self.record

        def append(w: mr.MrecWriter, i: int) -> None:
            rec.mark("append", i + 1)
            w.append(traj_frame(i), step=traj_step(i), time=traj_time(i))

        w = mr.MrecWriter(path, traj_schema(), flush_every=3, fileops=rec)
        rec.mark("durable", 0)
        for i in range(7):
            append(w, i)
        w.flush()
        rec.mark("durable", 7)
        for i in range(7, 12):
            append(w, i)
        w.close()
        rec.mark("durable", 12)
        w = mr.MrecWriter.open(path, flush_every=2, fileops=rec)
        for i in range(12, 17):
            append(w, i)
        w.flush()
        rec.mark("durable", 17)
        for i in range(17, TRAJ_FRAMES):
            append(w, i)
        w.close()
        rec.mark("durable", TRAJ_FRAMES)

    @staticmethod
    def _frames(path: Path, durable: Optional[int], upper: int) -> Tuple[Verdict, int]:
        """Open and compare; (verdict, nstep)."""
        try:
            reader = mr.MrecReader(path)
        except Exception as exc:
            if durable is None and isinstance(exc, MolrecError):
                return None, -1  # nothing was promised yet
            return symptom_of("unreadable", exc), -1
        with reader:
            n = len(reader)
            if durable is not None and n < durable:
                return ("durable frames lost", f"nstep {n} < {durable} (the last durable commit)"), n
            if n > upper:
                return ("phantom frames", f"nstep {n} > {upper} frames appended"), n
            try:
                if reader.step != [traj_step(i) for i in range(n)] or \
                        reader.time != ([traj_time(i) for i in range(n)] if n else None):
                    return ("silent wrong frames", f"step/time differ: {reader.step} {reader.time}"), n
                for i in range(n):
                    if not same_frame(reader[i], traj_expected(i)):
                        return ("silent wrong frames", f"frame {i} of {n} differs from what was appended"), n
                try:
                    reader[n]
                    return ("phantom frames", f"frame {n} readable past nstep"), n
                except IndexError:
                    pass
            except Exception as exc:
                return symptom_of("frame unreadable", exc), n
        return None, n

    @staticmethod
    def _after_creation_started(root: Path, path: Path) -> Verdict:
        """Before creation returned nothing is promised, but recovery and reopening may
        only fail with the library's own errors."""
        for attempt in (lambda: recover(path), lambda: mr.MrecWriter.open(path).close()):
            try:
                attempt()
            except MolrecError:
                pass
            except Exception as exc:
                return symptom_of("recovery failed", exc)
        return None

    def check(self, root: Path, t: int, marks: List[Tuple[int, str, Any]], deep: bool) -> Verdict:
        path = root / self.record
        durable = last_mark(marks, "durable", t)
        upper = count_marks(marks, "append", t)
        verdict, n = self._frames(path, durable, upper)
        if verdict is not None or n < 0:
            return verdict
        if durable is None:  # the record was still being created: only the reader is judged
            return self._after_creation_started(root, path)
        try:  # the run's status document (issue 12): always readable, "succeeded" once close() returned
            state = (live.read_status(mr.zarr.open_group(path)) or {}).get("state")
        except Exception as exc:
            return symptom_of("status unreadable", exc)
        if durable == self.frames and state != "succeeded":
            return "status lost", f"state {state!r} after close() returned"
        # recovery twice gives identical bytes, and reads the same frames
        repaired = root.parent / (root.name + "-repaired")
        shutil.copytree(root, repaired, symlinks=True)
        try:
            try:
                recover(repaired / self.record)
                first = snapshot(str(repaired))
                recover(repaired / self.record)
            except Exception as exc:
                return symptom_of("recovery failed", exc)
            if tree_digest(snapshot(str(repaired))) != tree_digest(first):
                return "recovery run twice changes bytes", "the second recovery changed the record"
            verdict, m = self._frames(repaired / self.record, durable, upper)
            if verdict is not None:
                return f"after recovery: {verdict[0]}", verdict[1]
            if m != n:
                return "recovery changes nstep", f"reader {n}, after recovery {m}"
            if deep:
                verdict = zarr_python_reads(repaired / self.record)
                if verdict is not None:
                    return verdict
        finally:
            shutil.rmtree(repaired, ignore_errors=True)
        # a reopening writer continues, and what it appends reads back
        try:
            w = mr.MrecWriter.open(path, flush_every=100)
            if w.committed != n:
                return "reopen disagrees with the reader", f"writer at {w.committed}, reader {n}"
            for i in range(n, n + 2):
                w.append(traj_frame(i), step=traj_step(i), time=traj_time(i))
            w.close()
        except Exception as exc:
            return symptom_of("reopen failed", exc)
        verdict, m = self._frames(path, n + 2, n + 2)
        if verdict is not None:
            return f"after reopen and append: {verdict[0]}", verdict[1]
        return None


class TrajectoryReopenWorkload(TrajectoryWorkload):
    """``MrecWriter.open`` of a record written with the layout before issue 23 (shards end
    anywhere; their first chunks share the index page's sector), then appends, a durable
    flush and close: the reopening writer must align the durable tails without writing
    into their sectors."""

    name = "trajectory-reopen"
    frames = 14

    def setup(self, root: Path) -> None:
        import molrec_raw.zarr.codecs.sharding as sharding

        saved, sharding.SECTOR_ALIGN = sharding.SECTOR_ALIGN, 1  # the layout before issue 23
        try:
            w = mr.MrecWriter(root / self.record, traj_schema(), flush_every=3)
            for i in range(7):
                w.append(traj_frame(i), step=traj_step(i), time=traj_time(i))
            w.close()
        finally:
            sharding.SECTOR_ALIGN = saved

    def run(self, root: Path, rec: Recorder) -> None:
        for i in range(7):  # appended and closed by setup: durable before the log starts
            rec.mark("append", i + 1)
        rec.mark("durable", 7)
        w = mr.MrecWriter.open(root / self.record, flush_every=2, fileops=rec)
        for i in range(7, 12):
            rec.mark("append", i + 1)
            w.append(traj_frame(i), step=traj_step(i), time=traj_time(i))
        w.flush()
        rec.mark("durable", 12)
        for i in range(12, self.frames):
            rec.mark("append", i + 1)
            w.append(traj_frame(i), step=traj_step(i), time=traj_time(i))
        w.close()
        rec.mark("durable", self.frames)


# metrics ---------------------------------------------------------------------------------------
def damaged_tail(path: Path) -> bool:
    """The record's WAL holds, past its watermark, a complete line that is not a well-formed
    event (what a torn sector leaves without powersafe overwrite)."""
    from molrec_raw.record.metrics import dense
    from molrec_raw.record.metrics.wal import complete_part, parse_wal

    try:
        group = mr.zarr.open_group(path / "metrics", mode="r")
        catalog = dense.read_catalog(group.attrs.asdict(), node=group.name)
    except MolrecError:
        return False
    floor = catalog.wal[1] if catalog.wal is not None else 0
    wal = path / "metrics" / dense.WAL_NAME
    data = wal.read_bytes()[floor:] if wal.exists() else b""
    return bool(parse_wal(complete_part(data), source=str(wal), lenient=True).skipped)


def metric_value(key: str, step: int) -> float:
    return float(step) if key == "a" else -float(step) - 0.5


class MetricsWorkload(Workload):
    name = "metrics"

    def setup(self, root: Path) -> None:
        mr.write_mrec_frame(root / self.record, mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(2)})}))

    def run(self, root: Path, rec: Recorder) -> None:
        path = root / self.record
        step = 0

        def log(m: mr.MetricsWriter, count: int, *, next_second: bool = False) -> None:
            nonlocal step
            for j in range(count):
                if next_second and j == count - 1:  # the buffer reaches the WAL when a new second starts
                    time.sleep(1.0 - time.time() % 1.0 + 0.01)
                key = "a" if step % 2 == 0 else "b"
                rec.mark("log", step + 1)
                m.log(key, metric_value(key, step), step=step)
                step += 1

        m = mr.MetricsWriter(path, fileops=rec)
        log(m, 6, next_second=True)  # an automatic WAL append
        log(m, 3)
        m.flush()  # WAL fsynced, then densified
        rec.mark("durable", step)
        log(m, 5, next_second=True)
        log(m, 2)
        m.flush()
        rec.mark("durable", step)
        log(m, 4, next_second=True)
        m.close()
        rec.mark("durable", step)
        m = mr.MetricsWriter(path, fileops=rec)  # reopen
        log(m, 3, next_second=True)
        m.close()
        rec.mark("durable", step)

    def check(self, root: Path, t: int, marks: List[Tuple[int, str, Any]], deep: bool) -> Verdict:
        path = root / self.record
        durable = last_mark(marks, "durable", t) or 0
        upper = count_marks(marks, "log", t)
        verdict = self._events(path, durable, upper)
        note: Verdict = None
        if verdict is not None and damaged_tail(path):
            # a complete line past the watermark that is no event: readers and writers refuse it
            # (README decision 9); past the watermark nothing was durable, and repair cuts it
            try:
                mr.repair_mrec(path)
            except Exception as exc:
                return symptom_of("recovery failed", exc)
            verdict = self._events(path, durable, upper)
            if verdict is not None:
                return f"after repair: {verdict[0]}", verdict[1]
            note = (NOTE + "the reader refused a damaged tail past the watermark; repair cut it",
                    "every durable event read back after repair")
        if verdict is not None:
            return verdict
        try:
            with mr.MetricsWriter(path) as m:
                m.log("a", 1e6, step=10 ** 6)
            got = mr.read_metrics(path)
        except Exception as exc:
            return symptom_of("reopen failed", exc)
        if int(got["a"].steps[-1]) != 10 ** 6:
            return "reopen failed", "the event logged after reopening is not read back"
        return self._events(path, durable, upper + 1, extra=True) or note

    @staticmethod
    def _events(path: Path, durable: int, upper: int, extra: bool = False) -> Verdict:
        try:
            series = mr.read_metrics(path)
        except Exception as exc:
            return symptom_of("metrics unreadable", exc)
        seen = set()
        for key, s in series.items():
            steps = [] if s.steps is None else [int(v) for v in s.steps]
            if len(set(steps)) != len(steps):
                return "an event read twice", f"{key}: steps {steps}"
            for step, value in zip(steps, np.asarray(s.values).tolist()):
                if extra and step == 10 ** 6:
                    continue
                if step >= upper or key != ("a" if step % 2 == 0 else "b") or value != metric_value(key, step):
                    return "a wrong event", f"{key} step {step} value {value}"
                seen.add(step)
        lost = [step for step in range(durable) if step not in seen]
        if lost:
            return "durable events lost", f"steps {lost} were logged before the last durable flush"
        return None


# write_mrec_frame over an existing record ------------------------------------------------------
def door_frame(version: int) -> mr.Frame:
    rng = np.random.default_rng(version)
    atoms = mr.Block({"x": rng.normal(size=40), "element": np.array(["O", "H"] * 20, dtype=object)})
    return mr.Frame({"title": f"version {version}"}, {"atoms": atoms}, mr.Box(np.eye(3) * (5.0 + version)))


class DoorsWorkload(Workload):
    name = "doors"

    def setup(self, root: Path) -> None:
        mr.write_mrec_frame(root / self.record, door_frame(1))

    def run(self, root: Path, rec: Recorder) -> None:
        mr.write_mrec_frame(root / self.record, door_frame(2), fileops=rec, overwrite=True)
        rec.mark("durable", 2)

    def check(self, root: Path, t: int, marks: List[Tuple[int, str, Any]], deep: bool) -> Verdict:
        durable = last_mark(marks, "durable", t)
        try:
            frame = mr.read_mrec_frame(root / self.record)
        except Exception as exc:
            return symptom_of("the record is gone or unreadable", exc)
        if same_frame(frame, door_frame(2)):
            return None
        if same_frame(frame, door_frame(1)):
            if durable == 2:
                return "the durable new record was lost", "the old record is back after write_mrec_frame returned"
            return None
        return "a mix of the old and the new record", "the frame matches neither version"


# pack_mrec_zip ------------------------------------------------------------------------------------
class PackWorkload(Workload):
    name = "pack"

    def setup(self, root: Path) -> None:
        frames = [traj_frame(i) for i in range(6)]
        mr.write_mrec_trajectory(root / self.record, frames, steps=[traj_step(i) for i in range(6)],
                                 times=[traj_time(i) for i in range(6)])

    def run(self, root: Path, rec: Recorder) -> None:
        mr.pack_mrec_zip(root / self.record, remove_source=True, fileops=rec)
        rec.mark("durable", 1)

    @staticmethod
    def _reads(path: Path) -> Optional[str]:
        try:
            with mr.MrecReader(path) as r:
                if len(r) != 6 or r.step != [traj_step(i) for i in range(6)]:
                    return f"{len(r)} frames, steps {r.step}"
                for i in range(6):  # written without a declared precision: stored as given
                    if not same_frame(r[i], traj_frame(i)):
                        return f"frame {i} differs"
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    def check(self, root: Path, t: int, marks: List[Tuple[int, str, Any]], deep: bool) -> Verdict:
        directory = root / self.record
        archive = root / (self.record + ".zip")
        zip_problem = self._reads(archive) if archive.exists() else "absent"
        if archive.exists() and zip_problem is not None:
            return "a broken zip under its final name", zip_problem
        if zip_problem is None:
            return None
        dir_problem = self._reads(directory)
        if dir_problem is not None:
            return "the record is lost (no zip, directory unreadable)", dir_problem
        if last_mark(marks, "durable", t) == 1:
            return "the packed zip was lost after pack returned", "no zip"
        return None


class DoorsRenamesWorkload(DoorsWorkload):
    """``write_mrec_frame`` over a record where the file system refuses the atomic exchange:
    the two-rename fallback (issue 23 item 5).  Every state must read as the old record or
    the new one — the reader finds an interrupted swap by the names it left — and the next
    writer completes or undoes the swap from those names."""

    name = "doors-renames"
    exchange = False

    def check(self, root: Path, t: int, marks: List[Tuple[int, str, Any]], deep: bool) -> Verdict:
        """The old record or the new one (read through the leftover names), then the next
        writer settles the swap: its record reads back, and no retired record is left."""
        verdict = super().check(root, t, marks, deep)
        if verdict is not None:
            return verdict
        try:  # which version a reader sees before anything is settled
            before = 2 if same_frame(mr.read_mrec_frame(root / self.record), door_frame(2)) else 1
            # the next writer settles the swap first (and replaces the record: it asks to)
            mr.write_mrec_frame(root / self.record, door_frame(3), overwrite=True)
            after = mr.read_mrec_frame(root / self.record)
        except Exception as exc:
            return symptom_of("the next writer failed", exc)
        if not same_frame(after, door_frame(3)):
            return "the next writer's record is not read back", f"after a crash that left version {before}"
        left = sorted(p.name for p in root.iterdir() if p.name != self.record and ".molrec-" in p.name
                      and not p.name.startswith(f".{self.record}.molrec-new-"))
        if left:
            return "the interrupted swap left names behind", ", ".join(left)
        return None


WORKLOADS: Dict[str, Callable[[], Workload]] = {
    "trajectory": TrajectoryWorkload, "trajectory-reopen": TrajectoryReopenWorkload, "metrics": MetricsWorkload,
    "doors": DoorsWorkload, "doors-renames": DoorsRenamesWorkload, "pack": PackWorkload,
}


@dataclass
class Recorded:
    workload: Workload
    model: CrashModel
    marks: List[Tuple[int, str, Any]]


def record(workload: Workload, work: Path, device: Device = PSOW_512) -> Recorded:
    """Run ``workload`` once through a recorder; prove the log complete (replay == disk)."""
    root = work / workload.name
    root.mkdir(parents=True)
    workload.setup(root)
    initial = snapshot(str(root))
    rec = Recorder(str(root), exchange=workload.exchange)
    workload.run(root, rec)
    model = CrashModel(initial, rec.log, device)
    check_replay(model, str(root))
    return Recorded(workload, model, list(rec.marks))


def zarr_python_available() -> bool:
    """zarr-python (the interop reader of the deep checks) imports here (it needs 3.11+)."""
    try:
        import zarr  # noqa: F401
    except ImportError:
        return False
    return True


def make_checker(recorded: Recorded, scratch: str, deep_every: int) -> Callable[[Tree, State], Verdict]:
    """``check(tree, state)``: materialize the tree and run the workload's assertions; one
    distinct tree in ``deep_every`` (chosen by its digest, so the same ones in any order and
    any process) also gets the zarr-python read."""
    counter = [0]

    def check(tree: Tree, state: State) -> Verdict:
        counter[0] += 1
        root = Path(scratch) / f"{recorded.workload.name}-{os.getpid()}-{counter[0]}"
        deep = deep_every > 0 and int(tree_digest(tree), 16) % deep_every == 0
        materialize(tree, str(root))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return recorded.workload.check(root, state.t, recorded.marks, deep=deep)
        except Exception as exc:  # a checker crash is reported, never hidden
            return "checker crashed", f"{type(exc).__name__}: {exc}"
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return check


def sample_states(states: List[State], wanted: int, rng: Any) -> List[State]:
    """``wanted`` of ``states``: an even share per state class (a class smaller than its
    share gives all of its states, the rest go to the others), drawn with ``rng``."""
    if len(states) <= wanted:
        return list(states)
    by_kind: Dict[str, List[State]] = {}
    for st in states:
        by_kind.setdefault(st.kind, []).append(st)
    chosen: List[State] = []
    left = wanted
    for n, kind in enumerate(sorted(by_kind, key=lambda k: (len(by_kind[k]), k))):
        share = min(len(by_kind[kind]), left // (len(by_kind) - n))
        chosen += rng.sample(by_kind[kind], share)
        left -= share
    return chosen


def check_states(recorded: Recorded, states: List[State], jobs: int = 1) -> Any:
    """Check ``states`` of a recorded workload (no zarr-python pass) in a scratch directory
    removed afterwards; returns the ``Outcome``."""
    from powercut_sim import Outcome, run_states

    outcome = Outcome(ops=len(recorded.model.ops))
    scratch = scratch_root()
    try:
        run_states(recorded.model, states, make_checker(recorded, scratch, 0), outcome, jobs=jobs)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return outcome


def campaign(names: List[str], seed: int, work: Path, *, device: Device = PSOW_512,
             budget: Optional[Dict[str, int]] = None, random_states: int = 0, deep_every: int = 25, jobs: int = 1,
             progress: Optional[Callable[[str, int, int], None]] = None) -> Dict[str, Any]:
    """Record each workload once on ``device``, enumerate every state of its systematic
    classes; with a ``budget`` (states per workload; None: all) check an even share per class
    of them (``sample_states``), else all of them, plus ``random_states`` seeded random ones.
    Returns ``{name: Outcome}``."""
    import random

    from powercut_sim import Outcome, enumerate_states, random_sample, run_states

    results: Dict[str, Any] = {}
    scratch = scratch_root()
    try:
        for name in names:
            recorded = record(WORKLOADS[name](), work, device)
            rng = random.Random(seed * 7919 + len(name))
            states = enumerate_states(recorded.model, seed=seed)
            if budget is not None and budget.get(name) is not None:
                states = sample_states(states, budget[name], rng)
            states += random_sample(recorded.model, rng, random_states)
            outcome = Outcome(ops=len(recorded.model.ops))
            checker = make_checker(recorded, scratch, deep_every if zarr_python_available() else 0)
            run_states(recorded.model, states, checker, outcome, jobs=jobs,
                       progress=None if progress is None else (lambda done, total, name=name: progress(name, done, total)))
            results[name] = outcome
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return results
