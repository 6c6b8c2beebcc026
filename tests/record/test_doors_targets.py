"""Doors do what their names say: ``MolRec`` writes every field it is given or refuses it
(root-layout#5: nothing dropped without a word), and a ``*.mrec.zip`` target of every writing
door is a packed record (trajectory#15), built beside and packed by the one packer."""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import molrec_raw as mr
from molrec_raw.errors import InvalidValueError, MolrecError, RecordExistsError, SpecViolationError, StoreError
from molrec_raw.record.forcefield import ForceFieldSection, block_name
from molrec_raw.record.observables import Observable
from molrec_raw.record.trajectory import MrecReader, MrecWriter, SequenceSchema, Trajectory

ROOT = Path(__file__).resolve().parents[2]


def atoms_frame(i: int, n: int = 3) -> mr.Frame:
    x = np.arange(n, dtype=np.float64) + 0.25 * i
    return mr.Frame({}, {"atoms": mr.Block({"x": x, "y": -x, "z": np.full(n, 0.5 * i)})})


def system_section(n: int = 3) -> mr.Frame:
    return mr.Frame({"smiles": "O"}, {"atoms": mr.Block({"element": np.array(["O", "H", "H"][:n], dtype=object)})})


def listing(directory: Path) -> list:
    return sorted(os.listdir(directory))


def assert_packed(path: Path) -> None:
    """``path`` is one zip file of STORED entries that validates clean, nothing left beside it."""
    assert path.is_file() and zipfile.is_zipfile(path)
    with zipfile.ZipFile(path) as archive:
        assert archive.testzip() is None
        assert {info.compress_type for info in archive.infolist()} == {zipfile.ZIP_STORED}
    assert mr.validate(path) == []
    assert listing(path.parent) == [path.name], "no build directory, temporary zip or lock file left"


def positions(reader: MrecReader) -> np.ndarray:
    return np.stack([reader[i].blocks["atoms"].columns["x"] for i in range(len(reader))])


# -- MolRec: every field written or refused --------------------------------------------------------
def test_root_layout_5_molrec_trajectory_list_is_written(tmp_path):
    frames = [atoms_frame(i) for i in range(3)]
    path = tmp_path / "x.mrec"
    mr.write_mrec(path, mr.MolRec(system=system_section(), trajectory=frames))
    assert mr.validate(path) == []
    rec = mr.read_mrec(path)
    assert isinstance(rec.trajectory, MrecReader) and len(rec.trajectory) == 3
    assert np.array_equal(positions(rec.trajectory), np.stack([f.blocks["atoms"].columns["x"] for f in frames]))
    rec.trajectory.close()


def test_root_layout_5_molrec_trajectory_object_keeps_its_numbering(tmp_path):
    frames = [atoms_frame(i) for i in range(4)]
    path = tmp_path / "t.mrec.zip"
    given = Trajectory(frames, np.array([0, 5, 10, 20]), np.array([0.0, 0.5, 1.0, 2.0]))
    mr.write_mrec(path, mr.MolRec(meta={"title": "t"}, trajectory=given))
    assert_packed(path)
    with MrecReader(path) as reader:
        assert list(reader.step) == [0, 5, 10, 20] and list(reader.time) == [0.0, 0.5, 1.0, 2.0]
        assert np.array_equal(reader[3].blocks["atoms"].columns["z"], frames[3].blocks["atoms"].columns["z"])
    assert mr.read_mrec_meta(path)["title"] == "t"


def test_root_layout_5_molrec_reader_of_another_record_is_copied_byte_for_byte(tmp_path):
    source = mr.write_mrec_trajectory(tmp_path / "src.mrec", [atoms_frame(i) for i in range(5)], steps=[1, 2, 3, 4, 9])
    with MrecReader(source) as reader:
        mr.write_mrec(tmp_path / "copy.mrec", mr.MolRec(system=system_section(), trajectory=reader))
    for name in os.listdir(source / "trajectory"):
        a, b = source / "trajectory" / name, tmp_path / "copy.mrec" / "trajectory" / name
        assert a.is_dir() or a.read_bytes() == b.read_bytes()
    with MrecReader(tmp_path / "copy.mrec") as copied, MrecReader(source) as original:
        assert list(copied.step) == [1, 2, 3, 4, 9]
        assert np.array_equal(positions(copied), positions(original))


