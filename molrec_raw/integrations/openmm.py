"""An OpenMM reporter that writes a MolRec trajectory while a simulation runs.

``MrecReporter(path, reportInterval)`` goes into ``simulation.reporters`` like OpenMM's own
``DCDReporter``.  The first report writes ``system/`` from ``simulation.topology`` (atoms:
``name element res_name res_id chain mass charge``; ``bonds``) and creates the trajectory;
every report appends one frame: step and time, ``x y z`` (``vx vy vz``, ``fx fy fz`` when
asked), the periodic box as lattice vectors (stored once while it does not change), and the
per-step meta ``pe ke temp`` (with ``energies``) and ``volume`` (periodic systems).

Units are OpenMM's (nm, ps, kJ/mol, dalton, e; ``temp`` in K), recorded in ``system``'s ``units`` meta key;
conversions, cell orientation and vocabulary all come from
:mod:`molrec_raw.integrations.conventions`.  Commits follow the writer's cadence
(trajectory §14); ``flush()``, ``close()`` and leaving a ``with`` block commit durably
(trajectory §10).  ``append=True`` reopens a record and continues after its last committed
step, for restarts from a checkpoint: reports at or before that step are skipped.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np

from molrec_raw.errors import InvalidValueError
from molrec_raw.integrations.conventions import (
    OPENMM_UNITS, Topology, atoms_frame, box_from_rows, continue_trajectory, require, start_trajectory,
    trajectory_schema,
)
from molrec_raw.record.trajectory import MrecWriter
from molrec_raw.zarr import PathLike

__all__ = ["MrecReporter", "degrees_of_freedom"]

_mm = require("openmm", "openmm")
_unit = require("openmm.unit", "openmm")

_NM = _unit.nanometer
_PS = _unit.picosecond
_KJ_MOL = _unit.kilojoule_per_mole
_NM_PS = _unit.nanometer / _unit.picosecond
_KJ_MOL_NM = _unit.kilojoule_per_mole / _unit.nanometer
_DALTON = _unit.dalton
_E = _unit.elementary_charge
#: R in kJ/(mol K): the constant OpenMM's StateDataReporter divides by.
_R = _unit.MOLAR_GAS_CONSTANT_R.value_in_unit(_unit.kilojoule_per_mole / _unit.kelvin)


def _version(text: str) -> Tuple[int, int]:
    parts = [int("".join(c for c in p if c.isdigit()) or 0) for p in text.split(".")[:2]]
    return (parts + [0, 0])[0], (parts + [0, 0])[1]


#: OpenMM >= 8.2 reads a reporter's description as a dictionary; older versions as a tuple.
DICT_DESCRIPTIONS = _version(str(_mm.version.version)) >= (8, 2)


def _in(quantity: Any, unit: Any) -> Any:
    """The value of an OpenMM ``Quantity`` in ``unit``.  A State hands out its values in
    OpenMM's own units already, and ``value_in_unit`` deep-copies even then: skip that."""
    return quantity._value if quantity.unit is unit or quantity.unit == unit else quantity.value_in_unit(unit)


def degrees_of_freedom(system: Any) -> int:
    """Degrees of freedom as OpenMM's StateDataReporter counts them: 3 per particle with
    mass (virtual sites are massless), minus one per constraint touching a massive
    particle, minus 3 when the system has a ``CMMotionRemover``."""
    massive = [bool(_in(system.getParticleMass(i), _DALTON) > 0) for i in range(system.getNumParticles())]
    dof = 3 * sum(massive)
    for k in range(system.getNumConstraints()):
        i, j, _ = system.getConstraintParameters(k)
        if massive[i] or massive[j]:
            dof -= 1
    if any(type(system.getForce(k)) is _mm.CMMotionRemover for k in range(system.getNumForces())):
        dof -= 3
    return dof


def _residue_ids(residues: List[Any]) -> np.ndarray:
    """``res_id`` (frame-and-types §13.2, unsigned): the residues' own ids when every one is a
    non-negative integer, else their 1-based position in the topology (spec-notes)."""
    ids = [str(r.id).strip() for r in residues]
    if all(i.isascii() and i.isdigit() for i in ids):
        return np.array([int(i) for i in ids], dtype=np.uint64)
    return np.array([r.index + 1 for r in residues], dtype=np.uint64)


