"""Whole-record doors (names as in the reference implementation, molrs 0.16).

A record is a ``*.mrec`` directory whose root is a Zarr V3 group; readers also open a
``*.mrec.zip``, and a packed record held in memory (``bytes``, ``bytearray``,
``memoryview``).  Writers build the record beside the target and swap it in, so an
existing record is never half-replaced, and they never delete anything that is not a
record or an empty directory.  A ``*.mrec.zip`` target is written as a packed record
(built in a hidden directory beside it, packed by the one packer, renamed into place), and
a ``bytearray`` target receives the bytes of a packed record.  Write order: root
``zarr.json``, ``meta/`` (caller's document with ``molrec_version`` stamped), then the
sections (root-layout invariant 6).
"""
from __future__ import annotations

import errno
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, Union, overload
from urllib.parse import urlsplit

from molrec_raw.errors import (InvalidValueError, NodeNotFoundError, NotARecordError, ReadOnlyError, RecordExistsError,
                               SpecViolationError, StoreError, UnsupportedFeatureError)
from molrec_raw.record import documents
from molrec_raw.record.locking import lock_writer
from molrec_raw.record.frame_io import MISSING_BLOCK, RowsOf, read_frame_group, write_frame_group
from molrec_raw.record.model import Frame
from molrec_raw.record.packer import is_packed_name, pack_directory
from molrec_raw.record.units import refuse_units_in_meta
from molrec_raw.record.violations import refuse
from molrec_raw.zarr import DirectoryStore, Group, Store, ZipStore, open_group
from molrec_raw.zarr.fileops import FileOps, PoisonGuard
from molrec_raw.zarr.remote import is_url, redact, url_name
from molrec_raw.zarr.store import PathLike, StoreLike
from molrec_raw.zarr.zipstore import Buffer, BytesSource

# What a reading door takes: a local path, a URL (read-only) or an open Store; the whole-
# record doors and MrecReader also take the bytes of a packed record (bytes, bytearray,
# memoryview).
RecordSource = Union[PathLike, Store]
RecordInput = Union[PathLike, Store, Buffer]

__all__ = [
    "write_mrec_frame", "write_mrec_system", "write_mrec_forcefield", "read_mrec_frame",
    "read_mrec_system", "read_mrec_forcefield", "read_mrec_meta", "section_names",
    "check_record_path", "open_record", "opened_record", "record_source", "RecordSource", "RecordInput", "claim_target",
    "local_record_problem", "not_a_record", "require_record_directory",
    "interrupted_swap", "swap_leftover", "settle_swap", "packed_build", "PackedBuild",
    "RecordTarget", "claim_packed_target",
]

_FRAME_SECTIONS = ("frame", "system")


def _check_record_name(name: str, shown: str) -> None:
    """Refuse a record named ``*.zarr`` / ``*.zarr.zip`` (``name``, the last segment of the
    path or URL ``shown``, which the message starts with)."""
    lowered = name.lower()
    if lowered.endswith(".zarr") or lowered.endswith(".zarr.zip"):
        raise SpecViolationError(
            f"{shown}: a MolRec record is a '*.mrec' directory (or '*.mrec.zip'); "
            "'.zarr' names a plain Zarr store, and tools find records by the .mrec suffix: rename it",
            store=shown, rule="root-layout#1",
        )


def check_record_path(path: PathLike) -> Path:
    """The local path of a record to write (or read): not named ``*.zarr`` / ``*.zarr.zip``
    — that names a generic Zarr store, and tools discover records by the ``*.mrec`` suffix
    (root-layout invariant 1) — and not a URL: records named by URL are read-only."""
    if isinstance(path, (bytes, bytearray, memoryview)):
        raise InvalidValueError(f"a {type(path).__name__} is not a path: a record in memory is written into a "
                                "bytearray by the whole-record doors (write_mrec, write_mrec_frame, write_mrec_system, "
                                "write_mrec_forcefield, write_mrec_trajectory) and read from bytes by the reading "
                                "doors and MrecReader; this door takes a path")
    if is_url(path):
        raise ReadOnlyError(f"{redact(str(path))}: a record named by URL is read-only; writers take a local path "
                            "(write the record locally, pack it, then upload the *.mrec.zip)")
    p = Path(path)
    _check_record_name(p.name, str(path))
    return p


