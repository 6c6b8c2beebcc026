"""The unit matrix (frame-and-types §13.5): every quantity x every writing door x every reading door.

Each writer states its units in the record; each reader hands values over in its tool's units
(ASE Å, eV, eV/Å, Å per ASE time unit, dalton, e; MDAnalysis Å, ps, kJ/mol, Å/ps; mdtraj nm,
ps), as stored with the units beside them (xarray attributes, the torch dataset's ``units``),
or converted to the units asked for (the torch dataset's ``units=``).  Positions, cells,
energies, forces, velocities, masses, charges, times and per-step temperatures (``temp``,
kelvin: the one temperature unit the table converts) are compared with the values the
writer was given, converted with constants written out here (not the package's table):
exactly where the conversion is the identity, to float rounding otherwise.

A combination a door cannot do is listed in ``CANNOT`` with the reason, and the test checks
that the reader indeed hands nothing over there (never a silent gap either way).
"""
from __future__ import annotations

import importlib.util
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import numpy as np
import pytest

import molrec_raw as mr
from molrec_raw.errors import MolrecError

QUANTITIES = ("positions", "cell", "energy", "forces", "velocities", "masses", "charges", "time", "temperature")
WRITERS = ("openmm", "ase", "mdanalysis", "mdtraj", "convert", "demo", "stated")
READERS = ("ase", "mdanalysis", "mdtraj", "xarray", "torch", "torch-converted")

#: (writer or "*", reader or "*", quantity) -> why the door cannot carry it.
CANNOT: Dict[tuple, str] = {
    ("*", "mdtraj", "energy"): "an mdtraj Trajectory holds no energies",
    ("*", "mdtraj", "forces"): "an mdtraj Trajectory holds no forces",
    ("*", "xarray", "cell"): "the xarray backend opens one block; the cell is no block",
    ("*", "xarray", "energy"): "the xarray backend opens one block; per-step meta is no block",
    ("mdtraj", "*", "energy"): "save_mrec writes what an mdtraj Trajectory holds: no energies",
    ("mdtraj", "*", "forces"): "save_mrec writes what an mdtraj Trajectory holds: no forces",
    ("convert", "*", "energy"): "convert goes through MDAnalysis from a TRR file, which holds no energies",
    ("demo", "*", "forces"): "the demo run records no forces",
    ("*", "mdtraj", "velocities"): "an mdtraj Trajectory holds no velocities",
    ("*", "mdtraj", "masses"): "mdtraj takes each atom's mass from its element, not from the record",
    ("*", "mdtraj", "charges"): "an mdtraj Topology holds no charges",
    ("*", "ase", "time"): "an ASE Atoms carries no time",
    ("*", "torch", "time"): "a dataset item carries no time",
    ("*", "torch-converted", "time"): "a dataset item carries no time",
    ("ase", "*", "time"): "ASE images carry no time, so the ASE writer records none",
    ("mdtraj", "*", "velocities"): "save_mrec writes what an mdtraj Trajectory holds: no velocities",
    ("mdtraj", "*", "masses"): "save_mrec writes what an mdtraj Topology holds: elements, no masses",
    ("mdtraj", "*", "charges"): "save_mrec writes what an mdtraj Topology holds: no charges",
    ("convert", "*", "charges"): "convert reads a PDB topology here, which holds no charges",
    ("demo", "*", "velocities"): "the demo run records no velocities",
    ("*", "ase", "temperature"): "an ASE image holds calculator results, momenta and arrays: no temperature "
                                 "(ASE derives one from the momenta)",
    ("*", "mdtraj", "temperature"): "an mdtraj Trajectory holds no per-step values",
    ("*", "xarray", "temperature"): "the xarray backend opens one block; per-step meta is no block",
    ("ase", "*", "temperature"): "an ASE image holds no temperature, so the ASE writer records none",
    ("mdtraj", "*", "temperature"): "save_mrec writes what an mdtraj Trajectory holds: no temperature",
    ("convert", "*", "temperature"): "convert goes through MDAnalysis from a TRR file, which holds no temperature",
    **{("ase", r, "charges"): "the ASE writer records initial charges per frame (column initial_charge), "
                              "which only ASE reads back; the others read charges from system/atoms"
       for r in ("mdanalysis", "xarray", "torch", "torch-converted")},
}
#: (reader, quantity) -> the tool's own default a reader shows where the writer recorded none.
TOOL_DEFAULTS = {("ase", "masses"): "ASE gives each atom its element's standard mass"}

# Independent constants (CODATA 2018), not the package's table: Å per unit, kJ/mol per unit.
LENGTH_IN_ANGSTROM = {"angstrom": 1.0, "nm": 10.0, "bohr": 0.529177210903}
ENERGY_IN_KJ_PER_MOL = {"kJ/mol": 1.0, "kcal/mol": 4.184, "eV": 96.485332123310018,
                        "hartree": 2625.4996394798254}
# fs per unit.  ASE's time unit is Å·sqrt(amu/eV) with ASE's default constants (CODATA 2014:
# amu 1.660539040e-27 kg, e 1.6021766208e-19 C): 1 Å/fs = 1/ase.units.fs = 10.180505671156725
# Å per ASE time unit, so 1 nm/ps = 10 Å/ps = 0.01 Å/fs = 0.10180505671156725 of ASE's.
TIME_IN_FS = {"fs": 1.0, "ps": 1000.0, "ase": 10.180505671156725,
              "(angstrom * (dalton / eV) ** 0.5)": 10.180505671156725}  # ASE's, as the record spells it
MASS_IN_DALTON = {"dalton": 1.0}
TEMPERATURE_IN_K = {"K": 1.0, "kelvin": 1.0}  # a factor table: kelvin only (°C, °F are refused)
#: The molar gas constant, kJ/(mol·K) (CODATA 2018, exact: k_B · N_A): OpenMM's temperature is
#: 2·KE / (dof·R), as its StateDataReporter computes it.
R_KJ_PER_MOL_K = 0.00831446261815324
CHARGE_IN_E = {"e": 1.0}


def cannot(writer: str, reader: str, quantity: str) -> Optional[str]:
    for w, r in ((writer, reader), ("*", reader), (writer, "*")):
        if (w, r, quantity) in CANNOT:
            return CANNOT[(w, r, quantity)]
    return None


def writer_cannot(writer: str, quantity: str) -> bool:
    """The writing door records no such values (so no reader can show them)."""
    return (writer, "*", quantity) in CANNOT


#: (reader, quantity) a reader hands over as float32 (the identity conversion is exact to float32).
SINGLE = {("mdanalysis", q) for q in ("positions", "cell", "forces", "velocities")} | \
         {("mdtraj", q) for q in ("positions", "cell")}


