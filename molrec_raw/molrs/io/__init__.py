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

from molrec_raw.molrs import _memory
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
    #3) and whichever sections are given (documents#1: at least one).  A path that holds a
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

    def write(path: "os.PathLike[str]") -> None:
        with as_molrs():
            _write(path, document, sections, trajectory)

    if isinstance(sink, bytearray):
        _memory.write_packed(sink, write)
    else:
        write(refuse_str_path(sink, "sink", reader=False))


def _write(path: "os.PathLike[str]", meta: dict[str, Any], sections: dict[str, Any],
           trajectory: Optional[Trajectory]) -> None:
    """One record at ``path``: the state sections through ``write_mrec`` (replacing a record
    there), the trajectory through ``MrecWriter`` — alone, ``write_mrec_trajectory``."""
    from molrec_raw.record.molrec import MolRec, write_mrec as write_record
    from molrec_raw.record.trajectory import MrecWriter, SequenceSchema, write_mrec_trajectory
    from molrec_raw.record.trajectory import Trajectory as RawTrajectory

    frames = [] if trajectory is None else [f._raw for f in trajectory.frames]
    step = None if trajectory is None else trajectory.step
    time = None if trajectory is None else trajectory.time
    if trajectory is not None and all(v is None for v in sections.values()):
        whole: Any = RawTrajectory(frames, step, time)  # the door takes a Trajectory with its labels
        write_mrec_trajectory(path, whole, meta=meta, overwrite=True)
        return
    write_record(path, MolRec(meta=meta, **sections), overwrite=True)
    if trajectory is None:
        return
    with MrecWriter(path, SequenceSchema.from_frames(frames), flush_every=max(1, len(frames)),
                    status=False) as writer:
        for i, raw_frame in enumerate(frames):
            writer.append(raw_frame, None if step is None else int(step[i]), None if time is None else float(time[i]))


from molrec_raw.molrs.io import mrec  # noqa: E402  (the submodule needs write_mrec's module first)
