"""Staging: collection shards named by URL, downloaded whole into a node-local cache.

LMDB maps its file into memory (``mmap``), so a shard must be a local file: a store that
serves byte ranges cannot be mapped (staging#local).  ``stage(urls, cache)`` puts each shard
named by an fsspec URL (``s3://``, ``gs://``, ``https://`` ... with the matching fsspec file
system installed: s3fs, gcsfs, aiohttp for HTTP) into a cache directory and returns the
local paths, in order::

    staged = stage(["s3://bucket/train/shard-00000.mrec.lmdb", ...], "/scratch/cache")
    ...                     # open them; the shards stay in use until
    staged.release()

The cache directory is ``cache=`` (a path or a :class:`ShardCache`), else the environment
variable ``MOLREC_RAW_CACHE``; with neither, a URL is refused naming both (no silent default:
shards are large and the right disk is the user's to choose).  A shard's place in the cache
mirrors its URL: ``<cache>/<scheme>/<host>/<path>`` (the query string of a signed URL left
out, so one object signed twice is one shard).

A shard is downloaded whole to a temporary name beside its place, its size checked against
the store's listing, its SHA-256 checked against ``<url>.sha256`` (the ``sha256sum`` line
the dataset builder writes beside each shard) when the store has one, fsynced, then renamed
into place — a torn download, a wrong size or digest, a server error is a MolrecError naming
the URL, and nothing partial is left under a final name (staging#whole).  An S3 ETag is not
used as a checksum: it is the object's MD5 only for a single-part upload without SSE-KMS,
and nothing in the listing says which it is; the size and the ``.sha256`` file are the check.

Processes on one node share the cache (staging#once): a downloader holds an exclusive
``flock`` on the shard's download lock (``.<name>.download-lock``) and the others wait for
it, then find the shard in place; a shard in place is used without asking the store again
(objects are assumed immutable, as every remote store of this package assumes).  Every
process that staged a shard holds a shared ``flock`` on its use lock (``.<name>.use-lock``)
until :meth:`StagedShards.release` (or the process ends); a byte ``budget`` evicts the least
recently staged shards whose use lock it can take exclusively *without waiting* — no process
has them — until what is asked for fits (staging#evict).  Lock files stay (empty, one per
shard ever staged): removing one could split the lock between two inodes.
"""
from __future__ import annotations

import errno
import hashlib
import os
import re
import secrets
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import AbstractSet, Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import unquote, urlsplit

from molrec_raw.errors import (ChecksumMismatchError, CorruptDataError, InvalidValueError, LockUnavailableError,
                               MolrecError, RemoteError, ResourceLimitError)
from molrec_raw.zarr.fileops import FileOps
from molrec_raw.zarr.remote import is_url, url_name
from molrec_raw.zarr.urls import redact

__all__ = ["CACHE_ENV", "BUDGET_ENV", "SHARD_SUFFIX", "ShardCache", "StagedShards", "stage", "shard_urls"]

CACHE_ENV = "MOLREC_RAW_CACHE"  #: the cache directory when ``cache=`` is not given
BUDGET_ENV = "MOLREC_RAW_CACHE_BUDGET"  #: the byte budget (an integer) when ``budget=`` is not given
SHARD_SUFFIX = ".mrec.lmdb"
_DIGEST_SUFFIX = ".sha256"
_USE_LOCK, _DOWNLOAD_LOCK, _PART = ".use-lock", ".download-lock", ".part"
_CHUNK = 4 << 20  # bytes hashed per read
_SYNC_EVERY = 32 << 20  # a download's bytes flushed to disk this often while it runs
_POLL = 0.005  # seconds between looks at a file still being written
_CONCURRENCY = 4  # shards downloaded at once
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
_GLOB = re.compile(r"[*?\[]")
PathLike = Union[str, "os.PathLike[str]"]


