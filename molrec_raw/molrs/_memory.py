"""Records in memory for the drop-in: a ``bytearray`` sink receives a packed record
(``*.mrec.zip`` bytes), a ``bytes`` source is read as one (molrs's ``write_mrec`` /
``MrecFile`` / ``MrecReader``).

TEMPORARY: molrec_raw's doors do not take bytes yet (that support is being added to
``record/doors.py``).  Until they do, both directions go through :func:`_spill` — the one
place that touches a temporary directory — using molrec_raw's public pack door.  At merge,
:func:`record_source` becomes "hand the bytes to the door" and :func:`write_packed`
"let the door fill the bytearray", and :func:`_spill` goes.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Callable, Optional, Tuple

from molrec_raw.record.pack import pack_mrec_zip

__all__ = ["record_source", "write_packed"]


def _spill(data: Optional[bytes]) -> Tuple["tempfile.TemporaryDirectory[str]", Path]:
    """TEMPORARY (replaced by molrec_raw's bytes doors at merge): a private temporary
    directory and, in it, ``memory.mrec.zip`` holding ``data`` — or, without data, the path
    ``memory.mrec`` where a record is to be written and packed.  The directory goes when the
    returned handle is cleaned up or collected."""
    holder = tempfile.TemporaryDirectory(prefix="molrs-dropin-")
    if data is None:
        return holder, Path(holder.name) / "memory.mrec"
    path = Path(holder.name) / "memory.mrec.zip"
    path.write_bytes(data)
    return holder, path


def record_source(data: bytes) -> Tuple[Any, Path]:
    """``(keep-alive handle, source a molrec_raw reading door opens)`` for a packed record in
    ``data``; the caller keeps the handle as long as it reads."""
    return _spill(data)


def write_packed(sink: bytearray, write: Callable[[Path], object]) -> None:
    """``write(path)`` writes a record directory; ``sink`` is cleared, then holds exactly the
    packed record's bytes (molrec_raw's pack: sorted STORED entries, deterministic)."""
    holder, path = _spill(None)
    try:
        write(path)
        packed = pack_mrec_zip(path)
        sink[:] = packed.read_bytes()
    finally:
        holder.cleanup()
