"""Packed records: ``<stem>.mrec/`` ⇄ ``<stem>.mrec.zip`` (trajectory §15, decision 12).

Packing first validates the record (a record that fails validation is refused unless
``check=False`` / ``--force``), then packs it with the one packer (record/packer.py: a
temporary zip beside the target, read back, renamed into place), and only then (when asked)
removes the source directory.  A source already named as a packed record (``*.mrec.zip``) is
refused: packing takes a directory.  An
existing zip is replaced only with ``overwrite=True``.  Files are found and read through the
record's DirectoryStore, so a symbolic link out of the record is refused, never packed.  The
zip is locked while it is written, and with ``remove_source`` the record too, from before
anything is read (record/locking.py).  Unpacking checks every entry name before anything is
written, and builds the record beside its destination then swaps it in, as the whole-record
doors do (the same lock and overwrite policy).
"""
from __future__ import annotations

import os
from contextlib import ExitStack
from pathlib import Path
from typing import Callable, List, Optional

from molrec_raw.errors import CorruptDataError, MolrecError, RecordExistsError, SpecViolationError, StoreError
from molrec_raw.record.doors import (PACKED, check_record_path, local_record_problem, not_a_record, replace_record,
                                    reported_io_failures, require_record_directory)
from molrec_raw.record.locking import lock_writer
from molrec_raw.record.packer import is_packed_name, pack_directory
from molrec_raw.zarr import Group, ZipStore
from molrec_raw.zarr.fileops import FileOps
from molrec_raw.zarr.metadata import GroupMetadata, parse_metadata
from molrec_raw.zarr.store import PathLike

__all__ = ["pack_mrec_zip", "unpack_mrec_zip"]


def _check_valid(source: Path) -> None:
    """Refuse a record that fails validation, naming the first violation and their count."""
    from molrec_raw.record.molrec import validate

    violations = validate(source)
    if violations:
        first = violations[0]
        raise SpecViolationError(
            f"{source} fails validation ({len(violations)} violation(s); first: {first}); refusing to pack it "
            "(molrec-raw validate lists them, molrec-raw repair restores a crashed record; --force / check=False "
            "packs it as it is)", store=str(source), rule=first.rule)


def pack_mrec_zip(path: PathLike, *, remove_source: bool = False,
                  progress: Optional[Callable[[int, int], object]] = None,
                  fileops: Optional[FileOps] = None, overwrite: bool = False, check: bool = True) -> Path:
    """Pack the record directory ``path`` (``<stem>.mrec``) into ``<stem>.mrec.zip`` beside it.

    ``check`` (default): refuse a record that fails validation.  ``overwrite``: replace an
    existing zip (refused otherwise).  A trajectory with an uncommitted tail packs as it
    stands: readers of the zip obey ``nstep`` exactly as on the directory.
    ``progress(done_bytes, total_bytes)`` follows the copy of the files' bytes.  Every file
    mutation goes through ``fileops`` (default: the system's calls).
    """
    source = check_record_path(path)
    if is_packed_name(source):
        hint = (f" (a directory under that name: rename it to {source.name[:-4]} and pack that)"
                if source.is_dir() else "")
        raise StoreError(f"{source} is already named as a packed record (*.mrec.zip); pack takes a record directory "
                         f"<stem>.mrec and writes <stem>.mrec.zip beside it{hint}", store=str(source),
                         rule="trajectory#15")
    target = source.with_name(source.name + ".zip") if source.name.endswith(".mrec") else source.with_suffix(".mrec.zip")
    with ExitStack() as locks:
        if remove_source:  # the record is going away: no writer may be at work in it
            locks.enter_context(lock_writer(source, writer="pack --remove-source", fileops=fileops))
        locks.enter_context(lock_writer(target, writer="pack", fileops=fileops))
        ops = locks.enter_context(reported_io_failures(fileops, f"pack of {source}"))
        require_record_directory(source, "pack")
        if target.exists() and not overwrite:
            raise RecordExistsError(f"{target} exists; refusing to overwrite it with a pack of {source} (pass "
                                    "overwrite=True, or --force)", store=str(target), rule="safety#overwrite")
        if check:
            _check_valid(source)
        pack_directory(source, target, progress, ops, overwrite)
        if remove_source:  # one rename retires the whole source: never half a record under its name
            retired = source.with_name(f".{source.name}{PACKED}{os.getpid()}")
            ops.replace(str(source), str(retired))
            ops.fsync_dir(str(source.parent))
            ops.rmtree(str(retired))  # what a failure leaves here, the next writer of the path removes
    return target


def _check_metadata(store: ZipStore, names: List[str], where: str) -> None:
    """Every node's ``zarr.json`` in the archive is Zarr V3 metadata, the root's a group
    (zarr-v3-subset#2): what is unpacked is a record's tree, checked before anything is
    written (its chunks are checked by whoever reads them, as on any record)."""
    for name in names:
        if name != "zarr.json" and not name.endswith("/zarr.json"):
            continue
        raw = store.get(name)
        try:
            meta = parse_metadata(raw or b"")
        except MolrecError as exc:
            raise exc.add_context(store=where, key=name) from None
        if name == "zarr.json" and not isinstance(meta, GroupMetadata):
            raise SpecViolationError(f"{where}: the archive's root zarr.json is not a group: not a packed record",
                                     store=where, key=name, rule="trajectory#15")


def unpack_mrec_zip(archive: PathLike, dest: PathLike, *,
                    progress: Optional[Callable[[int, int], object]] = None,
                    fileops: Optional[FileOps] = None, overwrite: bool = False) -> Path:
    """Extract a packed record into the directory ``dest``: missing or an empty directory, or
    an existing record with ``overwrite=True`` (refused otherwise).  The record is built
    beside ``dest`` and swapped in under ``dest``'s writer lock, as the whole-record doors do.

    Every entry name is checked first (ZipStore refuses absolute paths, ``..``, backslashes
    and empty segments at open; duplicates are refused here), so nothing is written for a
    hostile archive.  ``progress(done_bytes, total_bytes)`` follows the extraction.
    """
    source = Path(archive)
    problem = local_record_problem(source)
    if problem is None and source.is_dir():
        problem = "a directory: unpack takes a packed record (*.mrec.zip)"
    if problem is not None:
        raise not_a_record(source, problem)
    with ZipStore(archive) as store:
        if store.duplicate_names:  # readers take the last; a packed record never has any
            raise CorruptDataError(f"{archive}: the archive holds duplicate entry names "
                                   f"{sorted(store.duplicate_names)}: not a packed record",
                                   store=str(archive), rule="trajectory#15")
        names = list(store.list(""))
        if "zarr.json" not in names:
            raise SpecViolationError(f"{archive}: the archive has no root zarr.json: not a packed record",
                                     store=str(archive), rule="trajectory#15")
        _check_metadata(store, names, str(archive))
        total = sum(store.size(name) or 0 for name in names)

        def extract(root: Group) -> None:
            done = 0
            for name in names:
                data = store.get(name)
                assert data is not None  # a listed name
                root.store.set(name, data)
                done += len(data)
                if progress is not None:
                    progress(done, total)

        return replace_record(dest, extract, fileops=fileops, overwrite=overwrite)
