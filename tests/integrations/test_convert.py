"""``molrec-raw convert``: formats MDAnalysis reads into a record and back (XTC within XTC's
precision, DCD exact at float32), frame selection, precision, one-line errors with exit 2,
a progress bar on a terminal and silence on a pipe, memory that does not grow with the
trajectory's length."""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

mda = pytest.importorskip("MDAnalysis", reason="MDAnalysis is not installed (pip install 'molrec-raw[mdanalysis]')")
pytest.importorskip("MDAnalysisTests", reason="MDAnalysisTests (MDAnalysis's test data) is not installed")

from MDAnalysisTests.datafiles import DCD, GRO, LAMMPSDUMP, NCDF, PRMncdf, PSF, TRR, XTC, XYZ  # noqa: E402

import molrec_raw as mr  # noqa: E402
from molrec_raw.cli import main  # noqa: E402
from molrec_raw.record.trajectory import MrecWriter, SequenceSchema  # noqa: E402
from molrec_raw.integrations.conventions import start_trajectory  # noqa: E402

XTC_PRECISION_ANGSTROM = 0.01  # XTC stores 1/1000 nm


def _cli(*args):
    return main(["convert", *map(str, args)])


def test_xtc_to_record_to_xtc_within_xtc_precision(tmp_path):
    assert _cli(XTC, tmp_path / "a.mrec", "--topology", GRO) == 0
    assert _cli(tmp_path / "a.mrec", tmp_path / "b.xtc") == 0
    source, copy = mda.Universe(GRO, XTC), mda.Universe(GRO, str(tmp_path / "b.xtc"))
    assert len(copy.trajectory) == len(source.trajectory) == 10
    for a, b in zip(source.trajectory, copy.trajectory):
        np.testing.assert_allclose(b.positions, a.positions, atol=XTC_PRECISION_ANGSTROM)
        np.testing.assert_allclose(b.dimensions, a.dimensions, rtol=1e-6)
        assert b.time == pytest.approx(a.time)
    with mr.MrecReader(tmp_path / "a.mrec") as r:  # the record keeps XTC's steps (MDAnalysis < 2.10 writes its own)
        assert r.step == [ts.data["step"] for ts in source.trajectory]


def test_dcd_to_record_to_dcd_is_exact_at_float32(tmp_path, capsys):
    assert _cli(DCD, tmp_path / "a.mrec", "--topology", PSF) == 0
    assert _cli(tmp_path / "a.mrec", tmp_path / "b.dcd") == 0
    out, err = capsys.readouterr()
    assert "98 frames of 3341 atoms" in out and "frames/s" in out
    assert "[" not in err                                                 # no bar: stderr is not a terminal
    source, copy = mda.Universe(PSF, DCD), mda.Universe(PSF, str(tmp_path / "b.dcd"))
    for a, b in zip(source.trajectory, copy.trajectory):
        assert np.array_equal(a.positions, b.positions)


@pytest.mark.parametrize("topology, trajectory", [(GRO, TRR), (PRMncdf, NCDF), (None, XYZ)], ids=["trr", "netcdf", "xyz"])
def test_other_formats_mdanalysis_reads_become_records(tmp_path, topology, trajectory):
    args = [trajectory, tmp_path / "r.mrec", "--frames", "0:4"] + ([] if topology is None else ["--topology", topology])
    assert _cli(*args) == 0
    source = mda.Universe(trajectory) if topology is None else mda.Universe(topology, trajectory)
    copy = mda.Universe(str(tmp_path / "r.mrec"))
    assert len(copy.trajectory) == 4
    for a, b in zip(source.trajectory[:4], copy.trajectory):
        assert np.array_equal(a.positions, b.positions)
        if a.has_velocities:
            assert np.array_equal(a.velocities, b.velocities)


def test_frames_stride_and_precision_select_and_round(tmp_path):
    assert _cli(DCD, tmp_path / "s.mrec", "--topology", PSF, "--frames", "10:40", "--stride", "5",
                "--precision", "1e-3") == 0
    with mr.MrecReader(tmp_path / "s.mrec") as r:
        source = mda.Universe(PSF, DCD)
        assert len(r) == 6 and r.step == [source.trajectory[i].data["step"] for i in range(10, 40, 5)]
        assert r.schema.block_spec("atoms").columns["x"].precision == 1e-3
    assert _cli(tmp_path / "s.mrec", tmp_path / "one.pdb", "--frames", "-1") == 0
    assert len(mda.Universe(str(tmp_path / "one.pdb")).trajectory) == 1