def test_root_layout_5_read_then_write_carries_the_trajectory(tmp_path):
    path = mr.write_mrec_trajectory(tmp_path / "a.mrec", [atoms_frame(i) for i in range(3)])
    rec = mr.read_mrec(path)
    mr.write_mrec(tmp_path / "b.mrec", rec)
    assert isinstance(rec.trajectory, MrecReader)
    rec.trajectory.close()
    with MrecReader(tmp_path / "b.mrec") as reader:
        assert len(reader) == 3


@pytest.mark.parametrize("field, value, error, words", [
    ("trajectory", {"atoms": []}, InvalidValueError, "MolRec.trajectory must be"),
    ("trajectory", "frames.xyz", InvalidValueError, "MolRec.trajectory must be"),
    ("trajectory", [atoms_frame(0), {"atoms": None}], InvalidValueError, "trajectory frame 1 is a dict"),
    ("frame", {"atoms": {"x": [0.0]}}, InvalidValueError, "MolRec.frame must be a Frame"),
    ("system", [1, 2], InvalidValueError, "MolRec.system must be a Frame"),
    ("raw_sections", {"extra": b"bytes"}, InvalidValueError, r"MolRec.raw_sections\['extra'\] must be"),
    ("metrics", {"loss": None}, InvalidValueError, "MolRec.metrics is the read-only view"),
    ("forcefield", {"styles": []}, TypeError, "forcefield must be a ForceFieldSection"),
    ("observables", {"e": np.arange(3.0)}, TypeError, "observable 'e' must be an Observable"),
    ("observables", [1], TypeError, "observables are a mapping"),
    ("status", "running", SpecViolationError, "status document must be a JSON object"),
    ("method", 3, SpecViolationError, "method document must be a JSON object"),
    ("meta", ["title"], SpecViolationError, "meta document must be a JSON object"),
])
def test_root_layout_5_a_field_write_mrec_cannot_write_is_refused_before_writing(tmp_path, field, value, error, words):
    rec = mr.MolRec(system=system_section())
    setattr(rec, field, value)
    with pytest.raises(error, match=words):
        mr.write_mrec(tmp_path / "x.mrec", rec)
    assert listing(tmp_path) == []


def test_root_layout_5_frames_and_a_carried_trajectory_are_two_trajectories(tmp_path):
    path = mr.write_mrec_trajectory(tmp_path / "a.mrec", [atoms_frame(0)])
    rec = mr.read_mrec(path)
    reader = rec.trajectory
    rec.trajectory = [atoms_frame(1)]
    with pytest.raises(InvalidValueError, match="one trajectory"):
        mr.write_mrec(tmp_path / "b.mrec", rec)
    assert isinstance(reader, MrecReader)
    reader.close()
    assert not (tmp_path / "b.mrec").exists()


def _every_field() -> mr.MolRec:
    ff = ForceFieldSection({"name": "w", "units": {"preset": "real"}, "styles": [{"category": "atom", "style": "full"}]},
                           {block_name("atom", "full"): mr.Block({"name": np.array(["OW"], dtype=object),
                                                                  "mass": np.array([15.999])})})
    return mr.MolRec(
        meta={"title": "all", "creator": {"name": "test"}},
        status={"state": "succeeded"},
        method={"type": "classical", "description": "md", "engine": {"name": "lammps"}},
        frame=atoms_frame(9), system=system_section(), forcefield=ff,
        observables={"e": Observable(np.array([1.0, 2.0]), {"kind": "time_series", "description": "E",
                                                            "time_dependent": True, "unit": "eV"})},
        raw_sections={"vendor": {"vendor/zarr.json": b'{"zarr_format":3,"node_type":"group","attributes":{"k":1}}'}},
        trajectory=[atoms_frame(i) for i in range(2)],
    )


