"""The LMDB binding of a collection (lmdb.md): one environment in one file, its keys, its
``meta`` value, and each process's environments.

* One file (``subdir=False``), suffix ``.mrec.lmdb``, one unnamed database (``lmdb#L1``).
* Keys (``lmdb#L2``): ``meta`` (JSON), ``index`` (frame bytes), ``ff`` (frame bytes), and
  ``r``/``s``/``f`` followed by a big-endian u64 — record ``r``'s meta document (JSON), its
  system (frame bytes), the trajectory update at global frame ordinal ``j``.
* ``meta`` is written last, in the transaction that commits the collection; a file without
  it is not a collection (``lmdb#L3``).  It holds ``layout: "mrec-lmdb"`` and
  ``layout_version`` (``lmdb#L4``; a reader takes an absent one as the current layout), the collection document with ``molrec_version``
  (``lmdb#L5``), the ``sequence_schema`` and the counts (``lmdb#L6``).

LMDB forbids one process to open the same file twice (its locks are per process and file),
so every reader and writer of a file in a process shares one environment: :class:`Handle`,
counted, closed by its last user.  That table is this process's alone: in a child after
``fork`` the inherited environments are forgotten — dropped, never closed or used (closing
them would free the parent's reader slots) — and the first use there opens the file afresh.
py-lmdb (the ``lmdb`` extra) is imported on first use only, so ``import molrec_raw`` works
without it.
"""
from __future__ import annotations

import functools
import inspect
import os
import stat
import sys
import weakref
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Dict, Iterator, Optional, Tuple, TypeVar, cast

import orjson

from molrec_raw.collection import structure
from molrec_raw.errors import CorruptDataError, MolrecError, SpecViolationError, StoreError, UnsupportedFeatureError, brief

__all__ = [
    "LAYOUT", "LAYOUT_VERSION", "NEWEST_LAYOUT_VERSION", "META_KEY", "INDEX_KEY", "FF_KEY", "RECORD_META", "SYSTEM",
    "FRAME", "INDEX_BLOCK", "SUFFIX", "key", "key_name", "import_lmdb", "Handle", "acquire", "meta_value",
    "read_failure", "lmdb_errors", "is_lmdb_error",
]

LAYOUT = "mrec-lmdb"
LAYOUT_VERSION = 1
NEWEST_LAYOUT_VERSION = 1
META_KEY = b"meta"
INDEX_KEY = b"index"
FF_KEY = b"ff"
RECORD_META = b"r"
SYSTEM = b"s"
FRAME = b"f"
INDEX_BLOCK = "records"
SUFFIX = ".mrec.lmdb"

L1, L2, L3, L4, L5, L6 = (f"lmdb#L{n}" for n in range(1, 7))
_PREFIXED = {RECORD_META: "r", SYSTEM: "s", FRAME: "f"}


def key(prefix: bytes, n: int) -> bytes:
    """``prefix`` then ``n`` as a big-endian u64: byte order is numeric order, and a record's
    frames are one contiguous key range (lmdb#L2)."""
    return prefix + n.to_bytes(8, "big")


def key_name(raw: bytes) -> str:
    """A key as an error names it: ``meta``, ``index``, ``ff``, ``f‖42``."""
    if len(raw) == 9 and raw[:1] in _PREFIXED:
        return f"{_PREFIXED[raw[:1]]}‖{int.from_bytes(raw[1:], 'big')}"
    return raw.decode("ascii", "backslashreplace")


def import_lmdb() -> ModuleType:
    """py-lmdb, or an ImportError that names the extra."""
    try:
        import lmdb
    except ImportError:
        raise ImportError("collections (*.mrec.lmdb) need py-lmdb: pip install 'molrec-raw[lmdb]'") from None
    return lmdb


# -- the process's environments ------------------------------------------------------------
_PID = os.getpid()


class Handle:
    """One process's environment of one file, shared by its readers (and its writer).
    ``env`` is None once dropped (a ``fork`` child, or closed).  ``held``: the long-lived
    transactions opened on it (views), each with a ``forget()`` that drops its transaction
    without ending it — what a ``fork`` child does with its parent's."""

    __slots__ = ("env", "pid", "users", "identity", "path", "writable", "held")

    def __init__(self, env: Any, identity: Tuple[int, int], path: str, writable: bool) -> None:
        self.env, self.pid, self.users, self.identity, self.path, self.writable = env, _PID, 1, identity, path, writable
        self.held: "weakref.WeakSet[Any]" = weakref.WeakSet()

    @property
    def inherited(self) -> bool:
        """Opened by another process (this one is a ``fork`` child): never to be used."""
        return self.pid != _PID

    def release(self) -> None:
        """One user fewer; the last closes the environment (in the process that opened it)."""
        self.users -= 1
        if self.users > 0:
            return
        _OPEN.pop(self.identity, None)
        env, self.env = self.env, None
        if env is not None and not self.inherited:
            env.close()


