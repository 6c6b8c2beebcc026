"""The one seam for file mutations (architecture "Growing the house").

Every change that a :class:`~molrec_raw.zarr.store.DirectoryStore` — and the record layer's
doors that swap or remove whole records — makes to files goes through a :class:`FileOps`:
create/open for writing, write, positional write, truncate, fsync of a file, fsync of a
directory, rename/replace, atomic exchange, unlink, mkdir, rmdir.  The default object makes
the real ``os`` calls; a test hands a store a subclass that records them (the crash-state
simulator of ``tests/powercut``), so it sees every byte a writer puts on disk and every
barrier it relies on.  Reads (``open`` for reading, ``pread``, ``stat``, listings) change
nothing and do not go through the seam.

The object holds no state of its own (a recorder may); there is no module-level instance.

Two wrappers build on the seam (spec-notes/safety.md): :class:`PoisonGuard`, through which a
long-lived writer makes its mutations, remembers the first real I/O failure and refuses every
mutation after it (an fsync is never retried: Linux may have dropped the pages whose write-back
failed); :class:`FaultInjector` fails the k-th call of a kind with a chosen errno (the
fault-injection tests and campaign).  Advisory locks have verbs of their own (``lock``,
``upgrade_lock``, ``unlock``): lock files are not data, so a recorder of mutations does not
log them, while a fault injector can still fail them.
"""
from __future__ import annotations

import ctypes
import errno
import os
import stat
from typing import Any, Callable, Dict, FrozenSet, List, NoReturn, Optional, Sequence, Tuple, Union

from molrec_raw.errors import IOFailureError, MolrecError, PoisonedWriterError

try:  # POSIX advisory locks
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

__all__ = ["FileOps", "AppendFile", "Buffer", "DelegatingFileOps", "PoisonGuard", "FaultInjector", "FAULT_KINDS"]

Buffer = Union[bytes, bytearray, memoryview]
_RENAME_EXCHANGE = 2  # linux/fs.h
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_IOV_MAX = 1024  # buffers per pwritev call (POSIX guarantees at least 16; Linux allows 1024)


def _renameat2() -> Optional[Callable[..., int]]:
    """glibc's ``renameat2`` (Linux >= 3.15, glibc >= 2.28), or None."""
    import ctypes.util  # here, not at import: it loads subprocess, and only this call needs it

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    except OSError:  # pragma: no cover - no C library to load
        return None
    function = getattr(libc, "renameat2", None)
    if function is None:  # pragma: no cover - old glibc, other libc
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function  # type: ignore[no-any-return]


