"""The whole record: ``MolRec``, ``read_mrec``, ``write_mrec`` and ``validate``.

Sections this layer decodes become model objects; the trajectory (a lazy ``MrecReader``),
metrics (a read-only view) and every unknown root section are also carried as raw store
values and written back byte for byte (root-layout rule 5: preserve the unknown).  What
``write_mrec`` is given it writes or refuses: never a field dropped without a word.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union, cast, overload

from molrec_raw.errors import InvalidValueError, MolrecError, SpecViolationError
from molrec_raw.record import documents
from molrec_raw.record.damage import (Damage, arrays_under, as_damage, damaged_chunks, distinct, members_or_damage,
                                     structure_damage, trajectory_damage)
from molrec_raw.record.doors import (RecordInput, RecordTarget, _meta_attrs, _rows_of, record_source,
                                    replace_record, write_sections)
from molrec_raw.record.forcefield import ForceFieldSection, read_forcefield_group
from molrec_raw.record.frame_io import read_frame_group
from molrec_raw.record.metrics import Series, check_metrics_group, read_metrics_group
from molrec_raw.record.model import Frame
from molrec_raw.record.observables import Observable, read_observables_group, write_observables_group
from molrec_raw.record.trajectory import MrecReader, Trajectory
from molrec_raw.record.trajectory.writer import FrameSequence, frame_sequence, write_frame_sequence
from molrec_raw.record.violations import Violation, refuse
from molrec_raw.zarr import Group, PathLike, Store, open_group
from molrec_raw.zarr.store import StoreLike
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
    typed views are ``trajectory`` (an :class:`MrecReader`) and ``metrics``.

    ``trajectory`` to write is a :class:`Trajectory` or a list of :class:`Frame` (written
    through ``MrecWriter``, the schema derived from the frames; a ``FrameSequence``: under
    the pin it carries), or an :class:`MrecReader`
    (its record's section copied byte for byte, unless ``raw_sections`` carries the section
    it views).  ``metrics`` is a read-only view: written only as the section it views in
    ``raw_sections`` (log series with ``MetricsWriter``)."""

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
    trajectory: Union[None, MrecReader, Trajectory, FrameSequence, Sequence[Frame]] = None

    def section_names(self) -> List[str]:
        """The root sections this record holds, sorted: ``meta`` always, each set document or
        section, and every section carried verbatim (documents#1.1, root-layout#5)."""
        present = {"meta"}
        for name in ("status", "method", "frame", "system", "forcefield"):
            if getattr(self, name) is not None:
                present.add(name)
        for name in ("observables", "trajectory", "metrics"):
            if getattr(self, name) is not None:
                present.add(name)
        return sorted(present | set(self.raw_sections))


def read_mrec(path: RecordInput) -> MolRec:
    """Read every section; refuse on the first violated reader rule.  The trajectory is a
    lazy reader handle; sections are carried for rewriting without being loaded.  ``path``
    is a local path, a URL (``molrec_raw.zarr.remote``), an open store or the bytes of a
    packed record (``bytes``, ``bytearray``, ``memoryview``)."""
    root = open_group(record_source(path), mode="r")
    return _read(path, root, None)


def _read(path: RecordInput, root: Group, out: Optional[List[Violation]],
          progress: Optional[Callable[[int, int], None]] = None, verify: bool = True) -> MolRec:
    """The record at ``root``; ``out`` given: every violation collected there (a section
    that fails is left out, the others read), and with ``verify`` every frame resolved."""
    collect: List[Violation] = [] if out is None else out
    meta = _meta_attrs(root)
    collect.extend(documents.check_meta(meta))
    if out is None:
        refuse(collect)
    rec = MolRec(meta=meta)
    rows_of = _rows_of(root)
    groups = dict(root.groups()) if out is None else _sections(root, collect)
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
                if out is not None and verify:  # validate resolves every frame, not only what opening checks
                    collect.extend(rec.trajectory.recovery_violations())
                    collect.extend(_trajectory_checks(rec.trajectory, progress))
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