@pytest.mark.parametrize("target", ["all.mrec", "all.mrec.zip", "memory"])
def test_root_layout_5_every_molrec_field_round_trips(tmp_path, target):
    given = _every_field()
    where = bytearray() if target == "memory" else tmp_path / target
    out = mr.write_mrec(where, given)
    source = out if target == "memory" else where
    assert mr.validate(source) == []
    back = mr.read_mrec(source)
    assert back.section_names() == given.section_names() == sorted(
        ["meta", "status", "method", "frame", "system", "forcefield", "observables", "vendor", "trajectory"])
    assert back.meta["title"] == "all" and back.meta["creator"] == {"name": "test"}
    assert back.status == given.status and back.method == given.method
    assert np.array_equal(back.frame.blocks["atoms"].columns["x"], given.frame.blocks["atoms"].columns["x"])
    assert list(back.system.blocks["atoms"].columns["element"]) == ["O", "H", "H"]
    assert back.forcefield.document == given.forcefield.document
    assert back.observables == given.observables
    raw = back.raw_sections["vendor"]
    assert dict(raw.items())["vendor/zarr.json"] == given.raw_sections["vendor"]["vendor/zarr.json"]
    assert isinstance(back.trajectory, MrecReader) and len(back.trajectory) == 2
    back.trajectory.close()


def test_root_layout_5_metrics_travel_with_the_section_they_view(tmp_path):
    path = mr.write_mrec_system(tmp_path / "m.mrec", system_section())
    with mr.MetricsWriter(path) as metrics:
        for step in range(3):
            metrics.log("loss", 1.0 / (step + 1), step=step)
    rec = mr.read_mrec(path)
    assert rec.metrics is not None and "metrics" in rec.raw_sections
    mr.write_mrec(tmp_path / "copy.mrec.zip", rec)
    assert list(mr.read_metrics(tmp_path / "copy.mrec.zip")["loss"].values) == [1.0, 0.5, 1.0 / 3]
    del rec.raw_sections["metrics"]  # the view without its section: refused, not dropped
    with pytest.raises(InvalidValueError, match="read-only view"):
        mr.write_mrec(tmp_path / "view.mrec", rec)


# -- *.mrec.zip targets: every writing door ---------------------------------------------------------
def _frame_door(path):
    return mr.write_mrec_frame(path, atoms_frame(1), system=system_section())


def _system_door(path):
    return mr.write_mrec_system(path, system_section())


def _trajectory_door(path):
    return mr.write_mrec_trajectory(path, [atoms_frame(i) for i in range(3)])


def _molrec_door(path):
    mr.write_mrec(path, mr.MolRec(system=system_section(), trajectory=[atoms_frame(i) for i in range(3)]))
    return path


def _streaming_door(path):
    schema = SequenceSchema.from_frames([atoms_frame(0)])
    with MrecWriter(path, schema, flush_every=2) as writer:
        for i in range(5):
            writer.append(atoms_frame(i))
    return path


DOORS = {"write_mrec_frame": _frame_door, "write_mrec_system": _system_door, "write_mrec_trajectory": _trajectory_door,
         "write_mrec": _molrec_door, "MrecWriter": _streaming_door}


@pytest.mark.parametrize("door", sorted(DOORS))
def test_trajectory_15_a_zip_target_of_every_core_door_is_a_packed_record(tmp_path, door):
    path = tmp_path / "out.mrec.zip"
    assert Path(DOORS[door](path)) == path
    assert_packed(path)


@pytest.mark.parametrize("door", sorted(DOORS))
def test_trajectory_15_a_zip_target_holds_what_the_directory_holds_byte_for_byte(tmp_path, door):
    DOORS[door](tmp_path / "d.mrec")
    (tmp_path / "z").mkdir()
    DOORS[door](tmp_path / "z" / "d.mrec.zip")
    status = "status/zarr.json"  # the run's state records its times: the one entry that differs
    with zipfile.ZipFile(tmp_path / "z" / "d.mrec.zip") as archive:
        names = sorted(archive.namelist())
        expected = sorted(str(p.relative_to(tmp_path / "d.mrec")) for p in (tmp_path / "d.mrec").rglob("*")
                          if p.is_file())
        assert names == expected
        for name in names:
            if name != status:
                assert archive.read(name) == (tmp_path / "d.mrec" / name).read_bytes(), name


