"""One writer at a time: advisory locks beside the path a writer writes (spec-notes/safety.md).

Every writer takes its lock before it reads or changes anything, holds it for its whole life,
and releases it when it closes; readers never lock.  A lock is an ``flock`` on a lock file
*beside* the target, named after it::

    run.mrec                          the record (a directory)
    .run.mrec.molrec-lock             the record's lock
    .run.mrec.trajectory.molrec-lock  the trajectory section's lock (while MrecWriter runs)
    .run.mrec.metrics.molrec-lock     the metrics section's lock (while MetricsWriter runs)

Beside, not inside: the whole-record doors swap a new directory in under the same name, pack
and unpack copy what is inside, other Zarr readers list what is inside — a lock file in the
record would be swapped away, packed, listed and validated.  Beside it, it names the *path*
every writer of the record writes, survives the swap, and nothing inside the record changes
(the stored bytes of a record are the same with or without locks).

Two levels, so that a trajectory writer and a metrics writer of one record run at once (a
simulation logs both) while nothing else does: a *section* writer holds the record's lock
shared and its section's lock exclusive; a *whole-target* writer (the doors replacing a
record, ``repair``, ``unpack`` into a path, ``pack --remove-source``, the collection writer of
a ``*.mrec.lmdb``, a host ``*.mlp.jsonl`` WAL, a ``*.mrec.zip`` being packed) holds the
record's lock exclusive.  A single-file target is locked the same way (``.x.mrec.zip.molrec-lock``)::

    with lock_writer("data.mrec.lmdb", writer="collection writer"):   # the whole file
        ...

A lock dies with its descriptor, so with its process (``flock``; never a pid file that outlives
a kill).  Its last holder removes the lock file; one a killed writer left is locked again by
the next writer (after locking, a writer checks the file it locked is still the one at that
name, so a removal racing with it is harmless).  The holder writes what it is (pid, host,
since, which writer) into the file it holds exclusively, and a refused writer names it.

Where locks do not work — ``flock`` fails with ENOLCK/EOPNOTSUPP/ENOSYS (NFS without a lock
daemon, a Lustre mount without ``flock``), or the mount makes them local to one host (NFS
``local_lock=flock|all``, ``nolock``; Lustre ``localflock``) — the writer refuses with
:class:`~molrec_raw.errors.LockUnavailableError` instead of writing unprotected.  Users who
coordinate their writers themselves opt out: ``lock=False`` on the writer, or the environment
variable ``MOLREC_RAW_LOCKING=off`` (for the command line and for tools that wrap a writer).
"""
from __future__ import annotations

import datetime as _dt
import errno
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import orjson

from molrec_raw.errors import LockUnavailableError, StoreError, WriterLockedError
from molrec_raw.zarr.fileops import FileOps
from molrec_raw.zarr.store import PathLike

__all__ = ["WriterLock", "lock_writer", "lock_file_paths", "locking_enabled", "mount_lock_problem",
           "LOCK_SUFFIX", "LOCKING_ENV"]

RULE = "safety#lock"  # spec-notes/safety.md: one writer at a time, readers never lock
LOCK_SUFFIX = ".molrec-lock"
LOCKING_ENV = "MOLREC_RAW_LOCKING"  # "off"/"0"/"false"/"no": write without locks (the caller coordinates)
_OFF = ("0", "off", "false", "no")
_NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EINVAL)
_SETTLE_ATTEMPTS = 8  # lock files removed under a writer that was locking them: try again
_BUSY_ATTEMPTS, _BUSY_PAUSE = 3, 0.02  # a lock found held: looked at again twice, 20 ms apart
_OPT_OUT = (f"if you make sure yourself that only one writer writes it at a time, pass lock=False "
            f"(or set {LOCKING_ENV}=off)")
_INFO_BYTES = 4096  # at most this much of a lock file is read for its holder


def locking_enabled(lock: Optional[bool] = None) -> bool:
    """Whether a writer locks: ``lock`` when given (True/False), else unless the environment
    says ``MOLREC_RAW_LOCKING=off`` (``0``, ``false``, ``no``)."""
    if lock is not None:
        return bool(lock)
    return os.environ.get(LOCKING_ENV, "").strip().lower() not in _OFF


def lock_file_paths(target: PathLike, section: Optional[str] = None) -> Tuple[Path, Optional[Path]]:
    """The lock files of ``target`` (resolved: a symbolic link to a record and the record
    itself share one lock): the target's lock, and the section's (None without a section)."""
    real = Path(os.path.realpath(os.fspath(target)))
    main = real.with_name(f".{real.name}{LOCK_SUFFIX}")
    if section is None:
        return main, None
    if not section or "/" in section or section.startswith("."):
        raise ValueError(f"a lock section is a plain name, not {section!r}")
    return main, real.with_name(f".{real.name}.{section}{LOCK_SUFFIX}")