def test_a_format_whose_extension_misleads_takes_format(tmp_path, capsys):
    assert _cli(LAMMPSDUMP, tmp_path / "l.mrec") == 2
    assert "--topology" in capsys.readouterr().err
    assert _cli(LAMMPSDUMP, tmp_path / "l.mrec", "--format", "LAMMPSDUMP") == 0
    assert len(mda.Universe(str(tmp_path / "l.mrec")).trajectory) == len(
        mda.Universe(LAMMPSDUMP, format="LAMMPSDUMP").trajectory)


def _ragged(path):
    schema = SequenceSchema()
    for c in "xyz":
        schema.declare_column("atoms", c, "f64")
    with MrecWriter(path, schema) as w:
        for n in (3, 4):
            w.append(mr.Frame({}, {"atoms": mr.Block({c: np.zeros(n) for c in "xyz"})}))
    return path


@pytest.mark.parametrize("case", ["unknown-format", "missing-topology", "ragged", "missing-file", "precision-elsewhere",
                                  "single-frame-format"])
def test_errors_are_one_line_with_exit_status_2(tmp_path, capsys, case):
    plain = tmp_path / "plain.mrec"
    frame = mr.Frame({}, {"atoms": mr.Block({c: np.zeros(2) for c in "xyz"})})
    with start_trajectory(plain, mr.Frame({"units": mr.MetaValue("json", {"length": "nm"})}),
                          mr.SequenceSchema.from_frame(frame)) as w:
        w.append(frame)
        w.append(frame)
    args = {
        "unknown-format": (plain, tmp_path / "out.xyzzy"),
        "missing-topology": (plain, tmp_path / "out.pdb", "--frames", "0"),
        "ragged": (_ragged(tmp_path / "ragged.mrec"), tmp_path / "out.dcd"),
        "missing-file": (tmp_path / "absent.xtc", tmp_path / "out.mrec"),
        "precision-elsewhere": (DCD, tmp_path / "out.dcd", "--topology", PSF, "--precision", "0.01"),
        "single-frame-format": (DCD, tmp_path / "out.gro", "--topology", PSF),
    }[case]
    assert _cli(*args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith("molrec-raw convert: error: "), err
    expected = {"unknown-format": "XYZZY", "missing-topology": "--topology", "ragged": "atom count",
                "missing-file": "no such file", "precision-elsewhere": "record output",
                "single-frame-format": "one frame"}[case]
    assert expected in errors[0]


def test_progress_bar_on_a_terminal_silence_on_a_pipe(tmp_path):
    import pty

    command = [sys.executable, "-m", "molrec_raw", "convert", DCD, str(tmp_path / "t.mrec"), "--topology", PSF]
    piped = subprocess.run(command, capture_output=True, text=True, check=True)
    assert "convert [" not in piped.stderr and "98 frames" in piped.stdout
    master, slave = pty.openpty()
    try:
        subprocess.run(command[:-3] + [str(tmp_path / "u.mrec")] + command[-2:], stdout=subprocess.PIPE,
                       stderr=slave, check=True)
        drawn = os.read(master, 1 << 16).decode()
    finally:
        os.close(slave)
        os.close(master)
    assert "convert [" in drawn and "100.0%" in drawn


_PEAK = """
import resource, sys
from molrec_raw.cli import main
assert main(["convert", sys.argv[1], sys.argv[2]]) == 0
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def test_convert_streams_memory_does_not_grow_with_frames(tmp_path):
    n_atoms = 1000
    rng = np.random.default_rng(0)
    universe = mda.Universe.empty(n_atoms, trajectory=True)
    peaks = {}
    for frames in (300, 3000):
        dcd = tmp_path / f"{frames}.dcd"
        with mda.Writer(str(dcd), n_atoms) as w:
            for _ in range(frames):
                universe.atoms.positions = rng.uniform(0, 30, size=(n_atoms, 3))
                w.write(universe)
        run = subprocess.run([sys.executable, "-c", _PEAK, str(dcd), str(tmp_path / f"{frames}.mrec")],
                             capture_output=True, text=True, check=True)
        peaks[frames] = int(run.stdout.split()[-1]) / 1024  # MiB (ru_maxrss is KiB on Linux)
    grown = 2700 * n_atoms * 3 * 8 / 2**20                    # what holding the extra frames would cost (f64)
    assert peaks[3000] - peaks[300] < grown / 4, (peaks, grown)


def test_a_record_stating_no_units_is_refused_unless_assumed_13_5(tmp_path):
    """convert reads a record through MDAnalysis (Å): a record whose length unit is stated
    nowhere is refused, naming it; ``assume_units`` states it and the values convert."""
    from molrec_raw.errors import MolrecError
    from molrec_raw.integrations.convert import convert
    plain = tmp_path / "plain.mrec"
    mr.write_mrec_trajectory(plain, [mr.Frame({}, {"atoms": mr.Block({c: np.ones(2) for c in "xyz"})})] * 2)
    with pytest.raises(MolrecError, match="states no length unit"):
        convert(plain, tmp_path / "out.dcd")
    assert not (tmp_path / "out.dcd").exists()
    assert convert(plain, tmp_path / "out.dcd", assume_units={"length": "nm"}).frames == 2
    assert mda.Universe(str(tmp_path / "out.dcd")).atoms.positions[0, 0] == pytest.approx(10.0)


def test_13_5_convert_units_states_what_the_source_record_leaves_unstated(tmp_path, capsys):
    """frame-and-types §13.5: a record without a length unit is refused, naming the flag that
    states it; ``--units length=nm`` converts from nm (MDAnalysis reads in angstrom); --units on
    a source that is not a record is refused."""
    system = mr.Frame({}, {"atoms": mr.Block({"element": np.array(["O", "H", "H"], dtype=object)})})
    frames = [mr.Frame({}, {"atoms": mr.Block({c: np.arange(3.0) + i for c in "xyz"})}) for i in range(2)]
    src = tmp_path / "src.mrec"
    mr.write_mrec(src, mr.MolRec(system=system, trajectory=frames))
    assert main(["convert", str(src), str(tmp_path / "a.xyz")]) == 2
    err = capsys.readouterr().err
    assert "states no length unit" in err and "--units length=nm" in err and "assume_units" not in err
    assert main(["convert", str(src), str(tmp_path / "a.xyz"), "--units", "length=nm"]) == 0
    u = mda.Universe(str(tmp_path / "a.xyz"))
    assert np.allclose(u.trajectory[1].positions[2], [30.0, 30.0, 30.0])  # 3 nm = 30 angstrom
    assert main(["convert", str(tmp_path / "a.xyz"), str(tmp_path / "b.mrec"), "--units", "length=nm"]) == 2
    assert "--units states the units a source record" in capsys.readouterr().err


@pytest.mark.parametrize("topology, trajectory, formula", [
    (PSF, DCD, "C1040H1685N289O320S7"),
    (GRO, XTC, "C1040H23853N289Na4O11404S7X11084"),  # 11084 TIP4P virtual sites (MW): no element, ASE's X
])
def test_13_2_convert_supplies_elements_mdanalysis_guesses_and_says_so(tmp_path, topology, trajectory, formula):
    """frame-and-types#13.2: a PSF or GRO names no element; convert stores the ones MDAnalysis's
    guesser makes of the atom types (periodic-table spelling, "" where it cannot guess), records
    under system's 'guessed' meta key that they were guessed, and ASE reads the record."""
    pytest.importorskip("ase", reason="the record is read back through ASE")
    import ase.io
    import molrec_raw.integrations.ase  # noqa: F401
    target = tmp_path / "g.mrec"
    assert _cli(trajectory, target, "--topology", topology, "--frames", "0:2") == 0
    system = mr.read_mrec_system(target)
    elements = system.blocks["atoms"].columns["element"]
    guessed = system.meta["guessed"]
    guessed = guessed.value if isinstance(guessed, mr.MetaValue) else guessed
    assert guessed["element"]["from"] == "atom types" and guessed["element"]["by"].startswith("MDAnalysis ")
    assert guessed["element"]["unguessed"] == int(np.count_nonzero(elements == ""))
    image = ase.io.read(str(target), index=0, format="mrec")
    assert image.get_chemical_formula() == formula
    assert len(image) == len(elements)


def test_13_2_a_source_with_elements_is_not_guessed(tmp_path):
    """Elements the source names are kept as they are (no guess over them), and nothing is
    marked guessed."""
    u = mda.Universe.empty(3, n_residues=1, atom_resindex=[0, 0, 0], trajectory=True)
    u.add_TopologyAttr("names", ["OW", "HW1", "HW2"])
    u.add_TopologyAttr("elements", ["O", "H", "H"])
    u.add_TopologyAttr("types", ["XX", "XX", "XX"])  # a guess from types would say otherwise
    u.atoms.positions = np.arange(9.0).reshape(3, 3)
    with warnings.catch_warnings():  # MDAnalysis names each PDB field left at its default
        warnings.simplefilter("ignore", UserWarning)
        u.atoms.write(str(tmp_path / "w.pdb"))
    assert _cli(tmp_path / "w.pdb", tmp_path / "w.mrec") == 0
    system = mr.read_mrec_system(tmp_path / "w.mrec")
    assert "guessed" not in system.meta
    assert system.blocks["atoms"].columns["element"].tolist() == ["O", "H", "H"]
