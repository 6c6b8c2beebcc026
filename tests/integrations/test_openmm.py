"""MrecReporter on real OpenMM (CPU platform): frames equal the context's state at the
report steps (trajectory §3, §5, §7), system/ from the topology (frame-and-types §13.2–§13.5),
both description forms, durable close and restarts from a checkpoint after SIGKILL
(trajectory §10–§11)."""
from __future__ import annotations

import io
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("openmm", reason="OpenMM is not installed (pip install 'molrec-raw[openmm]')")

import openmm as mm  # noqa: E402
import openmm.app as app  # noqa: E402
import openmm.unit as u  # noqa: E402
from openmm_helpers import simulation, water_box  # noqa: E402

import molrec_raw as mr  # noqa: E402
from molrec_raw.errors import InvalidValueError  # noqa: E402
from molrec_raw.integrations.conventions import OPENMM_UNITS, Topology, units_of, xyz_of  # noqa: E402
from molrec_raw.integrations.openmm import DICT_DESCRIPTIONS, MrecReporter, degrees_of_freedom  # noqa: E402
from molrec_raw.record.precision import quantum  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


@pytest.fixture(scope="module")
def water():
    return water_box()


def _state(sim):
    return sim.context.getState(getPositions=True, getVelocities=True, getForces=True, getEnergy=True,
                                enforcePeriodicBox=True)


def _run(model, path, interval, steps, *others, **options):
    """A fresh simulation of ``model`` running ``steps`` with an MrecReporter (and ``others``)."""
    sim = simulation(*model)
    sim.reporters.extend(others)
    with MrecReporter(path, interval, **options) as reporter:
        sim.reporters.append(reporter)
        sim.step(steps)
    return sim


def _sdr_columns(text):
    """StateDataReporter's CSV as {header: [floats]}."""
    lines = text.strip().splitlines()
    headers = [h.strip('#"') for h in lines[0].split(",")]
    rows = [[float(v) for v in line.split(",")] for line in lines[1:]]
    return {h: [r[k] for r in rows] for k, h in enumerate(headers)}


def test_reporter_frames_equal_context_state_at_report_steps(water, tmp_path):
    """100 steps at interval 10 -> 10 frames: positions, box, steps, time and energies are
    the context's state at those steps; temperature and volume are StateDataReporter's."""
    topology, system, positions = water
    sim = simulation(topology, system, positions)
    out = io.StringIO()
    sim.reporters.append(app.StateDataReporter(out, 10, step=True, temperature=True, volume=True))
    path = tmp_path / "water.mrec"
    states = []
    with MrecReporter(path, 10) as reporter:
        sim.reporters.append(reporter)
        for _ in range(10):
            sim.step(10)
            states.append(_state(sim))
    sdr = _sdr_columns(out.getvalue())
    with mr.MrecReader(path) as reader:
        assert len(reader) == 10
        assert reader.step == list(range(10, 101, 10)) == [int(v) for v in sdr["Step"]]
        assert reader.time == [s.getTime().value_in_unit(u.picosecond) for s in states]
        for i, (frame, state) in enumerate(zip(reader, states)):
            atoms = frame.blocks["atoms"]
            assert np.array_equal(xyz_of(atoms), state.getPositions(asNumpy=True).value_in_unit(u.nanometer)), i
            rows = state.getPeriodicBoxVectors(asNumpy=True).value_in_unit(u.nanometer)
            assert np.array_equal(frame.box.vectors, rows.T) and frame.box.boundary == (True, True, True)
            assert frame.meta["pe"] == state.getPotentialEnergy().value_in_unit(u.kilojoule_per_mole)
            assert frame.meta["ke"] == state.getKineticEnergy().value_in_unit(u.kilojoule_per_mole)
            assert frame.meta["temp"] == pytest.approx(sdr["Temperature (K)"][i], rel=1e-12)
            assert frame.meta["volume"] == pytest.approx(sdr["Box Volume (nm^3)"][i], rel=1e-15)
            assert set(atoms.columns) == {"x", "y", "z"}
    assert mr.validate(path) == []


def test_fixed_box_is_stored_once_trajectory_7(water, tmp_path):
    path = tmp_path / "box.mrec"
    _run(water, path, 5, 20)
    box = mr.zarr.open_group(path)["trajectory/box"]
    assert "vectors" in box.attrs and box.get("vectors") is None  # the attribute form: one cell, never changed