class FileOps:
    """File mutations as the operating system performs them.  Subclasses override the
    verbs (the first block of methods); the helpers below them are built only from the
    verbs, so an override sees every mutation they make."""

    # -- verbs ----------------------------------------------------------------------
    def open(self, path: str, flags: int, mode: int = 0o666) -> int:
        """Open ``path`` for writing (``flags`` as ``os.open``); returns a descriptor."""
        return os.open(path, flags | _CLOEXEC, mode)

    def write(self, fd: int, data: Buffer) -> int:
        """Write at the descriptor's position (the end for ``O_APPEND``); bytes written."""
        return os.write(fd, data)

    def pwrite(self, fd: int, data: Buffer, offset: int) -> int:
        """Write at ``offset`` without moving the position; bytes written."""
        return os.pwrite(fd, data, offset)

    def truncate(self, fd: int, length: int) -> None:
        os.ftruncate(fd, length)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def close(self, fd: int) -> None:
        os.close(fd)

    def fsync_file(self, path: str) -> None:
        """Make the data of the file at ``path`` durable."""
        fd = os.open(path, os.O_RDONLY | _CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def fsync_dir(self, path: str) -> None:
        """Make the entries of directory ``path`` (creations, renames, removals) durable."""
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def replace(self, src: str, dst: str) -> None:
        """Rename ``src`` over ``dst`` (atomic for readers of ``dst``)."""
        os.replace(src, dst)

    def exchange(self, a: str, b: str) -> None:
        """Swap the two names atomically (``renameat2(RENAME_EXCHANGE)``).  Raises OSError
        (``ENOSYS``/``EINVAL``) where the system or the file system cannot."""
        function = _renameat2()
        if function is None:
            raise OSError(errno.ENOSYS, "renameat2 is not available here")
        at_cwd = -100
        if function(at_cwd, os.fsencode(a), at_cwd, os.fsencode(b), _RENAME_EXCHANGE) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), a)

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def mkdir(self, path: str) -> None:
        os.mkdir(path)

    def rmdir(self, path: str) -> None:
        os.rmdir(path)

    # -- advisory locks (not data: apart from the mutations above) -------------------
    def lock(self, path: str, exclusive: bool, wait: bool = False) -> int:
        """Open the lock file ``path`` (created when missing; never through a symbolic link)
        and take an advisory ``flock`` on it, exclusive or shared, without waiting (or, with
        ``wait``, waiting until it is granted).  Returns the descriptor, which holds the lock
        until it is closed — so a lock dies with its process.  ``BlockingIOError`` when
        another open file holds a conflicting lock (in this process or another) and
        ``wait`` is false; another ``OSError`` (ENOLCK, EOPNOTSUPP, ENOSYS, ...) where locks
        do not work.  Either way nothing stays open."""
        if fcntl is None:  # pragma: no cover - not POSIX
            raise OSError(errno.ENOSYS, "advisory locks (fcntl.flock) are not available here", path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | _CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | (0 if wait else fcntl.LOCK_NB))
        except BaseException:
            os.close(fd)
            raise
        return fd

    def upgrade_lock(self, fd: int) -> bool:
        """Turn the shared lock held on ``fd`` into an exclusive one without waiting; False
        when another holder shares it (``flock`` may then have dropped the shared lock: only
        a holder about to release calls this)."""
        assert fcntl is not None, "lock() succeeded, so fcntl exists"
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def unlock(self, fd: int, path: Optional[str] = None) -> None:
        """Release the lock held on ``fd``: remove the lock file ``path`` first when given
        (its last holder does), then close the descriptor.  A lock file that cannot be
        removed stays (harmless: the next writer locks it again)."""
        try:
            if path is not None:
                try:
                    os.unlink(path)
                except OSError:
                    pass
        finally:
            os.close(fd)

    # -- helpers built on the verbs ------------------------------------------------
    def write_all(self, fd: int, data: Buffer) -> None:
        view = memoryview(data).cast("B")
        while view:
            view = view[self.write(fd, view):]

    def pwrite_all(self, fd: int, data: Buffer, offset: int) -> None:
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            done += self.pwrite(fd, view[done:], offset + done)

    def pwrite_parts(self, fd: int, parts: Sequence[Buffer], offset: int) -> None:
        """``pwrite_all`` of the concatenation of ``parts``: with the system's ``pwrite``
        verb, in ``pwritev`` calls (no joined copy); a seam that overrides ``pwrite`` or
        ``pwrite_all`` sees one ``pwrite_all`` of the joined bytes."""
        pwritev = getattr(os, "pwritev", None)
        seam = type(self)
        if seam.pwrite is not FileOps.pwrite or seam.pwrite_all is not FileOps.pwrite_all or pwritev is None:
            self.pwrite_all(fd, b"".join(parts), offset)
            return
        views = [view for view in (memoryview(part).cast("B") for part in parts) if len(view)]
        first = 0
        while first < len(views):
            done = pwritev(fd, views[first:first + _IOV_MAX], offset)
            offset += done
            while done and first < len(views):  # past what was written (a short write goes on)
                size = len(views[first])
                if done >= size:
                    done -= size
                    first += 1
                else:
                    views[first] = views[first][done:]
                    done = 0

    def makedirs(self, path: str) -> List[str]:
        """Create ``path`` and its missing parents; returns the directories created
        (outermost first)."""
        missing = []
        current = path
        while current and not os.path.isdir(current):
            missing.append(current)
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
        made = []
        for directory in reversed(missing):
            try:
                self.mkdir(directory)
            except FileExistsError:
                if not os.path.isdir(directory):
                    raise
                continue
            made.append(directory)
        return made

    def rmtree(self, path: str) -> None:
        """Remove ``path`` and everything below it (symbolic links are removed, never
        followed); a missing ``path`` is not an error."""
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(mode):
            self.unlink(path)
            return
        with os.scandir(path) as entries:
            names = sorted(entry.name for entry in entries)
        for name in names:
            self.rmtree(os.path.join(path, name))
        self.rmdir(path)