def factor(quantity: str, source: Dict[str, str], target: Dict[str, str]) -> float:
    """``quantity`` from ``source`` units ({"length", "energy", "time"}, or {"force"} /
    {"velocity"} as "<energy>/<length>" / "<length>/<time>") to ``target``; masses in
    dalton and charges in e unless stated."""
    def size(units: Dict[str, str]) -> float:
        if quantity in ("positions", "cell"):
            return LENGTH_IN_ANGSTROM[units["length"]]
        if quantity == "energy":
            return ENERGY_IN_KJ_PER_MOL[units["energy"]]
        if quantity == "time":
            return TIME_IN_FS[units["time"]]
        if quantity == "masses":
            return MASS_IN_DALTON[units.get("mass", "dalton")]
        if quantity == "charges":
            return CHARGE_IN_E[units.get("charge", "e")]
        if quantity == "temperature":
            return TEMPERATURE_IN_K[units["temperature"]]
        if quantity == "velocities":
            if "velocity" in units:
                length, time = units["velocity"].split("/", 1)
            else:
                length, time = units["length"], units["time"]
            return LENGTH_IN_ANGSTROM[length] / TIME_IN_FS[time]
        if "force" in units:
            energy, length = units["force"].rsplit("/", 1)
        else:
            energy, length = units["energy"], units["length"]
        return ENERGY_IN_KJ_PER_MOL[energy] / LENGTH_IN_ANGSTROM[length]
    return size(source) / size(target)


@dataclass
class Frames:
    """What a door wrote or read: per frame, positions (n, 3), cell rows (3, 3) or None, energy
    or None, forces (n, 3) or None; ``units`` the units they are in; ``single``: float32 values."""
    units: Dict[str, str]
    frames: List[Dict[str, Any]] = field(default_factory=list)
    single: bool = False


# -- writers ------------------------------------------------------------------------------------
def _needs(module: str) -> None:
    pytest.importorskip(module, reason=f"the {module} door needs {module}")


def write_openmm(path: Path) -> Frames:
    _needs("openmm")
    import openmm as mm
    import openmm.app as app
    import openmm.unit as u
    from molrec_raw.integrations.openmm import MrecReporter

    top = app.Topology()
    chain = top.addChain()
    for _ in range(8):
        top.addAtom("AR", app.Element.getBySymbol("Ar"), top.addResidue("AR", chain))
    edge = 1.6
    top.setPeriodicBoxVectors(np.eye(3) * edge * u.nanometer)
    system = mm.System()
    system.setDefaultPeriodicBoxVectors(*(mm.Vec3(*row) * edge for row in np.eye(3)))
    nb = mm.NonbondedForce()
    nb.setNonbondedMethod(mm.NonbondedForce.CutoffPeriodic)
    nb.setCutoffDistance(0.7)
    charges = [0.25, -0.25] * 4  # nonzero: the system's charges must reach every reader that holds them
    for q in charges:
        system.addParticle(39.948)
        nb.addParticle(q, 0.34, 0.99)
    system.addForce(nb)
    grid = np.array([[i, j, k] for i in (0, 1) for j in (0, 1) for k in (0, 1)], dtype=float) * 0.5 + 0.3
    integrator = mm.LangevinMiddleIntegrator(120 * u.kelvin, 1 / u.picosecond, 0.002 * u.picoseconds)
    integrator.setRandomNumberSeed(3)
    sim = app.Simulation(top, system, integrator, mm.Platform.getPlatformByName("Reference"))
    sim.context.setPositions(grid * u.nanometer)
    sim.context.setVelocitiesToTemperature(120 * u.kelvin, 3)
    seen = Frames({"length": "nm", "energy": "kJ/mol", "time": "ps", "temperature": "K"})
    dof = 3 * 8  # 8 massive particles, no constraint, no CMMotionRemover

    class Capturing(MrecReporter):  # the state each report hands the reporter, as OpenMM gave it
        def report(self, simulation: Any, state: Any) -> None:
            seen.frames.append({
                "positions": state.getPositions(asNumpy=True).value_in_unit(u.nanometer),
                "cell": state.getPeriodicBoxVectors(asNumpy=True).value_in_unit(u.nanometer),
                "energy": state.getPotentialEnergy().value_in_unit(u.kilojoule_per_mole),
                "forces": state.getForces(asNumpy=True).value_in_unit(u.kilojoule_per_mole / u.nanometer),
                "velocities": state.getVelocities(asNumpy=True).value_in_unit(u.nanometer / u.picosecond),
                "masses": np.full(8, 39.948), "charges": np.array(charges),
                "time": state.getTime().value_in_unit(u.picosecond),
                "temperature": 2.0 * state.getKineticEnergy().value_in_unit(u.kilojoule_per_mole)
                / (dof * R_KJ_PER_MOL_K)})
            super().report(simulation, state)

    with Capturing(str(path), 2, forces=True, velocities=True) as reporter:
        sim.reporters.append(reporter)
        sim.step(6)
    return seen


def write_ase(path: Path) -> Frames:
    _needs("ase")
    import ase
    import ase.io
    from ase.calculators.singlepoint import SinglePointCalculator

    rng = np.random.default_rng(1)
    cell = np.array([[5.0, 0.0, 0.0], [0.8, 6.0, 0.0], [0.3, 0.4, 7.0]])
    images, seen = [], Frames({"length": "angstrom", "energy": "eV", "time": "ase"})
    masses, charges = np.array([63.5, 63.5, 197.0, 197.0]), np.array([0.1, -0.1, 0.2, -0.2])
    for _ in range(3):
        atoms = ase.Atoms("CuCuAuAu", positions=rng.uniform(0, 4, (4, 3)), cell=cell, pbc=True,
                          masses=masses, charges=charges)
        atoms.set_velocities(rng.normal(size=(4, 3)) * 0.01)
        energy, forces = float(rng.normal()), rng.normal(size=(4, 3))
        atoms.calc = SinglePointCalculator(atoms, energy=energy, forces=forces)
        images.append(atoms)
        seen.frames.append({"positions": atoms.positions.copy(), "cell": cell, "energy": energy, "forces": forces,
                            "velocities": atoms.get_velocities(), "masses": masses, "charges": charges})
    ase.io.write(str(path), images, format="mrec")
    return seen


def _mda_universe(n: int) -> Any:
    import MDAnalysis as mda
    u = mda.Universe.empty(n, n_residues=n, atom_resindex=np.arange(n), trajectory=True, forces=True,
                           velocities=True)
    u.add_TopologyAttr("names", [f"C{i}" for i in range(n)])
    u.add_TopologyAttr("elements", ["C"] * n)
    u.add_TopologyAttr("resnames", ["MOL"] * n)
    u.add_TopologyAttr("resids", np.arange(1, n + 1))
    u.add_TopologyAttr("masses", np.linspace(12.0, 13.0, n))
    u.add_TopologyAttr("charges", np.linspace(-0.5, 0.5, n))
    return u