def test_system_from_topology_frame_and_types_13_2(water, tmp_path):
    """system/: names, elements, residues, chains, masses, charges and bonds of the
    topology, with OpenMM's units recorded (§13.5)."""
    topology, system, _ = water
    path = tmp_path / "sys.mrec"
    _run(water, path, 10, 10)
    section = mr.read_mrec_system(path)
    assert units_of(section).same_as(OPENMM_UNITS)
    topo = Topology.from_section(section)
    atoms = list(topology.atoms())
    assert topo.n_atoms == len(atoms) == system.getNumParticles()
    assert list(topo.atoms["name"]) == [a.name for a in atoms]
    assert list(topo.atoms["element"]) == [a.element.symbol for a in atoms]
    assert list(topo.atoms["res_name"]) == [a.residue.name for a in atoms]
    assert list(topo.atoms["res_id"]) == [int(a.residue.id) for a in atoms]
    assert list(topo.atoms["chain"]) == [a.residue.chain.id for a in atoms]
    assert {"HOH", "NA", "CL"} <= set(topo.atoms["res_name"])
    assert np.array_equal(topo.atoms["mass"], [system.getParticleMass(i).value_in_unit(u.dalton)
                                               for i in range(len(atoms))])
    nonbonded = next(f for f in system.getForces() if isinstance(f, mm.NonbondedForce))
    assert np.array_equal(topo.atoms["charge"], [nonbonded.getParticleParameters(i)[0].value_in_unit(u.elementary_charge)
                                                 for i in range(len(atoms))])
    bonds = sorted((b[0].index, b[1].index) for b in topology.bonds())
    assert sorted(map(tuple, topo.relations["bonds"].tolist())) == bonds and bonds


def test_describe_next_report_both_forms(water, tmp_path):
    """OpenMM >= 8.2 reads the dictionary form, older versions the tuple; both drive a real
    run to the same record."""
    topology, system, positions = water
    sim = simulation(topology, system, positions)
    as_dict = MrecReporter(tmp_path / "dict.mrec", 4, velocities=True, forces=True)
    as_tuple = MrecReporter(tmp_path / "tuple.mrec", 4, velocities=True, forces=True)
    as_dict.describe_as_tuple, as_tuple.describe_as_tuple = False, True
    assert DICT_DESCRIPTIONS  # the installed OpenMM is >= 8.2: the dictionary form is the default
    sim.currentStep = 6
    assert as_dict.describeNextReport(sim) == {"steps": 2, "periodic": None,
                                               "include": ["positions", "velocities", "forces", "energy"]}
    assert as_tuple.describeNextReport(sim) == (2, True, True, True, True)
    sim.currentStep = 0
    sim.reporters += [as_dict, as_tuple]
    sim.step(12)
    as_dict.close()
    as_tuple.close()
    a, b = mr.read_mrec_trajectory(tmp_path / "dict.mrec"), mr.read_mrec_trajectory(tmp_path / "tuple.mrec")
    assert list(a.step) == list(b.step) == [4, 8, 12]
    for fa, fb in zip(a.frames, b.frames):
        for column in ("x", "vx", "fz"):
            assert np.array_equal(fa.blocks["atoms"].columns[column], fb.blocks["atoms"].columns[column])
        assert fa.meta == fb.meta


def test_velocities_forces_precision_and_subset(water, tmp_path):
    """velocities/forces as asked (lossless), positions on the precision grid
    (frame-and-types §8), an atom subset with its own system/ and bonds."""
    topology = water[0]
    subset = list(range(24, 60))
    path = tmp_path / "sub.mrec"
    state = _state(_run(water, path, 10, 10, precision=1e-3, velocities=True, forces=True, atomSubset=subset))
    frame = mr.read_mrec_trajectory(path).frames[0]
    atoms = frame.blocks["atoms"]
    q = quantum(1e-3)
    exact = state.getPositions(asNumpy=True).value_in_unit(u.nanometer)[subset]
    stored = xyz_of(atoms)
    assert np.all(np.abs(stored - exact) <= q / 2) and np.array_equal(stored, np.round(stored / q) * q)
    assert np.array_equal(xyz_of(atoms, ("vx", "vy", "vz")),
                          state.getVelocities(asNumpy=True).value_in_unit(u.nanometer / u.picosecond)[subset])
    forces = state.getForces(asNumpy=True).value_in_unit(u.kilojoule_per_mole / u.nanometer)[subset]
    assert np.array_equal(xyz_of(atoms, ("fx", "fy", "fz")), forces)
    topo = Topology.from_section(mr.read_mrec_system(path))
    atom_list = list(topology.atoms())
    assert list(topo.atoms["name"]) == [atom_list[i].name for i in subset]
    inside = sorted((subset.index(b[0].index), subset.index(b[1].index)) for b in topology.bonds()
                    if b[0].index in subset and b[1].index in subset)
    assert sorted(map(tuple, topo.relations["bonds"].tolist())) == inside
    assert mr.validate(path) == []