def _trajectory_checks(reader: MrecReader, progress: Optional[Callable[[int, int], None]]) -> List[Violation]:
    """Every frame resolved (``MrecReader.verify``); the damage met on the way reported as
    ``repair`` reports it — one survey, one entry per damaged chunk (damage.trajectory_damage)
    — rather than once per frame it costs."""
    faults: List[MolrecError] = []
    found = reader.verify(progress, damage=faults)
    opened = reader.damaged()
    if not faults and not opened:
        return found
    survey = trajectory_damage(reader.root, reader.logical_rows(), opened)
    if not survey:  # damage no chunk accounts for: each fault as met (never dropped)
        survey = [as_damage(exc, "trajectory") for exc in faults]
    return found + [_violation(d) for d in distinct(survey)]


def _sections(root: Group, out: List[Violation]) -> Dict[str, Group]:
    """The root's groups for validate: a section whose ``zarr.json`` cannot be read is
    reported, and the others are still checked."""
    found: Dict[str, Group] = {}
    for name, member in members_or_damage(root):
        if isinstance(member, MolrecError):
            out.append(_violation(as_damage(member, name)))
        elif isinstance(member, Group):
            found[name] = member
    return found


def _violation(damage: Damage) -> Violation:
    return Violation(damage.rule or "zarr-v3-subset#5", damage.node, f"{damage.message} ({damage.key})")


def _section_damage(group: Group, exc: MolrecError) -> List[Violation]:
    """What validate reports for a section whose reading failed: every chunk of it that does
    not decode (so one damaged column does not hide another), else the failure itself."""
    unreadable: List[Damage] = []
    damaged = [Violation(d.rule or "zarr-v3-subset#5", d.node, f"{d.message} (chunk {d.key})")
               for array in list(arrays_under(group, unreadable)) for d in damaged_chunks(array)]
    damaged = [_violation(d) for d in unreadable] + damaged
    return damaged or [Violation(exc.rule or type(exc).__name__, exc.node or f"/{group.path}", exc.message)]


# Fields whose wrong kind nothing further down names (the documents, the force field and the
# observables are refused by their own checks, naming their rule or type).
_TYPES: Tuple[Tuple[str, type, str], ...] = (
    ("frame", Frame, "a Frame or None"), ("system", Frame, "a Frame or None"), ("raw_sections", dict, "a dict"),
    ("metrics", dict, "None, or the view read_mrec made"),
)


def _check_fields(rec: MolRec) -> None:
    """Every field of ``rec`` is of a kind ``write_mrec`` writes, or the call is refused
    naming the field (nothing given is dropped without a word)."""
    for name, kind, what in _TYPES:
        value = getattr(rec, name)
        if value is not None and not isinstance(value, kind):
            raise InvalidValueError(f"MolRec.{name} must be {what}, not {type(value).__name__}")
    for key, value in rec.raw_sections.items():
        if not isinstance(value, (RawSection, Mapping)):
            raise InvalidValueError(f"MolRec.raw_sections[{key!r}] must be a RawSection or a mapping of key -> bytes, "
                                    f"not {type(value).__name__}")
    if rec.metrics is not None and "metrics" not in rec.raw_sections:
        raise InvalidValueError("MolRec.metrics is the read-only view of a metrics section that read_mrec carries in "
                                "raw_sections; it is not written on its own (log series with MetricsWriter after "
                                "writing the record)")


def _trajectory_to_write(rec: MolRec) -> Union[None, FrameSequence, RawSection]:
    """What ``write_mrec`` writes for ``rec.trajectory``: frames through ``MrecWriter``, the
    section an :class:`MrecReader` reads copied byte for byte, or nothing more when the
    reader is the view of the section carried in ``raw_sections`` (or there is none)."""
    given = rec.trajectory
    carried = "trajectory" in rec.raw_sections
    if given is None:
        return None
    if isinstance(given, MrecReader):
        return None if carried else RawSection(given._origin.store, "trajectory")  # the store it reads
    if carried:
        raise InvalidValueError("MolRec.trajectory holds frames and raw_sections carries a trajectory section: a "
                                "record holds one trajectory (drop one of them)", rule="root-layout#5")
    if isinstance(given, FrameSequence):  # already pinned (salvage keeps the original pin)
        return given
    if isinstance(given, (str, bytes, Mapping)) or not isinstance(given, (Trajectory, Sequence)):
        raise InvalidValueError("MolRec.trajectory must be a Trajectory, a list of Frame or an MrecReader, not "
                                f"{type(given).__name__}")
    return frame_sequence(cast(Union[Trajectory, Sequence[Frame]], given))  # a FrameSequence returned above


