"""A writer is poisoned by an I/O error (issue 23 item 2; spec-notes/safety.md "Poisoned writers").

Faults are injected into real calls through the project's I/O seam (``zarr/fileops.py``:
``FaultInjector`` fails the k-th call of a kind) and, once, into a real process with
``strace -e inject=``.  The first failure is raised naming the operation and the path; every
later call raises an error naming it; nothing more reaches the disk (fsync least of all);
``close()`` releases the lock without writing; a call that raised left nothing to account for;
``MrecWriter.open`` recovers from the disk.
"""
from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

import molrec_raw as mr
from molrec_raw.errors import IOFailureError, MolrecError, PoisonedWriterError, WriterLockedError
from molrec_raw.record.locking import LOCK_SUFFIX
from molrec_raw.zarr.fileops import FaultInjector

from safety_helpers import HERE, frame, frames_of, schema

FRAMES = 10
MUTATIONS = ("open", "write", "pwrite", "truncate", "fsync", "rename", "exchange", "unlink", "mkdir", "rmdir")
_KIND_OF_OPERATION = {"fsync_file": "fsync", "fsync_dir": "fsync", "replace": "rename", "makedirs": "mkdir"}


def _mutations(ops: FaultInjector) -> Dict[str, int]:
    return {kind: ops.calls.get(kind, 0) for kind in MUTATIONS}


def _trajectory_run(path: Path, ops: FaultInjector) -> Tuple[Optional[mr.MrecWriter], int, Optional[BaseException]]:
    """Create a writer through ``ops``, append FRAMES frames (a commit every 3, a durable flush
    after frame 5), close.  Returns the writer, the frames whose append returned, and the
    first error raised (None: it all worked)."""
    try:
        w = mr.MrecWriter(path, schema(), flush_every=3, fileops=ops)
    except MolrecError as exc:
        return None, 0, exc
    done = 0
    try:
        for i in range(FRAMES):
            w.append(frame(i))
            done += 1
            if i == 5:
                w.flush()
        w.close()
    except MolrecError as exc:
        return w, done, exc
    return w, done, None


def _clean_counts(tmp: Path) -> Dict[str, int]:
    ops = FaultInjector()
    _, done, error = _trajectory_run(tmp / "clean.mrec", ops)
    assert error is None and done == FRAMES
    return _mutations(ops)


