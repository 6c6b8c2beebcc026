"""MolRec records in MDAnalysis: importing this module registers a Reader, a Writer and a
topology parser under the format ``MREC``.

``mda.Universe("run.mrec")`` reads topology and trajectory from one record;
``mda.Universe("top.psf", "run.mrec")`` takes any topology MDAnalysis reads;
``mda.Writer("out.mrec", n_atoms)`` writes one.  Detection (``_format_hint``): a ``*.mrec``
directory (a trailing slash too) or a ``*.mrec.zip`` file — MDAnalysis's extension guess
would call ``x.mrec.zip`` "ZIP" and ``x.mrec/`` nothing.  Writers are chosen by extension
only (MDAnalysis has no writer hints): ``out.mrec``, or ``format="MREC"``; ``out.mrec.zip``
(a packed record) through the writer registered under ``ZIP``.

Conventions (``integrations.conventions``): the record's cell holds lattice vectors as
columns, MDAnalysis wants ``dimensions`` (lengths and angles), converted by MDAnalysis's own
``triclinic_box``/``triclinic_vectors``; values are read in MDAnalysis's units (Å, ps,
kJ/mol) from the units the record states, or from ``assume_units`` for units it leaves
unstated (a unit stated nowhere is refused, never guessed); the writer records the units it
wrote (its own) in ``system``.
"""
from __future__ import annotations

import os
import warnings
from typing import Any, Dict, List, Optional

import numpy as np

from molrec_raw.errors import InvalidValueError, MolrecError
from molrec_raw.integrations.conventions import (
    ELEMENTS, ENERGY_KEYS, MDANALYSIS_UNITS, RESIDUE_KEYS, RELATIONS, Topology, as_units, renumbered_res_ids,
    require, runs_of,
)
from molrec_raw.integrations.trajectories import TrajectorySink, TrajectorySource
from molrec_raw.record.trajectory import SequenceSchema
from molrec_raw.record.units import unit_of

mda = require("MDAnalysis", "mdanalysis")
from MDAnalysis.coordinates.base import ReaderBase, WriterBase  # noqa: E402
from MDAnalysis.core import topologyattrs as attrs  # noqa: E402
from MDAnalysis.core.topology import Topology as MDATopology  # noqa: E402
from MDAnalysis.lib.mdamath import triclinic_box, triclinic_vectors  # noqa: E402
from MDAnalysis.lib.util import store_init_arguments  # noqa: E402
from MDAnalysis.topology.base import TopologyReaderBase  # noqa: E402

__all__ = ["FORMAT", "is_record_path", "MRECReader", "MRECWriter", "MRECZipWriter", "MRECParser"]

FORMAT = "MREC"
#: ``ts.data`` keys MDAnalysis itself manages; never written as per-step meta.
_TIMESTEP_KEYS = frozenset({"dt", "time", "time_offset", "step"})
_MDA_UNITS = {"time": "ps", "length": "Angstrom", "velocity": "Angstrom/ps", "force": "kJ/(mol*Angstrom)"}


def is_record_path(thing: Any) -> bool:
    """MDAnalysis's ``_format_hint``: a path naming a record (``*.mrec``, ``*.mrec/``,
    ``*.mrec.zip``; root-layout#1).  Anything else (arrays, streams, lists) is not one."""
    if isinstance(thing, bytes):
        thing = os.fsdecode(thing)
    if not isinstance(thing, (str, os.PathLike)):
        return False
    name = os.fspath(thing)
    if not isinstance(name, str):
        return False
    name = name.rstrip("/" + os.sep).lower()
    return name.endswith(".mrec") or name.endswith(".mrec.zip")


def _dimensions(rows: Optional[np.ndarray]) -> Optional[np.ndarray]:
    """MDAnalysis ``dimensions`` ``[a, b, c, alpha, beta, gamma]`` of a cell given as rows."""
    if rows is None:
        return None
    return np.asarray(triclinic_box(rows[0], rows[1], rows[2]), dtype=np.float32)


