"""ASE's ``mrec`` format and MrecTrajectory on real ASE: EMT molecular dynamics written
and read back (trajectory §3, §5), the cell as columns in the record and rows in ASE with
per-axis pbc and origin (frame-and-types §10), calculator results, units (§13.5)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("ase", reason="ASE is not installed (pip install 'molrec-raw[ase]')")

import ase.io  # noqa: E402
from ase import Atoms, units  # noqa: E402
from ase.build import bulk, fcc111, molecule  # noqa: E402
from ase.calculators.emt import EMT  # noqa: E402
from ase.calculators.singlepoint import SinglePointCalculator  # noqa: E402
from ase.cluster import Icosahedron  # noqa: E402
from ase.io.formats import filetype, ioformats  # noqa: E402
from ase.md.nptberendsen import NPTBerendsen  # noqa: E402
from ase.md.velocitydistribution import MaxwellBoltzmannDistribution  # noqa: E402
from ase.md.verlet import VelocityVerlet  # noqa: E402

import molrec_raw as mr  # noqa: E402
from molrec_raw.errors import InvalidValueError  # noqa: E402
from molrec_raw.integrations.ase import MrecTrajectory  # noqa: E402
from molrec_raw.integrations.conventions import ASE_UNITS, units_of  # noqa: E402
from molrec_raw.record.precision import quantum  # noqa: E402

# ASE itself (not this package) still sets array shapes in place, which NumPy >= 2.5 deprecates.
pytestmark = pytest.mark.filterwarnings("ignore:Setting the shape on a NumPy array:DeprecationWarning")


def _thermalised(atoms, seed=0):
    atoms.calc = EMT()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # newer ASE renames it; same distribution
        MaxwellBoltzmannDistribution(atoms, temperature_K=600, rng=np.random.default_rng(seed))
    return atoms


def _snapshot(atoms):
    """What ASE holds at one moment, as copies."""
    return {"positions": atoms.get_positions(), "momenta": atoms.get_momenta(), "cell": atoms.cell.array.copy(),
            "pbc": atoms.pbc.copy(), "energy": atoms.get_potential_energy(), "forces": atoms.get_forces(),
            "numbers": atoms.numbers.copy()}


def _assert_same(image, held):
    assert np.array_equal(image.numbers, held["numbers"])
    assert np.array_equal(image.positions, held["positions"])
    assert np.array_equal(image.cell.array, held["cell"]) and np.array_equal(image.pbc, held["pbc"])
    # momenta are recorded as velocities (p/m) and come back as v·m: equal to the last bits
    assert np.allclose(image.get_momenta(), held["momenta"], rtol=1e-15, atol=1e-300)
    assert isinstance(image.calc, SinglePointCalculator)
    assert image.get_potential_energy() == held["energy"]
    assert np.array_equal(image.get_forces(), held["forces"])


def test_the_format_is_registered_by_entry_point():
    fmt = ioformats["mrec"]
    assert fmt.code == "+S" and set(fmt.globs) == {"*.mrec", "*.mrec.zip"}
    assert fmt.module_name == "molrec_raw.integrations.ase" and fmt.can_append


def test_emt_md_written_every_5_steps_reads_back_equal(tmp_path):
    """VelocityVerlet on a Cu cluster with EMT, 50 steps attached every 5 -> 11 images equal
    to what ASE held, through ase.io.read (":", -1, "::2"), iread and MrecTrajectory."""
    atoms = _thermalised(Icosahedron("Cu", 3))
    dyn = VelocityVerlet(atoms, 2 * units.fs)
    held = []
    path = tmp_path / "cu.mrec"
    with MrecTrajectory(path, "w", atoms) as traj:
        dyn.attach(traj.write, interval=5)
        dyn.attach(lambda: held.append(_snapshot(atoms)), interval=5)
        dyn.run(50)
        assert len(traj) == 11
    assert len(held) == 11
    images = ase.io.read(path, index=":", format="mrec")
    assert len(images) == 11
    for image, h in zip(images, held):
        _assert_same(image, h)
    _assert_same(ase.io.read(path, format="mrec"), held[-1])           # default index: the last image
    _assert_same(ase.io.read(path, index=-1, format="mrec"), held[-1])
    evens = ase.io.read(path, index="::2", format="mrec")
    assert len(evens) == 6
    for image, h in zip(evens, held[::2]):
        _assert_same(image, h)
    for image, h in zip(ase.io.iread(path, format="mrec"), held):
        _assert_same(image, h)
    with MrecTrajectory(path) as traj:
        assert len(traj) == 11
        _assert_same(traj[-1], held[-1])
        _assert_same(traj[3], held[3])
        assert [len(a) for a in traj] == [55] * 11 and len(traj[2:8:3]) == 2
    with mr.MrecReader(path) as reader:                                 # numbered by write, untimed
        assert reader.step == list(range(11)) and reader.time is None
        assert reader[0].meta["pe"] == held[0]["energy"]
    assert units_of(mr.read_mrec_system(path)).same_as(ASE_UNITS)
    system = mr.read_mrec_system(path).blocks["atoms"]
    assert list(system.columns["element"]) == ["Cu"] * 55 and system.columns["atomic_number"].tolist() == [29] * 55
    assert mr.validate(path) == []


def test_variable_cell_run_frame_and_types_10(tmp_path):
    """NPT (Berendsen) on periodic Cu: the cell changes every image; the record holds it as
    columns (vectors = rows.T), ASE gets rows back; stress round trips."""
    atoms = _thermalised(bulk("Cu", "fcc", a=3.7, cubic=True).repeat((2, 2, 2)), seed=3)
    atoms.rattle(0.02, seed=1)
    dyn = NPTBerendsen(atoms, 2 * units.fs, temperature_K=600, pressure_au=1e4 * units.bar,
                       taut=20 * units.fs, taup=50 * units.fs, compressibility_au=1e-2 / units.bar)
    held = []
    path = tmp_path / "npt.mrec"
    with MrecTrajectory(path, "w", atoms) as traj:
        dyn.attach(traj.write, interval=2)
        dyn.attach(lambda: held.append({**_snapshot(atoms), "stress": atoms.get_stress()}), interval=2)
        dyn.run(20)
    cells = [h["cell"] for h in held]
    assert len({c.tobytes() for c in cells}) == len(cells)          # a new cell every image
    with mr.MrecReader(path) as reader:
        for i, h in enumerate(held):
            assert np.array_equal(reader.box_at(i).vectors, h["cell"].T)   # lattice vectors are columns
            assert np.array_equal(np.asarray(reader[i].meta["stress"].value).reshape(3, 3),
                                  np.array(h["stress"])[[[0, 5, 4], [5, 1, 3], [4, 3, 2]]])
    for image, h in zip(ase.io.read(path, ":", format="mrec"), held):
        _assert_same(image, h)
        assert np.array_equal(image.get_stress(), h["stress"])
    assert mr.validate(path) == []


def test_pbc_on_two_axes_and_origin_round_trip(tmp_path):
    slab = fcc111("Al", size=(2, 2, 3), vacuum=6.0)
    assert slab.pbc.tolist() == [True, True, False]
    slab.set_celldisp([0.5, -1.0, 2.0])
    path = tmp_path / "slab.mrec"
    ase.io.write(path, slab)
    box = mr.read_mrec_trajectory(path).frames[0].box
    assert box.boundary == (True, True, False) and box.origin.tolist() == [0.5, -1.0, 2.0]
    back = ase.io.read(path, format="mrec")
    assert back.pbc.tolist() == [True, True, False]
    assert np.array_equal(back.cell.array, slab.cell.array) and np.array_equal(back.positions, slab.positions)
    assert np.array_equal(back.get_celldisp(), slab.get_celldisp())
    assert back.calc is None and not back.has("momenta")


def test_calculator_results_and_atom_arrays_round_trip(tmp_path):
    """energy, free_energy, forces, stress, charges, magmoms, magmom, dipole (and per-atom
    energies) from a calculator, plus initial charges/magmoms and tags, come back as a
    SinglePointCalculator and arrays."""
    rng = np.random.default_rng(5)
    atoms = molecule("CH3CH2OH")
    atoms.center(vacuum=4.0)
    atoms.pbc = True
    atoms.set_initial_charges(rng.normal(size=len(atoms)))
    atoms.set_initial_magnetic_moments(rng.normal(size=len(atoms)))
    atoms.set_tags(np.arange(len(atoms)) % 3)
    results = {"energy": -12.5, "free_energy": -12.75, "forces": rng.normal(size=(len(atoms), 3)),
               "stress": rng.normal(size=6), "charges": rng.normal(size=len(atoms)),
               "magmoms": rng.normal(size=len(atoms)), "magmom": 1.5, "dipole": rng.normal(size=3),
               "energies": rng.normal(size=len(atoms))}
    atoms.calc = SinglePointCalculator(atoms, **results)
    path = tmp_path / "results.mrec"
    with MrecTrajectory(path, "w") as traj:
        traj.write(atoms)
        traj.write(atoms, energy=-13.0)                     # given results win, as in ASE's Trajectory
    first, second = ase.io.read(path, ":", format="mrec")
    for key, value in results.items():
        assert np.array_equal(first.calc.results[key], value), key
    assert second.get_potential_energy() == -13.0
    assert np.array_equal(first.get_initial_charges(), atoms.get_initial_charges())
    assert np.array_equal(first.get_initial_magnetic_moments(), atoms.get_initial_magnetic_moments())
    assert np.array_equal(first.get_tags(), atoms.get_tags())
    frame = mr.read_mrec_trajectory(path).frames[0]
    assert np.array_equal(frame.blocks["atoms"].columns["charge"], results["charges"])   # canonical per-atom charge
    assert mr.validate(path) == []


def test_append_and_a_changing_composition(tmp_path):
    path = tmp_path / "many.mrec"
    water, co2 = molecule("H2O"), molecule("CO2")
    ase.io.write(path, [water, water])                      # a new *.mrec path needs no format
    ase.io.write(path, water, format="mrec", append=True)   # an existing directory does
    assert filetype(str(path)) == "bundletrajectory"        # ... ASE takes any directory for one
    assert len(ase.io.read(path, ":", format="mrec")) == 3
    with pytest.raises(InvalidValueError, match="other atoms than the record's system"):
        ase.io.write(path, co2, format="mrec", append=True)
    with MrecTrajectory(path, "a") as traj:
        assert len(traj) == 3
        traj.write(water)
    assert len(ase.io.read(path, ":", format="mrec")) == 4

    mixed = [water, co2, molecule("CH4")]                    # one call: composition stored per frame
    ase.io.write(tmp_path / "mixed.mrec", mixed)
    back = ase.io.read(tmp_path / "mixed.mrec", ":", format="mrec")
    assert [a.get_chemical_formula() for a in back] == ["H2O", "CO2", "CH4"]
    for a, b in zip(back, mixed):
        assert np.array_equal(a.positions, b.positions)
    ase.io.write(tmp_path / "mixed.mrec", molecule("NH3"), format="mrec", append=True)
    assert ase.io.read(tmp_path / "mixed.mrec", format="mrec").get_chemical_formula() == "H3N"
    assert mr.validate(tmp_path / "mixed.mrec") == []


def test_images_lacking_results_read_back_without_them(tmp_path):
    """A result only some images have is nullable in the record: the others come back
    without it (no invented zeros or NaN energies)."""
    bare = molecule("H2O")
    computed = molecule("H2O")
    computed.calc = SinglePointCalculator(computed, energy=-1.0, forces=np.ones((3, 3)))
    path = tmp_path / "partial.mrec"
    ase.io.write(path, [bare, computed, bare])
    images = ase.io.read(path, ":", format="mrec")
    assert images[0].calc is None and images[2].calc is None
    assert images[1].get_potential_energy() == -1.0 and np.array_equal(images[1].get_forces(), np.ones((3, 3)))

    with MrecTrajectory(tmp_path / "stream.mrec", "w") as traj:
        traj.write(bare)                                      # the first image fixes what is recorded
        with pytest.warns(UserWarning, match="not recorded: energy, forces"):
            traj.write(computed)
    with pytest.raises(InvalidValueError, match="has no forces"):
        with MrecTrajectory(tmp_path / "strict.mrec", "w") as traj:
            traj.write(computed)
            traj.write(bare)


def test_precision_zip_and_refusals(tmp_path):
    atoms = _thermalised(Icosahedron("Cu", 2))
    path = tmp_path / "p.mrec"
    ase.io.write(path, atoms, precision=1e-3)
    q = quantum(1e-3)
    back = ase.io.read(path, format="mrec")
    assert np.all(np.abs(back.positions - atoms.positions) <= q / 2)
    packed = mr.pack_mrec_zip(path)
    assert filetype(str(packed)) == "mrec"                  # *.mrec.zip is recognised by its glob
    assert np.array_equal(ase.io.read(packed).positions, back.positions)
    with pytest.raises(InvalidValueError, match="pinned to precision"):
        ase.io.write(path, atoms, format="mrec", append=True, precision=1e-2)
    no_cell = Atoms("H2", positions=[[0, 0, 0], [0, 0, 0.74]], pbc=[True, False, False])
    with pytest.raises(InvalidValueError, match="no cell vectors"):
        ase.io.write(tmp_path / "bad.mrec", no_cell)
    with pytest.raises(InvalidValueError, match="carries forward"):
        ase.io.write(tmp_path / "drop.mrec", [bulk("Cu"), Atoms("Cu", positions=[[0, 0, 0]])])
    with pytest.raises(InvalidValueError, match="read-only"):
        MrecTrajectory(path).write(atoms)
    with pytest.raises(InvalidValueError, match="mode"):
        MrecTrajectory(path, "x")


# -- units and one-frame records (frame-and-types §13.5, root-layout) ---------------------------------
EV_IN_KCAL_PER_MOL = 96.485332123310018 / 4.184  # CODATA 2018, written out (not the package's table)


def _water(units):
    atoms = mr.Block({"element": np.array(["O", "H", "H"], dtype=object), "x": np.array([0.0, 0.96, -0.24]),
                      "y": np.array([0.0, 0.0, 0.93]), "z": np.zeros(3), "fx": np.array([1.0, -0.5, -0.5]),
                      "fy": np.zeros(3), "fz": np.zeros(3)})
    return mr.Frame({"units": mr.MetaValue("json", units), "pe": -10.0}, {"atoms": atoms},
                    mr.Box(np.diag([10.0, 11.0, 12.0])))


def test_a_one_frame_record_reads_as_one_atoms_in_ase_units_13_5(tmp_path):
    """A record with a frame section and no trajectory is one image: ``ase.io.read`` gives one
    Atoms, ``index=":"`` a list of one; energy and forces via a SinglePointCalculator in eV and
    eV/Å (converted from the frame's stated ``real`` units: Å, kcal/mol)."""
    path = tmp_path / "one.mrec"
    mr.write_mrec_frame(path, _water("real"))
    image = ase.io.read(str(path), format="mrec")
    assert isinstance(image, Atoms) and list(image.get_chemical_symbols()) == ["O", "H", "H"]
    assert image.positions[1, 0] == 0.96 and np.array_equal(image.cell.array, np.diag([10.0, 11.0, 12.0]))
    assert image.get_potential_energy() == pytest.approx(-10.0 / EV_IN_KCAL_PER_MOL, rel=1e-12)
    assert image.get_forces()[0, 0] == pytest.approx(1.0 / EV_IN_KCAL_PER_MOL, rel=1e-12)
    images = ase.io.read(str(path), index=":", format="mrec")
    assert len(images) == 1 and np.array_equal(images[0].positions, image.positions)
    assert len(MrecTrajectory(path)) == 1


def test_a_system_and_one_frame_trajectory_reads_as_one_atoms_13_5(tmp_path):
    """system (elements, units nm/kJ/mol) + a trajectory of one frame: one Atoms in Å, eV."""
    from molrec_raw.integrations.conventions import start_trajectory
    water = _water({"length": "nm", "energy": "kJ/mol"})
    elements = water.blocks["atoms"].columns["element"]
    system = mr.Frame({"units": water.meta["units"]}, {"atoms": mr.Block({"element": elements})})
    frame = mr.Frame({"pe": -10.0}, {"atoms": mr.Block({c: v for c, v in water.blocks["atoms"].columns.items()
                                                       if c != "element"})}, water.box)
    with start_trajectory(tmp_path / "t.mrec", system, mr.SequenceSchema.from_frame(frame)) as w:
        w.append(frame)
    image = ase.io.read(str(tmp_path / "t.mrec"), format="mrec")
    assert isinstance(image, Atoms) and image.positions[1, 0] == pytest.approx(9.6, rel=1e-15)
    assert image.cell.array[2, 2] == pytest.approx(120.0, rel=1e-15)
    assert image.get_potential_energy() == pytest.approx(-10.0 / 96.485332123310018, rel=1e-12)
    assert image.get_forces()[0, 0] == pytest.approx(0.1 / 96.485332123310018, rel=1e-12)   # kJ/mol/nm -> eV/Å
    assert len(ase.io.read(str(tmp_path / "t.mrec"), index=":", format="mrec")) == 1


def test_the_readme_frame_gets_an_error_naming_what_is_missing_not_stop_iteration(tmp_path):
    """The README's first record (x only, no units) cannot be an ASE image: a MolrecError
    naming the unit, never a bare StopIteration."""
    from molrec_raw.errors import MolrecError
    atoms = mr.Block({"x": np.array([0.0, 0.96, -0.24]), "element": np.array(["O", "H", "H"], dtype=object)},
                     precision={"x": 1e-3})
    frame = mr.Frame({"title": "water"}, {"atoms": atoms}, mr.Box(np.eye(3) * 10.0))
    mr.write_mrec_frame(tmp_path / "water.mrec", frame)
    with pytest.raises(MolrecError, match="no image|y/z"):
        ase.io.read(str(tmp_path / "water.mrec"), format="mrec")


def test_the_demo_energy_reads_in_ev_not_kcal_per_mol_13_5(tmp_path):
    """The demo states the ``real`` preset (kcal/mol): ASE gets eV."""
    from molrec_raw.demo import write_demo
    write_demo(tmp_path / "demo.mrec", frames=2, molecules=2)
    with mr.MrecReader(tmp_path / "demo.mrec") as r:
        stored = float(r[1].meta["pe"])
    image = ase.io.read(str(tmp_path / "demo.mrec"), index=1, format="mrec")
    assert image.get_potential_energy() == pytest.approx(stored / EV_IN_KCAL_PER_MOL, rel=1e-12)