def write_mdanalysis(path: Path) -> Frames:
    _needs("MDAnalysis")
    import MDAnalysis as mda
    import molrec_raw.integrations.mdanalysis  # noqa: F401  (registers MREC)
    from MDAnalysis.lib.mdamath import triclinic_vectors

    rng = np.random.default_rng(2)
    u = _mda_universe(5)
    seen = Frames({"length": "angstrom", "energy": "kJ/mol", "time": "ps", "temperature": "K"}, single=True)
    with mda.Writer(str(path), n_atoms=5) as w:
        for i in range(3):
            u.atoms.positions = rng.uniform(0, 9, (5, 3))
            u.atoms.forces = rng.normal(size=(5, 3))
            u.atoms.velocities = rng.normal(size=(5, 3))
            u.dimensions = [10.0 + i, 11.0, 12.0, 80.0, 90.0, 100.0]
            u.trajectory.ts.data["pe"] = float(rng.normal() * 100)
            u.trajectory.ts.data["temp"] = 300.0 + float(rng.normal())
            u.trajectory.ts.time = 0.25 * i
            w.write(u.atoms)
            seen.frames.append({"positions": u.atoms.positions.astype(float), "forces": u.atoms.forces.astype(float),
                                "cell": triclinic_vectors(np.asarray(u.dimensions, float), dtype=np.float64),
                                "energy": u.trajectory.ts.data["pe"], "velocities": u.atoms.velocities.astype(float),
                                "masses": u.atoms.masses.astype(float), "charges": u.atoms.charges.astype(float),
                                "time": float(u.trajectory.ts.time), "temperature": u.trajectory.ts.data["temp"]})
    return seen


def write_mdtraj(path: Path) -> Frames:
    _needs("mdtraj")
    import mdtraj as md
    from mdtraj.utils import lengths_and_angles_to_box_vectors
    from molrec_raw.integrations.mdtraj import save_mrec

    top = md.Topology()
    residue = top.add_residue("HOH", top.add_chain())
    for name, element in (("O", md.element.oxygen), ("H1", md.element.hydrogen), ("H2", md.element.hydrogen)):
        top.add_atom(name, element, residue)
    xyz = np.random.default_rng(4).uniform(0, 1.5, (4, 3, 3)).astype(np.float32)
    lengths, angles = np.array([[2.0, 2.5, 3.0]] * 4, np.float32), np.array([[80.0, 90.0, 100.0]] * 4, np.float32)
    save_mrec(md.Trajectory(xyz, top, time=np.arange(4.0), unitcell_lengths=lengths, unitcell_angles=angles), path)
    a, b, c = lengths_and_angles_to_box_vectors(*np.asarray(lengths, float).T, *np.asarray(angles, float).T)
    cells = np.stack([a, b, c], axis=1)
    return Frames({"length": "nm", "time": "ps"},
                  [{"positions": xyz[i].astype(float), "cell": cells[i], "time": float(i)} for i in range(4)],
                  single=True)


def write_convert(path: Path) -> Frames:
    _needs("MDAnalysis")
    import MDAnalysis as mda
    from MDAnalysis.lib.mdamath import triclinic_vectors
    from molrec_raw.integrations.convert import convert

    rng = np.random.default_rng(5)
    u = _mda_universe(4)
    u.atoms.positions = rng.uniform(0, 9, (4, 3))
    u.dimensions = [20.0, 20.0, 20.0, 90.0, 90.0, 90.0]
    with warnings.catch_warnings():  # MDAnalysis names each PDB field this universe leaves at its default
        warnings.simplefilter("ignore", UserWarning)
        u.atoms.write(str(path.with_suffix(".pdb")))
    with mda.Writer(str(path.with_suffix(".trr")), n_atoms=4) as w:
        for i in range(3):
            u.atoms.positions = rng.uniform(0, 9, (4, 3))
            u.atoms.forces = rng.normal(size=(4, 3)) * 10
            u.atoms.velocities = rng.normal(size=(4, 3))
            u.dimensions = [20.0 + i, 21.0, 22.0, 90.0, 90.0, 90.0]
            u.trajectory.ts.data["step"] = 10 * i
            u.trajectory.ts.time = 0.5 * i
            w.write(u.atoms)
    convert(path.with_suffix(".trr"), path, topology=str(path.with_suffix(".pdb")))
    seen = Frames({"length": "angstrom", "energy": "kJ/mol", "time": "ps"}, single=True)
    source = mda.Universe(str(path.with_suffix(".pdb")), str(path.with_suffix(".trr")))
    for ts in source.trajectory:  # masses: MDAnalysis's guess from the PDB's elements, as convert stores them
        seen.frames.append({"positions": ts.positions.astype(float), "forces": ts.forces.astype(float),
                            "cell": triclinic_vectors(np.asarray(ts.dimensions, float), dtype=np.float64),
                            "velocities": ts.velocities.astype(float), "masses": source.atoms.masses.astype(float),
                            "time": float(ts.time)})
    return seen


def write_demo(path: Path) -> Frames:
    from molrec_raw.demo import write_demo as demo

    demo(path, frames=6, molecules=3)
    seen = Frames({"length": "angstrom", "energy": "kcal/mol", "time": "fs", "temperature": "K"})  # "real", K
    system = mr.read_mrec_system(path).blocks["atoms"].columns
    with mr.MrecReader(path) as r:
        for frame, time in zip(r, r.time):
            atoms = frame.blocks["atoms"].columns
            seen.frames.append({"positions": np.stack([atoms[c] for c in "xyz"], 1),
                                "cell": np.asarray(frame.box.vectors).T, "energy": float(frame.meta["pe"]),
                                "masses": system["mass"], "charges": system["charge"], "time": time,
                                "temperature": float(frame.meta["temp"])})
    return seen