def test_nonperiodic_system_writes_no_box_and_no_volume(tmp_path):
    path = tmp_path / "vacuum.mrec"
    _run(water_box(1.4, periodic=False), path, 5, 10, energies=False)
    with mr.MrecReader(path) as reader:
        assert len(reader) == 2 and reader[1].box is None and reader[1].meta == {}
        assert reader.schema.meta_keys() == []


def test_degrees_of_freedom_exclude_virtual_sites(tmp_path):
    """TIP4P-Ew's massless M sites carry no degrees of freedom; the temperature matches
    StateDataReporter's."""
    topology, system, positions = water_box(1.5, model="tip4pew")
    virtual = [i for i in range(system.getNumParticles()) if system.isVirtualSite(i)]
    assert virtual
    waters = sum(1 for r in topology.residues() if r.name == "HOH")
    ions = system.getNumParticles() - 4 * waters
    assert degrees_of_freedom(system) == 3 * (3 * waters + ions) - 3 * waters - 3  # rigid water, CM motion removed
    out = io.StringIO()
    _run((topology, system, positions), tmp_path / "tip4p.mrec", 5, 10, app.StateDataReporter(out, 5, temperature=True))
    temps = _sdr_columns(out.getvalue())["Temperature (K)"]
    with mr.MrecReader(tmp_path / "tip4p.mrec") as reader:
        assert [f.meta["temp"] for f in reader] == pytest.approx(temps, rel=1e-12)


def test_with_block_commits_durably_even_when_the_run_raises(water, tmp_path):
    topology, system, positions = water
    sim = simulation(topology, system, positions)
    path = tmp_path / "raised.mrec"
    with pytest.raises(RuntimeError, match="blew up"):
        with MrecReporter(path, 10) as reporter:
            sim.reporters.append(reporter)
            sim.step(30)
            raise RuntimeError("blew up")
    assert mr.read_mrec_trajectory(path).step.tolist() == [10, 20, 30]
    with pytest.raises(InvalidValueError, match="closed"):
        reporter.report(sim, _state(sim))


def test_append_refuses_what_it_cannot_continue(water, tmp_path):
    topology, system, positions = water
    sim = simulation(topology, system, positions)
    sim.reporters.append(MrecReporter(tmp_path / "none.mrec", 5, append=True))
    with pytest.raises(InvalidValueError, match="append=True continues an existing record"):
        sim.step(5)
    path = tmp_path / "a.mrec"
    sim = _run(water, path, 5, 5)
    sim.reporters.clear()
    sim.reporters.append(MrecReporter(path, 5, velocities=True, append=True))
    with pytest.raises(InvalidValueError, match="cannot continue the record"):
        sim.step(5)
    sim.reporters.clear()
    sim.reporters.append(MrecReporter(path, 5, atomSubset=[0, 1, 2], append=True))
    with pytest.raises(InvalidValueError, match="system has .* atoms"):
        sim.step(5)
    with pytest.raises(InvalidValueError):
        MrecReporter(path, 0)
    assert mr.read_mrec_trajectory(path).step.tolist() == [5]