class AppendFile:
    """One file opened for appending (``O_APPEND``) through a :class:`FileOps`: the metrics
    write-ahead log.  Its one writer holds the writer lock (``record/locking.py``) first."""

    def __init__(self, fileops: FileOps, path: str) -> None:
        self.fileops, self.path = fileops, path
        self.fd = fileops.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def read(self, start: int, length: int) -> bytes:
        return os.pread(self.fd, length, start)

    def write(self, data: Buffer) -> None:
        self.fileops.write_all(self.fd, data)

    def truncate(self, size: int) -> None:
        self.fileops.truncate(self.fd, size)

    def sync(self) -> None:
        self.fileops.fsync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            self.fileops.close(fd)

    def __enter__(self) -> "AppendFile":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# -- wrappers ---------------------------------------------------------------------------------
_VERBS = ("open", "write", "pwrite", "truncate", "fsync", "close", "fsync_file", "fsync_dir", "replace",
          "exchange", "unlink", "mkdir", "rmdir", "lock", "upgrade_lock", "unlock")


class DelegatingFileOps(FileOps):
    """A :class:`FileOps` whose verbs go to ``inner`` (default: the system's calls); the
    helpers are inherited, built on the verbs, so a wrapper sees every call they make.
    Wrappers override :meth:`_call`, which every verb goes through."""

    def __init__(self, inner: Optional[FileOps] = None) -> None:
        self.inner = inner if inner is not None else FileOps()
        self._paths: Dict[int, str] = {}  # descriptor -> path, for messages

    def path_of(self, fd: int) -> str:
        """The path a descriptor was opened on (``<fd N>`` when unknown)."""
        return self._paths.get(fd, f"<fd {fd}>")

    def _call(self, verb: str, path: str, function: Callable[..., Any], *args: Any) -> Any:
        return function(*args)

    def open(self, path: str, flags: int, mode: int = 0o666) -> int:
        """See :meth:`FileOps.open`."""
        fd: int = self._call("open", path, self.inner.open, path, flags, mode)
        self._paths[fd] = path
        return fd

    def write(self, fd: int, data: Buffer) -> int:
        """See :meth:`FileOps.write`."""
        return int(self._call("write", self.path_of(fd), self.inner.write, fd, data))

    def pwrite(self, fd: int, data: Buffer, offset: int) -> int:
        """See :meth:`FileOps.pwrite`."""
        return int(self._call("pwrite", self.path_of(fd), self.inner.pwrite, fd, data, offset))

    def truncate(self, fd: int, length: int) -> None:
        """See :meth:`FileOps.truncate`."""
        self._call("truncate", self.path_of(fd), self.inner.truncate, fd, length)

    def fsync(self, fd: int) -> None:
        """See :meth:`FileOps.fsync`."""
        self._call("fsync", self.path_of(fd), self.inner.fsync, fd)

    def close(self, fd: int) -> None:
        """See :meth:`FileOps.close`."""
        path = self._paths.pop(fd, f"<fd {fd}>")
        self._call("close", path, self.inner.close, fd)

    def fsync_file(self, path: str) -> None:
        """See :meth:`FileOps.fsync_file`."""
        self._call("fsync_file", path, self.inner.fsync_file, path)

    def fsync_dir(self, path: str) -> None:
        """See :meth:`FileOps.fsync_dir`."""
        self._call("fsync_dir", path, self.inner.fsync_dir, path)

    def replace(self, src: str, dst: str) -> None:
        """See :meth:`FileOps.replace`."""
        self._call("replace", dst, self.inner.replace, src, dst)

    def exchange(self, a: str, b: str) -> None:
        """See :meth:`FileOps.exchange`."""
        self._call("exchange", b, self.inner.exchange, a, b)

    def unlink(self, path: str) -> None:
        """See :meth:`FileOps.unlink`."""
        self._call("unlink", path, self.inner.unlink, path)

    def mkdir(self, path: str) -> None:
        """See :meth:`FileOps.mkdir`."""
        self._call("mkdir", path, self.inner.mkdir, path)

    def rmdir(self, path: str) -> None:
        """See :meth:`FileOps.rmdir`."""
        self._call("rmdir", path, self.inner.rmdir, path)

    def lock(self, path: str, exclusive: bool, wait: bool = False) -> int:
        """See :meth:`FileOps.lock`."""
        fd: int = self._call("lock", path, self.inner.lock, path, exclusive, wait)
        self._paths[fd] = path
        return fd

    def upgrade_lock(self, fd: int) -> bool:
        """See :meth:`FileOps.upgrade_lock`."""
        return bool(self._call("upgrade_lock", self.path_of(fd), self.inner.upgrade_lock, fd))

    def unlock(self, fd: int, path: Optional[str] = None) -> None:
        """See :meth:`FileOps.unlock`."""
        where = self._paths.pop(fd, path or f"<fd {fd}>")
        self._call("unlock", where, self.inner.unlock, fd, path)


