"""Stores: a flat map of ``/``-separated keys to bytes (zarr-v3-subset §1, §9).

One small interface serves every layer above: ``get``, ``get_range``, ``set``,
``write_at``, ``replace_atomic``, ``replace_durable``, ``truncate``, ``delete``, ``list``,
``list_dir``, ``sync`` (and ``open_append`` for a write-ahead log).  The commit protocol
of a trajectory is built only from these verbs.  A :class:`DirectoryStore` makes every
file mutation through its :class:`~molrec_raw.zarr.fileops.FileOps` (the one seam).

Every key is validated before it touches the file system (zarr-v3-subset §1):
no absolute path, no ``.``/``..`` segment, no backslash, no empty segment, no
NUL — a store never reads or writes outside its root.
"""
from __future__ import annotations

import itertools
import os
import stat
import threading
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple, TypeVar, Union

from molrec_raw.errors import InvalidKeyError, ReadOnlyError, StoreError
from molrec_raw.zarr.fileops import AppendFile, Buffer, FileOps

__all__ = ["Store", "ReadOnlyStore", "MemoryStore", "DirectoryStore", "validate_key", "PathLike", "StoreLike"]

# Temporary files of atomic replaces carry this marker; listings never show them.
TEMP_MARKER = ".molrec-tmp."
_CHECKED_FILES = 1 << 16  # read files a DirectoryStore remembers as checked (not links out of its root)

_S = TypeVar("_S", bound="Store")


def validate_key(key: str) -> str:
    """Return ``key`` if it is a safe store key, else raise InvalidKeyError."""
    if not isinstance(key, str):
        raise InvalidKeyError(f"store key must be str, got {type(key).__name__}")
    if key == "":
        raise InvalidKeyError("empty store key", key=key)
    if "\x00" in key or "\\" in key:
        raise InvalidKeyError("store key contains NUL or backslash", key=repr(key))
    if key.startswith("/") or (len(key) > 1 and key[1] == ":"):
        raise InvalidKeyError("absolute store key refused", key=key)
    for segment in key.split("/"):
        if segment in ("", ".", ".."):
            raise InvalidKeyError("store key has an empty, '.' or '..' segment", key=key)
        if TEMP_MARKER in segment:
            raise InvalidKeyError("store key uses the reserved temporary-file marker", key=key)
    return key


def _validate_prefix(prefix: str) -> str:
    """A listing prefix: '' (root) or a valid key ending in '/'."""
    if prefix == "":
        return prefix
    if not prefix.endswith("/"):
        raise InvalidKeyError("listing prefix must be empty or end with '/'", key=prefix)
    validate_key(prefix[:-1])
    return prefix


def _slice_range(size: int, start: int, length: Optional[int]) -> Tuple[int, int]:
    """Resolve (start, length) against a value of ``size`` bytes; negative start counts from the end."""
    if start < 0:
        start = max(0, size + start)
    end = size if length is None else min(size, start + length)
    return min(start, size), max(end, min(start, size))


def list_dir_of_keys(keys: Iterable[str], prefix: str) -> Tuple[List[str], List[str]]:
    """``list_dir`` for stores that hold a flat key set: immediate (keys, child names)."""
    _validate_prefix(prefix)
    names: Set[str] = set()
    dirs: Set[str] = set()
    for k in keys:
        if k.startswith(prefix):
            head, sep, _ = k[len(prefix):].partition("/")
            (dirs if sep else names).add(head)
    return sorted(names), sorted(dirs)


