"""One writer per record (issue 23 item 1; spec-notes/safety.md "One writer at a time").

Every writer — MrecWriter (create and open), MetricsWriter (record and host WAL), repair, the
whole-record doors, unpack into a path, pack --remove-source — holds an exclusive advisory lock
for its whole life, taken before anything is read or changed; a second writer, in another
process or the same, is refused naming the record and the holder; readers never lock; a lock
dies with its process; where locks cannot be trusted the writer says so.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import molrec_raw as mr
from molrec_raw.errors import LockUnavailableError, MolrecError, StoreError, WriterLockedError
from molrec_raw.record.locking import LOCK_SUFFIX, lock_file_paths, lock_writer, mount_lock_problem
from molrec_raw.zarr import ZipStore

from safety_helpers import (HERE, WRITERS, Held, conflicts, finish, frame, frames_of, in_thread, make_record,
                            schema, start_writer, tree)


def _setup(tmp: Path, holder: str) -> tuple:
    """A fresh record for one holder (without a trajectory when the holder creates one), and
    a packed record for unpack challengers."""
    source = make_record(tmp / "src.mrec")
    archive = mr.pack_mrec_zip(source)
    record = make_record(tmp / "r.mrec", trajectory=holder != "trajectory-create")
    return record, archive


def _challenge(kind: str, record: Path, archive: Path, holder: str, holder_pid: int) -> None:
    """Try a writer of ``kind`` while ``holder`` holds ``record``: refused (naming the record
    and the holder, the record untouched) exactly when the two kinds exclude each other."""
    before = tree(record)
    if conflicts(kind, holder):
        with pytest.raises(WriterLockedError) as info:
            finish(start_writer(kind, record, archive))
        message = str(info.value)
        assert str(record) in message or record.name in message, message
        assert f"pid {holder_pid}" in message and "since" in message, message
        assert [h["pid"] for h in info.value.holders] == [holder_pid], info.value.holders
        assert info.value.holders[0]["host"] == socket.gethostname()
        assert tree(record) == before, f"a refused {kind} changed the record"
    else:  # a trajectory writer and a metrics writer of one record run at once
        try:
            writer = start_writer(kind, record, archive)
        except WriterLockedError:
            raise
        except MolrecError as exc:  # let in, and refused for what it would write (W12: a trajectory exists)
            assert exc.rule == "trajectory#W12", exc
            return
        if isinstance(writer, mr.MetricsWriter):
            writer.log("other", 1.0)
        finish(writer)


@pytest.mark.parametrize("holder", WRITERS)
def test_safety_lock_every_writer_refuses_every_other_across_processes(tmp_path: Path, holder: str) -> None:
    """A writer of each kind held by another process; every kind of writer tried here: the
    ones that exclude it are refused (WriterLockedError naming the record, the pid, the host,
    since when) before they read or change anything; then the holder finishes normally and
    leaves no lock file behind."""
    record, archive = _setup(tmp_path, holder)
    held = Held(holder, record, archive).start()
    try:
        for kind in WRITERS:
            _challenge(kind, record, archive, holder, held.pid)
    finally:
        held.release()
    assert not [p for p in os.listdir(tmp_path) if p.endswith(LOCK_SUFFIX)], os.listdir(tmp_path)
    if holder != "pack-remove-source":
        assert mr.validate(record) == []
        mr.repair_mrec(record)  # every writer is let in again


@pytest.mark.parametrize("holder", ["trajectory-create", "trajectory-open", "metrics"])
def test_safety_lock_a_second_writer_in_the_same_process_is_refused(tmp_path: Path, holder: str) -> None:
    """The same matrix with the holder in this very process (flock locks belong to open files,
    not processes): refused alike."""
    record, archive = _setup(tmp_path, holder)
    writer = start_writer(holder, record)
    try:
        for kind in WRITERS:
            _challenge(kind, record, archive, holder, os.getpid())
    finally:
        finish(writer)
    mr.MrecWriter.open(record).close()  # released at close

@pytest.mark.parametrize("door", ["write_mrec_frame", "write_mrec_trajectory", "unpack", "repair"])
def test_safety_lock_a_door_holds_the_record_while_it_writes(tmp_path: Path, door: str) -> None:
    """A whole-record door running in a thread of this process, paused inside its lock:
    trajectory, metrics and whole-record writers are all refused until it has finished."""
    record, archive = _setup(tmp_path, door)
    release = in_thread(door, record, archive)
    try:
        for kind in ("trajectory-open", "metrics", "write_mrec", "repair"):
            before = tree(record)
            with pytest.raises(WriterLockedError, match="this process"):
                finish(start_writer(kind, record, archive))
            assert tree(record) == before
    finally:
        release()
    finish(start_writer("metrics", record))


def test_safety_lock_dies_with_its_process(tmp_path: Path) -> None:
    """A SIGKILLed writer's lock goes with it (flock, not a pid file): the lock file it left is
    locked again by the next writer at once, which then recovers and continues the record."""
    record = make_record(tmp_path / "r.mrec")
    held = Held("trajectory-open", record).start()
    with pytest.raises(WriterLockedError):
        mr.MrecWriter.open(record)
    held.kill()
    left = lock_file_paths(record, "trajectory")[1]
    assert left is not None and left.exists()  # the killed writer could not remove it ...
    with mr.MrecWriter.open(record) as w:  # ... and it does not matter
        w.append(frame(6))
    assert frames_of(record) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert not left.exists()


def test_safety_lock_single_file_targets(tmp_path: Path) -> None:
    """The primitive serves single-file targets as one call: a host WAL (two host writers of
    one *.mlp.jsonl), a zip being packed, and any file such as a *.mrec.lmdb collection."""
    run = tmp_path / "run"
    run.mkdir()
    host = mr.MetricsWriter.for_host(run)
    with pytest.raises(WriterLockedError, match="metrics.mlp.jsonl"):
        mr.MetricsWriter(run / "artifacts" / "metrics.mlp.jsonl")
    host.close()
    mr.MetricsWriter(run / "artifacts" / "metrics.mlp.jsonl").close()

    lmdb = tmp_path / "data.mrec.lmdb"
    code = textwrap.dedent(f"""
        import sys
        from molrec_raw.record.locking import lock_writer
        with lock_writer({str(lmdb)!r}, writer="collection writer"):
            print("ready", flush=True)
            sys.stdin.readline()
    """)
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        with pytest.raises(WriterLockedError, match=f"collection writer, pid {child.pid}"):
            lock_writer(lmdb, writer="collection writer")
    finally:
        child.communicate("go\n", timeout=60)
    with lock_writer(lmdb, writer="collection writer") as lock:
        assert lock.held
    assert not lmdb.exists()  # only its lock was ever there, and it is gone

    record = make_record(tmp_path / "p.mrec")
    zip_lock = lock_writer(tmp_path / "p.mrec.zip", writer="someone")  # the zip target is being written
    with pytest.raises(WriterLockedError, match="p.mrec.zip"):
        mr.pack_mrec_zip(record)
    zip_lock.release()
    mr.pack_mrec_zip(record)


def test_safety_lock_readers_never_lock(tmp_path: Path) -> None:
    """While a trajectory writer and a metrics writer hold a record, readers read it — the
    trajectory, the whole record, validate, a dry-run repair, a pack without removal — and
    none of them creates or takes a lock (the lock files beside it stay the writers' two)."""
    record = make_record(tmp_path / "r.mrec")
    w = mr.MrecWriter.open(record, flush_every=1)
    m = mr.MetricsWriter(record)
    try:
        w.append(frame(6))
        before = sorted(os.listdir(tmp_path))
        assert sorted(p for p in before if p.endswith(LOCK_SUFFIX)) == [
            ".r.mrec.metrics.molrec-lock", ".r.mrec.molrec-lock", ".r.mrec.trajectory.molrec-lock"]
        assert frames_of(record)[-1] == 6.0
        rec = mr.read_mrec(record)
        assert rec.trajectory is not None
        rec.trajectory.close()
        assert mr.validate(record) == []
        assert mr.repair_mrec(record, dry_run=True).nstep == 7
        archive = mr.pack_mrec_zip(record)
        with ZipStore(archive) as store:
            assert not [k for k in store.list("") if "lock" in k]  # a lock file is never packed
        assert sorted(os.listdir(tmp_path)) == sorted(before + [archive.name])
    finally:
        m.close()
        w.close()
    assert not [p for p in os.listdir(tmp_path) if p.endswith(LOCK_SUFFIX)]


def test_safety_lock_lives_beside_the_record_so_its_bytes_do_not_change(tmp_path: Path) -> None:
    """The lock files sit beside the record, never inside: the record's files while a writer
    holds it are exactly those of the same writes without locks (lock=False), and zarr-python
    (where installed) lists no foreign member."""
    for name, lock in (("locked.mrec", None), ("free.mrec", False)):
        path = tmp_path / name
        w = mr.MrecWriter(path, schema(), flush_every=2, durable=False, lock=lock)
        for i in range(4):
            w.append(frame(i))
        inside = sorted(tree(path))
        assert not [p for p in inside if "lock" in p]
        w.close()
    assert tree(tmp_path / "locked.mrec").keys() == tree(tmp_path / "free.mrec").keys()
    try:
        import zarr
    except ImportError:
        return
    group = zarr.open_group(str(tmp_path / "locked.mrec"), mode="r")
    assert sorted(group.group_keys()) == ["meta", "status", "trajectory"]


def test_safety_lock_a_symlink_to_a_record_shares_its_lock(tmp_path: Path) -> None:
    record = make_record(tmp_path / "real.mrec")
    os.symlink(record, tmp_path / "alias.mrec")
    with mr.MrecWriter.open(tmp_path / "alias.mrec"):
        with pytest.raises(WriterLockedError):
            mr.MrecWriter.open(record)


def test_safety_lock_unlink_race_never_admits_two_writers(tmp_path: Path) -> None:
    """Four processes take and release one record's lock 150 times each as fast as they can
    (the last holder removes the lock file each time, racing with the others' opening it):
    a marker each creates inside and removes before releasing is never found by another."""
    marker = tmp_path / "inside"
    code = textwrap.dedent(f"""
        import os, time
        from molrec_raw.errors import WriterLockedError
        from molrec_raw.record.locking import lock_writer
        got = 0
        while got < 150:
            try:
                lock = lock_writer({str(tmp_path / 'r.mrec')!r}, writer="racer")
            except WriterLockedError:
                continue
            try:
                fd = os.open({str(marker)!r}, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # fails if another is inside
                os.close(fd)
                os.unlink({str(marker)!r})
            finally:
                lock.release()
            got += 1
    """)
    racers = [subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True) for _ in range(4)]
    errors = [proc.communicate(timeout=600)[1] for proc in racers]
    assert [proc.returncode for proc in racers] == [0, 0, 0, 0], errors


