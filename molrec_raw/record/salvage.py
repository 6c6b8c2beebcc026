"""``salvage_mrec``: a new record holding everything of a damaged one that still reads
(issue 36; spec-notes/safety.md "Salvage").

``repair`` restores what a crash left and never bytes that rotted or were cut short; salvage
is the way out when it reports such damage and no copy exists.  The damaged record is only
read.  The new record holds:

- every trajectory frame that reads intact (every chunk it needs decodes and every rule of a
  read holds), with its step, time, cell, per-step meta and blocks as read — the values
  bit for bit — written through ``MrecWriter`` under the damaged record's own sequence
  schema (so the same pin, precision declarations and the codecs the writer chooses);
- every other section that reads (a typed section re-written from its values, the metrics
  and unknown sections copied byte for byte), and the ``meta`` document, with a note of
  its origin in ``meta.modules["molrec_raw.salvage"]`` (``content_hash`` dropped: it
  described the damaged record's content, not this one's).

What is lost is reported exactly (:class:`SalvageReport`): each frame left out with the nodes
that refuse it, each section that did not read, and the damage survey ``validate`` and
``repair`` report (record/damage.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Tuple

from molrec_raw.errors import InvalidValueError
from molrec_raw.record.damage import Damage, distinct, record_damage, structure_damage
from molrec_raw.record.doors import RecordInput, record_source
from molrec_raw.record.model import Frame
from molrec_raw.record.molrec import _read, write_mrec
from molrec_raw.record.trajectory import MrecReader
from molrec_raw.record.trajectory.reader import refused_node
from molrec_raw.record.trajectory.writer import FrameSequence
from molrec_raw.record.violations import Violation
from molrec_raw.zarr import Group, PathLike, Store, open_group

__all__ = ["SalvageReport", "salvage_mrec", "SALVAGE_MODULE"]

SALVAGE_MODULE = "molrec_raw.salvage"  # the meta.modules entry naming a salvaged record's origin


@dataclass
class SalvageReport:
    """What ``salvage_mrec`` kept and lost: ``nstep`` (committed frames of the damaged
    record), ``kept`` (their indices in it, in order: frame ``k`` of the new record is frame
    ``kept[k]``), ``lost`` (frame index -> the nodes under ``trajectory/`` that refuse it),
    ``sections_lost`` (section -> why it did not read), ``damaged`` (the damage survey)."""

    source: str
    target: str
    nstep: int = 0
    kept: List[int] = field(default_factory=list)
    lost: Dict[int, List[str]] = field(default_factory=dict)
    sections_lost: Dict[str, str] = field(default_factory=dict)
    damaged: List[Damage] = field(default_factory=list)

    def lost_runs(self) -> List[Tuple[int, int, List[str]]]:
        """The lost frames as runs ``(first, last, nodes)`` of consecutive frames refused by
        the same nodes."""
        runs: List[Tuple[int, int, List[str]]] = []
        for i in sorted(self.lost):
            nodes = self.lost[i]
            if runs and runs[-1][1] == i - 1 and runs[-1][2] == nodes:
                runs[-1] = (runs[-1][0], i, nodes)
            else:
                runs.append((i, i, nodes))
        return runs

    def as_json(self) -> Dict[str, Any]:
        """The report as plain JSON values (``molrec-raw salvage --json``)."""
        return {"source": self.source, "target": self.target, "nstep": self.nstep, "kept": len(self.kept),
                "lost_frames": [{"first": a, "last": b, "nodes": nodes} for a, b, nodes in self.lost_runs()],
                "sections_lost": self.sections_lost,
                "damaged": [{"node": d.node, "key": d.key, "message": d.message, "rule": d.rule}
                            for d in self.damaged]}


def salvage_mrec(source: RecordInput, target: PathLike, *, overwrite: bool = False) -> SalvageReport:
    """Write a new record at ``target`` holding every frame and section of ``source`` that
    reads intact (see the module docstring), and report what was lost.  ``source`` is only
    read (a directory, a ``*.mrec.zip``, a URL or a store); ``target`` (a ``*.mrec`` or
    ``*.mrec.zip``) is refused when it exists unless ``overwrite`` (safety#overwrite).
    Raises MolrecError when ``source`` cannot be read at all (no root, a ``meta`` document
    that does not parse: its version unknown)."""
    if isinstance(source, (str, Path)) and Path(source).absolute() == Path(target).absolute():
        raise InvalidValueError(f"{target}: salvage writes a new record, never over the damaged one it reads "
                                "(give another path for the salvaged record)", rule="safety#overwrite")
    root = open_group(record_source(source), mode="r")
    try:
        return _salvage(source, root, target, overwrite)
    finally:
        if not isinstance(source, Store):
            root.store.close()


def _salvage(source: RecordInput, root: Group, target: PathLike, overwrite: bool) -> SalvageReport:
    report = SalvageReport(str(source), str(target))
    problems: List[Violation] = []
    rec = _read(source, root, problems, verify=False)  # every section that reads; the rest noted
    present = sorted(name for name, member in root.members() if isinstance(member, Group))
    held = set(rec.section_names())
    for name in present:
        if name not in held:
            why = [f"{v.message} ({v.rule})" for v in problems if v.node.strip("/").split("/")[0] == name]
            report.sections_lost[name] = why[0] if why else "it does not read"
    reader = rec.trajectory if isinstance(rec.trajectory, MrecReader) else None
    rec.raw_sections.pop("trajectory", None)  # written again from the frames that read
    try:
        view = None
        if reader is not None:
            view = (reader.root, reader.logical_rows(), reader.damaged())
            rec.trajectory = _intact_frames(reader, report)
        report.damaged = distinct(structure_damage(root) + record_damage(root, view))
        rec.meta = _salvaged_meta(rec.meta, report)
        write_mrec(target, rec, overwrite=overwrite)
    finally:
        if reader is not None:
            reader.close()
    return report


def _intact_frames(reader: MrecReader, report: SalvageReport) -> FrameSequence:
    """The frames of ``reader`` that read intact, with their steps and times, under its pin;
    the others noted in ``report.lost`` with the nodes that refuse them."""
    report.nstep = len(reader)
    frames: List[Frame] = []
    for i, found in reader.frames_or_damage():
        if isinstance(found, Frame):
            frames.append(found)
            report.kept.append(i)
        else:
            report.lost[i] = reader.frame_damage(i) or [refused_node(found)]
    steps, times = reader.step, reader.time
    return FrameSequence(frames, [steps[i] for i in report.kept],
                         None if times is None else [times[i] for i in report.kept], reader.schema)


def _salvaged_meta(meta: Dict[str, Any], report: SalvageReport) -> Dict[str, Any]:
    """The damaged record's meta with the note of this salvage (see the module docstring)."""
    out = {k: v for k, v in meta.items() if k != "content_hash"}
    modules = dict(out.get("modules") or {})
    note: Dict[str, Any] = {"salvaged_from": Path(report.source).name if not report.source.startswith(("http", "s3"))
                            else report.source,
                            "frames_of_origin": report.nstep, "frames_kept": len(report.kept),
                            "frames_lost": [[a, b] for a, b, _ in report.lost_runs()],
                            "sections_lost": sorted(report.sections_lost)}
    if "content_hash" in meta:
        note["content_hash_of_origin"] = meta["content_hash"]
    modules[SALVAGE_MODULE] = note
    out["modules"] = modules
    return out
