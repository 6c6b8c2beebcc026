"""Read-only stores on any fsspec file system (the optional extra ``molrec-raw[remote]``):
S3, GCS, Azure (with s3fs, gcsfs, adlfs installed by the user), HTTP, memory, local ...

- :class:`FsspecStore` — a directory hierarchy under a root path (object stores list by
  prefix, so a MolRec directory record reads as on disk);
- :class:`FsspecFile` — one object read by ranges, the range source of a zip:
  ``ZipStore(FsspecFile("s3://bucket/run.mrec.zip"))``.

Both merge adjacent ranges and hand the rest to ``fs.cat_ranges`` (concurrent on the async
file systems), and turn every error of the file system into a ``StoreError`` naming the
URL.  Values are assumed not to change while they are read (``immutable``): a record read
this way is a closed one.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, TypeVar, Union

try:
    from fsspec.core import url_to_fs
    from fsspec.spec import AbstractFileSystem
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("molrec_raw.zarr.fsspecstore needs fsspec: pip install 'molrec-raw[remote]'") from exc

from molrec_raw.errors import InvalidValueError, MolrecError, RemoteError
from molrec_raw.zarr.ranges import DEFAULT_GAP, coalesce, split_spans
from molrec_raw.zarr.store import ReadOnlyStore, _slice_range, _validate_prefix, validate_key

__all__ = ["FsspecStore", "FsspecFile"]

_T = TypeVar("_T")
_CONCURRENCY = 4


def _resolve(url_or_fs: Union[str, AbstractFileSystem], path: str,
             storage_options: Dict[str, Any]) -> Tuple[AbstractFileSystem, str]:
    if isinstance(url_or_fs, str):
        if path:
            raise InvalidValueError("give either a URL, or a file system and a path, not a URL and a path")
        fs, root = url_to_fs(url_or_fs, **storage_options)
        return fs, str(root)
    if not isinstance(url_or_fs, AbstractFileSystem):
        raise InvalidValueError(f"expected a URL or an fsspec file system, got {type(url_or_fs).__name__}")
    if storage_options:
        raise InvalidValueError("storage options go with a URL; an fsspec file system is already configured")
    return url_or_fs, path


class _Guarded:
    """Calls into fsspec with its errors turned into ours."""

    fs: AbstractFileSystem
    label: str

    def _call(self, what: str, call: Callable[[], _T], key: Optional[str] = None) -> _T:
        try:
            return call()
        except MolrecError:
            raise
        except Exception as exc:  # a foreign library's errors stop here, as StoreErrors
            raise RemoteError(f"{what} failed: {type(exc).__name__}: {exc}", store=self.label, key=key) from None

    def _cat_ranges(self, path: str, ranges: Sequence[Tuple[int, int]], key: Optional[str]) -> List[bytes]:
        """Bytes of each ``(offset, length)`` of ``path``: neighbours merged, one
        ``cat_ranges`` call (concurrent on async file systems)."""
        spans = coalesce(ranges, DEFAULT_GAP)
        if len(spans) == 1:
            start, end, _ = spans[0]
            datas = [self._call("read", lambda: self.fs.cat_file(path, start, end), key)]
        else:
            datas = self._call("read", lambda: self.fs.cat_ranges(
                [path] * len(spans), [s for s, _, _ in spans], [e for _, e, _ in spans], on_error="raise"), key)
        return split_spans(ranges, spans, [bytes(d) for d in datas])


class FsspecFile(_Guarded):
    """One object of an fsspec file system as a range source (for ``ZipStore``)."""

    immutable = True

    def __init__(self, url_or_fs: Union[str, AbstractFileSystem], path: str = "", **storage_options: Any) -> None:
        self.fs, self.path = _resolve(url_or_fs, path, storage_options)
        self.label = self.fs.unstrip_protocol(self.path)
        self.concurrency = 1 if "file" in self.fs.protocol else _CONCURRENCY

    def describe(self) -> str:
        return self.label

    def tail(self, length: int) -> Tuple[int, bytes]:
        size = int(self._call("size", lambda: self.fs.size(self.path)))
        take = min(size, length)
        return size, self.read(size - take, take)

    def read(self, offset: int, length: int) -> bytes:
        if length <= 0:
            return b""
        return bytes(self._call("read", lambda: self.fs.cat_file(self.path, offset, offset + length)))

    def read_many(self, ranges: Sequence[Tuple[int, int]]) -> List[bytes]:
        return self._cat_ranges(self.path, ranges, None)

    def close(self) -> None:
        """Nothing to release: fsspec owns its connections."""


class FsspecStore(_Guarded, ReadOnlyStore):
    """A read-only store over the files under ``root`` on an fsspec file system:
    ``FsspecStore("s3://bucket/run.mrec", anon=True)`` or ``FsspecStore(fs, "bucket/run.mrec")``."""

    immutable = True

    def __init__(self, url_or_fs: Union[str, AbstractFileSystem], path: str = "", **storage_options: Any) -> None:
        self.fs, root = _resolve(url_or_fs, path, storage_options)
        self.root = root.rstrip("/")
        self.label = self.fs.unstrip_protocol(self.root)
        self.concurrency = 1 if "file" in self.fs.protocol else _CONCURRENCY
        self._sizes: Dict[str, Optional[int]] = {}

    def describe(self) -> str:
        return self.label

    def _path(self, key: str) -> str:
        return f"{self.root}/{validate_key(key)}"

    def get(self, key: str) -> Optional[bytes]:
        path = self._path(key)
        try:
            data = self.fs.cat_file(path)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        except Exception as exc:
            raise RemoteError(f"read failed: {type(exc).__name__}: {exc}", store=self.label, key=key) from None
        return bytes(data)

    def size(self, key: str) -> Optional[int]:
        if key in self._sizes:
            return self._sizes[key]
        path = self._path(key)
        try:
            info = self.fs.info(path)
        except FileNotFoundError:
            size = None
        except Exception as exc:
            raise RemoteError(f"size failed: {type(exc).__name__}: {exc}", store=self.label, key=key) from None
        else:
            size = None if info.get("type") == "directory" else int(info.get("size") or 0)
        self._sizes[key] = size
        return size

    def get_range(self, key: str, start: int, length: Optional[int] = None) -> Optional[bytes]:
        size = self.size(key)
        if size is None:
            return None
        lo, hi = _slice_range(size, start, length)
        return self._cat_ranges(self._path(key), [(lo, hi - lo)], key)[0]

    def get_ranges(self, key: str, ranges: Sequence[Tuple[int, int]]) -> List[Optional[bytes]]:
        size = self.size(key)
        if size is None:
            return [None] * len(ranges)
        bounds = [_slice_range(size, start, length) for start, length in ranges]
        return list(self._cat_ranges(self._path(key), [(lo, hi - lo) for lo, hi in bounds], key))

    def list_dir(self, prefix: str = "") -> Tuple[List[str], List[str]]:
        _validate_prefix(prefix)
        directory = f"{self.root}/{prefix}".rstrip("/")
        try:
            entries = self.fs.ls(directory, detail=True)
        except FileNotFoundError:
            return [], []
        except Exception as exc:
            raise RemoteError(f"listing failed: {type(exc).__name__}: {exc}", store=self.label, key=prefix) from None
        keys: List[str] = []
        dirs: List[str] = []
        for entry in entries:
            name = str(entry["name"]).rstrip("/").rsplit("/", 1)[-1]
            if not name or f"{directory}/{name}".lstrip("/") == directory.lstrip("/"):
                continue  # some file systems list the directory itself
            if entry.get("type") == "directory":
                dirs.append(name)
            else:
                keys.append(name)
                self._sizes[prefix + name] = int(entry.get("size") or 0)
        return sorted(set(keys)), sorted(set(dirs))

    def list(self, prefix: str = "") -> Iterator[str]:
        keys, dirs = self.list_dir(prefix)
        merged = sorted([(name, False) for name in keys] + [(name, True) for name in dirs])
        for name, is_dir in merged:
            if is_dir:
                yield from self.list(f"{prefix}{name}/")
            else:
                yield prefix + name

    def close(self) -> None:
        """Nothing to release: fsspec owns its connections."""