def test_safety_lock_opt_out_is_explicit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """lock=False (or MOLREC_RAW_LOCKING=off) takes no lock at all: the caller coordinates its
    writers.  Documented as the user's responsibility; nothing is refused, nothing is left."""
    record = make_record(tmp_path / "r.mrec")
    first = mr.MrecWriter.open(record, lock=False)
    assert not [p for p in os.listdir(tmp_path) if p.endswith(LOCK_SUFFIX)]
    first.close()
    monkeypatch.setenv("MOLREC_RAW_LOCKING", "off")
    with mr.MetricsWriter(record):
        with mr.MetricsWriter(record) as second:  # not refused: the caller said so
            assert second is not None
    assert not [p for p in os.listdir(tmp_path) if p.endswith(LOCK_SUFFIX)]


# -- where locks do not work -------------------------------------------------------------------
_MOUNTINFO = textwrap.dedent("""\
    22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
    40 22 0:40 / /home rw,relatime shared:2 - nfs4 server:/home rw,vers=4.2,local_lock=none,addr=10.0.0.1
    41 22 0:41 / /scratch rw,relatime shared:3 - nfs server:/scratch rw,vers=3,local_lock=flock,addr=10.0.0.1
    42 22 0:42 / /old rw,relatime shared:4 - nfs server:/old rw,vers=3,nolock,addr=10.0.0.1
    43 22 0:43 / /lustre rw shared:5 - lustre mgs@tcp:/fs rw,localflock
    44 41 0:44 / /scratch/fast rw shared:6 - ext4 /dev/sdb1 rw
    45 22 0:45 / /my\\040data rw shared:7 - nfs server:/d rw,local_lock=all
""")