CHILD = r"""
import sys
sys.path.insert(0, sys.argv[3])
import openmm.app as app
from openmm_helpers import simulation, water_box
from molrec_raw.integrations.openmm import MrecReporter
path, chk = sys.argv[1], sys.argv[2]
topology, system, _ = water_box()
sim = simulation(topology, system)
sim.loadCheckpoint(sys.argv[4])
reporter = MrecReporter(path, 10)
sim.reporters.append(reporter)
print("ready", flush=True)
while sim.currentStep < 4000:
    sim.step(40)
    reporter.flush()                 # the trajectory is committed through the checkpoint's step
    sim.saveCheckpoint(chk)
    print(sim.currentStep, flush=True)
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_then_append_from_checkpoint_trajectory_11(water, tmp_path):
    """A run killed by SIGKILL mid-way, restarted from its checkpoint with append=True: one
    trajectory, steps strictly increasing without a gap; frames up to the checkpoint equal an
    uninterrupted run's, frames past the last committed one are the restarted run's states."""
    topology, system, positions = water
    start = tmp_path / "start.chk"
    simulation(topology, system, positions).saveCheckpoint(str(start))
    path, chk = tmp_path / "run.mrec", tmp_path / "run.chk"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(chk), str(HERE), str(start)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout.readline().strip() == b"ready", child.stderr.read().decode()
    while int(child.stdout.readline() or b"-1") < 120:
        assert child.poll() is None, child.stderr.read().decode()
    time.sleep(random.Random(14).uniform(0.0, 0.2))  # somewhere in a step, a flush or a checkpoint
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL
    with mr.MrecReader(path) as reader:
        killed_at = reader.step
    assert len(killed_at) >= 12 and killed_at == list(range(10, 10 * len(killed_at) + 1, 10))

    sim = simulation(topology, system)
    sim.loadCheckpoint(str(chk))
    resumed_from = sim.currentStep
    assert resumed_from <= killed_at[-1]  # flushed before every checkpoint
    seen = Recorder(10)
    with MrecReporter(path, 10, append=True) as reporter:
        sim.reporters += [reporter, seen]
        sim.step(400 - resumed_from)

    reference = simulation(topology, system)
    reference.loadCheckpoint(str(start))
    with MrecReporter(tmp_path / "ref.mrec", 10) as reporter:
        reference.reporters.append(reporter)
        reference.step(400)
    got, want = mr.read_mrec_trajectory(path), mr.read_mrec_trajectory(tmp_path / "ref.mrec")
    assert got.step.tolist() == want.step.tolist() == list(range(10, 401, 10))
    for i, (step, a, b) in enumerate(zip(got.step.tolist(), got.frames, want.frames)):
        x = xyz_of(a.blocks["atoms"])
        if step <= resumed_from:  # written before the checkpoint: the uninterrupted run's frames, bit for bit
            assert np.array_equal(x, xyz_of(b.blocks["atoms"])) and a.meta == b.meta and a.box == b.box, i
        elif step <= killed_at[-1]:  # committed by the killed run: kept, the restarted run's report skipped
            assert step not in seen.positions, i
        else:  # the restarted run's (a reloaded checkpoint does not continue bit for bit on the CPU platform)
            assert np.array_equal(x, seen.positions[step]), i
    assert seen.positions and mr.validate(path) == []


class Recorder:
    """A plain OpenMM reporter keeping the positions of the states it is handed."""

    def __init__(self, interval):
        self.interval, self.positions = interval, {}

    def describeNextReport(self, simulation):
        return {"steps": self.interval - simulation.currentStep % self.interval, "periodic": None,
                "include": ["positions"]}

    def report(self, simulation, state):
        self.positions[simulation.currentStep] = state.getPositions(asNumpy=True).value_in_unit(u.nanometer)


def test_record_opens_in_zarr_python(water, tmp_path):
    """What the reporter writes is plain Zarr V3: zarr-python reads the topology and frames."""
    zarr = pytest.importorskip("zarr", minversion="3", reason="zarr-python 3 needs Python >= 3.11")
    topology, system, _ = water
    path = tmp_path / "z.mrec"
    state = _state(_run(water, path, 5, 10, velocities=True))
    root = zarr.open_group(path, mode="r")
    traj = root["trajectory"]
    n = system.getNumParticles()
    assert traj.attrs["nstep"] == 2 and traj.attrs["step_progression"] == {"start": 5, "stride": 5}
    assert np.array_equal(traj["atoms/vx"][:][n:], state.getVelocities(asNumpy=True).value_in_unit(
        u.nanometer / u.picosecond)[:, 0])
    assert list(root["system/atoms/name"][:][:3]) == [a.name for a in list(topology.atoms())[:3]]
    assert dict(root["system"].attrs)["units"] == OPENMM_UNITS.to_json()   # the units, readable without us
