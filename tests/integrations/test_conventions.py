"""The shared integration conventions: units (frame-and-types §13.5), cell orientation (§10),
canonical vocabulary (§13.2–§13.4)."""
import numpy as np
import pytest

import molrec_raw as mr
from molrec_raw.errors import InvalidValueError, MolrecError, SpecViolationError, UnsupportedFeatureError
from molrec_raw.integrations.conventions import (
    ASE_UNITS, MDANALYSIS_UNITS, NO_UNITS, MDTRAJ_UNITS, OPENMM_UNITS, Topology, Units, atoms_frame,
    box_from_rows, cell_rows, refuse_units_change, require, trajectory_schema, units_of, xyz_of,
)


def test_require_names_the_extra():
    with pytest.raises(ImportError, match=r"pip install 'molrec-raw\[nothing\]'"):
        require("surely_not_a_module_xyz", "nothing")


def test_units_factors_between_tools_13_5():
    assert MDANALYSIS_UNITS.factor("length", MDTRAJ_UNITS) == pytest.approx(0.1)
    assert MDTRAJ_UNITS.factor("length", MDANALYSIS_UNITS) == pytest.approx(10.0)
    assert OPENMM_UNITS.factor("velocity", MDANALYSIS_UNITS) == pytest.approx(10.0)   # nm/ps -> Å/ps
    assert OPENMM_UNITS.factor("force", MDANALYSIS_UNITS) == pytest.approx(0.1)      # kJ/mol/nm -> kJ/mol/Å
    assert ASE_UNITS.factor("energy", OPENMM_UNITS) == pytest.approx(96.4853321233)  # eV -> kJ/mol
    assert ASE_UNITS.factor("time", Units(time="fs")) == pytest.approx(10.1805055, rel=1e-7)
    assert ASE_UNITS.factor("stress", MDANALYSIS_UNITS) == pytest.approx(96.4853321233)  # eV/Å³ -> kJ/mol/Å³
    assert NO_UNITS.length is None and NO_UNITS.mass == "dalton" and NO_UNITS.charge == "e"   # §13.5 defaults only


def test_derived_units_stated_directly_convert_13_5():
    """A units object may state a derived quantity itself ("force": "eV/angstrom"): the one
    table splits it into its base units; an unknown part is refused, naming the unit."""
    from molrec_raw.record.units import unit_factor, unit_of
    assert unit_of("force", {"energy": "kcal/mol", "length": "angstrom"}) == "kcal/mol/angstrom"
    assert unit_of("volume", {"length": "nm"}) == "nm^3"
    assert unit_factor("force", {"force": "eV/angstrom"}, {"energy": "kJ/mol", "length": "nm"}) == \
        pytest.approx(964.853321233)
    assert unit_factor("force", {"force": "kcal/mol/angstrom"}, {"force": "kJ/mol/nm"}) == pytest.approx(41.84)
    assert unit_factor("stress", {"stress": "eV/angstrom^3"}, {"energy": "eV", "length": "nm"}) == pytest.approx(1e3)
    with pytest.raises(UnsupportedFeatureError, match="furlong"):
        unit_factor("force", {"force": "eV/furlong"}, {"force": "eV/angstrom"})


def test_units_json_forms_13_5():
    assert Units.from_json("openmm").temperature is None                         # no preset names a temperature
    assert Units.from_json({"preset": "openmm", "temperature": "K"}).same_as(OPENMM_UNITS)
    assert Units.from_json("openmm").with_defaults(OPENMM_UNITS).same_as(OPENMM_UNITS)
    for tool in (OPENMM_UNITS, MDANALYSIS_UNITS, MDTRAJ_UNITS, ASE_UNITS):  # every tool here uses kelvin
        assert tool.temperature == "K" and tool.to_json()["temperature"] == "K"
    assert Units.from_json({"preset": "real", "time": "ps"}).time == "ps"          # stated beats preset
    assert Units.from_json({"length": "Å"}).same_as(Units(length="angstrom"))
    assert Units.from_json(MDANALYSIS_UNITS.to_json()) == MDANALYSIS_UNITS
    with pytest.raises(UnsupportedFeatureError, match="unknown units preset"):
        Units.from_json("furlongs")
    with pytest.raises(SpecViolationError):
        Units.from_json({"length": 3})
    with pytest.raises(SpecViolationError):
        Units.from_json(5)