_OPEN: Dict[Tuple[int, int], Handle] = {}


def _forget_inherited() -> None:
    """In a ``fork`` child: drop (never close, never use) every environment of the parent, so
    py-lmdb lets this process open the files again (lmdb.md "One writer at a time; readers
    take LMDB's reader lock" — each process its own environment)."""
    global _PID
    _PID = os.getpid()
    for handle in _OPEN.values():
        for held in list(handle.held):
            held.forget()
        handle.env = None
    _OPEN.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_inherited)


def _identity(path: str) -> Tuple[int, int, bool]:
    """The file's device and inode (one file, however it is named) and whether it is a directory."""
    st = os.stat(path)
    return st.st_dev, st.st_ino, stat.S_ISDIR(st.st_mode)


def _lmdb_failure(exc: Exception, path: str, what: str) -> MolrecError:
    lmdb = import_lmdb()
    message = f"{what}: {exc}"
    if isinstance(exc, getattr(lmdb, "InvalidError", ())) or "MDB_INVALID" in str(exc):
        return CorruptDataError(f"{what}: the file is not an LMDB environment ({exc})", store=path, rule=L1)
    if isinstance(exc, getattr(lmdb, "VersionMismatchError", ())):
        return UnsupportedFeatureError(message, store=path, rule=L1)
    return StoreError(message, store=path, rule=L1)


# py-lmdb's errors that say the file's pages are not what LMDB wrote (damaged bytes)
_DAMAGE_ERRORS = ("CorruptedError", "PageNotFoundError", "BadValsizeError", "PageFullError", "BadTxnError",
                  "InvalidError", "BadDbiError", "IncompatibleError")


def read_failure(exc: BaseException, path: str) -> MolrecError:
    """A py-lmdb error out of a read as this package's error, naming the file (lmdb#L1):
    damaged pages (``MDB_CORRUPTED``, ``MDB_PAGE_NOTFOUND``, ...) as ``CorruptDataError``,
    anything else LMDB refuses as ``StoreError``."""
    name = type(exc).__name__
    text = " ".join(str(exc).split()) or name
    if name in _DAMAGE_ERRORS:
        return CorruptDataError(f"LMDB finds the file damaged ({text}): restore it from a copy", store=path, rule=L1)
    return StoreError(f"LMDB failed to read the file ({text})", store=path, rule=L1)


_F = TypeVar("_F", bound=Callable[..., Any])


def is_lmdb_error(exc: BaseException) -> bool:
    """Whether ``exc`` is py-lmdb's (then :func:`read_failure` names it)."""
    lmdb = sys.modules.get("lmdb")
    return lmdb is not None and isinstance(exc, getattr(lmdb, "Error", ()))