def _cell_rows(dimensions: Any) -> Optional[np.ndarray]:
    """Lattice-vector rows (f64) of MDAnalysis ``dimensions``; None without a cell."""
    if dimensions is None:
        return None
    rows = triclinic_vectors(np.asarray(dimensions, dtype=np.float64), dtype=np.float64)
    return None if not np.any(rows) else np.asarray(rows)


class MRECReader(ReaderBase):
    """A record's trajectory (or its single frame) as an MDAnalysis trajectory.

    Positions (float32), velocities and forces when the ``atoms`` block has them, in Å,
    Å/ps, kJ/(mol·Å); ``ts.dimensions`` from the cell (None without one); ``ts.time`` from
    the record's times (else ``frame * dt``); ``ts.data["step"]`` and every per-step meta
    key (``pe ke etotal volume`` in kJ/mol and Å³) in ``ts.data``.  Sequential reads fetch
    a batch of frames per column at once, the next batch read ahead on a thread while this
    one is handed out; random access reads one frame.  Pickling and
    ``copy()`` reopen by path (no open handle is pickled).  ``assume_units`` (e.g.
    ``{"length": "nm"}``) states units the record leaves unstated; a unit needed and stated
    nowhere is refused, naming it (frame-and-types §13.5).
    """

    format = FORMAT
    units = dict(_MDA_UNITS)
    _format_hint = staticmethod(is_record_path)

    @store_init_arguments  # type: ignore[untyped-decorator]
    def __init__(self, filename: Any, convert_units: bool = True, assume_units: Any = None, **kwargs: Any) -> None:
        super().__init__(os.fspath(filename), convert_units=convert_units, **kwargs)
        self._assume = as_units(assume_units)
        self._src: Optional[TrajectorySource] = None
        source = self._source
        if source.n_frames == 0:
            raise InvalidValueError(f"{self.filename}: the record's trajectory has no committed frames")
        self.n_atoms, self.n_frames = source.n_atoms, source.n_frames
        if not convert_units:
            stated = source.units.to_json()
            self.units = {q: str(unit_of(q, stated)) for q in ("length", "time", "velocity", "force")}
        self._batch: Any = None
        self._dims_key: Optional[bytes] = None
        self._dims: Optional[np.ndarray] = None
        self.ts = self._Timestep(self.n_atoms, velocities="velocities" in source.groups,
                                 forces="forces" in source.groups, reader=self, **self._ts_kwargs)
        self._frame = -1
        self._read_next_timestep()

    @property
    def _source(self) -> TrajectorySource:
        if self._src is None:
            self._src = TrajectorySource(self.filename, MDANALYSIS_UNITS if self.convert_units else None,
                                         assume=self._assume)
        return self._src

    @staticmethod
    def parse_n_atoms(filename: Any, **kwargs: Any) -> int:
        source = TrajectorySource(filename, assume=as_units(kwargs.get("assume_units")))
        try:
            return source.n_atoms
        finally:
            source.close()

    def _get_dt(self) -> float:
        times = self._source.times
        if times is None or len(times) < 2:
            raise AttributeError("the record has no times to take dt from")
        return float(times[1] - times[0])

    def _read_next_timestep(self, ts: Any = None) -> Any:
        if self._frame + 1 >= self.n_frames:
            raise IOError("past the last frame")
        return self._read_frame_into(self._frame + 1, self.ts if ts is None else ts)

    def _read_frame(self, frame: int) -> Any:
        return self._read_frame_into(frame, self.ts)

    def _read_frame_into(self, frame: int, ts: Any) -> Any:
        if not 0 <= frame < self.n_frames:
            raise IOError(f"frame {frame} is outside the {self.n_frames} frames")
        source = self._source
        batch = self._batch
        if batch is None or frame not in batch:
            # in order: a batch; from the second one on (not at a rewind to frame 0, as
            # MDAnalysis does after every pass) the next batch read ahead meanwhile
            continuing = batch is not None and frame == int(batch.frames[-1]) + 1
            size = source.batch_size() if continuing or frame == 0 else 1
            stop = min(self.n_frames, frame + size)
            following = range(stop, min(self.n_frames, stop + size)) if continuing else None
            batch = self._batch = source.read(range(frame, stop), ahead=following, stacked=ts.positions.dtype)
        self._frame = frame
        ts.frame = frame
        batch.fill(frame, "positions", ts.positions)
        if ts.has_velocities:
            batch.fill(frame, "velocities", ts.velocities)
        if ts.has_forces:
            batch.fill(frame, "forces", ts.forces)
        rows = source.cell_rows(frame)
        key = None if rows is None else rows.tobytes()
        if key != self._dims_key:
            self._dims_key, self._dims = key, _dimensions(rows)
        ts.dimensions = self._dims
        if source.times is not None:
            ts.time = float(source.times[frame])
        ts.data["step"] = int(source.steps[frame])
        if source.meta_keys:
            ts.data.update(source.meta(frame))
        return ts

    def timeseries(self, asel: Any = None, atomgroup: Any = None, start: Optional[int] = None,
                   stop: Optional[int] = None, step: Optional[int] = None, order: str = "fac") -> np.ndarray:
        """Positions of ``atomgroup`` (default: every atom) over frames ``start:stop:step`` as
        float32 in ``order`` (a permutation of ``"fac"``: frame, atom, coordinate) —
        MDAnalysis's ``timeseries``, read through the record's read engine a batch of frames
        at a time (``TrajectorySource.read``: each inner chunk decoded once) instead of one
        Timestep per frame; the reader's current frame is left where it was."""
        if asel is not None:
            warnings.warn("asel argument to timeseries will be renamed to 'atomgroup' in 3.0, see #3911",
                          category=DeprecationWarning, stacklevel=2)
            if atomgroup:
                raise ValueError("Cannot provide both asel and atomgroup kwargs")
            atomgroup = asel
        start, stop, step = self.check_slice_indices(start, stop, step)
        frames = np.arange(start, stop, step, dtype=np.int64)
        if atomgroup is not None:
            if len(atomgroup) == 0:
                raise ValueError("Timeseries requires at least one atom to analyze")
            atoms: Any = np.asarray(atomgroup.indices)
            n_atoms = atoms.size
        else:
            atoms, n_atoms = None, self.n_atoms
        if any(axis not in "fac" for axis in order):
            raise ValueError(f"Unrecognized order key in {order}, must be permutation of 'fac'")
        if sorted(order) != sorted("fac"):
            raise ValueError(f"Repeated or missing keys passed to argument `order`: {order}, each key must be used once")
        source = self._source
        out = np.empty((frames.size, n_atoms, 3), dtype=np.float32)
        first = 0
        for batch in source.batches(frames, ["positions"]):
            out[first:first + batch.frames.size] = batch.stacked("positions", np.float32, atoms)
            first += batch.frames.size
        return out.transpose(["fac".index(axis) for axis in order])

    def _reopen(self) -> None:
        self._frame = -1

    def close(self) -> None:
        src, self._src, self._batch = getattr(self, "_src", None), None, None
        if src is not None:
            src.close()

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        state["_src"], state["_batch"] = None, None  # reopened by path after unpickling
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)

    def Writer(self, filename: Any, n_atoms: Optional[int] = None, **kwargs: Any) -> "MRECWriter":
        """A record writer for this trajectory's atoms (velocities/forces as this one has)."""
        kwargs.setdefault("velocities", self.ts.has_velocities)
        kwargs.setdefault("forces", self.ts.has_forces)
        return MRECWriter(filename, self.n_atoms if n_atoms is None else n_atoms, **kwargs)


