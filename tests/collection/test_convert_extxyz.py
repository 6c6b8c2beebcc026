"""``molrec-raw convert`` into and out of collections (issue 22), against real ASE: extended
XYZ and ASE databases in (each image a record; ``--group-by KEY``), a collection out to
extended XYZ, a trajectory record's frames as records.  The cell convention: records hold
lattice vectors as columns, ASE as rows (integrations/conventions.py)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ase = pytest.importorskip("ase", reason="converting extxyz needs the [ase] extra (pip install 'molrec-raw[ase]')")
import ase.db  # noqa: E402
import ase.io  # noqa: E402
from ase.calculators.singlepoint import SinglePointCalculator  # noqa: E402

import molrec_raw as mr  # noqa: E402
from molrec_raw.cli import main  # noqa: E402

TESTDATA = Path(ase.__file__).parent / "test" / "testdata"


def _images() -> list:
    """Five images: two H2O of config 0, one H2O and two CH4 of config 1/2; a triclinic cell
    on the periodic ones (configs 0 and 2), none on config 1; image 1 has no stress."""
    rng = np.random.default_rng(7)
    out = []
    for i, (formula, config) in enumerate([("H2O", 0), ("H2O", 0), ("H2O", 1), ("CH4", 2), ("CH4", 2)]):
        periodic = config != 1
        atoms = ase.Atoms(formula, positions=rng.normal(size=(len(ase.Atoms(formula)), 3)),
                          cell=[[5.0, 0.0, 0.0], [1.0, 6.0, 0.0], [0.5, 0.25, 7.0]] if periodic else None,
                          pbc=periodic)
        atoms.info.update(config=config, name=f"img{i}", temperature=300.0 + i)
        results = {"energy": -10.0 - i, "forces": rng.normal(size=(len(atoms), 3))}
        if i != 1:
            results["stress"] = rng.normal(size=6)
        atoms.calc = SinglePointCalculator(atoms, **results)
        out.append(atoms)
    return out


@pytest.fixture
def extxyz(tmp_path: Path) -> Path:
    path = tmp_path / "train.extxyz"
    ase.io.write(path, _images(), format="extxyz")
    return path


def _full(voigt: np.ndarray) -> np.ndarray:
    from ase.stress import voigt_6_to_full_3x3_stress
    return np.asarray(voigt_6_to_full_3x3_stress(voigt))


def test_issue22_extxyz_each_image_a_record_with_system_trajectory_units_and_cell_columns(extxyz, tmp_path, capsys):
    target = tmp_path / "train.mrec.lmdb"
    assert main(["convert", str(extxyz), str(target)]) == 0
    assert capsys.readouterr().out.startswith(f"{target}: 5 records, 5 frames (19 atoms in all)")
    read = list(ase.io.iread(extxyz, index=":"))
    c = mr.read_collection(target)
    assert len(c) == 5 and c.units == {"length": "angstrom", "energy": "eV", "force": "eV/angstrom",
                                        "stress": "eV/angstrom^3"}
    assert c.index.columns["image"].tolist() == [0, 1, 2, 3, 4]
    for r, atoms in enumerate(read):
        rec = c[r]
        assert rec.meta == {"config": atoms.info["config"], "name": f"img{r}", "temperature": 300.0 + r}
        system = rec.system.blocks["atoms"].columns
        assert system["element"].tolist() == atoms.get_chemical_symbols()
        assert system["atomic_number"].tolist() == atoms.numbers.tolist()
        np.testing.assert_array_equal(system["mass"], atoms.get_masses())
        assert len(rec.trajectory) == 1
        frame = rec.trajectory[0]
        cols = frame.blocks["atoms"].columns
        np.testing.assert_array_equal(np.stack([cols["x"], cols["y"], cols["z"]], 1), atoms.positions)
        np.testing.assert_array_equal(np.stack([cols["fx"], cols["fy"], cols["fz"]], 1), atoms.get_forces())
        assert frame.meta["pe"] == atoms.get_potential_energy()
        if r == 1:  # no stress on this image: the declared key's NaN fill
            assert np.isnan(np.asarray(frame.meta["stress"].value)).all()
        else:
            np.testing.assert_array_equal(np.asarray(frame.meta["stress"].value).reshape(3, 3), _full(atoms.get_stress()))
        if atoms.pbc.any():
            np.testing.assert_array_equal(frame.box.vectors, atoms.cell.array.T)  # columns, not rows
            assert frame.box.boundary == (True, True, True)
        else:
            assert frame.box is None
    c.close()


def test_issue22_group_by_joins_consecutive_images_of_one_key(tmp_path):
    images = _images()[:3]  # configs 0, 0, 1: H2O throughout
    again = images[0].copy()
    again.calc = SinglePointCalculator(again, energy=-1.0, forces=np.zeros((3, 3)))
    again.info["config"] = 0  # config 0 again, after config 1: a record of its own
    source = tmp_path / "grouped.extxyz"
    ase.io.write(source, images + [again], format="extxyz")
    target = tmp_path / "grouped.mrec.lmdb"
    assert main(["convert", str(source), str(target), "--group-by", "config"]) == 0
    c = mr.read_collection(target)
    assert [rec.n_frames for rec in c] == [2, 1, 1] and c.index.columns["image"].tolist() == [0, 2, 3]
    assert c[0].trajectory.step.tolist() == [0, 1] and c[0].meta["name"] == "img0"
    assert [f.meta["pe"] for f in c[0].trajectory] == [-10.0, -11.0]
    c.close()


def test_issue22_group_by_refuses_a_group_whose_atoms_change(extxyz, tmp_path, capsys):
    assert main(["convert", str(extxyz), str(tmp_path / "x.mrec.lmdb"), "--group-by", "name_missing"]) == 2
    assert "image 0 has no info['name_missing']" in capsys.readouterr().err
    assert not (tmp_path / "x.mrec.lmdb").exists()  # the writer's unfinished file is removed
    with_cell = _images()[0]
    without = ase.Atoms(with_cell.numbers, positions=with_cell.positions, pbc=False)
    without.info["config"] = 0
    source = tmp_path / "dropped.extxyz"
    ase.io.write(source, [with_cell, without], format="extxyz")
    assert main(["convert", str(source), str(tmp_path / "z.mrec.lmdb"), "--group-by", "config"]) == 2
    assert "image 1 has no cell, an earlier image of its group has one" in capsys.readouterr().err
    lone = _images()[2:4]  # H2O then CH4
    for atoms in lone:
        atoms.info["config"] = 9
    source = tmp_path / "mixed.extxyz"
    ase.io.write(source, lone, format="extxyz")
    assert main(["convert", str(source), str(tmp_path / "y.mrec.lmdb"), "--group-by", "config"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "image 1 has other atoms than image 0 of its group (info['config'] = 9)" in err


def test_issue22_ase_database_rows_become_records(tmp_path):
    db_path = tmp_path / "structures.db"
    with ase.db.connect(db_path) as db:
        for i, atoms in enumerate(_images()):
            db.write(atoms, relaxed=bool(i % 2), family=f"f{i}", data={"origin": "unit-test"})
    target = tmp_path / "db.mrec.lmdb"
    assert main(["convert", str(db_path), str(target)]) == 0
    c = mr.read_collection(target)
    rows = list(ase.db.connect(db_path).select())
    assert len(c) == len(rows) == 5
    for rec, row in zip(c, rows):
        assert rec.meta == {"relaxed": row.relaxed, "family": row.family, "origin": "unit-test", "db_id": row.id}
        cols = rec.trajectory[0].blocks["atoms"].columns
        np.testing.assert_array_equal(np.stack([cols["x"], cols["y"], cols["z"]], 1), row.positions)
        assert rec.trajectory[0].meta["pe"] == row.energy
    c.close()


def test_issue22_collection_to_extxyz_round_trips_through_ase(extxyz, tmp_path):
    collection = tmp_path / "c.mrec.lmdb"
    assert main(["convert", str(extxyz), str(collection)]) == 0
    back = tmp_path / "back.extxyz"
    assert main(["convert", str(collection), str(back)]) == 0
    original, again = list(ase.io.iread(extxyz, index=":")), list(ase.io.iread(back, index=":"))
    assert len(again) == 5
    for a, b in zip(original, again):
        assert b.get_chemical_symbols() == a.get_chemical_symbols()
        np.testing.assert_array_equal(b.positions, a.positions)
        np.testing.assert_array_equal(b.cell.array, a.cell.array)  # rows again
        assert b.pbc.tolist() == a.pbc.tolist()
        np.testing.assert_array_equal(b.get_forces(), a.get_forces())
        assert b.get_potential_energy() == a.get_potential_energy()
        if "stress" in a.calc.results:
            np.testing.assert_allclose(b.get_stress(), a.get_stress(), rtol=0, atol=1e-15)
        else:
            assert "stress" not in b.calc.results  # a NaN fill is no result
        assert b.info["name"] == a.info["name"] and b.info["config"] == a.info["config"]
    assert [b.info["mrec_record"] for b in again] == [0, 1, 2, 3, 4]
    assert main(["convert", str(collection), str(back)]) == 2  # never overwrites
    grouped, grouped_back = tmp_path / "g.mrec.lmdb", tmp_path / "g.extxyz"
    assert main(["convert", str(extxyz), str(grouped), "--group-by", "config"]) == 0
    assert main(["convert", str(grouped), str(grouped_back)]) == 0
    again = list(ase.io.iread(grouped_back, index=":"))
    assert [b.info["mrec_record"] for b in again] == [0, 0, 1, 2, 2]  # --group-by mrec_record reads them back
    for a, b in zip(original, again):
        np.testing.assert_array_equal(b.positions, a.positions)
        np.testing.assert_array_equal(b.cell.array, a.cell.array)


def test_issue22_ase_testdata_triclinic_cell_keeps_its_convention(tmp_path):
    """ASE's own test file: a triclinic cell written with commas, per-atom molid and type."""
    source = TESTDATA / "opls_structure_ext.xyz"
    if not source.is_file():
        pytest.skip(f"this ASE ships no {source.name} test file")
    target = tmp_path / "opls.mrec.lmdb"
    assert main(["convert", str(source), str(target)]) == 0
    atoms = ase.io.read(source)
    c = mr.read_collection(target)
    box = c[0].trajectory[0].box
    np.testing.assert_array_equal(box.vectors, atoms.cell.array.T)
    np.testing.assert_array_equal(box.vectors[:, 1], atoms.cell.array[1])  # lattice vector b is column 1
    assert c[0].system.blocks["atoms"].columns["element"].tolist() == atoms.get_chemical_symbols()
    c.close()