def record_source(source: RecordInput) -> StoreLike:
    """What a reading door opens: an open ``Store`` as given; a URL (``http(s)://``,
    ``s3://``, ``gs://``, ... — see ``molrec_raw.zarr.remote``) with its name checked like a
    path; else a local path (:func:`check_record_path`).  A directory record over plain HTTP
    is refused: HTTP has no listing, and a record's sections are found by listing.  A local
    path that does not exist is refused as such ("no such file or directory") — unless a
    crash interrupted a two-rename swap there: then the record it left (:func:`swap_leftover`)
    is read, without renaming anything.  Bytes (``bytes``, ``bytearray``, ``memoryview``)
    are a packed record in memory: a read-only zip store over them, through the same checks
    as a ``*.mrec.zip`` file (a ``bytearray`` or ``memoryview`` is copied once)."""
    if isinstance(source, Store):
        return source
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _buffer_store(source)
    if is_url(source):
        url = str(source)
        name = url_name(url)
        _check_record_name(name, redact(url))
        if urlsplit(url).scheme.lower() in ("http", "https") and not name.lower().endswith(".zip"):
            raise UnsupportedFeatureError(
                f"{redact(url)}: a directory record cannot be read over plain HTTP, which has no listing: pack it "
                "(molrec-raw pack) and serve the *.mrec.zip, or put it on an object store and open an "
                "s3://, gs://, az://... URL (pip install 'molrec-raw[remote]')", store=redact(url))
        return url
    local = check_record_path(source)
    if not local.exists():
        leftover = swap_leftover(local)  # a two-rename swap a crash interrupted: read what it left
        if leftover is not None:
            return leftover
    problem = local_record_problem(local)
    if problem is not None:
        raise not_a_record(local, problem)
    return local


_RECORD_IS = "a record is a *.mrec directory holding a root zarr.json, or a *.mrec.zip archive"
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06", b"PK\x06\x06")  # local header; empty archive; ZIP64 end


def _buffer_store(data: Buffer) -> Store:
    """A read-only zip store over a packed record in memory, or the one answer to bytes that
    are not one (:func:`not_a_record`)."""
    source = BytesSource(data)
    head = source.read(0, 4)
    problem = "empty bytes" if not head else (None if head in _ZIP_MAGIC else "bytes that are not a zip archive")
    if problem is not None:
        raise not_a_record(source.describe(), problem)
    return ZipStore(source)


def local_record_problem(path: Path) -> Optional[str]:
    """Why the local ``path`` is not a record, or None when it may be one (a directory with a
    root ``zarr.json``, or a file that starts as a zip archive).  Cheap: a stat and at most
    four bytes read."""
    if not os.path.lexists(path):
        return "no such file or directory"
    if path.is_dir():
        return None if (path / "zarr.json").is_file() else "a directory without a root zarr.json"
    if not path.is_file():
        return "neither a directory nor a file" if not path.is_symlink() else "a dangling symbolic link"
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    if not head:
        return "an empty file"
    if head not in _ZIP_MAGIC:
        return "a file that is not a zip archive"
    return None


def not_a_record(path: PathLike, why: str) -> NotARecordError:
    """The one answer to a path that is not a record, whichever door or subcommand meets it:
    ``<path>: no such file or directory``, or ``<path>: not a MolRec record (<why>); a record
    is ...``."""
    if why == "no such file or directory":
        return NotARecordError(f"{path}: no such file or directory", store=str(path))
    return NotARecordError(f"{path}: not a MolRec record ({why}); {_RECORD_IS}", store=str(path))


