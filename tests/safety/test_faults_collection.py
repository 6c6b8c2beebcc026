"""The collection writer obeys issue 23 items 1 and 2 (spec-notes/safety.md): it holds the
exclusive writer lock of its ``*.mrec.lmdb`` for its whole life, taken before anything is read
(``safety#lock``); its first I/O failure — through the seam, or LMDB's own — poisons it
(``safety#poison``); an existing collection is replaced only when asked
(``safety#overwrite``)."""
from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import molrec_raw as mr
from molrec_raw.errors import IOFailureError, PoisonedWriterError, RecordExistsError, StoreError, WriterLockedError
from molrec_raw.record.locking import LOCK_SUFFIX, lock_writer
from molrec_raw.zarr.fileops import FaultInjector

from fault_campaign import HERE, N_RECORDS, UNITS, collection_record, collection_version, write_collection

pytest.importorskip("lmdb", reason="collections need the [lmdb] extra")


def _locks(directory: Path) -> list:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(LOCK_SUFFIX))


def test_safety_lock_collection_writer_refuses_a_second_writer_of_another_process(tmp_path: Path) -> None:
    """A CollectionWriter in a child process holds the file: a second one here is refused
    before it reads or changes anything (WriterLockedError naming the holder's pid), even
    with overwrite=True; once the child closed, the next writer replaces the collection."""
    path = tmp_path / "c.mrec.lmdb"
    write_collection(path, 1)
    before = path.read_bytes()
    code = textwrap.dedent(f"""
        import sys
        import molrec_raw as mr
        w = mr.CollectionWriter({str(path)!r}, units={{"length": "nm"}}, overwrite=True)
        print("ready", flush=True)
        sys.stdin.readline()
        w.abort()
    """)
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        with pytest.raises(WriterLockedError, match=f"CollectionWriter, pid {child.pid}") as info:
            mr.CollectionWriter(path, units=UNITS, overwrite=True)
        assert [h["pid"] for h in info.value.holders] == [child.pid]
    finally:
        child.communicate("go\n", timeout=60)
    assert not path.exists()  # the child's writer replaced it and was aborted: no collection
    write_collection(path, 2)
    assert collection_version(path) == 2 and _locks(tmp_path) == []
    assert before != path.read_bytes()


def test_safety_lock_collection_writer_opt_out(tmp_path: Path) -> None:
    """lock=False: the caller coordinates writers; the writer takes no lock (another holder of
    the lock does not stop it) and leaves no lock file."""
    path = tmp_path / "c.mrec.lmdb"
    with lock_writer(path, writer="someone else"):
        with pytest.raises(WriterLockedError, match="someone else"):
            mr.CollectionWriter(path, units=UNITS)
        w = mr.CollectionWriter(path, units=UNITS, lock=False)
        w.add_record(**collection_record(0))
        w.close()
    assert len(mr.read_collection(path)) == 1 and _locks(tmp_path) == []


def test_safety_overwrite_collection_refused_unless_asked(tmp_path: Path) -> None:
    """An existing collection: RecordExistsError (safety#overwrite) and its bytes untouched;
    overwrite=True replaces it.  A file that is not LMDB, or a directory, at the path is never
    replaced, even when asked."""
    path = tmp_path / "c.mrec.lmdb"
    write_collection(path, 1)
    before = path.read_bytes()
    with pytest.raises(RecordExistsError, match="overwrite=True") as info:
        mr.CollectionWriter(path, units=UNITS)
    assert info.value.rule == "safety#overwrite" and path.read_bytes() == before and _locks(tmp_path) == []
    write_collection(path, 2)  # overwrite=True
    assert collection_version(path) == 2
    other = tmp_path / "notes.mrec.lmdb"
    other.write_bytes(b"my notes, not a collection" * 10)
    with pytest.raises(StoreError, match="not an LMDB collection"):
        mr.CollectionWriter(other, units=UNITS, overwrite=True)
    assert other.read_bytes() == b"my notes, not a collection" * 10
    (tmp_path / "d.mrec.lmdb").mkdir()
    with pytest.raises(StoreError, match="not a collection file"):
        mr.CollectionWriter(tmp_path / "d.mrec.lmdb", units=UNITS, overwrite=True)
    assert _locks(tmp_path) == []