def write_stated(path: Path) -> Frames:
    """A record written with the core API whose ``system`` states its units itself."""
    from molrec_raw.integrations.conventions import start_trajectory

    rng = np.random.default_rng(6)
    units = {"length": "bohr", "energy": "hartree", "time": "fs", "temperature": "kelvin"}
    masses, charges = np.array([15.999, 1.008, 1.008]), np.array([-0.8, 0.4, 0.4])
    system = mr.Frame({"units": mr.MetaValue("json", units)},
                      {"atoms": mr.Block({"element": np.array(["O", "H", "H"], dtype=object), "mass": masses,
                                          "charge": charges})})
    seen = Frames(units)
    frames = []
    for _ in range(3):
        cols = {c: rng.normal(size=3) * 3 for c in ("x", "y", "z", "fx", "fy", "fz", "vx", "vy", "vz")}
        # rows a, b, c with a along x and b in the xy plane: the orientation MDAnalysis and mdtraj
        # keep (they hold lengths and angles only, so any other orientation comes back rotated)
        cell = np.diag([12.0, 13.0, 14.0]) + np.tril(rng.normal(size=(3, 3)), -1) * 0.5
        energy, temperature = float(rng.normal()) - 76.0, 250.0 + float(rng.normal())
        frames.append(mr.Frame({"pe": energy, "temp": temperature}, {"atoms": mr.Block(cols)}, mr.Box(cell.T.copy())))
        seen.frames.append({"positions": np.stack([cols[c] for c in "xyz"], 1), "cell": cell, "energy": energy,
                            "forces": np.stack([cols[c] for c in ("fx", "fy", "fz")], 1),
                            "velocities": np.stack([cols[c] for c in ("vx", "vy", "vz")], 1),
                            "masses": masses, "charges": charges, "time": 1.5 * len(frames),
                            "temperature": temperature})
    with start_trajectory(path, system, mr.SequenceSchema.from_frame(frames[0])) as w:
        for k, frame in enumerate(frames):
            w.append(frame, time=1.5 * (k + 1))
    return seen


WRITE: Dict[str, Callable[[Path], Frames]] = {
    "openmm": write_openmm, "ase": write_ase, "mdanalysis": write_mdanalysis, "mdtraj": write_mdtraj,
    "convert": write_convert, "demo": write_demo, "stated": write_stated}


# -- readers -----------------------------------------------------------------------------------
def read_ase(path: Path, tmp: Path) -> Frames:
    _needs("ase")
    import ase.io
    import molrec_raw.integrations.ase  # noqa: F401

    out = Frames({"length": "angstrom", "energy": "eV", "time": "ase"})
    for atoms in ase.io.read(str(path), index=":", format="mrec"):
        results = {} if atoms.calc is None else atoms.calc.results
        out.frames.append({"positions": atoms.positions, "cell": atoms.cell.array if atoms.cell.rank else None,
                           "energy": results.get("energy"), "forces": results.get("forces"),
                           "velocities": atoms.get_velocities() if atoms.has("momenta") else None,
                           "masses": atoms.get_masses(), "numbers": atoms.numbers,
                           "charges": atoms.get_initial_charges() if atoms.has("initial_charges") else None})
    return out


def read_mdanalysis(path: Path, tmp: Path) -> Frames:
    _needs("MDAnalysis")
    import MDAnalysis as mda
    import molrec_raw.integrations.mdanalysis  # noqa: F401
    from MDAnalysis.lib.mdamath import triclinic_vectors

    out = Frames({"length": "angstrom", "energy": "kJ/mol", "time": "ps", "temperature": "K"}, single=True)
    with warnings.catch_warnings():  # every writer of the matrix states its temperature unit
        warnings.filterwarnings("error", message=".*states no temperature unit")
        u = mda.Universe(str(path), to_guess=())
        u.trajectory[0]
    masses = u.atoms.masses.copy() if hasattr(u.atoms, "masses") else None
    charges = u.atoms.charges.copy() if hasattr(u.atoms, "charges") else None
    for ts in u.trajectory:
        out.frames.append({"positions": ts.positions.copy(), "energy": ts.data.get("pe"),
                           "forces": ts.forces.copy() if ts.has_forces else None,
                           "velocities": ts.velocities.copy() if ts.has_velocities else None,
                           "cell": None if ts.dimensions is None else triclinic_vectors(ts.dimensions),
                           "masses": masses, "charges": charges, "time": ts.time if "time" in ts.data else None,
                           "temperature": ts.data.get("temp")})
    return out


def read_mdtraj(path: Path, tmp: Path) -> Frames:
    _needs("mdtraj")
    from molrec_raw.integrations.mdtraj import load_mrec

    traj = load_mrec(path)
    cells = traj.unitcell_vectors
    times = traj.time
    with mr.MrecReader(path) as r:
        if r.time is None:  # mdtraj's loaders number the frames of a file without times 0, 1, …
            np.testing.assert_array_equal(times, np.arange(traj.n_frames))
            times = None
    return Frames({"length": "nm", "time": "ps"},
                  [{"positions": traj.xyz[i], "cell": None if cells is None else cells[i], "energy": None,
                    "forces": None, "time": None if times is None else float(times[i])} for i in range(traj.n_frames)],
                  single=True)


def read_xarray(path: Path, tmp: Path) -> Frames:
    xr = pytest.importorskip("xarray", reason="the xarray door needs xarray")
    from molrec_raw.integrations.xarray import MrecBackendEntrypoint

    with xr.open_dataset(str(path), engine=MrecBackendEntrypoint, group="trajectory/atoms") as ds:
        units = {"length": ds["x"].attrs["units"]}
        assert ds["y"].attrs["units"] == ds["z"].attrs["units"] == units["length"]
        vectors: Dict[str, Any] = {}
        for name, (unit, columns) in {"forces": ("force", ("fx", "fy", "fz")),
                                      "velocities": ("velocity", ("vx", "vy", "vz"))}.items():
            if columns[0] in ds:
                units[unit] = ds[columns[0]].attrs["units"]
                assert all(ds[c].attrs["units"] == units[unit] for c in columns)
                vectors[name] = np.stack([ds[c].values for c in columns], axis=-1)
        xyz = np.stack([ds[c].values for c in "xyz"], axis=-1)
        times = ds["time"].values if "time" in ds.coords else None
        if times is not None:
            units["time"] = ds["time"].attrs["units"]
    per_atom: Dict[str, Any] = {}
    if "system" in mr.section_names(path):
        with xr.open_dataset(str(path), engine=MrecBackendEntrypoint, group="system/atoms") as ds:
            for name, (unit, column) in {"masses": ("mass", "mass"), "charges": ("charge", "charge")}.items():
                if column in ds:
                    units[unit] = ds[column].attrs["units"]
                    per_atom[name] = ds[column].values
    return Frames(units, [{"positions": xyz[i], "cell": None, "energy": None,
                           **{k: v[i] for k, v in vectors.items()}, **per_atom,
                           "time": None if times is None else float(times[i])} for i in range(len(xyz))])


def _needs_torch() -> None:
    pytest.importorskip("lmdb", reason="collections need the [lmdb] extra")
    pytest.importorskip("torch", reason="the torch door needs torch (torch==2.13.0 under Python 3.11 here)")


