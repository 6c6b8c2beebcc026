"""``molrs.io``'s record doors over molrec_raw: :func:`write_mrec` writes a whole record,
:mod:`.mrec` reads it and streams trajectories.  The other formats of molrs's ``io`` are
out of the drop-in's scope (spec-notes/dropin.md).

A sink is an ``os.PathLike`` (a record directory, replaced if it is one) or a ``bytearray``
(cleared, then holding the packed record); a plain ``str`` is refused with ``TypeError``,
as molrs refuses it.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Optional, Union

from molrec_raw.molrs._errors import as_molrs, refuse_str_path
from molrec_raw.molrs.core import Frame, Trajectory, _json_value

__all__ = ["Text", "mrec", "write_mrec"]


class Text:
    """The text of a whole file, for a reader that takes text (no record door does)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _raw_frame(value: Optional[Frame], name: str) -> Any:
    if value is None:
        return None
    if not isinstance(value, Frame):
        raise TypeError(f"argument {name!r}: expected a Frame, got {type(value).__name__}")
    return value._raw


def write_mrec(sink: Union["os.PathLike[str]", bytearray], *, meta: Optional[Mapping[str, Any]] = None,
               frame: Optional[Frame] = None, system: Optional[Frame] = None,
               trajectory: Optional[Trajectory] = None, forcefield: Any = None) -> None:
    """Write a record: ``meta`` (a plain JSON document; ``molrec_version`` stamped, root-layout
    #3) and whichever sections are given (documents#1.1: at least one).  A path that holds a
    record is replaced; a ``bytearray`` receives the packed record (trajectory §15)."""
    from molrec_raw.molrs.io.mrec import ForceFieldSection

    document = dict(meta or {})
    for key, value in document.items():
        if not _json_value(value):
            raise TypeError(f"metadata value is not JSON-serializable: {value!r}")
    if forcefield is not None and not isinstance(forcefield, ForceFieldSection):
        raise TypeError(f"argument 'forcefield': the drop-in writes a molrs.io.mrec.ForceFieldSection, not "
                        f"{type(forcefield).__name__} (compiled force fields are molrs's own)")
    if trajectory is not None and not isinstance(trajectory, Trajectory):
        raise TypeError(f"argument 'trajectory': expected a Trajectory, got {type(trajectory).__name__}")
    sections = {"frame": _raw_frame(frame, "frame"), "system": _raw_frame(system, "system"),
                "forcefield": None if forcefield is None else forcefield._raw}

    target: Union["os.PathLike[str]", bytearray] = (
        sink if isinstance(sink, bytearray) else refuse_str_path(sink, "sink", reader=False))
    with as_molrs():
        _write(target, document, sections, trajectory)


def _write(target: Union["os.PathLike[str]", bytearray], meta: dict[str, Any], sections: dict[str, Any],
           trajectory: Optional[Trajectory]) -> None:
    """One record at ``target`` (a path, replacing a record there, or a ``bytearray`` that
    receives the packed record): every section through molrec_raw's ``write_mrec``, the
    trajectory's frames through its one trajectory writer."""
    from molrec_raw.record.molrec import MolRec, write_mrec as write_record
    from molrec_raw.record.trajectory import Trajectory as RawTrajectory

    frames = None if trajectory is None else RawTrajectory([f._raw for f in trajectory.frames], trajectory.step,
                                                           trajectory.time)
    write_record(target, MolRec(meta=meta, trajectory=frames, **sections), overwrite=True)


from molrec_raw.molrs.io import mrec  # noqa: E402  (the submodule needs write_mrec's module first)