def _topology(simulation: Any, indices: np.ndarray) -> Topology:
    """The canonical topology of the reported atoms (``indices`` into the system), with the
    system's masses and, when it has a NonbondedForce, its charges."""
    system = simulation.system
    atoms = list(simulation.topology.atoms())
    chosen = [atoms[i] for i in indices]
    residues = sorted({a.residue.index: a.residue for a in chosen}.values(), key=lambda r: r.index)
    res_ids = dict(zip((r.index for r in residues), _residue_ids(residues)))
    columns: Dict[str, Any] = {
        "name": [a.name for a in chosen],
        "element": [a.element.symbol if a.element is not None else "" for a in chosen],
        "res_name": [a.residue.name for a in chosen],
        "res_id": np.array([res_ids[a.residue.index] for a in chosen], dtype=np.uint64),
        "chain": [a.residue.chain.id for a in chosen],
        "mass": [_in(system.getParticleMass(int(i)), _DALTON) for i in indices],
    }
    nonbonded = [f for f in system.getForces() if isinstance(f, _mm.NonbondedForce)]
    if nonbonded:
        columns["charge"] = [_in(nonbonded[0].getParticleParameters(int(i))[0], _E) for i in indices]
    row = np.full(len(atoms), -1, dtype=np.int64)
    row[indices] = np.arange(len(indices))
    pairs = np.array([(b[0].index, b[1].index) for b in simulation.topology.bonds()], dtype=np.int64).reshape(-1, 2)
    pairs = row[pairs]
    return Topology(len(indices), columns, {"bonds": pairs[(pairs >= 0).all(axis=1)]})