class Store:
    """The store interface.  ``get``/``get_range`` return None for a missing key."""

    read_only: bool = False
    # True when no value changes while the store is open (a zip archive, a remote record):
    # readers may then remember what they derived from a value, such as a shard's index.
    immutable: bool = False
    # How many reads are worth issuing at once: 1 for local storage, more for stores whose
    # cost is the round trip (HTTP, object stores), where readers fetch columns concurrently.
    concurrency: int = 1

    def describe(self) -> str:  # pragma: no cover - overridden
        """What errors name as the store (a path, a redacted URL, ``<memory>``)."""
        return type(self).__name__

    def _check_writable(self, key: str) -> None:
        if self.read_only:
            raise ReadOnlyError("store is read-only", store=self.describe(), key=key)

    def get(self, key: str) -> Optional[bytes]:
        """The whole value of ``key``, or None when the key is missing (a missing chunk is the
        fill value, zarr-v3-subset#6)."""
        raise NotImplementedError

    def get_range(self, key: str, start: int, length: Optional[int] = None) -> Optional[bytes]:
        """Bytes ``[start, start+length)`` of a value; a negative start counts from the end.

        The result is shorter than ``length`` when the value is; callers check.
        """
        raise NotImplementedError

    def get_ranges(self, key: str, ranges: Sequence[Tuple[int, int]]) -> List[Optional[bytes]]:
        """Several ``(start, length)`` ranges of one value, in order (None: the key is
        missing).  Latency-bound stores merge adjacent ranges into one request and issue the
        rest concurrently; this default reads them one by one."""
        return [self.get_range(key, start, length) for start, length in ranges]

    def size(self, key: str) -> Optional[int]:
        """The length in bytes of ``key``'s value, or None when the key is missing."""
        raise NotImplementedError

    def set(self, key: str, value: bytes) -> None:
        """Write the whole value of ``key`` (created or replaced); refused on a read-only store."""
        raise NotImplementedError

    def write_at(self, key: str, offset: int, value: bytes) -> None:
        """Positional write into a value (created if missing); never truncates."""
        raise NotImplementedError

    def write_parts_at(self, key: str, offset: int, parts: Sequence[Buffer]) -> None:
        """``write_at`` of the concatenation of ``parts`` (a store that can write them
        without joining them first does)."""
        self.write_at(key, offset, b"".join(parts))

    def replace_atomic(self, key: str, value: bytes) -> None:
        """Replace a whole value so readers see the old or the new bytes, never a mix."""
        raise NotImplementedError

    def replace_durable(self, key: str, value: bytes) -> None:
        """``replace_atomic`` whose new bytes are durable before the name moves to them, so
        a power cut leaves the old or the new value, never an empty one; the rename itself
        is durable after the next ``sync``."""
        self.replace_atomic(key, value)
        self.sync([key])

    def truncate(self, key: str, size: int) -> None:
        """Cut a value to ``size`` bytes (crash recovery restores a shard this way)."""
        self._check_writable(key)
        raise NotImplementedError

    def open_append(self, key: str) -> AppendFile:
        """The value as a file opened for appending (a write-ahead log), created if missing."""
        self._check_writable(key)
        raise StoreError("this store cannot append to a value in place", store=self.describe(), key=key)

    def delete(self, key: str) -> None:
        """Remove a key; a missing key is not an error."""
        raise NotImplementedError

    def list(self, prefix: str = "") -> Iterator[str]:
        """Every key under ``prefix`` (recursively)."""
        raise NotImplementedError

    def list_dir(self, prefix: str = "") -> Tuple[List[str], List[str]]:
        """Immediate (keys, child names) under ``prefix`` — one level, sorted."""
        raise NotImplementedError

    def sync(self, keys: Iterable[str]) -> None:
        """Make the named values (and the directories holding them) durable."""

    def sync_all(self, skip: Iterable[str] = ()) -> None:
        """Make durable everything this store object changed since its last ``sync_all``:
        each file written (once), then each directory whose entries changed.  ``skip``: keys
        left for a later sync (a file about to be replaced anyway)."""

    def sync_tree(self, prefix: str) -> None:
        """Make every value and directory under ``prefix`` durable, whoever wrote them."""

    def close(self) -> None:
        """Release resources; the default store holds none."""

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ReadOnlyStore(Store):
    """A store that only reads (an archive, a remote record): every mutation is refused."""

    read_only = True

    def set(self, key: str, value: bytes) -> None:
        self._check_writable(key)

    def write_at(self, key: str, offset: int, value: bytes) -> None:
        self._check_writable(key)

    def replace_atomic(self, key: str, value: bytes) -> None:
        self._check_writable(key)

    def delete(self, key: str) -> None:
        self._check_writable(key)