class StagedShards(List[Path]):
    """The local paths of staged shards (a list, in the order asked for) holding each
    shard's use lock (shared) until :meth:`release` — while held, no budget evicts them
    (staging#evict).  A context manager; pickles as a plain list (locks stay with the
    process that took them; a forked child shares them until every copy is closed)."""

    def __init__(self, paths: Iterable[Path] = (), holds: Sequence[int] = ()) -> None:
        super().__init__(paths)
        self._holds = list(holds)

    @property
    def held(self) -> bool:
        """True while the use locks are held."""
        return bool(self._holds)

    def release(self) -> None:
        """Let a budget evict these shards again (idempotent)."""
        holds, self._holds = self._holds, []
        for fd in holds:
            os.close(fd)  # a close, never LOCK_UN: a forked child's copy keeps the parent's lock

    def __enter__(self) -> "StagedShards":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        self.release()

    def __reduce__(self) -> Any:
        return list, (list(self),)


class ShardCache:
    """A cache directory for shards named by URL (see the module docstring).

    ``directory`` None: the environment variable ``MOLREC_RAW_CACHE``; ``budget`` (bytes)
    None: ``MOLREC_RAW_CACHE_BUDGET`` when set, else no budget; ``storage_options`` go to
    fsspec (``{"endpoint_url": ...}`` for an S3-compatible server, credentials ...);
    ``concurrency`` shards are downloaded at once."""

    def __init__(self, directory: Optional[PathLike] = None, *, budget: Optional[int] = None,
                 storage_options: Optional[Mapping[str, Any]] = None, concurrency: int = _CONCURRENCY,
                 fileops: Optional[FileOps] = None) -> None:
        if directory is None:
            directory = os.environ.get(CACHE_ENV) or None
        if directory is None:
            raise InvalidValueError(f"shards named by URL are staged into a local directory (LMDB maps a local file): "
                                    f"pass cache=<directory> or set the environment variable {CACHE_ENV}",
                                    rule="staging#local")
        self.directory = Path(os.path.abspath(os.fspath(directory)))
        if budget is None and os.environ.get(BUDGET_ENV, "").strip():
            text = os.environ[BUDGET_ENV].strip()
            if not text.isdigit():
                raise InvalidValueError(f"{BUDGET_ENV}={text!r}: the cache budget is a number of bytes",
                                        store=str(self.directory), rule="staging#evict")
            budget = int(text)
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 0):
            raise InvalidValueError(f"budget={budget!r}: a number of bytes >= 0", store=str(self.directory),
                                    rule="staging#evict")
        if concurrency < 1:
            raise InvalidValueError(f"concurrency={concurrency!r}: at least 1", store=str(self.directory))
        self.budget = budget
        self.storage_options = dict(storage_options or {})
        self.concurrency = concurrency
        self.fileops = fileops or FileOps()

    def __repr__(self) -> str:
        return f"ShardCache({str(self.directory)!r}, budget={self.budget!r})"

    # -- where a shard goes ----------------------------------------------------------
    def path_for(self, url: str) -> Path:
        """The shard's place in the cache: ``<cache>/<scheme>/<host>/<path>`` (no query)."""
        parts = urlsplit(url)
        host = parts.netloc.rsplit("@", 1)[-1]  # credentials never become a directory name
        segments = [unquote(s) for s in parts.path.split("/") if s]
        if (not is_url(url) or not segments or any(s in (".", "..") or s.startswith(".") or "\0" in s
                                                   for s in [host, *segments])):
            raise InvalidValueError(f"{redact(url)}: not a URL of a shard this cache can hold (a scheme, a host or "
                                    "bucket, and a path of names that do not start with '.')", rule="staging#local")
        return self.directory.joinpath(parts.scheme.lower(), host or "_", *segments)

    # -- staging ---------------------------------------------------------------------
    def stage(self, urls: Iterable[str]) -> StagedShards:
        """Each shard of ``urls`` staged (downloaded when not in the cache): the local paths
        in the same order, holding their use locks (staging#whole, #once, #evict)."""
        urls = list(urls)
        places = [self.path_for(u) for u in urls]
        holds: List[int] = []
        try:
            missing: Dict[Path, str] = {}
            for url, place in zip(urls, places):
                self.fileops.makedirs(str(place.parent))
                holds.append(self._lock(_sibling(place, _USE_LOCK), exclusive=False, wait=True))
                os.utime(_sibling(place, _USE_LOCK))  # the last use, for the eviction order
                if not place.exists():
                    missing.setdefault(place, url)
            if missing:
                sizes = dict(zip(missing, self._map(self._listed_size, list(missing.items()))))
                self._make_room(sizes, set(places))
                list(self._map(self._download, [(place, url, sizes[place]) for place, url in missing.items()]))
        except BaseException:
            for fd in holds:
                os.close(fd)
            raise
        return StagedShards(places, holds)

    def _map(self, function: Any, items: List[Any]) -> List[Any]:
        if len(items) < 2 or self.concurrency < 2:
            return [function(item) for item in items]
        with ThreadPoolExecutor(min(self.concurrency, len(items)), thread_name_prefix="molrec-stage") as pool:
            futures = [pool.submit(function, item) for item in items]
            return [future.result() for future in futures]  # every download ends before the first error is raised

    def _listed_size(self, item: Tuple[Path, str]) -> int:
        """The object's size as the store lists it (a RemoteError naming the URL when the
        object is missing or the store states no size)."""
        _, url = item
        fs, path = _remote(url, self.storage_options)
        try:
            info = fs.info(path)
        except FileNotFoundError:
            raise RemoteError(f"{redact(url)}: no such object in the store", store=redact(url),
                              rule="staging#whole") from None
        except Exception as exc:
            raise _remote_failure("listing", url, exc) from None
        size = info.get("size")
        if info.get("type") == "directory" or size is None:
            raise RemoteError(f"{redact(url)}: the store lists no size for it (a directory, or a server that "
                              "states no Content-Length): its download could not be checked",
                              store=redact(url), rule="staging#whole")
        return int(size)

    def _download(self, item: Tuple[Path, str, int]) -> None:
        """Download one shard under its download lock, unless another process did meanwhile."""
        place, url, size = item
        fd = self._lock(_sibling(place, _DOWNLOAD_LOCK), exclusive=True, wait=True)
        try:
            if place.exists():
                return  # another process staged it while this one waited
            for stale in place.parent.glob(f".{place.name}.*{_PART}"):  # a killed download's leftovers
                self.fileops.unlink(str(stale))
            part = _sibling(place, f".{os.getpid()}-{secrets.token_hex(4)}{_PART}")
            try:
                self._fetch(url, part, size)
                self.fileops.fsync_file(str(part))
                self.fileops.replace(str(part), str(place))
            except BaseException:
                try:
                    self.fileops.unlink(str(part))
                except FileNotFoundError:
                    pass
                raise
            self.fileops.fsync_dir(str(place.parent))
        finally:
            self.fileops.unlock(fd)

    def _fetch(self, url: str, part: Path, size: int) -> None:
        """The object into ``part``, its size and (when the store has one) digest checked.
        fsspec writes the file in a thread of its own while this one follows it, hashing
        what arrived and flushing it to disk every ``_SYNC_EVERY`` bytes — the checks overlap
        the download instead of following it."""
        fs, path = _remote(url, self.storage_options)
        expected = None if urlsplit(url).query else self._published_digest(fs, path, url)
        failure: List[BaseException] = []
        done = threading.Event()

        def download() -> None:
            try:
                fs.get_file(path, str(part))
            except BaseException as exc:  # handed to the following thread, raised there
                failure.append(exc)
            finally:
                done.set()

        worker = threading.Thread(target=download, name="molrec-stage-get", daemon=True)
        worker.start()
        try:
            digest = _follow(part, done, expected is not None)
        finally:
            worker.join()
        if failure:
            exc = failure[0]
            if isinstance(exc, FileNotFoundError):
                raise RemoteError(f"{redact(url)}: the object disappeared during its download", store=redact(url),
                                  rule="staging#whole") from None
            raise _remote_failure("download", url, exc) from None
        got = part.stat().st_size if part.exists() else 0
        if got != size:
            raise CorruptDataError(f"{redact(url)}: the download has {got} bytes, the store lists {size}: a torn "
                                   "download (nothing was put in the cache)", store=redact(url), rule="staging#whole")
        if expected is not None and digest != expected:
            digest = _sha256(part)  # (hashed as it grew; a file system that rewrote a part is hashed again)
            if digest != expected:
                raise ChecksumMismatchError(f"{redact(url)}: SHA-256 of the download is {digest}, its "
                                            f"{url_name(url)}{_DIGEST_SUFFIX} says {expected} (nothing was put in "
                                            "the cache)", store=redact(url), rule="staging#whole")

    @staticmethod
    def _published_digest(fs: Any, path: str, url: str) -> Optional[str]:
        """The hex digest of ``<path>.sha256`` (a ``sha256sum`` line), None without one."""
        try:
            text = bytes(fs.cat_file(path + _DIGEST_SUFFIX)).decode("utf-8", "replace")
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise _remote_failure(f"reading {url_name(url)}{_DIGEST_SUFFIX}", url, exc) from None
        fields = text.split()
        name = url_name(url)
        if not fields or not _SHA256.fullmatch(fields[0]) or (len(fields) > 1 and fields[1].lstrip("*") != name):
            raise CorruptDataError(f"{redact(url)}{_DIGEST_SUFFIX}: not a sha256sum line for {name!r}: "
                                   f"{text[:120]!r}", store=redact(url), rule="staging#whole")
        return fields[0].lower()

    # -- the budget ------------------------------------------------------------------
    def usage(self) -> Dict[Path, int]:
        """Every shard in the cache and its size in bytes."""
        found: Dict[Path, int] = {}
        for root, _, files in os.walk(self.directory):
            for name in files:
                if not name.startswith("."):
                    path = Path(root, name)
                    try:
                        found[path] = path.stat().st_size
                    except FileNotFoundError:  # evicted meanwhile
                        continue
        return found

    def _make_room(self, needed: Dict[Path, int], keep: AbstractSet[Path]) -> None:
        """Evict least recently used shards not in use until ``needed`` fits the budget."""
        if self.budget is None:
            return
        present = self.usage()
        asked = sum(needed.values()) + sum(size for path, size in present.items() if path in keep)
        if asked > self.budget:
            raise ResourceLimitError(f"{self.directory}: the shards asked for take {asked} bytes, more than the "
                                     f"cache's budget of {self.budget} bytes", store=str(self.directory),
                                     rule="staging#evict")
        used = sum(present.values()) + sum(needed.values())
        for path in sorted((p for p in present if p not in keep), key=_last_use):
            if used <= self.budget:
                break
            if self._evict(path):
                used -= present[path]
        if used > self.budget:
            raise ResourceLimitError(f"{self.directory}: {used} bytes would be cached, more than the budget of "
                                     f"{self.budget} bytes, and every other shard is in use by a process",
                                     store=str(self.directory), rule="staging#evict")

    def _evict(self, path: Path) -> bool:
        """Remove one shard if no process uses or downloads it (locks taken without waiting)."""
        taken: List[int] = []
        try:
            for suffix in (_USE_LOCK, _DOWNLOAD_LOCK):
                try:
                    taken.append(self._lock(_sibling(path, suffix), exclusive=True, wait=False))
                except BlockingIOError:
                    return False
            try:
                self.fileops.unlink(str(path))
            except FileNotFoundError:
                return False
            self.fileops.fsync_dir(str(path.parent))
            return True
        finally:
            for fd in taken:
                self.fileops.unlock(fd)

    def _lock(self, path: Path, *, exclusive: bool, wait: bool) -> int:
        try:
            return self.fileops.lock(str(path), exclusive, wait)
        except BlockingIOError:
            raise
        except OSError as exc:
            if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EINVAL):
                raise LockUnavailableError(f"{self.directory}: the file system refuses flock on {path.name}; the "
                                           "shard cache needs advisory locks (a node-local disk)",
                                           store=str(self.directory), rule="staging#once") from None
            raise