@pytest.mark.parametrize("kind,k", [("open", 1), ("unlink", 1), ("unlink", 2)])
def test_safety_poison_collection_writer_seam_failure(tmp_path: Path, kind: str, k: int) -> None:
    """A failure at the seam while the writer replaces a collection (removing the old file or
    its LMDB lock file, creating the new one) is raised as an IOFailureError naming the
    operation, the path and the errno; nothing stays locked; a new writer works."""
    path = tmp_path / "c.mrec.lmdb"
    write_collection(path, 1)
    ops = FaultInjector().fail(kind, k, errno.EDQUOT)
    with pytest.raises(IOFailureError) as info:
        mr.CollectionWriter(path, units=UNITS, overwrite=True, fileops=ops)
    assert info.value.operation == kind and info.value.errno == errno.EDQUOT and "EDQUOT" in str(info.value)
    assert ops.injected and _locks(tmp_path) == []
    write_collection(path, 2)
    assert collection_version(path) == 2


_FULL_DISK = textwrap.dedent("""
    import resource, signal, sys
    sys.path.insert(0, {here!r})
    from pathlib import Path
    from fault_campaign import Run, write_collection
    from molrec_raw.errors import IOFailureError, PoisonedWriterError
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
    run = Run()
    try:
        write_collection(Path({path!r}), 2, None, run)
        print("finished")
    except IOFailureError as exc:
        print(f"raised|{{exc.operation}}|{{exc.errno}}|{{run.appended}}")
        for call in run.refusals:
            try:
                call()
                print("accepted")
            except PoisonedWriterError as again:
                print("refused", again.first is run.writer.poisoned)
""")


def test_safety_poison_collection_writer_lmdb_file_cannot_grow(tmp_path: Path) -> None:
    """LMDB's own write failing (the file may not grow past a limit: RLIMIT_FSIZE in a child,
    EFBIG, as a full quota would), no strace needed: the writer raises an IOFailureError naming
    LMDB's operation and the errno, every later add_record/close raises PoisonedWriterError
    naming it; the lock is released; no collection is left (readers refuse the file: no meta);
    a new writer writes one."""
    path = tmp_path / "c.mrec.lmdb"
    code = _FULL_DISK.format(here=str(HERE), path=str(path), limit=3 * 4096)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.split("\n")
    verdict, operation, code, added = lines[0].split("|")
    assert (verdict, operation, int(code)) == ("raised", "write transaction", errno.EFBIG), done.stdout
    assert 0 < int(added) < N_RECORDS, done.stdout  # some commits went through before the file was full
    assert lines[1:3] == ["refused True", "refused True"], done.stdout
    assert _locks(tmp_path) == []
    assert collection_version(path) is None
    write_collection(path, 2)
    assert collection_version(path) == 2


def test_safety_poison_collection_writer_close_releases_without_writing(tmp_path: Path) -> None:
    """A poisoned writer's close() raises the refusal every time, writes nothing (its file
    gets no meta: readers refuse it), and releases the lock; a poisoned writer's abort() (what
    a ``with`` block that raised does) removes the unfinished file and never raises."""
    for ending in ("close", "abort"):
        path = tmp_path / f"{ending}.mrec.lmdb"
        w = mr.CollectionWriter(path, units=UNITS)
        w.add_record(**collection_record(0))
        failure = IOFailureError("pretend", operation="write transaction", path=str(path), errno=errno.EIO)
        w._guard.poison(failure)  # what the first failure does (the real seam and LMDB paths: above)
        assert w.poisoned is failure
        with pytest.raises(PoisonedWriterError):
            w.add_record(**collection_record(1))
        if ending == "close":
            for _ in range(2):
                with pytest.raises(PoisonedWriterError) as info:
                    w.close()
                assert info.value.first is failure
            assert path.exists() and collection_version(path) is None
        else:
            w.abort()
            assert not path.exists() and not os.path.exists(f"{path}-lock")
        assert _locks(tmp_path) == []
