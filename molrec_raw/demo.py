"""A realistic sample record for newcomers (``molrec-raw demo PATH``).

A small NPT-like run of 32 three-site water molecules, written the way a simulation engine
would write it, through the public API only:

- ``system/`` — what does not move: per-atom element, type, mass, charge and molecule id, and
  the units the run uses (meta key ``units``: the ``real`` preset, temperatures in K);
- ``forcefield/`` — a TIP3P-like force field (atom, bond, angle and pair tables);
- ``trajectory/`` — streamed with ``MrecWriter`` while the "run" goes: coordinates x, y, z
  with precision 1e-3 Å; a nullable column (``dipole``, defined on oxygens only); a ``bonds``
  topology block that changes once (a proton leaves a molecule at frame 200); a box that the
  barostat rescales every 10 frames; per-step energies and temperature as meta series
  under their canonical names ``pe``, ``ke``, ``temp`` (frame-and-types §13.4);
- ``metrics/`` — the same thermodynamics logged through ``MetricsWriter`` (a WAL densified on
  close), plus a pressure every 10 steps;
- ``observables/`` — the oxygen mean-square displacement, computed afterwards by reading the
  trajectory back with ``MrecReader``;
- ``status``/``method`` documents.

Deterministic: the same ``seed`` gives the same values.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Dict

import numpy as np

from molrec_raw.errors import InvalidValueError, RecordExistsError
from molrec_raw.record.forcefield import ForceFieldSection, block_name
from molrec_raw.record.metrics import MetricsWriter
from molrec_raw.record.model import Block, Box, Frame
from molrec_raw.record.molrec import MolRec, read_mrec, write_mrec
from molrec_raw.record.observables import Observable
from molrec_raw.record.packer import is_packed_name
from molrec_raw.record.trajectory import MrecReader, MrecWriter, SequenceSchema
from molrec_raw.zarr.store import PathLike

__all__ = ["write_demo"]

STEPS_PER_FRAME = 10
TIMESTEP_FS = 2.0
DISSOCIATION_FRAME = 200
_PARTIAL_CHARGE = {"OW": -0.834, "HW": 0.417}
UNITS = {"preset": "real", "temperature": "K"}  # Å, kcal/mol, fs (frame-and-types §13.5)


def _system(molecules: int) -> Frame:
    types = np.array(["OW", "HW", "HW"] * molecules, dtype=object)
    atoms = Block({
        "element": _strings(*["O", "H", "H"] * molecules),
        "type": types,
        "mass": np.tile([15.9994, 1.008, 1.008], molecules),
        "charge": np.array([_PARTIAL_CHARGE[t] for t in types.tolist()]),
        "mol_id": np.repeat(np.arange(molecules, dtype=np.uint64), 3),
    })
    return Frame({"name": "water box", "formula": f"(H2O){molecules}", "units": UNITS}, {"atoms": atoms})


def _strings(*values: str) -> np.ndarray:
    """Strings as the object array a string column takes."""
    return np.array(values, dtype=object)


def _forcefield() -> ForceFieldSection:
    return ForceFieldSection(
        {"name": "tip3p-like", "units": {"preset": "real"},
         "styles": [{"category": "atom", "style": "full"}, {"category": "bond", "style": "harmonic"},
                    {"category": "angle", "style": "harmonic"}, {"category": "pair", "style": "lj/cut/coul/long"}]},
        {block_name("atom", "full"): Block({"name": _strings("OW", "HW"), "mass": np.array([15.9994, 1.008]),
                                             "charge": np.array([-0.834, 0.417])}),
         block_name("bond", "harmonic"): Block({"name": _strings("OW-HW"), "itom": _strings("OW"), "jtom": _strings("HW"),
                                                 "k": np.array([450.0]), "r0": np.array([0.9572])}),
         block_name("angle", "harmonic"): Block({"name": _strings("HW-OW-HW"), "itom": _strings("HW"),
                                                  "jtom": _strings("OW"), "ktom": _strings("HW"),
                                                  "k": np.array([55.0]), "theta0": np.array([104.52])}),
         block_name("pair", "lj/cut/coul/long"): Block({"name": _strings("OW-OW"), "itom": _strings("OW"), "jtom": _strings("OW"),
                                                         "epsilon": np.array([0.1521]), "sigma": np.array([3.1507])})},
    )


def _schema(atoms: int) -> SequenceSchema:
    schema = SequenceSchema().declare_block("atoms", rows=atoms)
    for c in "xyz":
        schema.declare_column("atoms", c, "f64").declare_precision("atoms", c, 1e-3)
    schema.declare_column("atoms", "dipole", "f64").declare_nullable("atoms", "dipole")
    schema.declare_column("bonds", "atomi", "u64").declare_column("bonds", "atomj", "u64")
    schema.declare_target("bonds", "atomi", "atoms").declare_target("bonds", "atomj", "atoms")
    for key in ("pe", "ke", "temp"):
        schema.declare_meta(key, "f64")
    return schema


def _bonds(molecules: int, broken: bool) -> Block:
    oxygen = np.repeat(np.arange(molecules, dtype=np.uint64) * 3, 2)
    hydrogen = oxygen + np.tile(np.array([1, 2], dtype=np.uint64), molecules)
    if broken:  # molecule 0 loses its second proton: H2O -> OH- + H+
        oxygen, hydrogen = np.delete(oxygen, 1), np.delete(hydrogen, 1)
    return Block({"atomi": oxygen, "atomj": hydrogen})


def write_demo(path: PathLike, *, frames: int = 300, molecules: int = 32, seed: int = 0,
               overwrite: bool = False) -> Path:
    """Write the demo record at ``path`` (a ``*.mrec`` directory); an existing record there is
    replaced only with ``overwrite=True`` (``molrec-raw demo --force``), anything else never."""
    target = Path(path)
    if is_packed_name(target):  # its run logs metrics, which only a directory takes
        raise InvalidValueError(f"{target}: the demo writes a *.mrec directory (it logs metrics as it runs); "
                                "pack it afterwards (molrec-raw pack)")
    if target.exists() and not overwrite:
        raise RecordExistsError(f"{target} exists; the demo writes a new record (--force replaces a record "
                                "there)", store=str(target), rule="safety#overwrite")
    if frames < 1 or molecules < 1:
        raise InvalidValueError(f"the demo needs at least one frame and one molecule, got {frames} and {molecules}")
    rng = np.random.default_rng(seed)
    n = 3 * molecules
    side = math.ceil(molecules ** (1 / 3))
    box0 = 3.1 * side
    grid = np.stack(np.meshgrid(*[np.arange(side)] * 3, indexing="ij"), -1).reshape(-1, 3)[:molecules] * 3.1 + 1.0
    geometry = np.array([[0.0, 0.0, 0.0], [0.9572, 0.0, 0.0], [-0.24, 0.927, 0.0]])
    positions = (grid[:, None, :] + geometry[None, :, :]).reshape(n, 3)
    oxygen = np.arange(n) % 3 == 0

    write_mrec(target, MolRec(
        meta={"creator": {"name": "molrec-raw demo"}, "title": f"{molecules} water molecules, NPT-like"},
        status={"state": "running"},
        method={"type": "classical", "description": "molecular dynamics, NPT, 2 fs steps",
                "engine": {"name": "molrec-raw demo"}},
        system=_system(molecules), forcefield=_forcefield()), overwrite=overwrite)

    with MrecWriter(target, _schema(n)) as trajectory, MetricsWriter(target) as metrics:
        velocity = rng.normal(scale=0.02, size=(n, 3))
        for i in range(frames):
            velocity = 0.9 * velocity + rng.normal(scale=0.01, size=(n, 3))  # a smooth random walk
            positions = positions + velocity
            scale = 1.0 + 0.002 * math.sin(i // 10 / 3.0)  # the barostat acts every 10 frames
            dipole = np.where(oxygen, 2.3 + 0.05 * rng.normal(size=n), np.nan)
            kinetic = float(0.5 * np.sum(velocity**2) * 60.0)
            potential = -9.8 * molecules + 0.3 * math.sin(i / 15.0) + 0.05 * rng.normal()
            temperature = 300.0 + 4.0 * rng.normal()
            atoms = Block({"x": positions[:, 0], "y": positions[:, 1], "z": positions[:, 2], "dipole": dipole},
                          masks={"dipole": oxygen})
            blocks = {"atoms": atoms}
            if i == 0 or i == DISSOCIATION_FRAME:  # unchanged topology is simply not restated
                blocks["bonds"] = _bonds(molecules, broken=i >= DISSOCIATION_FRAME)
            step = i * STEPS_PER_FRAME
            trajectory.append(
                Frame({"pe": potential, "ke": kinetic, "temp": temperature},
                      blocks, Box(np.eye(3) * box0 * scale)),
                step=step, time=step * TIMESTEP_FS)
            metrics.log_many({"energy/potential": potential, "energy/kinetic": kinetic,
                              "thermo/temperature": temperature}, step=step)
            if i % 10 == 0:
                metrics.log("thermo/pressure", 1.0 + 30.0 * rng.normal(), step=step)

    rec = read_mrec(target)
    assert isinstance(rec.trajectory, MrecReader)  # read_mrec's view of the section
    rec.observables = {"msd_oxygen": Observable(_oxygen_msd(rec.trajectory, oxygen), {
        "kind": "time_series", "description": "mean-square displacement of the oxygens from frame 0",
        "time_dependent": True, "unit": "angstrom^2"})}
    rec.status = {"state": "succeeded"}
    rec.trajectory.close()
    write_mrec(target, rec, overwrite=True)  # its own record; trajectory and metrics carried verbatim
    return target


def _oxygen_msd(reader: MrecReader, oxygen: np.ndarray) -> np.ndarray:
    def coordinates(i: int) -> np.ndarray:
        columns: Dict[str, np.ndarray] = reader.read_columns(i, [("atoms", c) for c in "xyz"]).blocks["atoms"].columns
        return np.stack([columns[c][oxygen] for c in "xyz"], axis=1)

    start = coordinates(0)
    return np.array([np.mean(np.sum((coordinates(i) - start) ** 2, axis=1)) for i in range(len(reader))])