def stage(urls: Iterable[str], cache: Union[None, PathLike, ShardCache] = None) -> StagedShards:
    """The shards named by ``urls`` staged into ``cache`` (a directory, a :class:`ShardCache`,
    or None for ``MOLREC_RAW_CACHE``): their local paths, in order, holding their use locks
    until ``release()`` (see the module docstring)."""
    return (cache if isinstance(cache, ShardCache) else ShardCache(cache)).stage(urls)


def shard_urls(source: Union[str, Sequence[str]], storage_options: Optional[Mapping[str, Any]] = None) -> List[str]:
    """The shard URLs a URL source names: a list as given; a URL with a glob pattern, its
    matches; a URL ending in ``.mrec.lmdb``, itself; any other URL, a directory: the
    ``*.mrec.lmdb`` objects in it.  Matches sorted by name (plain HTTP has no listing: list
    the shards)."""
    if not isinstance(source, str):
        return list(source)
    if source.endswith(SHARD_SUFFIX) and not _GLOB.search(source):
        return [source]
    fs, path = _remote(source, storage_options or {})
    pattern = path if _GLOB.search(path) else path.rstrip("/") + "/*" + SHARD_SUFFIX
    try:
        found = sorted(str(p) for p in fs.glob(pattern))
    except Exception as exc:
        raise _remote_failure("listing", source, exc) from None
    if not found:
        raise RemoteError(f"{redact(source)}: no {SHARD_SUFFIX} shards there", store=redact(source))
    return [fs.unstrip_protocol(p) for p in found]