def _cases(tmp: Path) -> List[Tuple[str, int, int]]:
    """Every kind the workload makes, at up to 6 positions spread over its calls (the first,
    the last, and between); EIO and ENOSPC alternate."""
    cases = []
    for kind, n in _clean_counts(tmp).items():
        if n == 0:
            continue
        picks = sorted({1, n, *range(1, n + 1, max(1, n // 4))})[:6]
        cases += [(kind, k, errno.EIO if j % 2 == 0 else errno.ENOSPC) for j, k in enumerate(picks)]
    return cases


def _check_poisoned(w: mr.MrecWriter, error: BaseException, ops: FaultInjector, kind: str, code: int) -> None:
    first = error.first if isinstance(error, PoisonedWriterError) else error
    assert isinstance(first, IOFailureError), repr(error)
    assert _KIND_OF_OPERATION.get(first.operation, first.operation) == kind and first.errno == code, first
    assert first.path and first.path in str(first) and errno.errorcode[code] in str(first)
    assert w.poisoned is first
    seen = _mutations(ops)
    for call in (lambda: w.append(frame(99)), w.flush, w.close):  # every later call names the first error
        with pytest.raises(PoisonedWriterError) as refused:
            call()
        assert refused.value.first is first and str(first) in str(refused.value)
    assert _mutations(ops) == seen, "a poisoned writer touched the disk (or retried an fsync)"


def test_safety_poison_every_fault_of_a_trajectory_writer(tmp_path: Path) -> None:
    """The bounded sweep: each kind of mutation the workload makes, failed at up to six of its
    calls.  Each time: the writer raised a MolrecError (an IOFailureError naming the operation,
    the path and the errno, or — when the failing call was one the store's code tolerates — the
    refusal of the next call naming it); it refuses everything after; close() releases the lock
    without writing; MrecWriter.open recovers a record whose frames are exactly those appended,
    up to what it committed; the caller appends the rest from ``committed`` (nothing twice)."""
    cases = _cases(tmp_path)
    assert len(cases) >= 20
    kinds = set()
    for n, (kind, k, code) in enumerate(cases):
        path = tmp_path / f"c{n}.mrec"
        ops = FaultInjector().fail(kind, k, code)
        w, done, error = _trajectory_run(path, ops)
        assert ops.injected, f"{kind}#{k}: the fault was never reached"
        assert error is not None, f"{kind}#{k}: a failed {kind} went unnoticed"
        kinds.add(kind)
        if w is None:  # failed while creating: nothing to recover beyond what reached the disk
            assert isinstance(error, IOFailureError) and _KIND_OF_OPERATION.get(error.operation, error.operation) == kind
        else:
            _check_poisoned(w, error, ops, kind, code)  # ... and closes it
        assert not [p for p in os.listdir(tmp_path) if p.startswith(f".c{n}.") and p.endswith(LOCK_SUFFIX)], \
            f"{kind}#{k}: the lock outlived the writer"
        if w is None:
            continue
        with mr.MrecWriter.open(path) as again:  # recovery reads the disk, never the poisoned memory
            committed = again.committed
            assert committed <= done
            for i in range(committed, FRAMES):
                again.append(frame(i))
        assert frames_of(path) == [float(i) for i in range(FRAMES)], f"{kind}#{k}"
        assert mr.validate(path) == []
    assert kinds >= {"open", "pwrite", "fsync", "rename", "mkdir"}, kinds


def test_safety_poison_a_raising_append_did_not_queue_its_frame(tmp_path: Path) -> None:
    """The append whose automatic commit failed (ENOSPC writing the first shard) raised; after
    recovery its frame is not on disk, and the caller who re-appends from ``committed`` writes
    every frame exactly once."""
    path = tmp_path / "r.mrec"
    probe = FaultInjector()
    w = mr.MrecWriter(path, schema(), flush_every=2, fileops=probe)
    before = probe.calls.get("write", 0)
    w.abort()
    shutil.rmtree(path)
    ops = FaultInjector().fail("write", before + 1, errno.ENOSPC)
    w = mr.MrecWriter(path, schema(), flush_every=2, fileops=ops)
    w.append(frame(0))
    with pytest.raises(IOFailureError, match="No space left on device") as info:
        w.append(frame(1))  # the commit of frames 0 and 1
    assert info.value.operation == "write" and "trajectory" in info.value.path
    with pytest.raises(PoisonedWriterError):
        w.append(frame(1))  # a retry is refused: it would otherwise write frame 1 twice
    with pytest.raises(PoisonedWriterError):
        w.close()  # releases the lock, writes nothing
    with mr.MrecWriter.open(path) as again:
        assert again.committed == 0
        for i in range(again.committed, 4):
            again.append(frame(i))
    assert frames_of(path) == [0.0, 1.0, 2.0, 3.0]


def test_safety_poison_fsync_is_never_retried(tmp_path: Path) -> None:
    """A failed fsync (Linux may have dropped the pages whose write-back failed: a later fsync
    that succeeds proves nothing) poisons the writer: no later call fsyncs anything, and close()
    releases the lock without writing, raising the refusal."""
    path = tmp_path / "r.mrec"
    probe = FaultInjector()
    mr.MrecWriter(path, schema(), flush_every=100, fileops=probe).abort()
    created = probe.calls["fsync"]
    shutil.rmtree(path)
    ops = FaultInjector().fail("fsync", created + 1, errno.EIO)
    w = mr.MrecWriter(path, schema(), flush_every=100, fileops=ops)
    w.append(frame(0))
    with pytest.raises(IOFailureError, match=r"fsync.*Input/output error \(EIO\)"):
        w.flush()
    fsyncs = ops.calls["fsync"]
    with pytest.raises(PoisonedWriterError, match="fsync"):
        w.flush()
    with pytest.raises(PoisonedWriterError):
        w.close()
    assert ops.calls["fsync"] == fsyncs
    with pytest.raises(PoisonedWriterError):
        w.close()  # every time: its data did not all reach the disk
    w.abort()  # never raises
    with mr.MrecWriter.open(path) as again:  # the lock was released ...
        with pytest.raises(WriterLockedError):  # ... and is held again by the new writer
            mr.MrecWriter.open(path)
        assert again.committed == 0


def test_safety_poison_abort_writes_nothing_and_releases(tmp_path: Path) -> None:
    path = tmp_path / "r.mrec"
    ops = FaultInjector()
    w = mr.MrecWriter(path, schema(), flush_every=100, fileops=ops)
    w.append(frame(0))
    seen = _mutations(ops)
    w.abort()
    w.abort()
    assert _mutations(ops) == seen
    with mr.MrecWriter.open(path) as again:
        assert again.committed == 0


def _metrics_run(path: Path, ops: FaultInjector, host: bool) -> Tuple[Optional[mr.MetricsWriter], List[int], int,
                                                                      Optional[BaseException]]:
    """Log steps 0..29 (a durable flush every 10), close.  Returns the writer, the steps whose
    log returned, the steps made durable by a flush that returned, and the first error."""
    logged: List[int] = []
    durable = 0
    try:
        m = mr.MetricsWriter(path, fileops=ops)
    except MolrecError as exc:
        return None, logged, durable, exc
    try:
        for step in range(30):
            m.log("loss", 1.0 / (step + 1), step=step, wall_time=1.0e9 + step)
            logged.append(step)
            if step % 10 == 9:
                m.flush()
                durable = len(logged)
        m.close()
        durable = len(logged)
    except MolrecError as exc:
        return m, logged, durable, exc
    return m, logged, durable, None


@pytest.mark.parametrize("host", [False, True], ids=["record", "host-wal"])
def test_safety_poison_every_fault_of_a_metrics_writer(tmp_path: Path, host: bool) -> None:
    """The same for MetricsWriter (a record's WAL and dense series, or a host WAL): each kind
    of mutation failed at up to six of its calls; the writer raised a MolrecError naming the
    first failure and refuses every later log/flush/close; the next writer recovers, and
    readers see every event of the last flush that returned, in order, nothing invented."""
    def target(name: str) -> Path:
        if host:
            (tmp_path / name).mkdir()
            return tmp_path / name / "artifacts" / "metrics.mlp.jsonl"
        record = tmp_path / f"{name}.mrec"
        mr.write_mrec_frame(record, frame(0), durable=False)
        return record

    clean = FaultInjector()
    assert _metrics_run(target("clean"), clean, host)[3] is None
    cases = [(kind, k) for kind, n in _mutations(clean).items() if n
             for k in sorted({1, n, *range(1, n + 1, max(1, n // 3))})[:5]]
    assert len(cases) >= 8
    for n, (kind, k) in enumerate(cases):
        path = target(f"m{n}")
        ops = FaultInjector().fail(kind, k, errno.EIO)
        m, logged, durable, error = _metrics_run(path, ops, host)
        assert ops.injected and error is not None, f"{kind}#{k}"
        if m is not None:
            first = m.poisoned
            assert first is not None, f"{kind}#{k}: {error!r}"
            assert isinstance(first, IOFailureError) and str(first) in str(error) or error is first
            seen = _mutations(ops)
            for call in (lambda: m.log("loss", 0.0, step=99), m.flush, m.close):
                with pytest.raises(PoisonedWriterError):
                    call()
            assert _mutations(ops) == seen
        mr.MetricsWriter(path).close()  # the next writer cuts what the failure tore, and densifies
        got = mr.read_metrics(path).get("loss")
        steps = [] if got is None else [int(s) for s in got.steps]
        assert steps == logged[:len(steps)] and len(steps) >= durable, f"{kind}#{k}: {steps} {logged} {durable}"


def _strace_runs() -> bool:
    if shutil.which("strace") is None:
        return False
    return subprocess.run(["strace", "-f", "-qq", "-e", "trace=none", "true"], capture_output=True).returncode == 0


_CHILD = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, {here!r})
    import molrec_raw as mr
    from molrec_raw.errors import IOFailureError, PoisonedWriterError
    from safety_helpers import frame, schema
    w = mr.MrecWriter({path!r}, schema(), flush_every=100)
    os.getppid()  # a mark in the strace log: the writer exists
    appended = 0
    try:
        for i in range(8):
            w.append(frame(i))
            appended += 1
            w.flush()
            os.getppid()  # a mark: flush i + 1 returned
    except IOFailureError as exc:
        print("first", exc.operation, exc.errno, appended, flush=True)
    try:
        w.append(frame(50))
    except PoisonedWriterError as exc:
        print("refused", "fsync" in str(exc), flush=True)
    try:
        w.close()
    except PoisonedWriterError:
        print("closed", flush=True)
""")


@pytest.mark.skipif(not _strace_runs(), reason="strace is not installed or cannot trace here (ptrace refused)")
def test_safety_poison_strace_injected_fsync_failure_in_a_real_process(tmp_path: Path) -> None:
    """``strace -e inject=fsync:error=EIO:when=K`` fails the third durable flush's fsync of a
    real writer process: it raises IOFailureError(fsync, EIO), refuses the next append naming
    it, releases on close; afterwards MrecWriter.open recovers the frames of the flushes that
    returned."""
    path = tmp_path / "r.mrec"
    code = _CHILD.format(here=str(HERE), path=str(path))
    log = tmp_path / "trace.log"
    probe = subprocess.run(["strace", "-f", "-qq", "-o", str(log), "-e", "trace=fsync,getppid",
                            sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert probe.returncode == 0, probe.stderr[-2000:]
    lines = log.read_text().splitlines()
    marks = [i for i, line in enumerate(lines) if "getppid" in line]
    assert len(marks) == 9, marks
    before_third = sum("fsync(" in line for line in lines[:marks[2]])  # creation and two flushes
    assert before_third > sum("fsync(" in line for line in lines[:marks[1]]) > 0
    shutil.rmtree(path)
    when = before_third + 1  # the first fsync of the third flush
    run = subprocess.run(["strace", "-f", "-qq", "-o", os.devnull, "-e", "trace=fsync",
                          "-e", f"inject=fsync:error=EIO:when={when}", sys.executable, "-c", code],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    out = run.stdout.split("\n")
    assert out[0] in (f"first {verb} {errno.EIO} 3" for verb in ("fsync", "fsync_file", "fsync_dir")), run.stdout
    assert out[1] == "refused True" and out[2] == "closed", run.stdout
    assert not [p for p in os.listdir(tmp_path) if p.endswith(LOCK_SUFFIX)]
    with mr.MrecWriter.open(path) as again:
        assert 2 <= again.committed <= 3
    assert frames_of(path) == [float(i) for i in range(len(frames_of(path)))]
    assert mr.validate(path) == []