def require_record_directory(path: Path, what: str) -> None:
    """Refuse a path that is not a record directory: the one answer (:func:`not_a_record`),
    or, for a packed record, that ``what`` (``repair``, ``pack``) takes a directory."""
    problem = local_record_problem(path)
    if problem is not None:
        raise not_a_record(path, problem)
    if not path.is_dir():
        raise StoreError(f"{path}: {what} works on a record directory; a *.mrec.zip is read-only "
                         "(unpack it first)", store=str(path))


def open_record(path: RecordInput) -> Group:
    """Open a record's root group read-only (directory, zip, URL or store) and check its version."""
    root = open_group(record_source(path), mode="r")
    refuse(documents.check_meta(_meta_attrs(root)))
    return root


@contextmanager
def opened_record(path: RecordInput) -> Iterator[Group]:
    """:func:`open_record` for one read: the store is closed afterwards unless the caller
    passed it in."""
    root = open_record(path)
    try:
        yield root
    finally:
        if not isinstance(path, Store):
            root.store.close()


def _meta_attrs(root: Group) -> Dict[str, Any]:
    meta = root.get("meta")
    return dict(meta.attrs) if isinstance(meta, Group) else {}  # missing meta/ ≡ {} (14.24)


def _rows_of(root: Group) -> RowsOf:
    """Row counts of blocks in the record's frame-shaped sections, for absolute targets."""
    def rows(section: str, block: str) -> Optional[int]:
        if section not in _FRAME_SECTIONS:
            return None
        if not isinstance(root.get(section), Group):
            return None
        node = root.get(f"{section}/{block}")
        count = node.attrs.get("count") if isinstance(node, Group) else None
        return count if isinstance(count, int) and not isinstance(count, bool) else MISSING_BLOCK
    return rows


def section_names(path: RecordInput) -> List[str]:
    """The record's root sections (every child group, known or not), sorted."""
    with opened_record(path) as root:
        return [name for name, node in root.members() if isinstance(node, Group)]


def read_mrec_meta(path: RecordInput) -> Dict[str, Any]:
    """The ``meta`` document exactly as stored (not re-stamped; README decision 1)."""
    with opened_record(path) as root:
        return _meta_attrs(root)


def _read_section(path: RecordInput, name: str) -> Frame:
    with opened_record(path) as root:
        group = root.get(name)
        if not isinstance(group, Group):
            raise NodeNotFoundError(f"{root.store.describe()}: record has no {name!r} section",
                                    store=root.store.describe(), node=name)
        return read_frame_group(group, rows_of=_rows_of(root))


def read_mrec_forcefield(path: RecordInput) -> Any:
    """The record's force field (values as stored, decisions 11 and 15), or None."""
    from molrec_raw.record.forcefield import read_forcefield_group

    with opened_record(path) as root:
        group = root.get("forcefield")
        return read_forcefield_group(group) if isinstance(group, Group) else None


def read_mrec_frame(path: RecordInput) -> Frame:
    """The record's ``frame`` section; ``path`` is a local path, a URL, an open store or a
    packed record's bytes."""
    return _read_section(path, "frame")


def read_mrec_system(path: RecordInput) -> Frame:
    """The record's ``system`` section; ``path`` is a local path, a URL, an open store or a
    packed record's bytes."""
    return _read_section(path, "system")


# -- writing --------------------------------------------------------------------------------
def _frame_rows_of(sections: Mapping[str, Optional[Frame]]) -> RowsOf:
    def rows(section: str, block: str) -> Optional[int]:
        frame = sections.get(section) if section in _FRAME_SECTIONS else None
        if frame is None:
            return None
        return frame.blocks[block].nrows if block in frame.blocks else MISSING_BLOCK
    return rows