# -- helpers ------------------------------------------------------------------------------
def _remote(url: str, storage_options: Mapping[str, Any]) -> Tuple[Any, str]:
    """(fsspec file system, path) of ``url``; an ImportError naming what to install."""
    try:
        from molrec_raw.zarr.fsspecstore import FsspecFile
        handle = FsspecFile(url, **storage_options)
    except ImportError as exc:
        raise ImportError(f"{redact(url)}: staging this URL needs {exc} (fsspec: pip install "
                          "'molrec-raw[remote]'; S3: s3fs, GCS: gcsfs, HTTP: aiohttp)") from exc
    except MolrecError as exc:
        raise exc.add_context(store=redact(url))
    return handle.fs, handle.path


def _sibling(place: Path, suffix: str) -> Path:
    """A hidden file beside ``place``: ``.<name><suffix>``."""
    return place.with_name(f".{place.name}{suffix}")


def _last_use(path: Path) -> float:
    try:
        return _sibling(path, _USE_LOCK).stat().st_mtime
    except FileNotFoundError:
        return path.stat().st_mtime if path.exists() else 0.0


def _follow(part: Path, done: threading.Event, hashing: bool) -> Optional[str]:
    """Read ``part`` as another thread writes it until ``done`` and nothing more arrives: the
    SHA-256 of what was read (None unless ``hashing``); written data is flushed to disk along
    the way (``fdatasync`` every ``_SYNC_EVERY`` bytes), so the final fsync finds little left."""
    while not part.exists():
        if done.wait(_POLL):
            if not part.exists():
                return None
            break
    digest = hashlib.sha256()
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    read = synced = 0
    with open(part, "rb", buffering=0) as fh:
        while True:
            finished = done.is_set()
            n = fh.readinto(buffer)
            if n:
                if hashing:
                    digest.update(view[:n])
                read += n
                if read - synced >= _SYNC_EVERY:
                    os.fdatasync(fh.fileno())
                    synced = read
            elif finished:
                break
            else:
                done.wait(_POLL)
    return digest.hexdigest() if hashing else None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as fh:
        while True:
            n = fh.readinto(buffer)
            if not n:
                break
            digest.update(view[:n])
    return digest.hexdigest()


def _remote_failure(what: str, url: str, exc: BaseException) -> RemoteError:
    return RemoteError(f"{redact(url)}: {what} failed: {type(exc).__name__}: {exc}", store=redact(url),
                       rule="staging#whole")
