"""A small solvated system built with OpenMM itself (its amber14/tip3p force fields and
Modeller.addSolvent), run on the CPU platform with one thread and deterministic forces so runs are reproducible."""
from __future__ import annotations

import openmm as mm
import openmm.app as app
import openmm.unit as u

STEP_PS = 0.002


def water_box(edge_nm: float = 1.8, *, model: str = "tip3p", periodic: bool = True):
    """``(topology, system, positions)``: a cube of water with one NaCl pair."""
    files = {"tip3p": "amber14/tip3p.xml", "tip4pew": "amber14/tip4pew.xml"}
    forcefield = app.ForceField("amber14-all.xml", files[model])
    modeller = app.Modeller(app.Topology(), [])
    modeller.addSolvent(forcefield, model=model, boxSize=mm.Vec3(edge_nm, edge_nm, edge_nm) * u.nanometer,
                        positiveIon="Na+", negativeIon="Cl-", ionicStrength=0.3 * u.molar)
    method = app.PME if periodic else app.NoCutoff
    system = forcefield.createSystem(modeller.topology, nonbondedMethod=method, nonbondedCutoff=0.7 * u.nanometer,
                                     constraints=app.HBonds)
    return modeller.topology, system, modeller.positions


def simulation(topology, system, positions=None, seed: int = 7):
    """A Langevin simulation on the CPU platform (one thread, DeterministicForces: bitwise reproducible)."""
    integrator = mm.LangevinMiddleIntegrator(300 * u.kelvin, 1.0 / u.picosecond, STEP_PS * u.picoseconds)
    integrator.setRandomNumberSeed(seed)
    sim = app.Simulation(topology, system, integrator, mm.Platform.getPlatformByName("CPU"), {"Threads": "1", "DeterministicForces": "true"})
    if positions is not None:
        sim.context.setPositions(positions)
        sim.minimizeEnergy(maxIterations=100)
        sim.context.setVelocitiesToTemperature(300 * u.kelvin, seed)
    return sim