@pytest.mark.parametrize("directory, problem", [
    ("/", None), ("/home/me", None),
    ("/scratch/run", "local_lock=flock"), ("/old", "nolock"), ("/lustre/x", "localflock"),
    ("/scratch/fast/run", None),  # the deepest mount decides
    ("/my data/run", "local_lock=all"),  # mountinfo escapes spaces
])
def test_safety_lock_mounts_whose_locks_are_local_are_named(directory: str, problem: object) -> None:
    found = mount_lock_problem(directory, _MOUNTINFO)
    if problem is None:
        assert found is None
    else:
        assert found is not None and str(problem) in found


def _strace_runs() -> bool:
    if shutil.which("strace") is None:
        return False
    probe = subprocess.run(["strace", "-f", "-qq", "-e", "trace=none", "true"], capture_output=True)
    return probe.returncode == 0


_WRITE = textwrap.dedent("""
    import sys
    sys.path.insert(0, {here!r})
    import molrec_raw as mr
    from safety_helpers import frame, schema
    with mr.MrecWriter({path!r}, schema()) as w:
        w.append(frame(0))
    print("wrote", flush=True)
""")


@pytest.mark.skipif(not _strace_runs(), reason="strace is not installed or cannot trace here (ptrace refused)")
def test_safety_lock_a_file_system_without_locks_is_refused_not_ignored(tmp_path: Path) -> None:
    """flock failing with ENOLCK (NFS without a lock daemon), injected into a real process by
    strace: the writer refuses, says locks do not work and how to opt out, and writes nothing;
    with MOLREC_RAW_LOCKING=off the same process writes."""
    code = _WRITE.format(here=str(HERE), path=str(tmp_path / "r.mrec"))
    argv = ["strace", "-f", "-qq", "-o", os.devnull, "-e", "trace=flock", "-e", "inject=flock:error=ENOLCK",
            sys.executable, "-c", code]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert run.returncode != 0 and "LockUnavailableError" in run.stderr, run.stderr[-2000:]
    assert "advisory locks do not work" in run.stderr and "lock=False" in run.stderr and "MOLREC_RAW_LOCKING" in run.stderr
    assert not (tmp_path / "r.mrec").exists()
    run = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "MOLREC_RAW_LOCKING": "off"})
    assert run.returncode == 0 and "wrote" in run.stdout, run.stderr[-2000:]
    assert frames_of(tmp_path / "r.mrec") == [0.0]


def test_safety_lock_unavailable_error_is_a_store_error() -> None:
    assert issubclass(LockUnavailableError, StoreError) and issubclass(WriterLockedError, StoreError)
