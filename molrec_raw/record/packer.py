"""The one packer: a record directory into a ``*.mrec.zip`` (trajectory §15, decision 12).

One STORED entry per file, names relative to the record root with ``/``, sorted, ZIP64
where needed, no directory entries (``zarr.zipstore.write_zip``) — written under a temporary
name beside the target, read back (central directory and every entry's CRC-32), renamed into
place and the directory holding it synced.  ``molrec-raw pack``, every writing door given a
``*.mrec.zip`` target and every door writing a record into memory go through
:func:`pack_directory`.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, List, Optional, Tuple

from molrec_raw.errors import CorruptDataError, RecordExistsError
from molrec_raw.zarr import DirectoryStore, ZipStore
from molrec_raw.zarr.fileops import FileOps
from molrec_raw.zarr.store import TEMP_MARKER
from molrec_raw.zarr.zipstore import write_zip

__all__ = ["is_packed_name", "record_files", "pack_directory"]


def is_packed_name(path: Path) -> bool:
    """Whether a writer's target names a packed record (``*.mrec.zip``; any ``*.zip``, which
    readers open as an archive): written as one zip file, never as a directory."""
    return path.name.lower().endswith(".zip")


def record_files(root: Path) -> List[Tuple[str, Path]]:
    """Every file of the record as ``(entry name, local path)``, sorted, through the record's
    store: its listing skips a crashed writer's temporary files, and its path resolution
    refuses a symbolic link that leads out of the record (StoreError naming the link)."""
    store = DirectoryStore(root, read_only=True)
    return sorted((key, Path(store.path_of(key))) for key in store.list(""))


def pack_directory(source: Path, target: Path, progress: Optional[Callable[[int, int], object]], ops: FileOps,
                   overwrite: bool) -> None:
    """Pack the record directory ``source`` into the zip ``target``: written beside it, read
    back, renamed into place (an existing zip only with ``overwrite``), its name synced.  The
    caller holds ``target``'s writer lock; a failure removes the temporary zip."""
    files = record_files(source)
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
        if target.exists() and not overwrite:
            raise RecordExistsError("refusing to overwrite an existing zip", store=str(target))
        ops.replace(str(staging), str(target))  # the zip's bytes were fsynced by write_zip
        ops.fsync_dir(str(target.parent))  # ... and now its name: only then may the source go
    except BaseException:
        try:
            if staging.exists():
                ops.unlink(str(staging))
        except OSError:  # the first failure is what the caller hears of
            pass
        raise


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