@pytest.mark.parametrize("door", ["write_mrec_frame", "write_mrec_trajectory", "write_mrec"])
def test_safety_overwrite_an_existing_packed_record_is_replaced_only_when_asked(tmp_path, door):
    path = tmp_path / "o.mrec.zip"
    DOORS[door](path)
    before = path.read_bytes()
    with pytest.raises(RecordExistsError, match="existing packed record"):
        DOORS[door](path)
    assert path.read_bytes() == before
    mr.write_mrec_system(path, system_section(2), overwrite=True)
    assert mr.section_names(path) == ["meta", "system"]
    assert_packed(path)


def test_trajectory_15_a_directory_or_a_file_under_a_zip_name_is_never_replaced(tmp_path):
    made = tmp_path / "old.mrec.zip"
    mr.write_mrec_system(tmp_path / "rec.mrec", system_section())
    os.rename(tmp_path / "rec.mrec", made)  # a directory under a packed name
    for door in (lambda: mr.write_mrec_frame(made, atoms_frame(0), overwrite=True),
                 lambda: MrecWriter(made, SequenceSchema.from_frames([atoms_frame(0)]))):
        with pytest.raises(StoreError, match="a directory"):
            door()
    assert (made / "zarr.json").is_file()
    text = tmp_path / "notes.mrec.zip"
    text.write_text("notes")
    with pytest.raises(StoreError, match="not a packed record"):
        mr.write_mrec_frame(text, atoms_frame(0), overwrite=True)
    assert text.read_text() == "notes"


def test_trajectory_15_zip_targets_are_deterministic(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        mr.write_mrec(tmp_path / name / "r.mrec.zip", _every_field())
    assert (tmp_path / "a" / "r.mrec.zip").read_bytes() == (tmp_path / "b" / "r.mrec.zip").read_bytes()


def test_trajectory_15_streaming_writer_adds_a_trajectory_to_a_packed_record(tmp_path):
    """What the tools' writers do: ``system/`` first (a packed record), then ``MrecWriter``."""
    path = mr.write_mrec_system(tmp_path / "s.mrec.zip", system_section())
    _streaming_door(path)
    assert_packed(path)
    assert mr.section_names(path) == ["meta", "status", "system", "trajectory"]
    with MrecReader(path) as reader:
        assert len(reader) == 5
    assert mr.read_mrec(path).status["state"] == "succeeded"


def test_trajectory_15_streaming_writer_crash_leaves_the_committed_frames_beside(tmp_path):
    path = tmp_path / "run.mrec.zip"
    writer = MrecWriter(path, SequenceSchema.from_frames([atoms_frame(0)]))
    for i in range(3):
        writer.append(atoms_frame(i))
    writer.flush()
    writer.append(atoms_frame(3))
    writer.abort()  # what a killed process leaves
    assert not path.exists()
    left = [name for name in listing(tmp_path) if name.startswith(".run.mrec.zip.molrec-run-")]
    assert len(left) == 1
    with MrecReader(tmp_path / left[0]) as reader:
        assert len(reader) == 3


def test_trajectory_15_streaming_writer_failing_run_is_packed_with_its_committed_frames(tmp_path):
    path = tmp_path / "fail.mrec.zip"
    with pytest.raises(RuntimeError):
        with MrecWriter(path, SequenceSchema.from_frames([atoms_frame(0)])) as writer:
            writer.append(atoms_frame(0))
            writer.flush()
            writer.append(atoms_frame(1))
            raise RuntimeError("the engine blew up")
    assert mr.read_mrec(path).status["state"] == "failed"
    with MrecReader(path) as reader:
        assert len(reader) == 1
    assert listing(tmp_path) == ["fail.mrec.zip"]


def test_trajectory_11_a_packed_record_is_not_reopened_for_append(tmp_path):
    path = _trajectory_door(tmp_path / "p.mrec.zip")
    with pytest.raises(StoreError, match="unpack it"):
        MrecWriter.open(path)


# -- the command line ---------------------------------------------------------------------------------
def _cli(*args, cwd):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "molrec_raw", *args], cwd=cwd, env=env, capture_output=True,
                          text=True)


