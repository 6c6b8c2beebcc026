"""A record one tool writes opens in the others without glue: the shared conventions
(units in system meta, frame-and-types §13.5; cell columns vs rows, §10; canonical names, §13)."""
from __future__ import annotations

import numpy as np
import pytest

openmm = pytest.importorskip("openmm", reason="needs OpenMM (pip install 'molrec-raw[openmm]')")
mda = pytest.importorskip("MDAnalysis", reason="needs MDAnalysis (pip install 'molrec-raw[mdanalysis]')")
md = pytest.importorskip("mdtraj", reason="needs mdtraj (pip install 'molrec-raw[mdtraj]')")
ase_io = pytest.importorskip("ase.io", reason="needs ASE (pip install 'molrec-raw[ase]')")

import openmm.unit as u  # noqa: E402
from ase.build import bulk  # noqa: E402
from ase.calculators.emt import EMT  # noqa: E402

import molrec_raw.integrations.mdanalysis  # noqa: E402,F401  (registers the MREC format)
from molrec_raw.integrations.mdtraj import load_mrec  # noqa: E402
from molrec_raw.integrations.openmm import MrecReporter  # noqa: E402

from openmm_helpers import simulation, water_box  # noqa: E402


@pytest.fixture(scope="module")
def openmm_run(tmp_path_factory):
    """A record written by MrecReporter (nm, ps, kJ/mol) and the states it reported."""
    path = tmp_path_factory.mktemp("cross") / "water.mrec"
    topology, system, positions = water_box(1.8)
    sim = simulation(topology, system, positions)
    states = []
    with MrecReporter(str(path), 5) as reporter:
        sim.reporters.append(reporter)
        for _ in range(3):
            sim.step(5)
            states.append(sim.context.getState(getPositions=True, getEnergy=True, enforcePeriodicBox=True))
    return path, topology, states


def test_openmm_record_opens_in_mdanalysis_in_angstrom_13_5(openmm_run):
    path, topology, states = openmm_run
    universe = mda.Universe(str(path))
    assert universe.atoms.n_atoms == topology.getNumAtoms() and len(universe.trajectory) == len(states)
    assert list(universe.atoms.names[:3]) == [a.name for a in list(topology.atoms())[:3]]
    for ts, state in zip(universe.trajectory, states):
        nm = state.getPositions(asNumpy=True).value_in_unit(u.nanometer)
        assert np.allclose(ts.positions, 10.0 * nm, atol=1e-4)                    # nm -> Å
        box = state.getPeriodicBoxVectors(asNumpy=True).value_in_unit(u.nanometer)
        assert np.allclose(ts.dimensions[:3], 10.0 * np.linalg.norm(box, axis=1), rtol=1e-6)
        assert ts.data["pe"] == pytest.approx(state.getPotentialEnergy().value_in_unit(u.kilojoule_per_mole))


def test_openmm_record_opens_in_mdtraj_in_nm_10(openmm_run):
    path, topology, states = openmm_run
    traj = load_mrec(str(path))
    assert traj.n_frames == len(states) and traj.n_atoms == topology.getNumAtoms()
    assert traj.topology.n_bonds == topology.getNumBonds()
    for k, state in enumerate(states):
        assert np.allclose(traj.xyz[k], state.getPositions(asNumpy=True).value_in_unit(u.nanometer), atol=1e-6)
        rows = state.getPeriodicBoxVectors(asNumpy=True).value_in_unit(u.nanometer)
        assert np.allclose(traj.unitcell_vectors[k], rows, atol=1e-6)             # rows in mdtraj, columns in the record


def test_ase_record_opens_in_mdanalysis_and_mdtraj(tmp_path):
    atoms = bulk("Cu", "fcc", a=3.6, cubic=True).repeat((2, 2, 1))
    atoms.rattle(0.05, seed=3)
    atoms.calc = EMT()
    atoms.get_potential_energy()
    images = [atoms.copy() for _ in range(2)]
    images[1].positions += 0.1
    path = tmp_path / "cu.mrec"
    ase_io.write(str(path), images, format="mrec")
    universe = mda.Universe(str(path))
    assert len(universe.trajectory) == 2
    assert np.allclose(universe.trajectory[1].positions, images[1].positions, atol=1e-5)   # Å both sides
    assert np.allclose(universe.trajectory[0].dimensions[:3], atoms.cell.lengths(), rtol=1e-6)
    traj = load_mrec(str(path))
    assert np.allclose(traj.xyz[1], images[1].positions / 10.0, atol=1e-6)              # Å -> nm
    assert np.allclose(traj.unitcell_vectors[0], atoms.cell.array / 10.0, atol=1e-6)


def test_openmm_record_opens_in_xarray(openmm_run):
    xr = pytest.importorskip("xarray", reason="needs xarray (pip install 'molrec-raw[xarray]')")
    path, topology, states = openmm_run
    ds = xr.open_dataset(str(path), engine="mrec", group="trajectory/atoms")
    assert ds.x.dims == ("frame", "atoms") and ds.sizes["frame"] == len(states)
    nm = np.stack([s.getPositions(asNumpy=True).value_in_unit(u.nanometer) for s in states])
    assert np.allclose(np.stack([ds.x.values, ds.y.values, ds.z.values], axis=-1), nm, atol=1e-6)
    assert list(ds.step.values) == [5, 10, 15]