_NEW, _OLD = ".molrec-new-", ".molrec-old-"  # staging and retired names: .<name><tag><pid>
PACKED = ".molrec-packed-"  # a source pack --remove-source retired (its zip is complete): .<name><tag><pid>
_SWAP_ERRNOS = (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV)


def _is_record(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink() and (path / "zarr.json").is_file()


def interrupted_swap(target: Path) -> Optional[Tuple[Path, Path]]:
    """``(new, old)`` when a crash interrupted a two-rename swap at ``target`` (spec-notes/
    record.md "Paths and replacement"): ``target`` is missing and ``.<name>.molrec-old-<pid>``
    holds the old record, ``.<name>.molrec-new-<pid>`` (same pid; it may be missing) the new
    one.  None otherwise — the target exists, or nothing was interrupted mid-swap."""
    if target.exists() or target.is_symlink():
        return None
    prefix = f".{target.name}{_OLD}"
    try:
        names = sorted(os.listdir(target.parent))
    except OSError:
        return None
    for name in names:
        old = target.parent / name
        if name.startswith(prefix) and old.is_dir() and not old.is_symlink():
            return target.with_name(f".{target.name}{_NEW}{name[len(prefix):]}"), old
    return None


def swap_leftover(target: Path) -> Optional[Path]:
    """What stands for a missing ``target`` after an interrupted two-rename swap: the new
    record (complete: the first rename comes after its build was synced), else the old one
    (None: no interrupted swap).  What a reader opens; it renames nothing."""
    found = interrupted_swap(target)
    if found is None:
        return None
    new, old = found
    return new if _is_record(new) else (old if _is_record(old) else None)


def _remove(ops: FileOps, path: Path) -> None:
    """``rmtree`` that a concurrent removal of the same leftover does not fail."""
    try:
        ops.rmtree(str(path))
    except FileNotFoundError:
        pass


def settle_swap(target: Path, fileops: Optional[FileOps] = None) -> None:
    """Finish what a crash left of a two-rename swap at ``target``, as every writer does
    before it touches the path: a missing target gets the new record of the interrupted
    swap back under its name (or the old one, when the new one is not a record), durably;
    then the retired records of swaps that completed (``.<name>.molrec-old-*``; and
    ``.<name>.molrec-new-*``, which after an exchange names the old record, or is the staging
    of a door whose clean-up failed) are removed, and the rest of a source that ``pack
    --remove-source`` had retired (``.<name>.molrec-packed-*``)."""
    ops = fileops if fileops is not None else FileOps()
    found = interrupted_swap(target)
    if found is not None:
        new, old = found
        keep, drop = (new, old) if _is_record(new) else (old, new)
        ops.replace(str(keep), str(target))
        ops.fsync_dir(str(target.parent))
        _remove(ops, drop)
    retired = (f".{target.name}{_OLD}", f".{target.name}{_NEW}")  # under the lock: no writer builds one now
    try:
        names = sorted(os.listdir(target.parent))
    except OSError:
        return
    present = target.exists() or target.is_symlink()
    for name in names:
        if (name.startswith(retired) and present) or name.startswith(f".{target.name}{PACKED}"):
            _remove(ops, target.parent / name)


@overload
def replace_record(path: PathLike, build: Callable[[Group], object], durable: bool = True,
                   fileops: Optional[FileOps] = None, *, overwrite: bool = False,
                   lock: Optional[bool] = None) -> Path: ...


@overload
def replace_record(path: bytearray, build: Callable[[Group], object], durable: bool = True,
                   fileops: Optional[FileOps] = None, *, overwrite: bool = False,
                   lock: Optional[bool] = None) -> bytearray: ...


def replace_record(path: Union[PathLike, bytearray], build: Callable[[Group], object], durable: bool = True,
                   fileops: Optional[FileOps] = None, *, overwrite: bool = False,
                   lock: Optional[bool] = None) -> Union[Path, bytearray]:
    """Build a record beside ``path`` with ``build(root_group)``, then swap it in, holding
    the record's writer lock exclusively from before the first look at ``path`` until after
    the swap (record/locking.py; ``lock`` False: the caller coordinates writers).

    An existing record at ``path`` is replaced only with ``overwrite=True``
    (:class:`~molrec_raw.errors.RecordExistsError` otherwise); an empty directory is written
    into; anything else is refused and left untouched.  ``durable`` fsyncs every file
    and directory of the new record before the swap, so a power loss never leaves a
    renamed record with missing bytes (cost: one fsync per file), and the directory
    holding it after the swap.  The swap of an existing record is one atomic exchange of
    the two names (``renameat2(RENAME_EXCHANGE)``): a crash leaves the old record or the
    new one at ``path``, never none.  Where the system cannot exchange, two renames are
    used (the old record to ``.<name>.molrec-old-<pid>``, the new one from
    ``.<name>.molrec-new-<pid>`` to ``path``): a crash between them leaves both names, which
    readers read through (:func:`swap_leftover`) and the next writer completes
    (:func:`settle_swap`) — the old record or the new one either way (spec-notes/record.md).
    Every file mutation goes through ``fileops`` (default: the system's calls).

    A ``*.mrec.zip`` path is written as a packed record: built in
    ``.<name>.molrec-new-<pid>`` beside it, packed by the one packer (a temporary zip,
    fsynced, read back, renamed over ``path``, the directory synced), the build directory
    removed; an existing packed record there is replaced only with ``overwrite=True``, and
    anything else at that name (a directory, a file that is not a zip) is refused.  A
    ``bytearray`` receives the bytes of the packed record (its content replaced), built in a
    private temporary directory; nothing else is written.
    """
    if isinstance(path, bytearray):
        return _build_into_buffer(path, build)
    target = check_record_path(path).absolute()
    with lock_writer(target, writer="whole-record writer", lock=lock, fileops=fileops):
        with reported_io_failures(fileops, f"the whole-record writer of {target}") as ops:
            settle_swap(target, ops)
            if is_packed_name(target):
                claim_packed_target(target, overwrite)
                return _build_and_pack(target, build, ops)
            claim_target(target, overwrite)
            return _build_and_swap(target, build, durable, ops)


def claim_packed_target(target: Path, overwrite: bool) -> None:
    """The overwrite policy for a ``*.mrec.zip`` target (spec-notes/safety.md): a missing
    path is written; an existing packed record only with ``overwrite`` (``--force``), else
    :class:`~molrec_raw.errors.RecordExistsError`; anything else (a directory under that
    name, a file that is not a zip archive) never."""
    if not (target.exists() or target.is_symlink()):
        return
    if target.is_dir() or local_record_problem(target) is not None:
        raise StoreError(f"{target}: refusing to replace it: a *.mrec.zip target is written as one zip file, and "
                         f"the path holds {'a directory' if target.is_dir() else 'a file that is not a packed record'}",
                         store=str(target), rule="trajectory#15")
    if not overwrite:
        raise RecordExistsError(f"{target} is an existing packed record; refusing to replace it (pass "
                                "overwrite=True, or --force on the command line)", store=str(target),
                                rule="safety#overwrite")


def _build_and_pack(target: Path, build: Callable[[Group], object], ops: FileOps) -> Path:
    """The zip-target body of :func:`replace_record`, under the lock: build in a hidden
    directory beside the target, pack it over the target, remove the directory."""
    staging = target.with_name(f".{target.name}{_NEW}{os.getpid()}")
    ops.rmtree(str(staging))
    try:
        root = open_group(DirectoryStore(staging, fileops=ops), mode="w")
        build(root)
        root.store.close()
        pack_directory(staging, target, None, ops, overwrite=True)  # the claim was checked under the lock
    finally:
        try:
            ops.rmtree(str(staging))
        except OSError:  # the first failure is what the caller hears of; the next writer removes it
            pass
    return target


class _Scratch(FileOps):
    """The file operations of a private build that is read back and removed: nothing in it
    needs to survive a power cut, so nothing is synced (an in-memory record costs no fsync)."""

    def fsync(self, fd: int) -> None:
        pass

    def fsync_file(self, path: str) -> None:
        pass

    def fsync_dir(self, path: str) -> None:
        pass


def _build_into_buffer(sink: bytearray, build: Callable[[Group], object]) -> bytearray:
    """The ``bytearray`` body of :func:`replace_record`: build and pack in a private
    temporary directory (never synced), then put the packed bytes into ``sink`` (only when
    all went well)."""
    with tempfile.TemporaryDirectory(prefix="molrec-raw-") as private:
        directory, archive = Path(private) / "record.mrec", Path(private) / "record.mrec.zip"
        ops = _Scratch()
        root = open_group(DirectoryStore(directory, fileops=ops), mode="w")
        build(root)
        root.store.close()
        pack_directory(directory, archive, None, ops, overwrite=False)
        sink[:] = archive.read_bytes()
    return sink


class PackedBuild:
    """Where a streaming writer builds a ``*.mrec.zip`` target (:func:`packed_build`): a
    hidden directory ``.<name>.molrec-run-<random>`` beside it, holding the packed record
    already there (extracted) if any; :meth:`pack` packs it over the target and removes it.
    A crash before :meth:`pack` leaves the target as it was and the directory, a record
    with every committed frame (spec-notes/safety.md, "Packed targets")."""

    def __init__(self, target: Path, ops: FileOps) -> None:
        self.target, self._ops = target, ops
        if target.exists() or target.is_symlink():
            if target.is_dir() or local_record_problem(target) is not None:
                raise StoreError(f"{target}: a *.mrec.zip target is written as one zip file, and the path holds "
                                 f"{'a directory' if target.is_dir() else 'a file that is not a packed record'}",
                                 store=str(target), rule="trajectory#15")
        self.directory = Path(tempfile.mkdtemp(prefix=f".{target.name}.molrec-run-", dir=target.parent))
        try:
            if target.exists():
                with ZipStore(target) as archive:
                    out = DirectoryStore(self.directory, fileops=ops)
                    for key in archive.list(""):
                        data = archive.get(key)
                        if data is not None:
                            out.set(key, data)
        except BaseException:
            self.discard()
            raise

    def pack(self) -> None:
        """Pack the build over the target (durably: the zip fsynced, renamed, its directory
        synced), then remove the build."""
        pack_directory(self.directory, self.target, None, self._ops, overwrite=True)
        self.discard()

    def discard(self) -> None:
        """Remove the build (what a failed run leaves is not packed)."""
        try:
            self._ops.rmtree(str(self.directory))
        except OSError:
            pass


def packed_build(target: Path, ops: FileOps) -> Optional[PackedBuild]:
    """The build directory of a streaming writer whose target is a ``*.mrec.zip`` (None for
    a directory target)."""
    return PackedBuild(target.absolute(), ops) if is_packed_name(target) else None


@contextmanager
def reported_io_failures(fileops: Optional[FileOps], what: str) -> Iterator[FileOps]:
    """The seam of a one-shot door (``safety#poison``): it remembers the first I/O failure
    and, when an ``OSError`` or a store's wrapping of it escapes the door, raises that failure
    (an :class:`~molrec_raw.errors.IOFailureError` naming the operation, the path and the
    errno) instead; the door's clean-up of its private staging still runs after it."""
    seam = PoisonGuard(fileops, what=what, refuse=False)
    try:
        yield seam
    except (OSError, StoreError) as exc:
        seam.fail(exc)


def claim_target(target: Path, overwrite: bool) -> None:
    """The overwrite policy of every door that writes a record at a path (spec-notes/safety.md):
    a missing path or an empty directory is written; an existing record only with
    ``overwrite`` (``--force``), else :class:`~molrec_raw.errors.RecordExistsError`; anything
    else (a file, a directory that is not a record) never."""
    if not (target.exists() or target.is_symlink()):
        return
    is_record = target.is_dir() and (target / "zarr.json").is_file()
    if not (is_record or (target.is_dir() and not any(target.iterdir()))):
        raise StoreError(
            f"{target}: refusing to replace it: the path exists and is neither a record (no root zarr.json) "
            "nor an empty directory (move it away, or write the record elsewhere)", store=str(target),
        )
    if is_record and not overwrite:
        raise RecordExistsError(f"{target} is an existing record; refusing to replace it (pass overwrite=True, "
                                "or --force on the command line)", store=str(target), rule="safety#overwrite")


def _build_and_swap(target: Path, build: Callable[[Group], object], durable: bool, ops: FileOps) -> Path:
    """The body of :func:`replace_record`, under the lock: build beside, swap in."""
    staging = target.with_name(f".{target.name}{_NEW}{os.getpid()}")
    ops.rmtree(str(staging))
    try:
        root = open_group(DirectoryStore(staging, fileops=ops), mode="w")  # the root zarr.json lands first
        build(root)
        if durable:
            root.store.sync(root.store.list(""))
    except BaseException:
        try:
            ops.rmtree(str(staging))
        except OSError:
            pass
        raise
    parent = str(target.parent)
    if target.is_dir():
        try:  # one atomic step: afterwards ``staging`` names the old record
            ops.exchange(str(staging), str(target))
            retired = staging
        except OSError as exc:
            if exc.errno not in _SWAP_ERRNOS:
                raise StoreError(f"{target}: cannot swap in the new record: {exc.strerror or exc}",
                                 store=str(target)) from None
            retired = target.with_name(f".{target.name}{_OLD}{os.getpid()}")
            ops.replace(str(target), str(retired))  # from here until the next rename: see settle_swap
            ops.replace(str(staging), str(target))
        if durable:
            ops.fsync_dir(parent)
        _remove(ops, retired)
    else:
        ops.replace(str(staging), str(target))
        if durable:
            ops.fsync_dir(parent)
    return target


def write_sections(root: Group, meta: Optional[Dict[str, Any]], sections: Dict[str, Optional[Frame]],
                   forcefield: Any = None, extra_sections: Iterable[str] = ()) -> None:
    """``meta/`` first, then the frame-shaped sections (system before frame).  Refuses a
    record without a substantive section (decision 2), counting ``extra_sections`` that
    the caller writes afterwards."""
    present = [name for name, frame in sections.items() if frame is not None]
    refuse(documents.check_sections(present + (["forcefield"] if forcefield is not None else []) + list(extra_sections)))
    stamped = documents.stamp_meta(meta)
    refuse(documents.check_finite_json(stamped, "/meta", "frame-and-types#14.41"))
    refuse(documents.check_meta(stamped, writing=True))
    root.create_group("meta", attributes=stamped)
    rows_of = _frame_rows_of(sections)
    for name in ("system", "frame"):
        frame = sections.get(name)
        if frame is not None:
            write_frame_group(root, name, frame, rows_of=rows_of)
    if forcefield is not None:
        from molrec_raw.record.forcefield import write_forcefield_group
        write_forcefield_group(root, forcefield)


def target_name(path: Union[PathLike, bytearray]) -> str:
    """A writing door's target as its messages name it."""
    return "the record being written (a bytearray)" if isinstance(path, bytearray) else str(path)


# A writing door's target: a local path (``*.mrec`` directory, ``*.mrec.zip`` packed record)
# or a ``bytearray`` that receives the packed record.
RecordTarget = Union[PathLike, bytearray]


@overload
def write_mrec_frame(path: PathLike, frame: Frame, system: Optional[Frame] = None,
                     meta: Optional[Dict[str, Any]] = None, forcefield: Any = None, *,
                     durable: bool = True, fileops: Optional[FileOps] = None, overwrite: bool = False) -> Path: ...


@overload
def write_mrec_frame(path: bytearray, frame: Frame, system: Optional[Frame] = None,
                     meta: Optional[Dict[str, Any]] = None, forcefield: Any = None, *,
                     durable: bool = True, fileops: Optional[FileOps] = None, overwrite: bool = False) -> bytearray: ...


def write_mrec_frame(path: RecordTarget, frame: Frame, system: Optional[Frame] = None,
                     meta: Optional[Dict[str, Any]] = None, forcefield: Any = None, *,
                     durable: bool = True, fileops: Optional[FileOps] = None,
                     overwrite: bool = False) -> Union[Path, bytearray]:
    """Write a record holding ``frame`` (and optionally ``system`` and a force field); an
    existing record at ``path`` is replaced only with ``overwrite=True``.  A ``*.mrec.zip``
    path is written as a packed record; a ``bytearray`` receives one (:func:`replace_record`)."""
    refuse_units_in_meta(meta, target_name(path))
    return replace_record(path, lambda root: write_sections(
        root, meta, {"frame": frame, "system": system}, forcefield), durable, fileops, overwrite=overwrite)


@overload
def write_mrec_system(path: PathLike, system: Frame, meta: Optional[Dict[str, Any]] = None,
                      forcefield: Any = None, *, durable: bool = True, fileops: Optional[FileOps] = None,
                      overwrite: bool = False) -> Path: ...


@overload
def write_mrec_system(path: bytearray, system: Frame, meta: Optional[Dict[str, Any]] = None,
                      forcefield: Any = None, *, durable: bool = True, fileops: Optional[FileOps] = None,
                      overwrite: bool = False) -> bytearray: ...


def write_mrec_system(path: RecordTarget, system: Frame, meta: Optional[Dict[str, Any]] = None,
                      forcefield: Any = None, *, durable: bool = True, fileops: Optional[FileOps] = None,
                      overwrite: bool = False) -> Union[Path, bytearray]:
    """Write a record holding ``system`` (and optionally a force field); an existing record
    at ``path`` is replaced only with ``overwrite=True``.  A ``*.mrec.zip`` path is written
    as a packed record; a ``bytearray`` receives one (:func:`replace_record`)."""
    refuse_units_in_meta(meta, target_name(path))
    return replace_record(path, lambda root: write_sections(root, meta, {"system": system}, forcefield),
                          durable, fileops, overwrite=overwrite)


@overload
def write_mrec_forcefield(path: PathLike, forcefield: Any, meta: Optional[Dict[str, Any]] = None, *,
                          durable: bool = True, fileops: Optional[FileOps] = None, overwrite: bool = False) -> Path: ...


@overload
def write_mrec_forcefield(path: bytearray, forcefield: Any, meta: Optional[Dict[str, Any]] = None, *,
                          durable: bool = True, fileops: Optional[FileOps] = None,
                          overwrite: bool = False) -> bytearray: ...


def write_mrec_forcefield(path: RecordTarget, forcefield: Any, meta: Optional[Dict[str, Any]] = None, *,
                          durable: bool = True, fileops: Optional[FileOps] = None,
                          overwrite: bool = False) -> Union[Path, bytearray]:
    """Write a force-field package: ``meta`` + ``forcefield`` (a valid record on its own); an
    existing record at ``path`` is replaced only with ``overwrite=True``.  A ``*.mrec.zip``
    path is written as a packed record; a ``bytearray`` receives one (:func:`replace_record`)."""
    if forcefield is None:
        raise SpecViolationError("a force-field record needs a force field", rule="documents#9.1")
    return replace_record(path, lambda root: write_sections(root, meta, {}, forcefield), durable, fileops,
                          overwrite=overwrite)