def lmdb_errors(where: Callable[[Any], str]) -> Callable[[_F], _F]:
    """A method (or generator method) whose py-lmdb errors become :func:`read_failure`'s
    MolrecError naming the file ``where(self)`` — every read of a collection goes through
    one, so damaged bytes never surface as py-lmdb's own exception."""
    def wrap(method: _F) -> _F:
        if inspect.isgeneratorfunction(method):
            @functools.wraps(method)
            def generator(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
                try:
                    yield from method(self, *args, **kwargs)
                except Exception as exc:
                    if is_lmdb_error(exc):
                        raise read_failure(exc, where(self)) from None
                    raise
            return cast(_F, generator)

        @functools.wraps(method)
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            except Exception as exc:
                if is_lmdb_error(exc):
                    raise read_failure(exc, where(self)) from None
                raise
        return cast(_F, call)
    return wrap


def acquire(path: Path, *, writable: bool = False, map_size: int = 1 << 28, durable: bool = True,
            check_structure: bool = True) -> Handle:
    """This process's environment of ``path``: shared when already open here, else opened —
    read-only with the reader lock (a reader), or read-write (a writer creating the file).

    A reader's open first checks the file's structure in Python (:func:`structure.check_file`,
    lmdb#L18, lmdb#L19), before liblmdb maps it or creates its ``-lock`` file: a file cut short or
    with a damaged page is refused with a CorruptDataError naming the file and the page, never a
    SIGBUS.  ``check_structure=False`` skips that (a file known good); never the default.  A
    writer's open is of the file it has just created (it never opens an existing one)."""
    lmdb = import_lmdb()
    where = str(path)
    try:
        device, inode, directory = _identity(where)
    except FileNotFoundError:
        raise StoreError(f"{where}: no such file (a collection is one *.mrec.lmdb file)", store=where,
                         rule=L1) from None
    except OSError as exc:
        raise StoreError(f"{where}: cannot open: {exc.strerror}", store=where, rule=L1) from None
    identity = device, inode
    if directory:
        raise StoreError(f"{where}: a collection is one file (subdir=False), not a directory", store=where, rule=L1)
    handle = _OPEN.get(identity)
    if handle is not None and handle.env is not None and not handle.inherited:
        handle.users += 1
        return handle
    if not writable and check_structure:
        try:
            structure.check_file(where)
        except OSError as exc:
            raise StoreError(f"{where}: cannot read: {exc.strerror}", store=where, rule=L1) from None
    try:
        if writable:
            env = lmdb.open(where, subdir=False, map_size=map_size, readonly=False, lock=True, max_dbs=0,
                            readahead=False, meminit=True, sync=durable, metasync=durable)
        else:
            # no spare read transaction: a fork child freeing the inherited environment would end
            # it, releasing the parent's reader slot to another process (MDB_BAD_RSLOT in the parent)
            env = lmdb.open(where, subdir=False, readonly=True, lock=True, max_dbs=0, readahead=False,
                            max_spare_txns=0)
    except lmdb.Error as exc:
        if "already open" in str(exc):
            raise StoreError("the file is held by an environment this process inherited through fork (a view "
                             "or transaction opened before forking is still alive here): close it, or open "
                             "readers after forking", store=where, rule=L1) from None
        if not writable and isinstance(exc, getattr(lmdb, "ReadonlyError", ())) or "Permission denied" in str(exc) \
                or "Read-only file system" in str(exc):
            raise StoreError(f"cannot take LMDB's reader lock ({exc}): a collection on read-only media is "
                             "copied first (lmdb.md)", store=where, rule=L1) from None
        raise _lmdb_failure(exc, where, "cannot open the LMDB environment") from None
    handle = Handle(env, identity, where, writable)
    _OPEN[identity] = handle
    return handle


# -- the meta value ------------------------------------------------------------------------
def meta_value(collection: Dict[str, Any], schema: Dict[str, Any], n_records: int, n_frames: int) -> bytes:
    """The ``meta`` value (lmdb#L3–L6): layout, its version, the collection document, the
    declaration and the counts."""
    return orjson.dumps({"layout": LAYOUT, "layout_version": LAYOUT_VERSION, "collection": collection,
                         "sequence_schema": schema, "n_records": n_records, "n_frames": n_frames},
                        option=orjson.OPT_SERIALIZE_NUMPY)


def read_meta_value(raw: Optional[bytes], path: str) -> Dict[str, Any]:
    """The ``meta`` value parsed and its binding fields checked: present (``lmdb#L3``),
    ``layout``, and ``layout_version`` when present (``lmdb#L4``: a version this reader
    knows; absent is the current layout, README#decision-21), the counts (``lmdb#L6``).  The
    collection document and the declaration are the caller's to check."""
    node = "/meta"
    if raw is None:
        raise SpecViolationError("no 'meta' key: this file is not a collection (a writer writes it last, when it "
                                 "commits the collection; was the writer interrupted?)", store=path, key="meta",
                                 node=node, rule=L3)
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise CorruptDataError(f"the 'meta' value is not UTF-8 JSON: {exc}", store=path, key="meta", node=node,
                               rule=L3) from None
    if type(doc) is not dict:
        raise CorruptDataError(f"the 'meta' value is not a JSON object: {brief(doc)}", store=path, key="meta",
                               node=node, rule=L3)
    if doc.get("layout") != LAYOUT:
        raise SpecViolationError(f"layout {brief(doc.get('layout'))} is not {LAYOUT!r}: not a collection in this "
                                 "binding", store=path, key="meta", node=node, rule=L4)
    if "layout_version" in doc:  # absent: the current layout (the newest lmdb.md has none, README#decision-21)
        version = doc["layout_version"]
        if type(version) is not int or not 1 <= version <= NEWEST_LAYOUT_VERSION:
            error = UnsupportedFeatureError if type(version) is int and version > NEWEST_LAYOUT_VERSION \
                else SpecViolationError
            raise error(f"layout_version {brief(version)} is not an integer in 1..{NEWEST_LAYOUT_VERSION} (the "
                        "newest this reader knows)", store=path, key="meta", node=node, rule=L4)
    for name in ("n_records", "n_frames"):
        value = doc.get(name)
        if type(value) is not int or value < 0:
            raise SpecViolationError(f"{name} {brief(value)} is not a non-negative integer", store=path, key="meta",
                                     node=node, rule=L6)
    for name in ("collection", "sequence_schema"):
        if name not in doc:
            raise SpecViolationError(f"the 'meta' value has no {name!r}", store=path, key="meta", node=node, rule=L3)
    return doc