def _collection(path: Path, tmp: Path) -> Path:
    from molrec_raw.integrations.frames_as_records import frames_as_records

    target = tmp / f"{path.name}.lmdb"
    if not target.exists():
        frames_as_records(str(path), str(target))
    return target


def _torch_frames(ds: Any, energy_key: bool) -> List[Dict[str, Any]]:
    frames = []
    for j in range(len(ds)):
        item = ds[j]
        vxyz = [f"atoms/{c}" for c in ("vx", "vy", "vz")]
        frames.append({"positions": item["positions"].numpy(),
                       "cell": item["cell"].numpy() if bool(item["pbc"].any()) else None,
                       "energy": float(item["energy"]) if "energy" in item else None,
                       "forces": item["forces"].numpy() if "forces" in item else None,
                       "velocities": np.stack([item[c].numpy() for c in vxyz], 1) if vxyz[0] in item else None,
                       "masses": item["atoms/mass"].numpy() if "atoms/mass" in item else None,
                       "charges": item["atoms/charge"].numpy() if "atoms/charge" in item else None,
                       "temperature": float(item["temp"]) if "temp" in item else None})
    return frames


def _torch_keys(collection: Path) -> List[str]:
    """The standard keys, and the velocity, mass and charge columns the collection has."""
    from molrec_raw.integrations.torch import MrecDataset

    ds = MrecDataset(collection)
    try:
        columns = [f"atoms/{c}" for c in ("vx", "vy", "vz", "mass", "charge")] + ["temp"]
        return list(ds.keys) + [c for c in columns if _has_key(collection, c)]
    finally:
        ds.close()


def _has_key(collection: Path, key: str) -> bool:
    from molrec_raw.integrations.torch import MrecDataset

    try:
        MrecDataset(collection, keys=[key]).close()
    except MolrecError:
        return False
    return True


def read_torch(path: Path, tmp: Path) -> Frames:
    """The collection's units as stored; ``ds.units`` says which."""
    _needs_torch()
    from molrec_raw.integrations.torch import MrecDataset

    collection = _collection(path, tmp)
    ds = MrecDataset(collection, keys=_torch_keys(collection))
    try:
        units = {"length": ds.units["positions"], **({"energy": ds.units["energy"]} if "energy" in ds.units else {}),
                 **({"force": ds.units["forces"]} if "forces" in ds.units else {}),
                 **({"velocity": ds.units["atoms/vx"]} if "atoms/vx" in ds.units else {}),
                 **({"mass": ds.units["atoms/mass"]} if "atoms/mass" in ds.units else {}),
                 **({"charge": ds.units["atoms/charge"]} if "atoms/charge" in ds.units else {}),
                 **({"temperature": ds.units["temp"]} if "temp" in ds.units else {})}
        assert ds.units["cell"] == units["length"]
        return Frames(units, _torch_frames(ds, "energy" in ds.keys))
    finally:
        ds.close()


def read_torch_converted(path: Path, tmp: Path) -> Frames:
    """Converted to the units asked for (nm, kJ/mol), and ``ds.units`` says so."""
    _needs_torch()
    from molrec_raw.integrations.torch import MrecDataset

    collection = _collection(path, tmp)
    ds = MrecDataset(collection, keys=_torch_keys(collection),
                     units={"length": "nm", "energy": "kJ/mol", "time": "ps", "temperature": "K"})
    try:
        assert ds.units["positions"] == ds.units["cell"] == "nm"
        assert ds.units.get("energy", "kJ/mol") == "kJ/mol" and ds.units.get("forces", "kJ/mol/nm") == "kJ/mol/nm"
        assert ds.units.get("atoms/vx", "nm/ps") == "nm/ps" and ds.units.get("temp", "K") == "K"
        return Frames({"length": "nm", "energy": "kJ/mol", "time": "ps", "temperature": "K"},
                      _torch_frames(ds, "energy" in ds.keys))
    finally:
        ds.close()


READ: Dict[str, Callable[[Path, Path], Frames]] = {
    "ase": read_ase, "mdanalysis": read_mdanalysis, "mdtraj": read_mdtraj, "xarray": read_xarray,
    "torch": read_torch, "torch-converted": read_torch_converted}


# -- the matrix --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Any]:
    made: Dict[str, Any] = {}
    tmp = tmp_path_factory.mktemp("unit-matrix")

    def get(writer: str) -> Any:
        if writer not in made:
            path = tmp / f"{writer}.mrec"
            try:
                made[writer] = (path, WRITE[writer](path), tmp)
            except BaseException as exc:  # a skip (tool absent) or a failure: the same for every reader
                made[writer] = exc
        if isinstance(made[writer], BaseException):
            raise made[writer]
        return made[writer]
    return get


def _compare(got: Any, want: Any, f: float, single: bool, what: str) -> None:
    want = np.asarray(want, dtype=np.float64) * f
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == want.shape, what
    if f == 1.0 and what.split()[0] != "cell":
        expected = want.astype(np.float32).astype(np.float64) if single else want
        np.testing.assert_array_equal(got, expected, err_msg=f"{what}: the identity conversion must be exact")
    elif what.split()[0] == "cell" and single:
        # cells through lengths and angles in float32 (MDAnalysis dimensions, mdtraj unit cells)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max(), err_msg=what)
    else:
        np.testing.assert_allclose(got, want, rtol=2e-7 if single else 1e-12, atol=0, err_msg=what)


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("writer", WRITERS)
def test_unit_matrix_values_in_the_readers_units_13_5(written: Any, writer: str, reader: str) -> None:
    """frame-and-types#13.5: a record states its units; every reading door hands positions,
    cells, energies and forces over in its tool's units (or as stored with the units named),
    equal to what the writing door was given."""
    path, truth, tmp = written(writer)
    got = READ[reader](path, tmp)
    assert len(got.frames) == len(truth.frames) > 0
    single = got.single or truth.single and reader not in ("ase", "xarray", "torch", "torch-converted")
    for k, (g, t) in enumerate(zip(got.frames, truth.frames)):
        for quantity in QUANTITIES:
            reason = cannot(writer, reader, quantity)
            what = f"{quantity} of frame {k} ({writer} -> {reader})"
            if reason is not None and (reader, quantity) in TOOL_DEFAULTS and writer_cannot(writer, quantity):
                from ase.data import atomic_masses
                np.testing.assert_array_equal(g[quantity], atomic_masses[g["numbers"]], err_msg=what)
                continue
            if reason is not None:
                assert g.get(quantity) is None, f"{what}: listed as impossible ({reason}) but carried"
                assert t.get(quantity) is None or not writer_cannot(writer, quantity), \
                    f"{what}: the writer is listed as recording none ({reason}) but was given some"
                continue
            assert g.get(quantity) is not None and t.get(quantity) is not None, f"{what}: missing, and not listed"
            f = factor(quantity, truth.units, got.units)
            if quantity in QUANTITIES[:4]:  # energies stay f64
                as_single = single and quantity != "energy"
            else:
                as_single = (reader, quantity) in SINGLE
            _compare(g[quantity], t[quantity], f, as_single, what)