def test_unknown_unit_is_refused_never_guessed_13_5():
    odd = Units(length="furlong")
    assert odd.factor("length", Units(length="furlong")) == 1.0                     # same spelling: no conversion
    with pytest.raises(UnsupportedFeatureError, match="furlong"):
        odd.factor("length", MDANALYSIS_UNITS)
    with pytest.raises(UnsupportedFeatureError, match="states no length unit"):
        Units().factor("length", MDANALYSIS_UNITS)
    with pytest.raises(UnsupportedFeatureError, match="states no time unit"):
        Units(length="nm").factor("velocity", MDANALYSIS_UNITS)


def test_refuse_appending_in_other_units():
    refuse_units_change(None, OPENMM_UNITS, "r")
    refuse_units_change(Units.from_json("openmm"), OPENMM_UNITS, "r")
    with pytest.raises(MolrecError, match="refusing to append"):
        refuse_units_change(MDANALYSIS_UNITS, OPENMM_UNITS, "r")


def test_cell_rows_are_the_transpose_of_record_columns_10():
    rows = np.array([[10.0, 0, 0], [2.0, 11.0, 0], [1.0, 3.0, 12.0]])
    box = box_from_rows(rows, pbc=(True, True, False), origin=[1, 2, 3])
    assert np.array_equal(box.vectors[:, 1], rows[1])                               # lattice vector b is column 1
    assert box.boundary == (True, True, False) and list(box.origin) == [1, 2, 3]
    assert np.array_equal(cell_rows(box), rows)
    assert box_from_rows(np.zeros((3, 3))) is None and box_from_rows(None) is None
    assert cell_rows(None) is None and cell_rows(mr.Box.undefined()) is None
    with pytest.raises(InvalidValueError):
        box_from_rows(np.eye(2))


def test_topology_round_trip_through_a_record_13_2(tmp_path):
    top = Topology(3, {"name": ["O", "H1", "H2"], "element": ["O", "H", "H"], "res_id": np.array([1, 1, 1]),
                       "res_name": ["HOH"] * 3, "mass": [15.999, 1.008, 1.008], "charge": [-0.8, 0.4, 0.4]},
                   {"bonds": [[0, 1], [0, 2]], "angles": [[1, 0, 2]]})
    path = tmp_path / "w.mrec"
    mr.write_mrec_system(path, top.system(OPENMM_UNITS))
    system = mr.read_mrec_system(path)
    back = Topology.from_section(system)
    assert back.n_atoms == 3 and set(back.atoms) == set(top.atoms)
    assert back.atoms["res_id"].dtype == np.uint64 and back.relations["bonds"].tolist() == [[0, 1], [0, 2]]
    assert back.relations["angles"].tolist() == [[1, 0, 2]]
    assert units_of(system).same_as(OPENMM_UNITS)
    assert units_of(mr.Frame()) is None


def test_topology_refuses_bad_input():
    with pytest.raises(InvalidValueError, match="renumber"):
        Topology(2, {"res_id": np.array([-1, 2])})
    with pytest.raises(InvalidValueError, match="outside"):
        Topology(2, {}, {"bonds": [[0, 2]]})
    with pytest.raises(InvalidValueError, match="shape"):
        Topology(2, {"name": ["a"]})
    with pytest.raises(InvalidValueError, match="not a topology column"):
        Topology(2, {"colour": ["a", "b"]})


def test_atoms_only_system_keeps_its_row_count(tmp_path):
    path = tmp_path / "n.mrec"
    mr.write_mrec_system(path, Topology(5).system(MDANALYSIS_UNITS))
    assert mr.read_mrec_system(path).blocks["atoms"].nrows == 5


def test_trajectory_frames_in_canonical_vocabulary_13_4(tmp_path):
    path = tmp_path / "t.mrec"
    mr.write_mrec_system(path, Topology(4).system(MDANALYSIS_UNITS))
    schema = trajectory_schema(4, velocities=True, precision=1e-3, meta_keys=["pe", "temp"])
    rng = np.random.default_rng(1)
    xyz, vel = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    with mr.MrecWriter(path, schema) as w:
        w.append(atoms_frame(xyz, velocities=vel, box=box_from_rows(np.eye(3) * 5), meta={"pe": -1.5, "temp": 300}),
                 step=10, time=0.02)
    assert mr.validate(path) == []
    with mr.MrecReader(path) as r:
        frame = r[0]
    atoms = frame.blocks["atoms"]
    assert np.allclose(xyz_of(atoms), xyz, atol=2 ** -10) and np.array_equal(xyz_of(atoms, ("vx", "vy", "vz")), vel)
    assert xyz_of(atoms, ("fx", "fy", "fz")) is None
    assert frame.meta == {"pe": -1.5, "temp": 300.0} and np.array_equal(cell_rows(frame.box), np.eye(3) * 5)
    with pytest.raises(InvalidValueError):
        atoms_frame(np.zeros((3, 2)))