@overload
def write_mrec(path: PathLike, rec: MolRec, *, durable: bool = True, fileops: Optional[FileOps] = None,
               overwrite: bool = False) -> Path: ...


@overload
def write_mrec(path: bytearray, rec: MolRec, *, durable: bool = True, fileops: Optional[FileOps] = None,
               overwrite: bool = False) -> bytearray: ...


def write_mrec(path: RecordTarget, rec: MolRec, *, durable: bool = True, fileops: Optional[FileOps] = None,
               overwrite: bool = False) -> Union[Path, bytearray]:
    """Write ``rec`` as a record at ``path``; an existing record there is replaced (safely:
    built beside, swapped in) only with ``overwrite=True`` — ``rec`` may have been read from
    it (its carried sections are read before the swap).  A ``*.mrec.zip`` path is written as
    a packed record; a ``bytearray`` receives the packed record.  Returns where the record
    went (the path, or the ``bytearray``).  Every field of ``rec`` is written or the call
    refused before anything is written."""
    if not isinstance(rec, MolRec):
        raise TypeError(f"write_mrec needs a MolRec, got {type(rec).__name__}")
    _check_fields(rec)
    trajectory = _trajectory_to_write(rec)
    refuse(documents.check_sections(rec.section_names()))
    for name, doc in (("status", rec.status), ("method", rec.method)):
        if doc is not None:
            refuse(documents.check_finite_json(doc, f"/{name}", "documents#9.4"))
            refuse(documents.check_status(doc, writing=True) if name == "status"
                   else documents.check_method(doc, writing=True))
    clash = set(rec.raw_sections) & set(_KNOWN)
    if clash:
        raise SpecViolationError(f"raw sections {sorted(clash)} have a typed field in MolRec", rule="root-layout#5")
    raw: Dict[str, Union[RawSection, Mapping[str, bytes]]] = dict(rec.raw_sections)
    if isinstance(trajectory, RawSection):
        raw["trajectory"] = trajectory

    def build(root: Group) -> None:
        later = [n for n in _DOCUMENTS if getattr(rec, n) is not None] + list(raw)
        if isinstance(trajectory, FrameSequence):
            later.append("trajectory")
        write_sections(root, rec.meta, {"frame": rec.frame, "system": rec.system}, rec.forcefield, later)
        for name in _DOCUMENTS:
            doc = getattr(rec, name)
            if doc is not None:
                root.create_group(name, attributes=doc)
        if rec.observables is not None:
            write_observables_group(root, rec.observables)
        for name, values in sorted(raw.items()):
            for key, value in values.items():
                if not key.startswith(f"{name}/"):
                    raise SpecViolationError(f"raw section {name!r} holds a key outside it: {key!r}")
                root.store.set(key, value)
        if isinstance(trajectory, FrameSequence):  # last: its writer reads the sections it refers to
            write_frame_sequence(root, trajectory)

    return replace_record(path, build, durable, fileops, overwrite=overwrite)


def validate(path: RecordInput, *, progress: Optional[Callable[[int, int], None]] = None) -> List[Violation]:
    """Every violated reader rule of the record at ``path``, without stopping at the first;
    a trajectory is checked frame by frame (``progress(done, total)`` follows that walk).
    Damage is reported where it lies: a section whose metadata does not parse, every chunk
    that does not decode, stored values no group reaches (a section whose group metadata
    is gone), committed trajectory data that is missing (record/damage.py).

    A store that cannot be opened at all (no root group, unreadable metadata) raises.
    """
    root = open_group(record_source(path), mode="r")
    out: List[Violation] = []
    try:
        try:
            rec = _read(path, root, out, progress)
        except MolrecError as exc:  # corrupt bytes beneath a rule check: report, do not stop
            out.append(Violation(exc.rule or type(exc).__name__, exc.node or "/", exc.message))
        else:
            if isinstance(rec.trajectory, MrecReader):
                rec.trajectory.close()
        out.extend(_violation(d) for d in structure_damage(root))  # what no reader meets
    finally:
        if not isinstance(path, Store):
            root.store.close()
    return out