def test_the_matrix_covers_every_quantity_a_door_converts() -> None:
    """Every base and derived quantity the doors convert per atom or per frame (velocity,
    mass, charge, time, temperature beside length, energy and force) has a column in the matrix."""
    from molrec_raw.integrations.conventions import COLUMN_QUANTITIES, META_QUANTITIES
    covered = {"positions": "length", "cell": "length", "energy": "energy", "forces": "force",
               "velocities": "velocity", "masses": "mass", "charges": "charge", "time": "time",
               "temperature": "temperature"}
    assert set(covered) == set(QUANTITIES)
    assert set(COLUMN_QUANTITIES.values()) <= set(covered.values())
    assert {q for q, _ in META_QUANTITIES.values()} <= set(covered.values())  # pe ke etotal volume temp


def test_every_impossible_combination_names_a_reason() -> None:
    """The list of what a door cannot carry is the whole list: each entry names writers,
    readers and quantities that exist, with a reason."""
    for (w, r, q), reason in CANNOT.items():
        assert (w == "*" or w in WRITERS) and (r == "*" or r in READERS) and q in QUANTITIES and reason


# -- the rows of the newcomer's table this matrix proves, and the refusals ------------------------
def test_a_unit_stated_nowhere_is_refused_naming_it_13_5(tmp_path: Path) -> None:
    """No door hands over numbers whose unit the record does not state: each refuses, naming
    the unit (frame-and-types §13.5: coordinates have no default unit)."""
    frame = mr.Frame({}, {"atoms": mr.Block({"x": np.ones(2), "y": np.zeros(2), "z": np.zeros(2),
                                             "element": np.array(["H", "H"], dtype=object)})})
    path = tmp_path / "plain.mrec"
    mr.write_mrec_frame(path, frame)
    refusals = 0
    if importlib.util.find_spec("ase"):
        import ase.io
        import molrec_raw.integrations.ase  # noqa: F401
        with pytest.raises(MolrecError, match="states no length unit"):
            ase.io.read(str(path), format="mrec")
        assert ase.io.read(str(path), format="mrec", assume_units={"length": "nm"}).positions[0, 0] == \
            pytest.approx(10.0)
        refusals += 1
    if importlib.util.find_spec("mdtraj"):
        from molrec_raw.integrations.mdtraj import load_mrec
        with pytest.raises(MolrecError, match="states no length unit"):
            load_mrec(path)
        refusals += 1
    if importlib.util.find_spec("MDAnalysis"):
        import MDAnalysis as mda
        import molrec_raw.integrations.mdanalysis  # noqa: F401
        with pytest.raises(MolrecError, match="states no length unit"):
            mda.Universe(str(path))
        refusals += 1
    if refusals == 0:
        pytest.skip("no reading door with a tool installed")


def test_an_unknown_unit_is_refused_naming_it_13_5(tmp_path: Path) -> None:
    _needs("ase")
    import ase.io
    import molrec_raw.integrations.ase  # noqa: F401
    frame = mr.Frame({"units": mr.MetaValue("json", {"length": "furlong"})},
                     {"atoms": mr.Block({"x": np.ones(1), "y": np.zeros(1), "z": np.zeros(1),
                                         "element": np.array(["H"], dtype=object)})})
    mr.write_mrec_frame(tmp_path / "f.mrec", frame)
    with pytest.raises(MolrecError, match="furlong"):
        ase.io.read(str(tmp_path / "f.mrec"), format="mrec")


def _unstated(tmp_path: Path) -> Path:
    """A trajectory with positions, velocities, forces, an energy and times, stating no unit."""
    cols = {c: np.arange(2.0) + k for k, c in enumerate(("x", "y", "z", "vx", "vy", "vz", "fx", "fy", "fz"))}
    atoms = mr.Block({**cols, "element": np.array(["H", "H"], dtype=object)})
    path = tmp_path / "unstated.mrec"
    mr.write_mrec_trajectory(path, [mr.Frame({"pe": 1.0}, {"atoms": atoms})] * 2, times=[0.0, 1.0])
    return path


ALL_MISSING = "the record states no energy, length or time unit"


def test_every_reader_names_every_missing_unit_at_once_13_5(tmp_path: Path) -> None:
    """frame-and-types#13.5: a reader names every unit it needs and the record leaves unstated in
    one refusal, sorted (not one per attempt, not in a set's hash order)."""
    path = _unstated(tmp_path)
    refusals = 0
    if importlib.util.find_spec("ase"):
        import ase.io
        import molrec_raw.integrations.ase  # noqa: F401
        with pytest.raises(MolrecError, match=ALL_MISSING):
            ase.io.read(str(path), format="mrec")
        refusals += 1
    if importlib.util.find_spec("MDAnalysis"):
        import MDAnalysis as mda
        import molrec_raw.integrations.mdanalysis  # noqa: F401
        with pytest.raises(MolrecError, match=ALL_MISSING):
            mda.Universe(str(path))
        refusals += 1
    if refusals == 0:
        pytest.skip("no reading door with a tool installed")


@pytest.mark.parametrize("seed", ["0", "1", "2"])
def test_the_missing_units_message_does_not_depend_on_the_hash_seed_13_5(tmp_path: Path, seed: str) -> None:
    """The same record gives the same refusal under any PYTHONHASHSEED (ASE's once named one
    unit or two depending on a set's order)."""
    _needs("ase")
    import os
    import subprocess
    import sys
    path = _unstated(tmp_path)
    code = ("import ase.io, molrec_raw.integrations.ase\n"
            f"try:\n    ase.io.read({str(path)!r}, format='mrec')\n"
            "except Exception as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": seed}).stdout
    assert ALL_MISSING in out and "(energy: energy, force; length: force, length, velocity; time: velocity;" in out


