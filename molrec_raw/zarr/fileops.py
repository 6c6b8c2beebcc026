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
"""
from __future__ import annotations

import ctypes
import errno
import os
import stat
from typing import Any, Callable, List, Optional, Union

__all__ = ["FileOps", "AppendFile", "Buffer"]

Buffer = Union[bytes, bytearray, memoryview]
_RENAME_EXCHANGE = 2  # linux/fs.h
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


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
    write-ahead log.  ``lock()`` takes an exclusive advisory lock (one appender per file)."""

    def __init__(self, fileops: FileOps, path: str) -> None:
        self.fileops, self.path = fileops, path
        self.fd = fileops.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)

    def lock(self) -> bool:
        """Take the exclusive lock without waiting; False when another process holds it."""
        import fcntl

        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

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
            try:
                import fcntl

                fcntl.flock(fd, fcntl.LOCK_UN)
            except OSError:  # pragma: no cover - the descriptor is closed anyway
                pass
            self.fileops.close(fd)

    def __enter__(self) -> "AppendFile":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