@dataclass
class WriterLock:
    """A held writer lock (or, with locking turned off, a stand-in that holds nothing):
    ``release()`` (idempotent; also on ``with`` exit) lets the next writer in.  ``held`` says
    whether a lock is held; ``target``, ``section`` and ``writer`` say what for."""

    target: str
    section: Optional[str]
    writer: str
    fileops: FileOps
    _held: List[Tuple[int, Path, bool]] = field(default_factory=list, init=False, repr=False)  # (fd, file, exclusive)

    @property
    def held(self) -> bool:
        """True while this object holds a lock."""
        return bool(self._held)

    def release(self) -> None:
        """Release every lock this object holds (the section's first, then the target's);
        the last holder of a lock file removes it.  Never raises for a lock file it cannot
        remove (the next writer locks it again)."""
        held, self._held = self._held, []
        for fd, path, exclusive in reversed(held):
            try:
                if exclusive:  # (a note left by a failed removal names a dead process: ignored)
                    self.fileops.unlock(fd, str(path))
                elif self.fileops.upgrade_lock(fd):  # no one else shares it: the last holder
                    self.fileops.unlock(fd, str(path))
                else:
                    self.fileops.unlock(fd)
            except OSError:  # the descriptor is gone either way; the lock with it
                pass

    def __enter__(self) -> "WriterLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:  # a writer dropped unclosed: its lock goes with it
        if self._held:
            try:
                self.release()
            except Exception:  # pragma: no cover - interpreter shutdown
                pass


def lock_writer(target: PathLike, section: Optional[str] = None, *, writer: str = "a writer",
                lock: Optional[bool] = None, fileops: Optional[FileOps] = None) -> WriterLock:
    """Take the writer lock of ``target`` — a record directory, a ``*.mrec.zip``, a
    ``*.mlp.jsonl``, a ``*.mrec.lmdb``, existing or not (a missing directory holding it is
    made, as the writer would make it) — for the
    whole target (``section=None``) or for one section of a record (``"trajectory"``,
    ``"metrics"``), before anything is read or changed.  ``writer`` names the taker in the
    holder note (``MrecWriter``).  Raises :class:`~molrec_raw.errors.WriterLockedError`
    naming the target and what is known of the holder when another writer (of this process
    or another) holds it, and :class:`~molrec_raw.errors.LockUnavailableError` where locks do
    not work; ``lock`` (None: the ``MOLREC_RAW_LOCKING`` environment variable) False returns a
    stand-in that holds nothing.  Lock files go through ``fileops`` (its lock verbs)."""
    ops = fileops if fileops is not None else FileOps()
    handle = WriterLock(os.fspath(target), section, writer, ops)
    if not locking_enabled(lock):
        return handle
    main, part = lock_file_paths(target, section)
    directory = str(main.parent)
    if not os.path.isdir(directory):  # made now, as the writer would make it: the lock lives there
        try:
            ops.makedirs(directory)
        except OSError as exc:
            raise StoreError(f"cannot write {handle.target}: cannot make its directory {directory}: "
                             f"{exc.strerror or exc}", store=handle.target) from None
    problem = mount_lock_problem(directory)
    if problem is not None:
        raise LockUnavailableError(f"cannot lock {handle.target} for writing: {problem}; a second writer "
                                   f"would not be refused; {_OPT_OUT}", store=handle.target, rule=RULE)
    try:
        fd = _settle(ops, main, exclusive=part is None, handle=handle, main=main)
        handle._held.append((fd, main, part is None))
        if part is not None:
            fd = _settle(ops, part, exclusive=True, handle=handle, main=main)
            handle._held.append((fd, part, True))
        _note(handle._held[-1][0], writer, section)
    except BaseException:
        handle.release()
        raise
    return handle


def _settle(ops: FileOps, path: Path, *, exclusive: bool, handle: WriterLock, main: Path) -> int:
    """Lock ``path``; then make sure it is still the file of that name (its last holder may
    have removed it meanwhile: then lock the new one).  A lock found held is tried again a
    few times, briefly: a holder that is releasing holds it exclusively for an instant."""
    busy = 0
    for _ in range(_SETTLE_ATTEMPTS):
        try:
            fd = ops.lock(str(path), exclusive)
        except BlockingIOError:
            busy += 1
            if busy >= _BUSY_ATTEMPTS:
                raise _refusal(handle, path, main) from None
            time.sleep(_BUSY_PAUSE)
            continue
        except OSError as exc:
            if exc.errno in _NO_LOCKS:
                raise LockUnavailableError(
                    f"cannot lock {handle.target} for writing: advisory locks do not work on this file system "
                    f"({exc.strerror or exc}, {errno.errorcode.get(exc.errno or 0, exc.errno)}: e.g. NFS without "
                    f"a lock daemon); a second writer would not be refused; {_OPT_OUT}", store=handle.target,
                    rule=RULE) from None
            raise StoreError(f"cannot lock {handle.target} for writing: cannot open its lock file {path}: "
                             f"{exc.strerror or exc}; {_OPT_OUT}", store=handle.target) from None
        try:
            here, now = os.fstat(fd), os.stat(path)
            same = (here.st_dev, here.st_ino) == (now.st_dev, now.st_ino)
        except FileNotFoundError:
            same = False
        if same:
            return fd
        ops.unlock(fd)
    raise StoreError(f"cannot lock {handle.target}: its lock file {path} keeps being replaced", store=handle.target)