def test_units_in_the_meta_document_are_refused_naming_where_they_go_13_5(tmp_path: Path) -> None:
    """frame-and-types#13.5: units given as the record's /meta document (where no reader looks)
    are refused, naming the system section's 'units' meta key; given there (system=), every
    reader converts with them."""
    frames = [mr.Frame({}, {"atoms": mr.Block({"x": np.ones(2), "y": np.zeros(2), "z": np.zeros(2),
                                               "element": np.array(["H", "H"], dtype=object)})})]
    path = tmp_path / "u.mrec"
    with pytest.raises(MolrecError, match=r"u\.mrec: the meta document's 'units' key would state nothing.*"
                                          r"'units' meta key \(tag json\) of its system section"):
        mr.write_mrec_trajectory(path, frames, meta={"units": {"length": "nm"}})
    assert not path.exists()
    with pytest.raises(MolrecError, match="belong in the 'units' meta key"):
        mr.write_mrec_system(path, mr.Frame({}, {}), meta={"units": "real"})
    with pytest.raises(MolrecError, match="belong in the 'units' meta key"):
        mr.MrecWriter(path, mr.SequenceSchema.from_frame(frames[0]), meta={"units": "real"})
    system = mr.Frame({"units": mr.MetaValue("json", {"length": "nm"})})
    mr.write_mrec_trajectory(path, frames, system=system, meta={"creator": {"name": "me"}})
    assert mr.read_mrec_meta(path)["creator"] == {"name": "me"}
    assert mr.validate(path) == [] if hasattr(mr, "validate") else True
    if importlib.util.find_spec("ase"):
        import ase.io
        import molrec_raw.integrations.ase  # noqa: F401
        assert ase.io.read(str(path), format="mrec").positions[0, 0] == pytest.approx(10.0)


def test_a_record_with_units_in_its_meta_document_says_where_they_belong_13_5(tmp_path: Path) -> None:
    """A record another producer wrote with /meta 'units' (readable: the spec keeps unknown
    keys): a reader's missing-unit refusal says that key states nothing and where units go."""
    _needs("ase")
    import ase.io
    import molrec_raw.integrations.ase  # noqa: F401
    from molrec_raw.record.doors import replace_record, write_sections
    frame = mr.Frame({}, {"atoms": mr.Block({"x": np.ones(1), "y": np.zeros(1), "z": np.zeros(1),
                                             "element": np.array(["H"], dtype=object)})})
    path = tmp_path / "other.mrec"  # written below the doors, which refuse it
    replace_record(path, lambda root: write_sections(root, {"units": {"length": "nm"}}, {"frame": frame}))
    with pytest.raises(MolrecError, match="states no length unit.*/meta document has a 'units' key, which states "
                                          "nothing: a record's units belong in the 'units' meta key"):
        ase.io.read(str(path), format="mrec")


@pytest.mark.parametrize("stated, ase_per_stated", [
    ({"length": "nm", "time": "ps"}, 0.10180505671156725),     # 1 nm/ps = 0.01 Å/fs
    ({"preset": "real"}, 10.180505671156725),                   # Å/fs
    ({"velocity": "angstrom/fs"}, 10.180505671156725),
    ({"preset": "metal"}, 0.010180505671156725),                # Å/ps
    ({"length": "angstrom", "time": "Å·sqrt(amu/eV)"}, 1.0),    # ASE's own unit, spelled as ASE's docs do
])
def test_velocities_convert_to_ases_time_unit_13_5(tmp_path: Path, stated: Dict[str, str],
                                                   ase_per_stated: float) -> None:
    """frame-and-types#13.5: velocities stated as nm/ps, as "real", as Å/fs reach ASE in Å per
    ASE time unit (1 Å/fs = 1/ase.units.fs); they failed with "unknown unit" before."""
    _needs("ase")
    import ase.io
    import molrec_raw.integrations.ase  # noqa: F401
    atoms = mr.Block({"x": np.zeros(1), "y": np.zeros(1), "z": np.zeros(1), "vx": np.array([2.0]),
                      "vy": np.zeros(1), "vz": np.zeros(1), "element": np.array(["H"], dtype=object)})
    units = {"length": "angstrom", **stated} if "velocity" in stated else stated
    mr.write_mrec_frame(tmp_path / "v.mrec", mr.Frame({"units": mr.MetaValue("json", units)}, {"atoms": atoms}))
    image = ase.io.read(str(tmp_path / "v.mrec"), format="mrec")
    assert image.get_velocities()[0, 0] == pytest.approx(2.0 * ase_per_stated, rel=1e-12)


def test_stress_reaches_ase_in_ev_per_cubic_angstrom_13_5(tmp_path: Path) -> None:
    """frame-and-types#13.5: a per-step stress (f64x9, the full tensor) stated in kJ/mol/nm³
    (the record's energy / length³) reaches ASE in eV/Å³: 1 kJ/mol/nm³ = 1/96.485332123310018
    eV per 1000 Å³."""
    _needs("ase")
    import ase.io
    import molrec_raw.integrations.ase  # noqa: F401
    tensor = np.array([[1.0, 0.5, 0.25], [0.5, 2.0, 0.125], [0.25, 0.125, 3.0]])
    frame = mr.Frame({"units": mr.MetaValue("json", {"preset": "openmm"}),
                      "stress": mr.MetaValue("f64x9", tuple(tensor.ravel().tolist()))},
                     {"atoms": mr.Block({"x": np.zeros(1), "y": np.zeros(1), "z": np.zeros(1),
                                         "element": np.array(["Ar"], dtype=object)})},
                     mr.Box(np.eye(3) * 2.0))
    mr.write_mrec_frame(tmp_path / "s.mrec", frame)
    image = ase.io.read(str(tmp_path / "s.mrec"), format="mrec")
    per = 1.0 / 96.485332123310018 / 1000.0
    voigt = [tensor[0, 0], tensor[1, 1], tensor[2, 2], tensor[1, 2], tensor[0, 2], tensor[0, 1]]
    np.testing.assert_allclose(image.get_stress(), np.array(voigt) * per, rtol=1e-12)


def test_the_torch_dataset_names_every_missing_unit_at_once_13_5(tmp_path: Path) -> None:
    """frame-and-types#13.5, collection#C1: a collection stating neither a length nor an energy
    unit is refused by the dataset once, naming both together (sorted)."""
    _needs_torch()
    from molrec_raw.integrations.torch import MrecDataset

    atoms = mr.Block({c: np.zeros(2) for c in ("x", "y", "z", "fx", "fy", "fz")})
    with mr.CollectionWriter(tmp_path / "n.mrec.lmdb", units={"time": "ps"}) as w:  # no length, no energy
        w.add_record(system=mr.Frame({}, {"atoms": mr.Block({"element": np.array(["H", "H"], dtype=object)})}),
                     frames=[mr.Frame({"pe": 1.0}, {"atoms": atoms})])
    with pytest.raises(MolrecError, match=r"states no energy or length unit.*\(energy: energy, force; "
                                          r"length: force, length;"):
        MrecDataset(tmp_path / "n.mrec.lmdb")