class MRECParser(TopologyReaderBase):
    """The topology of a record's ``system`` (else ``frame``) section: names, types,
    elements, masses, charges, residues (``res_id``/``res_name``, squashed per run of
    ``chain res_id res_name mol_id``), segments and chainIDs from ``chain``, molnums from
    ``mol_id``; bonds, angles, dihedrals, impropers.  A record without either section gets
    its atom count only (from the trajectory)."""

    format = FORMAT
    _format_hint = staticmethod(is_record_path)

    def parse(self, **kwargs: Any) -> Any:
        """The MDAnalysis Topology of the record, built as the class says; ``assume_units``
        as for the reader (integrations.conventions)."""
        # every group and per-step key the reader will convert: a unit the record leaves
        # unstated is named with all the others now, not one per Universe attempt
        source = TrajectorySource(self.filename, MDANALYSIS_UNITS, assume=as_units(kwargs.get("assume_units")))
        try:
            top = source.topology()
            n_atoms = source.n_atoms
        finally:
            source.close()
        return _mda_topology(Topology(n_atoms) if top is None else top)


def _mda_topology(top: Topology) -> Any:
    atoms = top.atoms
    n = top.n_atoms
    found: List[Any] = []
    for key, cls in (("name", attrs.Atomnames), ("type", attrs.Atomtypes), ("element", attrs.Elements),
                     ("mass", attrs.Masses), ("charge", attrs.Charges), ("chain", attrs.ChainIDs)):
        if key in atoms:
            found.append(cls(atoms[key]))
    residue = runs_of(top, RESIDUE_KEYS + ("mol_id",))
    first = np.flatnonzero(np.r_[True, residue[1:] != residue[:-1]]) if n else np.zeros(0, np.int64)
    resids = atoms["res_id"][first].astype(np.int64) if "res_id" in atoms else np.arange(1, first.size + 1)
    found += [attrs.Resids(resids), attrs.Resnums(resids.copy())]
    if "res_name" in atoms:
        found.append(attrs.Resnames(atoms["res_name"][first]))
    if "mol_id" in atoms:
        found.append(attrs.Molnums(atoms["mol_id"][first].astype(np.int64)))
    segment = runs_of(top, ("chain",))[first] if first.size else np.zeros(0, np.int64)
    seg_first = np.flatnonzero(np.r_[True, segment[1:] != segment[:-1]]) if first.size else np.zeros(0, np.int64)
    segids = atoms["chain"][first][seg_first] if "chain" in atoms else np.array(["SYSTEM"], dtype=object)
    found.append(attrs.Segids(np.asarray(segids, dtype=object)))
    for key, cls in (("bonds", attrs.Bonds), ("angles", attrs.Angles), ("dihedrals", attrs.Dihedrals),
                     ("impropers", attrs.Impropers)):
        if key in top.relations:
            found.append(cls([tuple(int(i) for i in row) for row in top.relations[key]]))
    n_res = max(1, int(first.size))
    n_seg = max(1, int(len(segids)))
    return MDATopology(n, n_res, n_seg, attrs=found, atom_resindex=residue if n else None,
                       residue_segindex=segment if first.size else None)