def test_trajectory_15_pack_of_a_packed_name_says_so(tmp_path):
    _trajectory_door(tmp_path / "out.mrec.zip")
    done = _cli("pack", "out.mrec.zip", cwd=tmp_path)
    assert done.returncode != 0 and "already named as a packed record" in done.stderr
    assert listing(tmp_path) == ["out.mrec.zip"]  # no out.mrec.mrec.zip
    os.rename(tmp_path / "out.mrec.zip", tmp_path / "keep.zip")
    mr.write_mrec_system(tmp_path / "d.mrec", system_section())
    os.rename(tmp_path / "d.mrec", tmp_path / "d.mrec.zip")  # a directory an older writer made under that name
    done = _cli("pack", "d.mrec.zip", cwd=tmp_path)
    assert done.returncode != 0 and "rename it to d.mrec" in done.stderr
    assert sorted(listing(tmp_path)) == ["d.mrec.zip", "keep.zip"]


def test_trajectory_15_convert_to_a_zip_target_writes_a_packed_record(tmp_path):
    pytest.importorskip("MDAnalysis", reason="convert needs MDAnalysis (pip install 'molrec-raw[mdanalysis]')")
    system = system_section()
    system.meta["units"] = "real"  # convert reads through MDAnalysis, which needs the record's units (§13.5)
    mr.write_mrec(tmp_path / "src.mrec", mr.MolRec(system=system, trajectory=[atoms_frame(i) for i in range(4)]))
    done = _cli("convert", "src.mrec", "out.mrec.zip", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out.mrec.zip").is_file() and zipfile.is_zipfile(tmp_path / "out.mrec.zip")
    assert mr.validate(tmp_path / "out.mrec.zip") == []
    with MrecReader(tmp_path / "out.mrec.zip") as reader:
        assert len(reader) == 4
    assert listing(tmp_path) == ["out.mrec.zip", "src.mrec"]
    again = _cli("convert", "src.mrec", "out.mrec.zip", cwd=tmp_path)
    assert again.returncode != 0 and "--force" in again.stderr
    forced = _cli("convert", "src.mrec", "out.mrec.zip", "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert mr.validate(tmp_path / "out.mrec.zip") == []


# -- the integrations' writers ----------------------------------------------------------------------
def test_trajectory_15_mdanalysis_writer_of_a_zip_name_writes_a_packed_record(tmp_path):
    mda = pytest.importorskip("MDAnalysis", reason="MDAnalysis is not installed (pip install 'molrec-raw[mdanalysis]')")
    import molrec_raw.integrations.mdanalysis  # noqa: F401  (registers the writers)

    u = mda.Universe.empty(3, trajectory=True)
    u.add_TopologyAttr("name", ["O", "H", "H"])
    u.add_TopologyAttr("type", ["O", "H", "H"])
    u.atoms.positions = np.arange(9.0).reshape(3, 3)
    with mda.Writer(str(tmp_path / "w.mrec.zip"), 3) as writer:
        for _ in range(2):
            writer.write(u)
    assert_packed(tmp_path / "w.mrec.zip")
    back = mda.Universe(str(tmp_path / "w.mrec.zip"))
    assert len(back.trajectory) == 2 and np.allclose(back.atoms.positions, np.arange(9.0).reshape(3, 3))
    with pytest.raises(InvalidValueError, match=r"\*.mrec.zip"):
        mda.Writer(str(tmp_path / "plain.zip"), 3)


def test_trajectory_15_ase_write_of_a_zip_name_writes_a_packed_record(tmp_path):
    ase_io = pytest.importorskip("ase.io", reason="ASE is not installed (pip install 'molrec-raw[ase]')")
    from ase import Atoms

    import molrec_raw.integrations.ase  # noqa: F401

    images = [Atoms("H2", positions=[[0, 0, i], [0, 0, i + 0.74]], cell=np.eye(3) * 5, pbc=True) for i in range(3)]
    ase_io.write(tmp_path / "a.mrec.zip", images, format="mrec")
    assert_packed(tmp_path / "a.mrec.zip")
    back = ase_io.read(tmp_path / "a.mrec.zip", index=":", format="mrec")
    assert len(back) == 3 and np.allclose(back[2].positions, images[2].positions)


def test_trajectory_15_mdtraj_save_of_a_zip_name_writes_a_packed_record(tmp_path):
    md = pytest.importorskip("mdtraj", reason="mdtraj is not installed (pip install 'molrec-raw[mdtraj]')")
    from molrec_raw.integrations.mdtraj import load_mrec, save_mrec

    top = md.Topology()
    residue = top.add_residue("HOH", top.add_chain())
    for symbol in "OHH":
        top.add_atom(symbol, md.element.get_by_symbol(symbol), residue)
    xyz = np.random.default_rng(3).random((4, 3, 3)).astype(np.float32)
    save_mrec(md.Trajectory(xyz, top), tmp_path / "t.mrec.zip")
    assert_packed(tmp_path / "t.mrec.zip")
    assert np.allclose(load_mrec(tmp_path / "t.mrec.zip").xyz, xyz, atol=1e-6)


def test_trajectory_15_openmm_reporter_of_a_zip_name_writes_a_packed_record(tmp_path):
    mm = pytest.importorskip("openmm", reason="OpenMM is not installed (pip install 'molrec-raw[openmm]')")
    import openmm.app as app
    import openmm.unit as unit

    from molrec_raw.integrations.openmm import MrecReporter

    topology = app.Topology()
    residue = topology.addResidue("AR", topology.addChain())
    system = mm.System()
    for _ in range(2):
        topology.addAtom("Ar", app.element.argon, residue)
        system.addParticle(39.9)
    simulation = app.Simulation(topology, system, mm.VerletIntegrator(0.001), mm.Platform.getPlatformByName("Reference"))
    simulation.context.setPositions([mm.Vec3(0, 0, 0), mm.Vec3(0.5, 0, 0)] * unit.nanometer)
    with MrecReporter(tmp_path / "o.mrec.zip", 2) as reporter:
        simulation.reporters.append(reporter)
        simulation.step(6)
    assert_packed(tmp_path / "o.mrec.zip")
    with MrecReader(tmp_path / "o.mrec.zip") as reader:
        assert len(reader) == 3


def test_documents_9_1_a_refused_write_to_a_zip_target_leaves_nothing(tmp_path):
    path = tmp_path / "e.mrec.zip"
    with pytest.raises(SpecViolationError):
        mr.write_mrec(path, mr.MolRec())  # no substantive section (documents#9.1): refused before building
    assert listing(tmp_path) == []
    with pytest.raises(MolrecError):
        mr.write_mrec_trajectory(path, [atoms_frame(0), atoms_frame(1, n=4)], steps=[1, 1])
    assert listing(tmp_path) == []


def test_trajectory_15_streaming_writer_failing_before_a_commit_leaves_the_target_as_it_was(tmp_path):
    path = tmp_path / "early.mrec.zip"
    with pytest.raises(RuntimeError):
        with MrecWriter(path, SequenceSchema.from_frames([atoms_frame(0)])):
            raise RuntimeError("the tool failed before its first frame")
    assert listing(tmp_path) == []
    mr.write_mrec_system(path, system_section())
    before = path.read_bytes()
    with pytest.raises(RuntimeError):
        with MrecWriter(path, SequenceSchema.from_frames([atoms_frame(0)])) as writer:
            writer.append(atoms_frame(0))  # buffered, never committed
            raise RuntimeError("again")
    assert path.read_bytes() == before and listing(tmp_path) == ["early.mrec.zip"]


def test_trajectory_15_the_demo_says_it_writes_a_directory(tmp_path):
    from molrec_raw.demo import write_demo

    with pytest.raises(InvalidValueError, match="pack it afterwards"):
        write_demo(tmp_path / "demo.mrec.zip", frames=2, molecules=1)
    assert listing(tmp_path) == []