class MrecReporter:
    """Writes a MolRec trajectory from an OpenMM ``Simulation`` (add it to ``simulation.reporters``).

    ``precision`` (nm) rounds positions to a declared precision (frame-and-types §8);
    ``velocities``/``forces`` add ``vx vy vz``/``fx fy fz``; ``energies`` the per-step ``pe ke
    temp`` (of the whole system, also with ``atomSubset``; OpenMM evaluates the energy for it); ``atomSubset`` reports only those
    atoms (0-based indices, in that order); ``append`` continues an existing record after its
    last committed step.  ``describe_as_tuple`` selects OpenMM's older tuple description
    (automatic: OpenMM < 8.2).  Close it (or use ``with``): frames since the last commit are
    lost otherwise, as with every ``MrecWriter``.
    """

    def __init__(self, path: PathLike, reportInterval: int, *, precision: Optional[float] = None,
                 velocities: bool = False, forces: bool = False, energies: bool = True,
                 atomSubset: Optional[Iterable[int]] = None, append: bool = False) -> None:
        if isinstance(reportInterval, bool) or not isinstance(reportInterval, (int, np.integer)) or reportInterval < 1:
            raise InvalidValueError(f"reportInterval must be a positive integer, got {reportInterval!r}")
        trajectory_schema(1, precision=precision)  # a bad precision is refused now, not at the first report
        self._path = path
        self._interval = int(reportInterval)
        self._precision = precision
        self._velocities, self._forces, self._energies = bool(velocities), bool(forces), bool(energies)
        self._subset = None if atomSubset is None else np.array(list(atomSubset), dtype=np.int64)
        self._append = bool(append)
        self.describe_as_tuple = not DICT_DESCRIPTIONS
        self._writer: Optional[MrecWriter] = None
        self._skip_through: Optional[int] = None
        self._periodic = False
        self._dof = 0
        self._closed = False

    # ------------------------------------------------------------------ OpenMM's reporter API
    def describeNextReport(self, simulation: Any) -> Any:
        """Steps to the next report and what the state must hold: OpenMM's dictionary form
        (``steps``, ``periodic`` — None: wrapped as the simulation's default —, ``include``)
        or the tuple form ``(steps, positions, velocities, forces, energies)``."""
        steps = self._interval - simulation.currentStep % self._interval
        if self.describe_as_tuple:
            return (steps, True, self._velocities, self._forces, self._energies)
        include = ["positions"] + ["velocities"] * self._velocities + ["forces"] * self._forces
        return {"steps": steps, "periodic": None, "include": include + ["energy"] * self._energies}

    def report(self, simulation: Any, state: Any) -> None:
        """Append the frame of ``state`` at ``simulation.currentStep`` (skipped on append when
        the record already holds that step)."""
        if self._closed:
            raise InvalidValueError(f"MrecReporter for {str(self._path)!r} is closed")
        step = int(simulation.currentStep)
        if self._writer is None:
            self._writer = self._begin(simulation)
        if self._skip_through is not None and step <= self._skip_through:
            return
        positions = _in(state.getPositions(asNumpy=True), _NM)
        velocities = _in(state.getVelocities(asNumpy=True), _NM_PS) if self._velocities else None
        forces = _in(state.getForces(asNumpy=True), _KJ_MOL_NM) if self._forces else None
        if self._subset is not None:
            positions = positions[self._subset]
            velocities = None if velocities is None else velocities[self._subset]
            forces = None if forces is None else forces[self._subset]
        meta: Dict[str, float] = {}
        if self._energies:
            pe = float(_in(state.getPotentialEnergy(), _KJ_MOL))
            ke = float(_in(state.getKineticEnergy(), _KJ_MOL))
            meta.update(pe=pe, ke=ke, temp=self._temperature(simulation, ke))
        box = None
        if self._periodic:
            rows = _in(state.getPeriodicBoxVectors(asNumpy=True), _NM)
            box = box_from_rows(rows)
            meta["volume"] = float(rows[0, 0] * rows[1, 1] * rows[2, 2])  # OpenMM's reduced form (as StateDataReporter)
        frame = atoms_frame(positions, velocities=velocities, forces=forces, box=box, meta=meta)
        self._writer.append(frame, step=step, time=float(_in(state.getTime(), _PS)))

    # ------------------------------------------------------------------ record
    def _temperature(self, simulation: Any, ke: float) -> float:
        """As OpenMM's StateDataReporter: the integrator's own temperature where it computes
        one (Drude integrators), else 2·KE / (dof·R); NaN without degrees of freedom."""
        integrator = simulation.context.getIntegrator()
        if hasattr(integrator, "computeSystemTemperature"):
            return float(integrator.computeSystemTemperature().value_in_unit(_unit.kelvin))
        return 2.0 * ke / (self._dof * _R) if self._dof > 0 else float("nan")

    def _begin(self, simulation: Any) -> MrecWriter:
        system = simulation.system
        n = system.getNumParticles()
        indices = np.arange(n) if self._subset is None else self._subset
        if self._subset is not None and (len(np.unique(indices)) != len(indices)
                                         or (len(indices) and (indices.min() < 0 or indices.max() >= n))):
            raise InvalidValueError(f"atomSubset must list distinct atoms of the {n} in the system")
        self._periodic = bool(system.usesPeriodicBoundaryConditions())
        self._dof = degrees_of_freedom(system)
        keys = ("pe", "ke", "temp") * self._energies + ("volume",) * self._periodic
        schema = trajectory_schema(len(indices), velocities=self._velocities, forces=self._forces,
                                   precision=self._precision, meta_keys=keys)
        if not self._append:
            return start_trajectory(self._path, _topology(simulation, indices).system(OPENMM_UNITS), schema)
        where = f"MrecReporter({str(self._path)!r}, append=True)"
        writer, stored, self._skip_through = continue_trajectory(self._path, OPENMM_UNITS, schema, where)
        atoms = stored.blocks.get("atoms")
        problem = None
        if atoms is None or atoms.nrows != len(indices):
            problem = f"its system has {0 if atoms is None else atoms.nrows} atoms, this reporter writes {len(indices)}"
        elif writer.schema != schema:
            problem = (f"its trajectory is pinned to {writer.schema.to_json()}, this reporter writes "
                       f"{schema.to_json()} (same precision, velocities, forces, energies needed)")
        if problem is not None:
            writer.close()
            raise InvalidValueError(f"{where}: cannot continue the record: {problem}")
        return writer

    def flush(self) -> None:
        """Commit the frames reported so far, durably (call it before saving a checkpoint)."""
        if self._writer is not None and not self._closed:
            self._writer.flush()

    def close(self) -> None:
        """The last durable commit; idempotent."""
        if not self._closed and self._writer is not None:
            self._writer.close()
        self._closed = True

    def __enter__(self) -> "MrecReporter":
        return self

    def __exit__(self, *exc: Any) -> None:
        # Every buffered frame is a complete state OpenMM reported; an exception raised later in
        # the run (a blow-up) does not spoil it, so it is committed (spec-notes/integrations.md).
        self.close()