def _optional(group: Any, attribute: str) -> Optional[np.ndarray]:
    try:
        return np.asarray(getattr(group, attribute))
    except AttributeError:  # MDAnalysis's NoDataError is one too
        return None


def topology_of(group: Any) -> Topology:
    """The canonical topology of an MDAnalysis AtomGroup (atoms in the group's order;
    relations kept when every atom of one is in the group, renumbered to the group)."""
    n = group.n_atoms
    atoms: Dict[str, np.ndarray] = {}
    for key, attribute in (("name", "names"), ("type", "types"), ("element", "elements"), ("mass", "masses"),
                           ("charge", "charges"), ("res_name", "resnames"), ("mol_id", "molnums")):
        values = _optional(group, attribute)
        if values is not None:
            atoms[key] = values
    resids = _optional(group, "resids")
    if resids is not None:
        resids, renumbered = renumbered_res_ids(resids)
        if renumbered:
            warnings.warn("negative residue ids cannot be stored (u64, frame-and-types §13.2): residues "
                          "renumbered 1, 2, … in order", stacklevel=3)
        atoms["res_id"] = resids
    chains = _optional(group, "chainIDs")
    if chains is None or not any(str(c).strip() for c in chains):
        chains = _optional(group, "segids")
    if chains is not None:
        atoms["chain"] = chains
    relations: Dict[str, np.ndarray] = {}
    lookup = np.full(group.universe.atoms.n_atoms, -1, dtype=np.int64)
    lookup[group.indices] = np.arange(n)
    for key in RELATIONS:
        try:
            indices = np.asarray(getattr(group, key).to_indices(), dtype=np.int64)
        except AttributeError:
            continue
        if indices.size:
            local = lookup[indices]
            relations[key] = local[np.all(local >= 0, axis=1)]
    return Topology(n, atoms, relations)