# Failures that are the control flow of a caller, not a fault: a missing directory the store
# then creates, a directory already made, a file already gone, a directory not yet empty, an
# atomic exchange the system cannot make (the doors fall back to two renames).
_EXPECTED: Dict[str, FrozenSet[int]] = {
    "open": frozenset({errno.ENOENT, errno.EEXIST}),
    "mkdir": frozenset({errno.EEXIST}),
    "unlink": frozenset({errno.ENOENT, errno.ENOTDIR}),
    "rmdir": frozenset({errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT, errno.ENOTDIR}),
    "fsync_file": frozenset({errno.ENOENT}),
    "fsync_dir": frozenset({errno.ENOENT}),
    "exchange": frozenset({errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV}),
}
_UNGUARDED = frozenset({"close", "lock", "upgrade_lock", "unlock"})  # releasing is never refused


def io_failure(verb: str, path: str, exc: OSError) -> IOFailureError:
    """The error a failed file operation is reported as: the operation, the path, the errno
    (by name) and the system's words."""
    code = exc.errno
    name = errno.errorcode.get(code, str(code)) if code is not None else "?"
    return IOFailureError(f"{verb} failed on {path}: {exc.strerror or exc} ({name})",
                          operation=verb, path=path, errno=code)


class PoisonGuard(DelegatingFileOps):
    """The seam of one long-lived writer: passes every call to ``inner`` and remembers the
    first real I/O failure (``failure``, an :class:`~molrec_raw.errors.IOFailureError` naming
    the operation and the path); from then on every mutation is refused (an ``OSError`` the
    call never attempted; the writer raises :class:`~molrec_raw.errors.PoisonedWriterError`
    before it gets there) — nothing is retried, fsync least of all.
    Closing descriptors and releasing locks are never refused.  ``what`` names the writer in
    messages (``the trajectory writer of run.mrec``).  ``refuse=False``: the seam of a one-shot
    door, which only remembers the first failure (to raise it naming the operation and the
    path) and lets the door clean up its private staging after it."""

    def __init__(self, inner: Optional[FileOps] = None, what: str = "the writer", refuse: bool = True) -> None:
        super().__init__(inner)
        self.what, self.refuse = what, refuse
        self.failure: Optional[IOFailureError] = None
        self._cause: Optional[BaseException] = None

    @property
    def poisoned(self) -> Optional[BaseException]:
        """What poisoned the writer: the cause given to :meth:`poison`, else the first I/O
        failure seen at the seam (even one the writer's code caught); None while sound."""
        return self._cause if self._cause is not None else self.failure

    def poison(self, exc: BaseException) -> BaseException:
        """Poison the writer by ``exc``, the failure of a call that had begun changing files,
        and return what that call raises: the I/O failure beneath it (an
        :class:`~molrec_raw.errors.IOFailureError` naming the operation and the path) in place
        of the store's wrapping of it, else ``exc`` itself (an interrupt, a bug)."""
        if isinstance(exc, PoisonedWriterError):  # refused at the seam: poisoned already
            if self._cause is None:
                self._cause = exc.first
            return exc
        first: BaseException = exc
        if self.failure is not None and isinstance(exc, (OSError, MolrecError)):
            first = self.failure
        if self._cause is None:
            self._cause = first
        return first

    def check(self) -> None:
        """Raise :meth:`refusal` when the writer is poisoned."""
        cause = self.poisoned
        if cause is not None:
            raise self.refusal(cause)

    def refusal(self, first: BaseException) -> PoisonedWriterError:
        """The error every call of a poisoned writer raises, naming the first failure."""
        return PoisonedWriterError(
            f"{self.what} is poisoned by an earlier failure ({first}); nothing more is written through it: "
            "close() it, then reopen the record (MrecWriter.open / a new writer), which verifies what "
            "reached the disk", first=first, rule="safety#poison")

    # The helpers go to ``inner`` whole (a seam may override a helper, e.g. to act halfway
    # through a write): the guard sees their failures, not each verb inside them.
    def write_all(self, fd: int, data: Buffer) -> None:
        """See :meth:`FileOps.write_all`."""
        self._call("write", self.path_of(fd), self.inner.write_all, fd, data)

    def pwrite_all(self, fd: int, data: Buffer, offset: int) -> None:
        """See :meth:`FileOps.pwrite_all`."""
        self._call("pwrite", self.path_of(fd), self.inner.pwrite_all, fd, data, offset)

    def pwrite_parts(self, fd: int, parts: Sequence[Buffer], offset: int) -> None:
        """See :meth:`FileOps.pwrite_parts`."""
        self._call("pwrite", self.path_of(fd), self.inner.pwrite_parts, fd, parts, offset)

    def makedirs(self, path: str) -> List[str]:
        """See :meth:`FileOps.makedirs`."""
        made: List[str] = self._call("mkdir", path, self.inner.makedirs, path)
        return made

    def rmtree(self, path: str) -> None:
        """See :meth:`FileOps.rmtree`."""
        self._call("rmtree", path, self.inner.rmtree, path)

    def fail(self, exc: BaseException) -> NoReturn:
        """Called in an ``except`` block of a writer's call that had begun changing files:
        poison the writer (:meth:`poison`) and raise what that call raises."""
        failure = self.poison(exc)
        if failure is exc:
            raise  # the exception being handled, with its traceback
        raise failure from exc

    def _call(self, verb: str, path: str, function: Callable[..., Any], *args: Any) -> Any:
        if self.failure is not None and self.refuse and verb not in _UNGUARDED:
            # refused as the system would fail it, so the store's own clean-up code (which
            # expects OSError) stays in charge; the writer reports the first failure
            raise OSError(errno.EIO, f"not attempted: {self.what} is poisoned by {self.failure}", path)
        try:
            return function(*args)
        except OSError as exc:
            if self.failure is None and exc.errno not in _EXPECTED.get(verb, ()) \
                    and not isinstance(exc, BlockingIOError):
                self.failure = io_failure(verb, path, exc)
            raise


