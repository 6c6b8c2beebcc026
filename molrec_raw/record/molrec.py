"""The whole record: ``MolRec``, ``read_mrec``, ``write_mrec`` and ``validate``.

Sections this layer decodes become model objects; the trajectory (a lazy ``MrecReader``),
metrics (a read-only view) and every unknown root section are also carried as raw store
values and written back byte for byte (root-layout rule 5: preserve the unknown).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from molrec_raw.errors import MolrecError, SpecViolationError
from molrec_raw.record import documents
from molrec_raw.record.damage import arrays_under, damaged_chunks
from molrec_raw.record.doors import RecordSource, _meta_attrs, _rows_of, record_source, replace_record, write_sections
from molrec_raw.record.forcefield import ForceFieldSection, read_forcefield_group
from molrec_raw.record.frame_io import read_frame_group
from molrec_raw.record.metrics import Series, check_metrics_group, read_metrics_group
from molrec_raw.record.model import Frame
from molrec_raw.record.observables import Observable, read_observables_group, write_observables_group
from molrec_raw.record.trajectory import MrecReader
from molrec_raw.record.violations import Violation, refuse
from molrec_raw.zarr import Group, PathLike, Store, open_group
from molrec_raw.zarr.fileops import FileOps

__all__ = ["MolRec", "RawSection", "read_mrec", "write_mrec", "validate"]

_DOCUMENTS = ("status", "method")
_KNOWN = ("meta", "status", "method", "frame", "system", "forcefield", "observables")


@dataclass(frozen=True)
class RawSection:
    """A section carried verbatim: its store values, read only when written out (a long
    trajectory is never loaded into memory just to be copied)."""

    store: Store
    name: str

    def items(self) -> Iterator[Tuple[str, bytes]]:
        for key in list(self.store.list(f"{self.name}/")):
            value = self.store.get(key)
            if value is not None:
                yield key, value


@dataclass
class MolRec:
    """A whole record.  ``raw_sections`` maps a section written back unchanged to its store
    values (a :class:`RawSection`, or a dict of key relative to the record root → bytes):
    sections this layer does not interpret, and the trajectory and metrics sections, whose
    typed views are ``trajectory`` (an :class:`MrecReader`) and ``metrics``."""

    meta: Dict[str, Any] = field(default_factory=dict)
    status: Optional[Dict[str, Any]] = None
    method: Optional[Dict[str, Any]] = None
    frame: Optional[Frame] = None
    system: Optional[Frame] = None
    forcefield: Optional[ForceFieldSection] = None
    observables: Optional[Dict[str, Observable]] = None  # None: no section; {}: an empty one
    raw_sections: Dict[str, Union[RawSection, Mapping[str, bytes]]] = field(default_factory=dict)
    # Read-only view of the metrics section (dense series + WAL tail); the section itself is
    # carried in raw_sections and written back byte for byte, WAL included.
    metrics: Optional[Dict[str, Series]] = None
    trajectory: Optional[MrecReader] = None

    def section_names(self) -> List[str]:
        """The root sections this record holds, sorted: ``meta`` always, each set document or
        section, and every section carried verbatim (documents#1.1, root-layout#5)."""
        present = {"meta"}
        for name in ("status", "method", "frame", "system", "forcefield"):
            if getattr(self, name) is not None:
                present.add(name)
        if self.observables is not None:
            present.add("observables")
        return sorted(present | set(self.raw_sections))


def read_mrec(path: RecordSource) -> MolRec:
    """Read every section; refuse on the first violated reader rule.  The trajectory is a
    lazy reader handle; sections are carried for rewriting without being loaded.  ``path``
    is a local path, a URL (``molrec_raw.zarr.remote``) or an open store."""
    root = open_group(record_source(path), mode="r")
    return _read(path, root, None)


def _read(path: RecordSource, root: Group, out: Optional[List[Violation]],
          progress: Optional[Callable[[int, int], None]] = None) -> MolRec:
    collect: List[Violation] = [] if out is None else out
    meta = _meta_attrs(root)
    collect.extend(documents.check_meta(meta))
    if out is None:
        refuse(collect)
    rec = MolRec(meta=meta)
    rows_of = _rows_of(root)
    groups = dict(root.groups())
    if out is not None:  # decision 2: reported by validate, never a reason to refuse reading
        collect.extend(documents.check_sections(groups))

    def section(name: str, group: Group) -> None:
        if name in _DOCUMENTS:
            doc = dict(group.attrs)
            collect.extend(documents.check_status(doc) if name == "status" else documents.check_method(doc))
            setattr(rec, name, doc)
        elif name in ("frame", "system"):
            setattr(rec, name, read_frame_group(group, out=collect, rows_of=rows_of))
        elif name == "forcefield":
            rec.forcefield = read_forcefield_group(group, out=collect)
            version = meta.get("molrec_version")  # already checked above; here only read
            if out is not None and type(version) is int and version == 1:  # unstamped is current
                collect.append(Violation("README#decision-15", "/forcefield",
                                         "version-1 force field: read as stored, no unit or angle conversion"))
        elif name == "observables":
            rec.observables = read_observables_group(group, out=collect)
        elif name == "metrics":
            rec.raw_sections[name] = RawSection(root.store, name)
            if out is None:
                rec.metrics = read_metrics_group(group)
            else:
                collect.extend(check_metrics_group(group))
        elif name == "trajectory":
            rec.raw_sections[name] = RawSection(root.store, name)
            try:
                rec.trajectory = MrecReader(path)
                if out is not None:  # validate resolves every frame, not only what opening checks
                    collect.extend(rec.trajectory.recovery_violations())
                    collect.extend(rec.trajectory.verify(progress))
            except MolrecError as exc:
                if out is None:
                    raise
                collect.append(Violation(exc.rule or type(exc).__name__, exc.node or "/trajectory", exc.message))
        elif name != "meta":
            rec.raw_sections[name] = RawSection(root.store, name)

    for name, group in groups.items():
        if out is None:
            section(name, group)
            refuse(collect)
            continue
        try:
            section(name, group)
        except MolrecError as exc:  # bytes beneath a rule check fail: every damaged chunk, then the next section
            collect.extend(_section_damage(group, exc))
    return rec


def _section_damage(group: Group, exc: MolrecError) -> List[Violation]:
    """What validate reports for a section whose reading failed: every chunk of it that does
    not decode (so one damaged column does not hide another), else the failure itself."""
    damaged = [Violation(d.rule or "zarr-v3-subset#5", d.node, f"{d.message} (chunk {d.key})")
               for array in arrays_under(group) for d in damaged_chunks(array)]
    return damaged or [Violation(exc.rule or type(exc).__name__, exc.node or f"/{group.path}", exc.message)]


def write_mrec(path: PathLike, rec: MolRec, *, durable: bool = True, fileops: Optional[FileOps] = None,
               overwrite: bool = False) -> None:
    """Write ``rec`` as a record at ``path``; an existing record there is replaced (safely:
    built beside, swapped in) only with ``overwrite=True`` — ``rec`` may have been read from
    it (its carried sections are read before the swap)."""
    if not isinstance(rec, MolRec):
        raise TypeError(f"write_mrec needs a MolRec, got {type(rec).__name__}")
    refuse(documents.check_sections(rec.section_names()))
    for name, doc in (("status", rec.status), ("method", rec.method)):
        if doc is not None:
            refuse(documents.check_finite_json(doc, f"/{name}", "documents#9.4"))
            refuse(documents.check_status(doc, writing=True) if name == "status"
                   else documents.check_method(doc, writing=True))
    clash = set(rec.raw_sections) & set(_KNOWN)
    if clash:
        raise SpecViolationError(f"raw sections {sorted(clash)} have a typed field in MolRec", rule="root-layout#5")

    def build(root: Group) -> None:
        later = [n for n in _DOCUMENTS if getattr(rec, n) is not None] + list(rec.raw_sections)
        write_sections(root, rec.meta, {"frame": rec.frame, "system": rec.system}, rec.forcefield, later)
        for name in _DOCUMENTS:
            doc = getattr(rec, name)
            if doc is not None:
                root.create_group(name, attributes=doc)
        if rec.observables is not None:
            write_observables_group(root, rec.observables)
        for name, values in sorted(rec.raw_sections.items()):
            for key, value in values.items():
                if not key.startswith(f"{name}/"):
                    raise SpecViolationError(f"raw section {name!r} holds a key outside it: {key!r}")
                root.store.set(key, value)

    replace_record(path, build, durable, fileops, overwrite=overwrite)


def validate(path: RecordSource, *, progress: Optional[Callable[[int, int], None]] = None) -> List[Violation]:
    """Every violated reader rule of the record at ``path``, without stopping at the first;
    a trajectory is checked frame by frame (``progress(done, total)`` follows that walk).

    A store that cannot be opened at all (no root group, unreadable metadata) raises.
    """
    root = open_group(record_source(path), mode="r")
    out: List[Violation] = []
    try:
        rec = _read(path, root, out, progress)
    except MolrecError as exc:  # corrupt bytes beneath a rule check: report, do not stop
        out.append(Violation(exc.rule or type(exc).__name__, exc.node or "/", exc.message))
    else:
        if rec.trajectory is not None:
            rec.trajectory.close()
    finally:
        if not isinstance(path, Store):
            root.store.close()
    return out