#: The ``system`` meta key (tag json) that says which columns a producer guessed, not read.
GUESSED_KEY = "guessed"


def guess_elements(universe: Any) -> Optional[Dict[str, Any]]:
    """Give a Universe without elements the ones MDAnalysis's guesser makes of its atom types
    and names (``guess_TopologyAttrs``, MDAnalysis >= 2.8; ``guess_types`` before), spelled
    as the periodic table does (``"NA"`` -> ``"Na"``); an atom it cannot guess (a virtual
    site: MDAnalysis's ``"DUMMY"``) gets ``""``.  Returns what to record under the ``system``
    meta key :data:`GUESSED_KEY` — ``{"element": {"by": ..., "from": ..., "unguessed": n}}``
    (spec-notes/integrations.md, "Guessed elements") — or None when the Universe has
    elements already or nothing to guess them from."""
    atoms = universe.atoms
    if _optional(atoms, "elements") is not None or (_optional(atoms, "types") is None
                                                     and _optional(atoms, "names") is None):
        return None
    with warnings.catch_warnings():  # the guesser warns per atom it cannot guess: counted below instead
        warnings.simplefilter("ignore")
        try:
            if hasattr(universe, "guess_TopologyAttrs"):
                universe.guess_TopologyAttrs(to_guess=["elements"])
                raw = np.asarray(atoms.elements, dtype=object)
                how = "guess_TopologyAttrs(to_guess=['elements'])"
            else:  # MDAnalysis < 2.8
                from MDAnalysis.topology.guessers import guess_types
                raw = np.asarray(guess_types(atoms.names), dtype=object)
                universe.add_TopologyAttr("elements", raw)
                how = "guessers.guess_types(names)"
        except (ValueError, AttributeError, KeyError):  # NoDataError: nothing it guesses from (LAMMPS type ids)
            return None
    known = {symbol.upper(): symbol for symbol in ELEMENTS if symbol}
    atoms.elements = elements = np.array([known.get(str(e).strip().upper(), "") for e in raw], dtype=object)
    return {"element": {"by": f"MDAnalysis {mda.__version__} {how}",
                        "from": "atom types" if _optional(atoms, "types") is not None else "atom names",
                        "unguessed": int(np.count_nonzero(elements == ""))}}