#: What :class:`FaultInjector` counts and fails: each verb's kind (the three fsyncs are one kind).
FAULT_KINDS: Dict[str, str] = {verb: verb for verb in _VERBS}
FAULT_KINDS.update({"fsync_file": "fsync", "fsync_dir": "fsync", "replace": "rename"})


class FaultInjector(DelegatingFileOps):
    """Fails chosen calls through the seam: ``fail(kind, k, code)`` makes the k-th call
    (1-based) of that kind — ``open write pwrite truncate fsync close rename exchange unlink
    mkdir rmdir lock upgrade_lock unlock`` (see ``FAULT_KINDS``) — raise ``OSError(code)``
    without performing it.  ``calls`` counts the calls of each kind so far; ``injected``
    lists the faults raised as ``(kind, k, path)``.  Wrap a recorder or another seam with
    ``inner``."""

    def __init__(self, inner: Optional[FileOps] = None) -> None:
        super().__init__(inner)
        self.calls: Dict[str, int] = {}
        self.injected: List[Tuple[str, int, str]] = []
        self._faults: Dict[Tuple[str, int], int] = {}

    def fail(self, kind: str, k: int, code: int = errno.EIO) -> "FaultInjector":
        """Fail the ``k``-th call of ``kind`` with ``code`` (EIO, ENOSPC, EDQUOT, ...); returns self."""
        if kind not in FAULT_KINDS.values():
            raise ValueError(f"unknown fault kind {kind!r}; one of {sorted(set(FAULT_KINDS.values()))}")
        if k < 1:
            raise ValueError(f"k counts calls from 1, got {k}")
        self._faults[(kind, k)] = code
        return self

    def _call(self, verb: str, path: str, function: Callable[..., Any], *args: Any) -> Any:
        kind = FAULT_KINDS[verb]
        k = self.calls[kind] = self.calls.get(kind, 0) + 1
        code = self._faults.get((kind, k))
        if code is not None:
            self.injected.append((kind, k, path))
            if verb in ("close", "unlock"):  # the descriptor goes anyway (as close(2) does on EIO)
                function(*args)
            raise OSError(code, os.strerror(code), path)
        return function(*args)