def test_issue22_frames_as_records(tmp_path, capsys):
    from molrec_raw.integrations.conventions import ASE_UNITS, start_trajectory, units_meta
    from molrec_raw.record.trajectory import write_mrec_trajectory

    frames = [mr.Frame({"pe": -1.0 * k}, {"atoms": mr.Block({"x": np.arange(3.0) + k, "y": np.zeros(3),
                                                            "z": np.zeros(3)})}, mr.Box(np.eye(3) * (5 + k)))
              for k in range(4)]
    system = mr.Frame({"units": units_meta(ASE_UNITS)}, {"atoms": mr.Block({"element": np.array(["O", "H", "H"],
                                                                                                  dtype=object)})})
    record = tmp_path / "run.mrec"
    schema = mr.SequenceSchema.from_frames(frames)
    with start_trajectory(record, system, schema) as writer:
        for k, frame in enumerate(frames):
            writer.append(frame, step=10 * k)
    target = tmp_path / "frames.mrec.lmdb"
    assert main(["convert", str(record), str(target)]) == 2
    assert "--frames-as-records" in capsys.readouterr().err
    assert main(["convert", str(record), str(target), "--frames-as-records"]) == 0
    c = mr.read_collection(target)
    assert len(c) == 4 and c.units["length"] == "angstrom" and c.index.columns["frame"].tolist() == [0, 1, 2, 3]
    for k, rec in enumerate(c):
        assert rec.trajectory.step.tolist() == [10 * k]
        assert rec.trajectory[0].blocks["atoms"].columns["x"].tolist() == (np.arange(3.0) + k).tolist()
        assert rec.trajectory[0].meta["pe"] == -1.0 * k and rec.trajectory[0].box.vectors[0, 0] == 5 + k
        assert rec.system.blocks["atoms"].columns["element"].tolist() == ["O", "H", "H"]
    c.close()
    bare = tmp_path / "bare.mrec"
    write_mrec_trajectory(bare, frames)
    assert main(["convert", str(bare), str(tmp_path / "b.mrec.lmdb"), "--frames-as-records"]) == 2
    assert "states no units" in capsys.readouterr().err
    assert main(["convert", str(bare), str(tmp_path / "b.mrec.lmdb"), "--frames-as-records",
                 "--units", "length=nm,energy=kJ/mol"]) == 0
    assert mr.read_collection(tmp_path / "b.mrec.lmdb").units == {"length": "nm", "energy": "kJ/mol"}


def test_issue22_convert_bad_input_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.extxyz"
    bad.write_text("3\nnot a comment line = \"\nH 0 0\n")
    for args in ([str(bad), str(tmp_path / "o.mrec.lmdb")], [str(tmp_path / "none.xyz"), str(tmp_path / "p.mrec.lmdb")],
                 [str(bad), str(tmp_path / "q.mrec.lmdb"), "--precision", "0.1"]):
        run = subprocess.run([sys.executable, "-m", "molrec_raw", "convert", *args], capture_output=True, text=True,
                             timeout=120)
        assert run.returncode == 2, run.stderr
        assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr, run.stderr
