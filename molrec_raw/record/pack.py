"""Packed records: ``<stem>.mrec/`` ⇄ ``<stem>.mrec.zip`` (trajectory §15, decision 12).

Packing writes one STORED entry per file, names relative to the record root with ``/``,
sorted, ZIP64 where needed, no directory entries — to a temporary name beside the target,
verifies the central directory and every entry's CRC by reading the archive back, renames it
into place, and only then (when asked) removes the source directory. An existing zip is never
overwritten. Unpacking checks every entry name before anything is written.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, List, Optional, Tuple

from molrec_raw.errors import CorruptDataError, SpecViolationError, StoreError
from molrec_raw.zarr import DirectoryStore, ZipStore
from molrec_raw.zarr.fileops import FileOps
from molrec_raw.zarr.store import TEMP_MARKER, PathLike
from molrec_raw.zarr.zipstore import write_zip

__all__ = ["pack_mrec_zip", "unpack_mrec_zip"]



def _record_files(root: Path) -> List[Tuple[str, Path]]:
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for filename in filenames:
            if TEMP_MARKER in filename:
                continue  # a crashed writer's temporary file is not part of the record
            full = Path(dirpath) / filename
            files.append((full.relative_to(root).as_posix(), full))
    return sorted(files)


def pack_mrec_zip(path: PathLike, *, remove_source: bool = False,
                  progress: Optional[Callable[[int, int], object]] = None,
                  fileops: Optional[FileOps] = None) -> Path:
    """Pack the record directory ``path`` (``<stem>.mrec``) into ``<stem>.mrec.zip`` beside it.

    A trajectory with an uncommitted tail packs as it stands: readers of the zip obey
    ``nstep`` exactly as on the directory.  ``progress(done_bytes, total_bytes)`` follows
    the copy of the files' bytes.  Every file mutation goes through ``fileops`` (default:
    the system's calls).
    """
    ops = fileops if fileops is not None else FileOps()
    source = Path(path)
    if not (source.is_dir() and (source / "zarr.json").is_file()):
        raise SpecViolationError(f"{source} is not a record directory (no root zarr.json)", rule="trajectory#15")
    target = source.with_name(source.name + ".zip") if source.name.endswith(".mrec") else source.with_suffix(".mrec.zip")
    if target.exists():
        raise StoreError("refusing to overwrite an existing zip", store=str(target))
    files = _record_files(source)
    staging = target.with_name(f".{target.name}{TEMP_MARKER}{os.getpid()}")
    total, done = sum(full.stat().st_size for _, full in files), 0

    def advance(nbytes: int) -> None:
        nonlocal done
        done += nbytes
        if progress is not None:
            progress(done, total)

    try:
        write_zip(staging, files, progress=advance, fileops=ops)
        _verify(staging, files)
        if target.exists():
            raise StoreError("refusing to overwrite an existing zip", store=str(target))
        ops.replace(str(staging), str(target))  # the zip's bytes were fsynced by write_zip
        ops.fsync_dir(str(target.parent))  # ... and now its name: only then may the source go
    except BaseException:
        if staging.exists():
            ops.unlink(str(staging))
        raise
    if remove_source:
        ops.rmtree(str(source))
    return target


def _verify(archive: Path, files: List[Tuple[str, Path]]) -> None:
    """Read the archive back: same names, same sizes, every CRC-32 checked."""
    with ZipStore(archive) as store:
        names = list(store.list(""))
        if names != [name for name, _ in files]:
            raise CorruptDataError("packed archive does not list the record's files", store=str(archive))
        for name, full in files:
            data = store.get(name)  # verifies the entry's CRC-32
            if data is None or len(data) != full.stat().st_size:
                raise CorruptDataError(f"packed entry {name!r} differs from its file", store=str(archive))


def unpack_mrec_zip(archive: PathLike, dest: PathLike, *,
                    progress: Optional[Callable[[int, int], object]] = None,
                    fileops: Optional[FileOps] = None) -> Path:
    """Extract a packed record into the directory ``dest`` (which must not exist or be empty).

    Every entry name is checked first (ZipStore refuses absolute paths, ``..``, backslashes
    and empty segments at open; duplicates are refused here), so nothing is written for a
    hostile archive.  ``progress(done_bytes, total_bytes)`` follows the extraction.
    """
    target = Path(dest)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise StoreError("unpack destination exists and is not an empty directory", store=str(target))
    with ZipStore(archive) as store:
        if store.duplicate_names:  # readers take the last; a packed record never has any
            raise CorruptDataError(f"archive holds duplicate entry names {sorted(store.duplicate_names)}",
                                   store=str(archive), rule="trajectory#15")
        names = list(store.list(""))
        if "zarr.json" not in names:
            raise SpecViolationError("archive has no root zarr.json: not a packed record", store=str(archive),
                                     rule="trajectory#15")
        total, done = sum(store.size(name) or 0 for name in names), 0
        out = DirectoryStore(target, fileops=fileops)
        for name in names:
            data = store.get(name)
            assert data is not None  # a listed name
            out.set(name, data)
            done += len(data)
            if progress is not None:
                progress(done, total)
    return target