def _note(fd: int, writer: str, section: Optional[str]) -> None:
    """Write who holds the lock into the file held exclusively (best effort: a holder that
    cannot say who it is still holds the lock)."""
    note = {"pid": os.getpid(), "host": socket.gethostname(), "writer": writer,
            "since": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if section is not None:
        note["section"] = section
    try:
        data = orjson.dumps(note) + b"\n"
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
    except OSError:
        pass


def _holders(main: Path) -> List[Dict[str, Any]]:
    """What the lock files of one target say of their holders: the target's own, then each
    section's.  A note left by a dead process of this host is dropped."""
    prefix = main.name[: -len(LOCK_SUFFIX)] + "."
    paths = [main]
    try:
        paths += sorted(p for p in main.parent.iterdir()
                        if p.name.startswith(prefix) and p.name.endswith(LOCK_SUFFIX) and p != main)
    except OSError:
        pass
    host = socket.gethostname()
    found = []
    for path in paths:
        try:
            with open(path, "rb") as fh:
                note = orjson.loads(fh.read(_INFO_BYTES) or b"null")
        except (OSError, orjson.JSONDecodeError):
            continue
        if not isinstance(note, dict) or not isinstance(note.get("pid"), int):
            continue
        if note.get("host") == host and not _alive(note["pid"]):
            continue
        found.append(note)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):  # another user's process; a nonsense pid
        return True
    return True


def _describe(note: Dict[str, Any]) -> str:
    what = str(note.get("writer") or "a writer")
    if note.get("section"):
        what += f" ({note['section']})"
    host = "this host" if note.get("host") == socket.gethostname() else f"host {note.get('host')}"
    pid = note.get("pid")
    same = " — this process" if pid == os.getpid() and note.get("host") == socket.gethostname() else ""
    return f"{what}, pid {pid} on {host}{same}, since {note.get('since')}"


def _refusal(handle: WriterLock, path: Path, main: Path) -> WriterLockedError:
    holders = _holders(main)
    on_section = path != main
    if on_section:  # refused on the section: its holder is the one to name
        holders = [h for h in holders if h.get("section") == handle.section] or holders
    who = "; ".join(_describe(h) for h in holders) if holders else "holder unknown"
    what = f"its {handle.section} section" if on_section else "it"
    return WriterLockedError(
        f"{handle.target} is being written by another writer, which holds {what} ({who}); one writer at a "
        f"time: wait for it to finish, or stop it (a killed writer's lock goes with its process)",
        holders=holders, store=handle.target, rule=RULE)


# -- where locks cannot be trusted -------------------------------------------------------------
_LOCAL_ONLY = {  # mount options that make flock() local to one client
    "nfs": ("local_lock=flock", "local_lock=all", "nolock"),
    "nfs4": ("local_lock=flock", "local_lock=all", "nolock"),
    "lustre": ("localflock",),
}


def mount_lock_problem(directory: PathLike, mountinfo: Optional[str] = None) -> Optional[str]:
    """Why advisory locks taken in ``directory`` would not be seen by writers on other hosts,
    or None: the mount holding it (``/proc/self/mountinfo``, or the ``mountinfo`` text given)
    is an NFS mount with ``local_lock=flock``/``all`` or ``nolock``, or a Lustre mount with
    ``localflock``.  None where nothing is known (not Linux, no such file)."""
    if mountinfo is None:
        try:
            with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
                mountinfo = fh.read()
        except OSError:
            return None
    real = os.path.realpath(os.fspath(directory))
    best: Optional[Tuple[str, str, List[str]]] = None
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        try:
            sep = fields.index("-")
            point = _unescape(fields[4])
            fstype, options = fields[sep + 1], fields[5].split(",") + fields[sep + 3].split(",")
        except (ValueError, IndexError):
            continue
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, fstype, options)
    if best is None:
        return None
    point, fstype, options = best
    for option in _LOCAL_ONLY.get(fstype, ()):
        if option in options:
            return (f"{point} is a {fstype} mount with option {option}, so locks are seen only by this host "
                    "(writers on other hosts would not be refused)")
    return None


def _unescape(text: str) -> str:
    """A mountinfo path: spaces, tabs, newlines and backslashes are octal escapes."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and text[i + 1:i + 4].isdigit() and len(text[i + 1:i + 4]) == 3:
            out.append(chr(int(text[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(text[i])
            i += 1
    return "".join(out)