class MemoryStore(Store):
    """A store in a dict; for tests and for building records in memory."""

    def __init__(self, values: Optional[Dict[str, bytes]] = None, *, read_only: bool = False) -> None:
        self._values: Dict[str, bytes] = {}
        for key, value in (values or {}).items():
            self._values[validate_key(key)] = bytes(value)
        self.read_only = read_only

    def describe(self) -> str:
        return "<memory>"

    def get(self, key: str) -> Optional[bytes]:
        return self._values.get(validate_key(key))

    def get_range(self, key: str, start: int, length: Optional[int] = None) -> Optional[bytes]:
        value = self._values.get(validate_key(key))
        if value is None:
            return None
        lo, hi = _slice_range(len(value), start, length)
        return value[lo:hi]

    def size(self, key: str) -> Optional[int]:
        value = self._values.get(validate_key(key))
        return None if value is None else len(value)

    def set(self, key: str, value: bytes) -> None:
        self._check_writable(validate_key(key))
        self._values[key] = bytes(value)

    replace_atomic = set

    def write_at(self, key: str, offset: int, value: bytes) -> None:
        self._check_writable(validate_key(key))
        old = bytearray(self._values.get(key, b""))
        if len(old) < offset:
            old.extend(b"\x00" * (offset - len(old)))
        old[offset:offset + len(value)] = value
        self._values[key] = bytes(old)

    def truncate(self, key: str, size: int) -> None:
        self._check_writable(validate_key(key))
        if key in self._values:
            self._values[key] = self._values[key][:size]

    def delete(self, key: str) -> None:
        self._check_writable(validate_key(key))
        self._values.pop(key, None)

    def list(self, prefix: str = "") -> Iterator[str]:
        _validate_prefix(prefix)
        return iter(sorted(k for k in self._values if k.startswith(prefix)))

    def list_dir(self, prefix: str = "") -> Tuple[List[str], List[str]]:
        return list_dir_of_keys(self._values, prefix)