# -- temperature: kelvin only, stated by every writer that stores it -----------------------------
@pytest.mark.parametrize("writer", WRITERS)
def test_every_writer_storing_temp_states_its_temperature_unit_13_5(written: Any, writer: str) -> None:
    """frame-and-types#13.5: a writing door that stores per-step ``temp`` states a temperature
    unit (kelvin) in the record; one that stores none is listed as unable to."""
    from molrec_raw.record.units import declared_units
    from molrec_raw.zarr import open_group

    path, _, _ = written(writer)
    with mr.MrecReader(path) as r:
        stores = "temp" in dict(r.schema.meta_keys())
    assert stores == (not writer_cannot(writer, "temperature")), writer
    if stores:
        assert declared_units(open_group(path))["temperature"] in TEMPERATURE_IN_K


@pytest.mark.parametrize("unit", ["degC", "°C", "℃", "celsius", "degF", "°F", "fahrenheit", "degree Celsius"])
def test_a_temperature_scale_with_an_offset_is_refused_naming_the_rule_13_5(unit: str) -> None:
    """frame-and-types#13.5: the table converts by a factor, so kelvin is the one temperature
    unit; °C and °F are refused by name (never treated as a factor, nor as unknown)."""
    from molrec_raw.record.units import unit_factor
    assert unit_factor("temperature", {"temperature": "kelvin"}, {"temperature": "K"}) == 1.0
    with pytest.raises(MolrecError, match=r"x\.mrec: cannot convert temperature .* a scale with an offset from "
                                          r"kelvin, which a factor table cannot carry; only kelvin converts") as info:
        unit_factor("temperature", {"temperature": unit}, {"temperature": "K"}, "x.mrec")
    assert info.value.rule == "frame-and-types#13.5"
    with pytest.raises(MolrecError, match="offset from kelvin"):
        unit_factor("temperature", {"temperature": "K"}, {"temperature": unit})


def _with_temp(path: Path, units: Dict[str, str]) -> Path:
    atoms = mr.Block({"x": np.ones(2), "y": np.zeros(2), "z": np.zeros(2),
                      "element": np.array(["H", "H"], dtype=object)})
    frames = [mr.Frame({"pe": 1.0, "temp": 300.0 + k}, {"atoms": atoms}) for k in range(3)]
    mr.write_mrec_trajectory(path, frames, system=mr.Frame({"units": mr.MetaValue("json", units)}))
    return path


def test_the_mdanalysis_door_refuses_temp_stated_in_celsius_13_5(tmp_path: Path) -> None:
    """frame-and-types#13.5: a door carrying ``temp`` converts it or refuses: a record stating
    its temperatures in °C is refused when it opens, naming the record and the rule."""
    _needs("MDAnalysis")
    import MDAnalysis as mda
    import molrec_raw.integrations.mdanalysis  # noqa: F401
    path = _with_temp(tmp_path / "c.mrec", {"length": "nm", "energy": "kJ/mol", "temperature": "degC"})
    with pytest.raises(MolrecError, match=r"c\.mrec: cannot convert temperature from 'degC' to 'K'.*only kelvin"):
        mda.Universe(str(path), to_guess=())
    atoms = mr.Block({"x": np.ones(1), "y": np.zeros(1), "z": np.zeros(1)})
    units = mr.Frame({"units": mr.MetaValue("json", {"length": "nm", "temperature": "degC"})})
    mr.write_mrec_trajectory(tmp_path / "no-temp.mrec", [mr.Frame({}, {"atoms": atoms})], system=units)
    u = mda.Universe(str(tmp_path / "no-temp.mrec"), to_guess=())  # no temp: the unit converts nothing
    assert u.trajectory[0].positions[0, 0] == pytest.approx(10.0)


def test_a_temp_whose_unit_is_stated_nowhere_is_handed_over_with_one_warning_13_5(tmp_path: Path) -> None:
    """frame-and-types#13.5 (spec-notes/integrations.md, "Units"): a record holding ``temp`` and
    stating no temperature unit (written before the writers stated one) stays readable: the
    MDAnalysis door hands ``temp`` over as stored with ONE warning per Universe, naming the
    record, the key and how to state the unit; stated when reading, no warning and no change."""
    _needs("MDAnalysis")
    import MDAnalysis as mda
    import molrec_raw.integrations.mdanalysis  # noqa: F401
    path = _with_temp(tmp_path / "old.mrec", {"length": "nm", "energy": "kJ/mol"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        u = mda.Universe(str(path), to_guess=())
        temps = [ts.data["temp"] for ts in u.trajectory] + [u.trajectory[1].data["temp"]]
    assert temps == [300.0, 301.0, 302.0, 301.0]
    said = [str(w.message) for w in caught if "temperature" in str(w.message)]
    assert len(said) == 1, said
    assert said[0].startswith(f"{path}: the record states no temperature unit: per-step 'temp' handed over as stored")
    assert "assume_units={'temperature': 'K'}" in said[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        u = mda.Universe(str(path), to_guess=(), assume_units={"temperature": "K"})
        assert [ts.data["temp"] for ts in u.trajectory] == [300.0, 301.0, 302.0]
    assert not [w for w in caught if "temperature" in str(w.message)]


def test_the_torch_dataset_refuses_temp_whose_unit_is_stated_nowhere_13_5(tmp_path: Path) -> None:
    """frame-and-types#13.5, collection#C1: the torch dataset hands a key only when asked for it;
    asked for ``temp`` of a collection stating no temperature unit it refuses, naming the unit;
    stated, it hands kelvin over and names it in ``ds.units``."""
    _needs_torch()
    from molrec_raw.integrations.torch import MrecDataset
    atoms = mr.Block({c: np.zeros(2) for c in ("x", "y", "z")})
    system = mr.Frame({}, {"atoms": mr.Block({"element": np.array(["H", "H"], dtype=object)})})
    for name, units in (("none", {"length": "nm"}), ("k", {"length": "nm", "temperature": "K"})):
        with mr.CollectionWriter(tmp_path / f"{name}.mrec.lmdb", units=units) as w:
            w.add_record(system=system, frames=[mr.Frame({"temp": 310.0}, {"atoms": atoms})])
    with pytest.raises(MolrecError, match="states no temperature unit"):
        MrecDataset(tmp_path / "none.mrec.lmdb", keys=["positions", "temp"])
    ds = MrecDataset(tmp_path / "k.mrec.lmdb", keys=["positions", "temp"])
    try:
        assert ds.units["temp"] == "K" and float(ds[0]["temp"]) == 310.0
    finally:
        ds.close()
    # a target whose units name no temperature (LAMMPS' "metal"): its temperatures are kelvin
    ds = MrecDataset(tmp_path / "k.mrec.lmdb", keys=["positions", "temp"], units="metal")
    try:
        assert ds.units["temp"] == "K" and float(ds[0]["temp"]) == 310.0
    finally:
        ds.close()