class MRECWriter(WriterBase):
    """Writes an MDAnalysis trajectory to a new record (an existing one is replaced), frame
    by frame through ``MrecWriter``: the first frame's AtomGroup gives the topology
    (``system`` section, with ``units`` Å, ps, kJ/mol); ``precision`` (None = lossless)
    rounds positions; velocities/forces are written when the first frame has them (or as
    ``velocities=``/``forces=`` say).  Steps come from ``ts.data["step"]`` when the source
    has one (they must increase), else 0, 1, 2…; times from ``ts.time``; ``ts.data`` scalars
    named like per-step keys (``pe``, ``temp``, …) become per-step meta."""

    format = FORMAT
    multiframe = True
    singleframe = True
    units = dict(_MDA_UNITS)

    def __init__(self, filename: Any, n_atoms: int, *, precision: Optional[float] = None,
                 velocities: Optional[bool] = None, forces: Optional[bool] = None, convert_units: bool = True,
                 system_meta: Optional[Dict[str, Any]] = None, **kwargs: Any) -> None:
        self.filename = os.fspath(filename)
        if n_atoms is None or int(n_atoms) < 0:
            raise InvalidValueError(f"{self.filename}: n_atoms must be a non-negative integer, got {n_atoms!r}")
        self.n_atoms = int(n_atoms)
        self.precision, self.convert_units = precision, convert_units
        self._velocities, self._forces = velocities, forces
        self._system_meta = system_meta
        self._sink: Optional[TrajectorySink] = None
        self._step: Optional[int] = None
        self._ignored: set[str] = set()
        self._closed = False

    def _open(self, group: Any, ts: Any) -> TrajectorySink:
        meta_keys = sorted(k for k, v in ts.data.items() if _per_step_key(k, v))
        velocities = ts.has_velocities if self._velocities is None else bool(self._velocities)
        forces = ts.has_forces if self._forces is None else bool(self._forces)
        return TrajectorySink(self.filename, self.n_atoms, MDANALYSIS_UNITS, topology=topology_of(group),
                              precision=self.precision, velocities=velocities, forces=forces, meta_keys=meta_keys,
                              system_meta=self._system_meta)

    def _write_next_frame(self, obj: Any) -> None:
        try:
            group = obj.atoms
        except AttributeError:
            raise TypeError("MRECWriter.write needs an AtomGroup or a Universe") from None
        if group.n_atoms != self.n_atoms:
            raise InvalidValueError(f"{self.filename}: the writer was opened for {self.n_atoms} atoms, "
                                    f"this AtomGroup has {group.n_atoms}")
        ts = group.universe.trajectory.ts
        if self._sink is None:
            self._sink = self._open(group, ts)
        sink = self._sink
        step = self._next_step(ts.data.get("step"))
        meta = {k: v for k, v in ts.data.items() if k in sink.meta_keys}
        extra = {k for k, v in ts.data.items() if _per_step_key(k, v)} - set(sink.meta_keys) - self._ignored
        if extra:
            self._ignored |= extra
            warnings.warn(f"{self.filename}: per-step value(s) {sorted(extra)} appeared after the first frame "
                          "and are not written (the record's schema was pinned then)", stacklevel=3)
        sink.append(group.positions,
                    velocities=group.velocities if sink.velocities else None,
                    forces=group.forces if sink.forces else None,
                    cell=_cell_rows(ts.dimensions), step=step, time=float(ts.time), meta=meta)

    def _next_step(self, source_step: Any) -> int:
        if isinstance(source_step, (int, np.integer)) and not isinstance(source_step, bool):
            step = int(source_step)
            if self._step is not None and step <= self._step:
                raise InvalidValueError(f"{self.filename}: step {step} does not follow step {self._step}; a record's "
                                        "steps increase (trajectory#W16): write the frames in order")
        else:
            step = 0 if self._step is None else self._step + 1
        self._step = step
        return step

    def close(self) -> None:
        if getattr(self, "_closed", True):  # closed, or __init__ never finished
            return
        self._closed = True  # first: a close that fails is not tried again (MDAnalysis closes on __del__)
        sink = self._sink
        if sink is None:
            sink = self._sink = TrajectorySink(self.filename, self.n_atoms, MDANALYSIS_UNITS,
                                               precision=self.precision)  # no frame: the atom count only
        sink.close()


class MRECZipWriter(MRECWriter):
    """``mda.Writer("out.mrec.zip", n_atoms)``: MDAnalysis names a writer by the last
    extension (``ZIP``), so the packed-record writer is registered under it; the record is
    built beside and packed at close (``MrecWriter``).  A ``*.zip`` not named ``*.mrec.zip``
    is refused (root-layout#1)."""

    format = "ZIP"

    def __init__(self, filename: Any, n_atoms: int, **kwargs: Any) -> None:
        if not is_record_path(filename):
            raise InvalidValueError(f"{os.fspath(filename)!r}: MDAnalysis writes a zip here only as a packed MolRec "
                                    "record, named *.mrec.zip (root-layout#1)")
        super().__init__(filename, n_atoms, **kwargs)


def _per_step_key(key: str, value: Any) -> bool:
    """A ``ts.data`` entry written as per-step f64 meta: a real scalar under a name a record
    can hold (the canonical ``pe ke etotal temp press volume`` and a producer's own)."""
    if key in _TIMESTEP_KEYS or isinstance(value, (bool, np.bool_)):
        return False
    if not isinstance(value, (int, float, np.integer, np.floating)):
        return False
    try:
        SequenceSchema().declare_meta(key, "f64")
    except MolrecError:  # a name no Zarr node can carry
        return False
    return key in ENERGY_KEYS or key.replace("_", "").isalnum()