class DirectoryStore(Store):
    """Keys are files under ``root`` (zarr-v3-subset §9.1).

    ``set`` and ``replace_atomic`` write a temporary file in the same directory
    and rename it over the target, so a crash leaves the old or the new value.
    ``sync`` fsyncs files and then their directories, including every directory this store
    created since the last sync and the directory it was created in (so a new node's entry
    is durable too, not only the files inside it).  Every mutation goes through
    ``fileops`` (default: the operating system's calls).
    """

    def __init__(self, root: Union[str, os.PathLike[str]], *, read_only: bool = False,
                 fileops: Optional[FileOps] = None) -> None:
        self.root = Path(root)
        self.read_only = read_only
        self.fileops = fileops if fileops is not None else FileOps()
        self._counter = itertools.count(1)
        self._created_dirs: Set[str] = set()  # directories whose entries changed since the last sync
        self._dirty_files: Set[str] = set()  # files written since the last sync_all
        self._created_lock = threading.Lock()
        self._inside_dirs: Set[str] = set()  # directories checked to resolve inside the root
        self._read_paths: Dict[str, str] = {}  # read keys checked (no link out of the root) -> file

    def describe(self) -> str:
        return str(self.root)

    def _path(self, key: str, *, reading: bool = True) -> str:
        """The file of ``key``, for every read, write and delete: refused (StoreError naming
        the link) when a symbolic link leads outside the root — a directory on the way, or,
        for a read, the file itself — so nothing outside a store is read, packed or written
        through it.  Directories and read keys are checked once each (remembered; at most
        65536 keys, then the memory starts again): a read costs one ``lstat`` the first time,
        and a known key is neither validated nor joined again.  A write never follows the
        file (it replaces a link, or opens O_NOFOLLOW)."""
        if reading:
            known = self._read_paths.get(key)
            if known is not None:
                return known
        path = os.path.join(self.root, *validate_key(key).split("/"))
        directory = os.path.dirname(path)
        if directory not in self._inside_dirs:
            if not self._resolves_inside(directory):
                raise self._escape(key)
            self._inside_dirs.add(directory)
        if reading:
            if os.path.islink(path) and not self._resolves_inside(path):
                raise self._escape(key)
            if len(self._read_paths) >= _CHECKED_FILES:  # bounded memory; the checks start again
                self._read_paths.clear()
            self._read_paths[key] = path
        return path

    def path_of(self, key: str) -> str:
        """The local file of ``key`` (checked as every read is: never through a symbolic link
        out of the root); it need not exist."""
        return self._path(key)

    def _resolves_inside(self, path: str) -> bool:
        root = os.path.realpath(self.root)
        real = os.path.realpath(path)
        return real == root or real.startswith(root.rstrip(os.sep) + os.sep)

    def _escape(self, key: str) -> StoreError:
        """The refusal of a key that a symbolic link leads out of the store, naming the link."""
        parts = validate_key(key).split("/")
        link = key
        for depth in range(1, len(parts) + 1):
            if os.path.islink(os.path.join(self.root, *parts[:depth])):
                link = "/".join(parts[:depth])
                break
        target = os.path.realpath(os.path.join(self.root, *link.split("/")))
        return StoreError(f"refusing to follow the symbolic link {link!r} out of the store (it leads to {target})",
                          store=self.describe(), key=key, rule="safety#symlink")

    def _write_path(self, key: str) -> str:
        """The file of ``key`` for a write or a delete (see :meth:`_path`)."""
        return self._path(key, reading=False)

    def _fail(self, action: str, key: str, exc: OSError) -> StoreError:
        return StoreError(f"cannot {action}: {exc.strerror or exc}", store=self.describe(), key=key)

    def get(self, key: str) -> Optional[bytes]:
        path = self._path(key)
        try:
            with open(path, "rb") as fh:
                return fh.read()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except IsADirectoryError:
            return None
        except OSError as exc:
            raise self._fail("read", key, exc) from None

    def get_range(self, key: str, start: int, length: Optional[int] = None) -> Optional[bytes]:
        path = self._path(key)
        try:
            with open(path, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                lo, hi = _slice_range(size, start, length)
                return os.pread(fh.fileno(), hi - lo, lo) if hi > lo else b""
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as exc:
            raise self._fail("read", key, exc) from None

    def get_ranges(self, key: str, ranges: Sequence[Tuple[int, int]]) -> List[Optional[bytes]]:
        """Several ranges of one file through one open: a ``pread`` each (the inner chunks
        of a shard a read needs)."""
        path = self._path(key)
        try:
            with open(path, "rb") as fh:
                fd = fh.fileno()
                size = os.fstat(fd).st_size
                out: List[Optional[bytes]] = []
                for start, length in ranges:
                    lo, hi = _slice_range(size, start, length)
                    out.append(os.pread(fd, hi - lo, lo) if hi > lo else b"")
                return out
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return [None] * len(ranges)
        except OSError as exc:
            raise self._fail("read", key, exc) from None

    def open_for_read(self, key: str) -> Optional[int]:
        """A read-only descriptor of the file of ``key`` (None when missing) for a reader
        that keeps it open (``zarr/handles.py``, ``FileRanges``); the caller closes it.
        The path is resolved as for every read."""
        try:
            fd = os.open(self._path(key), os.O_RDONLY | getattr(os, "O_BINARY", 0))
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as exc:
            raise self._fail("read", key, exc) from None
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        return fd

    def size(self, key: str) -> Optional[int]:
        try:
            st = os.stat(self._path(key))
        except (FileNotFoundError, NotADirectoryError):
            return None
        return None if stat.S_ISDIR(st.st_mode) else st.st_size

    def _makedirs(self, path: str, key: str) -> None:
        directory = os.path.dirname(path)
        try:
            made = self.fileops.makedirs(directory)
        except OSError as exc:
            raise self._fail("create directory", key, exc) from None
        with self._created_lock:  # new entries in the first existing parent and in each new directory
            self._created_dirs.update(made)
            if made:
                self._created_dirs.add(os.path.dirname(made[0]))

    def _open(self, path: str, key: str, flags: int) -> int:
        """Open for writing, creating the missing directories of ``path`` on the way."""
        try:
            return self.fileops.open(path, flags, 0o666)
        except FileNotFoundError:  # first value in a new directory
            self._makedirs(path, key)
            return self.fileops.open(path, flags, 0o666)

    def _replace(self, key: str, value: bytes, durable: bool) -> None:
        self._check_writable(key)
        path = self._write_path(key)
        tmp = f"{path}{TEMP_MARKER}{os.getpid()}.{next(self._counter)}"
        ops = self.fileops
        try:
            fd = self._open(tmp, key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            try:
                ops.write_all(fd, value)
                if durable:
                    ops.fsync(fd)
            finally:
                ops.close(fd)
            ops.replace(tmp, path)
        except OSError as exc:
            try:
                ops.unlink(tmp)
            except OSError:
                pass
            raise self._fail("write", key, exc) from None
        with self._created_lock:  # the rename is durable at the next sync of its directory
            self._created_dirs.add(os.path.dirname(path))
            if durable:
                self._dirty_files.discard(path)
            else:
                self._dirty_files.add(path)

    def replace_atomic(self, key: str, value: bytes) -> None:
        self._replace(key, value, False)

    set = replace_atomic

    def replace_durable(self, key: str, value: bytes) -> None:
        self._replace(key, value, True)

    def write_at(self, key: str, offset: int, value: bytes) -> None:
        self._write_at(key, offset, value, None)

    def write_parts_at(self, key: str, offset: int, parts: Sequence[Buffer]) -> None:
        """The parts in one positional write, without joining them (``FileOps.pwrite_parts``)."""
        self._write_at(key, offset, None, parts)

    def _write_at(self, key: str, offset: int, value: Optional[bytes], parts: Optional[Sequence[Buffer]]) -> None:
        self._check_writable(key)
        if offset < 0:
            raise StoreError("negative write offset", store=self.describe(), key=key)
        path = self._write_path(key)
        ops = self.fileops
        try:
            fd = self._open(path, key, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0))
            try:
                if parts is None:
                    assert value is not None, "write_at gives the value"
                    ops.pwrite_all(fd, value, offset)
                else:
                    ops.pwrite_parts(fd, parts, offset)
            finally:
                ops.close(fd)
        except OSError as exc:
            raise self._fail("write", key, exc) from None
        with self._created_lock:
            self._dirty_files.add(path)
            self._created_dirs.add(os.path.dirname(path))

    def truncate(self, key: str, size: int) -> None:
        self._check_writable(key)
        path = self._write_path(key)
        ops = self.fileops
        try:
            fd = ops.open(path, os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0))
            try:
                ops.truncate(fd, size)
            finally:
                ops.close(fd)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise self._fail("truncate", key, exc) from None
        with self._created_lock:
            self._dirty_files.add(path)

    def open_append(self, key: str) -> AppendFile:
        self._check_writable(key)
        path = self._write_path(key)
        try:
            try:
                return AppendFile(self.fileops, path)
            except FileNotFoundError:
                self._makedirs(path, key)
                return AppendFile(self.fileops, path)
        except OSError as exc:
            raise self._fail("open for appending", key, exc) from None

    def delete(self, key: str) -> None:
        """Remove a file, then the directories it leaves empty (up to the root), so a later
        value may use the same name as a file (e.g. a re-created 0-d array's chunk ``c``)."""
        self._check_writable(key)
        path = self._write_path(key)
        ops = self.fileops
        try:
            ops.unlink(path)
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as exc:
            raise self._fail("delete", key, exc) from None
        directory, root = os.path.dirname(path), os.path.abspath(self.root)
        changed = [directory]
        while os.path.abspath(directory) != root:
            try:
                ops.rmdir(directory)
            except OSError:  # not empty (or already gone): stop
                break
            directory = os.path.dirname(directory)
            changed.append(directory)
        with self._created_lock:
            self._dirty_files.discard(path)
            self._created_dirs.update(changed)

    def list_dir(self, prefix: str = "") -> Tuple[List[str], List[str]]:
        _validate_prefix(prefix)
        directory = os.path.join(self.root, *prefix.split("/")[:-1]) if prefix else str(self.root)
        keys: List[str] = []
        dirs: List[str] = []
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    if TEMP_MARKER in entry.name:
                        continue
                    (dirs if entry.is_dir() else keys).append(entry.name)
        except (FileNotFoundError, NotADirectoryError):
            pass
        except OSError as exc:
            raise self._fail("list", prefix, exc) from None
        return sorted(keys), sorted(dirs)

    def list(self, prefix: str = "") -> Iterator[str]:
        keys, dirs = self.list_dir(prefix)
        merged = [(name, False) for name in keys] + [(name, True) for name in dirs]
        for name, is_dir in sorted(merged):
            if is_dir:
                yield from self.list(f"{prefix}{name}/")
            else:
                yield prefix + name

    def temporary_files(self, prefix: str = "") -> List[str]:
        """Paths (relative to the root, ``/``-separated) of temporary files an interrupted
        replace left under ``prefix`` — listings never show them; recovery removes them."""
        _validate_prefix(prefix)
        top = os.path.join(self.root, *prefix.split("/")[:-1]) if prefix else str(self.root)
        found = []
        for directory, dirnames, filenames in os.walk(top):
            dirnames.sort()
            for name in sorted(filenames):
                if TEMP_MARKER in name:
                    found.append(os.path.relpath(os.path.join(directory, name), self.root).replace(os.sep, "/"))
        return found

    def remove_temporary(self, relpath: str) -> None:
        """Delete one file named by :meth:`temporary_files`."""
        self._check_writable(relpath)
        parts = relpath.split("/")
        if TEMP_MARKER not in parts[-1] or any(p in ("", ".", "..") for p in parts):
            raise InvalidKeyError("not a temporary file of this store", key=relpath)
        try:
            self.fileops.unlink(os.path.join(self.root, *parts))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise self._fail("delete", relpath, exc) from None

    def sync(self, keys: Iterable[str]) -> None:
        """fsync each file, then each directory that holds one (so renames are durable) and
        every directory created since the last sync together with its parent."""
        self._sync_paths([self._path(key) for key in keys], set())

    def _sync_paths(self, files: Iterable[str], directories: Set[str]) -> None:
        """fsync ``files`` (a missing one is skipped), then ``directories``, the files'
        directories and every directory whose entries changed since the last sync, deepest
        first."""
        ops = self.fileops
        synced = []
        for path in files:
            try:
                ops.fsync_file(path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise self._fail("sync", path, exc) from None
            synced.append(path)
            directories.add(os.path.dirname(path))
        with self._created_lock:
            directories |= self._created_dirs
            self._created_dirs = set()
            self._dirty_files.difference_update(synced)
        for directory in sorted(directories, key=len, reverse=True):  # deepest first
            try:
                ops.fsync_dir(directory)
            except FileNotFoundError:  # created, then emptied and removed again
                continue
            except OSError as exc:
                raise self._fail("sync", directory, exc) from None

    def sync_all(self, skip: Iterable[str] = ()) -> None:
        later = {self._path(key) for key in skip}
        with self._created_lock:
            files = sorted(self._dirty_files - later)
        self._sync_paths(files, set())

    def sync_tree(self, prefix: str) -> None:
        _validate_prefix(prefix)
        top = os.path.join(self.root, *prefix.split("/")[:-1]) if prefix else str(self.root)
        files, directories = [], {os.path.dirname(top), top}
        for directory, dirnames, filenames in os.walk(top):
            directories.add(directory)
            files += [os.path.join(directory, name) for name in sorted(filenames) if TEMP_MARKER not in name]
        self._sync_paths(files, directories)


PathLike = Union[str, "os.PathLike[str]"]  # a file-system path, as every door takes it
StoreLike = Union[Store, PathLike]
