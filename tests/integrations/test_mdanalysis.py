"""The MDAnalysis integration: MDAnalysis's own reader/writer harness (MultiframeReaderTest,
BaseWriterTest with a BaseReference, from MDAnalysisTests) on a record, round trips of the
trajectories MDAnalysisTests ships, format detection, units (frame-and-types §13.5), the
cell as columns (§10), pickling for parallel analysis, refusals."""
import pickle
import warnings

import numpy as np
import pytest

mda = pytest.importorskip("MDAnalysis", reason="MDAnalysis is not installed (pip install 'molrec-raw[mdanalysis]')")
pytest.importorskip("MDAnalysisTests", reason="MDAnalysisTests (MDAnalysis's test harness and data) is not installed")

from MDAnalysisTests.coordinates.base import BaseReference, BaseWriterTest, MultiframeReaderTest  # noqa: E402
from MDAnalysisTests.datafiles import (  # noqa: E402
    COORDINATES_TOPOLOGY, COORDINATES_TRR, DCD, DCD_TRICLINIC, GRO, PSF, PSF_TRICLINIC, XTC,
)

import molrec_raw as mr  # noqa: E402
from molrec_raw.errors import MolrecError  # noqa: E402
from molrec_raw.integrations.conventions import MDANALYSIS_UNITS, Units, units_of  # noqa: E402
from molrec_raw.integrations.mdanalysis import MRECParser, MRECReader, MRECWriter, is_record_path  # noqa: E402
from molrec_raw.integrations.trajectories import TrajectorySink  # noqa: E402
from molrec_raw.record.trajectory import MrecWriter, SequenceSchema  # noqa: E402


def _copy(universe, path, **kwargs):
    with mda.Writer(str(path), n_atoms=universe.atoms.n_atoms, **kwargs) as w:
        for _ in universe.trajectory:
            w.write(universe.atoms)
    return str(path)


@pytest.fixture(scope="module")
def reference_record(tmp_path_factory):
    """MDAnalysisTests' synthetic reference (5 atoms, 5 frames, velocities, forces, a changing
    triclinic box: the TRR copy of it) written as a record by the MREC writer."""
    universe = mda.Universe(COORDINATES_TOPOLOGY, COORDINATES_TRR)
    return _copy(universe, tmp_path_factory.mktemp("reference") / "reference.mrec")


class MRECReference(BaseReference):
    def __init__(self, path):
        super().__init__()
        self.trajectory = path
        self.topology = COORDINATES_TOPOLOGY
        self.reader = MRECReader
        self.writer = MRECWriter
        self.ext = "mrec"
        self.prec = 3  # the synthetic values passed through TRR's nm (as MDAnalysis's TRR reference)
        self.changing_dimensions = True
        for ts in (self.first_frame, self.second_frame, self.last_frame, self.jump_to_frame):
            ts.velocities = ts.positions / 10
            ts.forces = ts.positions / 100

    def iter_ts(self, i):
        ts = super().iter_ts(i)
        ts.velocities = ts.positions / 10
        ts.forces = ts.positions / 100
        return ts


class TestMRECReaderHarness(MultiframeReaderTest):
    """MDAnalysis's reader test base, as its own formats pass it."""

    @pytest.fixture()
    @staticmethod
    def ref(reference_record):
        return MRECReference(reference_record)


class TestMRECWriterHarness(BaseWriterTest):
    """MDAnalysis's writer test base (AtomGroup, Universe, selections, changing boxes)."""

    @pytest.fixture()
    @staticmethod
    def ref(reference_record):
        return MRECReference(reference_record)


# ------------------------------------------------------------------ detection
def test_format_hint_names_records_root_layout_1(tmp_path):
    from MDAnalysis.core._get_readers import get_parser_for, get_reader_for

    for name in ("run.mrec", "run.mrec/", "RUN.MREC", "run.mrec.zip", tmp_path / "x.mrec"):
        assert is_record_path(name), name
        assert get_reader_for(name) is MRECReader and get_parser_for(name) is MRECParser
    for thing in ("run.zip", "run.xtc", "mrec", np.zeros((3, 3)), ["a.mrec", "b.mrec"], None, 3):
        assert not is_record_path(thing)
    assert mda.Writer(str(tmp_path / "w.mrec"), n_atoms=1).__class__ is MRECWriter


def test_universe_opens_a_packed_record_and_a_trailing_slash(tmp_path):
    path = _copy(mda.Universe(PSF, DCD), tmp_path / "adk.mrec")
    packed = mr.pack_mrec_zip(path)
    for name in (str(packed), path + "/"):
        u = mda.Universe(name)
        assert u.atoms.n_atoms == 3341 and len(u.trajectory) == 98


# ------------------------------------------------------------------ topology and coordinates
def test_universe_from_a_record_alone_carries_the_topology_13_2(tmp_path):
    psf = mda.Universe(PSF, DCD)
    u = mda.Universe(_copy(psf, tmp_path / "adk.mrec"))
    for attribute in ("names", "types", "masses", "charges", "resids", "resnames", "segids"):
        assert np.array_equal(getattr(u.atoms, attribute), getattr(psf.atoms, attribute)), attribute
    assert u.atoms.n_residues == psf.atoms.n_residues and u.atoms.n_segments == psf.atoms.n_segments
    for relation in ("bonds", "angles", "dihedrals", "impropers"):
        assert np.array_equal(np.sort(getattr(u, relation).to_indices(), axis=0),
                              np.sort(getattr(psf, relation).to_indices(), axis=0)), relation
    system = mr.read_mrec_system(tmp_path / "adk.mrec")
    assert units_of(system).same_as(MDANALYSIS_UNITS)                  # the units it wrote, in system
    assert system.blocks["atoms"].columns["chain"][0] == "4AKE"        # segids -> chain
    assert system.blocks["bonds"].columns["atomi"].dtype == np.uint64  # 0-based u64 endpoints


def test_round_trip_psf_dcd_positions_dimensions_times(tmp_path):
    source = mda.Universe(PSF, DCD)
    copy = mda.Universe(PSF, _copy(source, tmp_path / "adk.mrec"))
    assert len(copy.trajectory) == len(source.trajectory)
    for a, b in zip(source.trajectory, copy.trajectory):
        assert a.frame == b.frame and np.array_equal(a.positions, b.positions)
        assert b.positions.dtype == np.float32
        assert a.dimensions is None and b.dimensions is None          # this DCD has no cell
        assert b.time == pytest.approx(a.time) and b.data["step"] == a.data["step"]


@pytest.mark.parametrize("topology, trajectory", [(GRO, XTC), (PSF_TRICLINIC, DCD_TRICLINIC)],
                         ids=["gro-xtc", "triclinic-psf-dcd"])
def test_round_trip_real_trajectories_with_cells_10(tmp_path, topology, trajectory):
    source = mda.Universe(topology, trajectory)
    copy = mda.Universe(_copy(source, tmp_path / "t.mrec"))
    assert len(copy.trajectory) == len(source.trajectory)
    for a, b in zip(source.trajectory, copy.trajectory):
        assert np.array_equal(a.positions, b.positions)
        np.testing.assert_allclose(b.dimensions, a.dimensions, rtol=1e-6, atol=1e-4)
        assert b.time == pytest.approx(a.time, abs=1e-6)
    # the record holds lattice vectors as COLUMNS: column k is MDAnalysis's row k
    from MDAnalysis.lib.mdamath import triclinic_vectors
    with mr.MrecReader(tmp_path / "t.mrec") as r:
        source.trajectory[0]
        np.testing.assert_allclose(r.box_at(0).vectors.T, triclinic_vectors(source.dimensions), rtol=1e-6)


def test_velocities_forces_step_and_per_step_meta_in_ts_data(tmp_path):
    path = tmp_path / "m.mrec"
    units = Units("nm", "ps", "eV")
    sink = TrajectorySink(path, 2, units, velocities=True, forces=True, meta_keys=["pe", "temp"])
    for i in range(3):
        x = np.full((2, 3), 0.1 * i)
        sink.append(x, velocities=x + 1, forces=x + 2, cell=np.eye(3) * 2.0, step=10 * i, time=0.002 * i,
                    meta={"pe": -1.0 * i, "temp": 300.0})
    sink.close()
    u = mda.Universe(str(path))
    ts = u.trajectory[2]
    np.testing.assert_allclose(ts.positions, 2.0, rtol=1e-6)                     # 0.2 nm -> 2 Å
    np.testing.assert_allclose(ts.velocities, 12.0, rtol=1e-6)                   # 1.2 nm/ps -> Å/ps
    np.testing.assert_allclose(ts.forces, 2.2 * 96.4853321233 / 10, rtol=1e-6)  # eV/nm -> kJ/(mol Å)
    np.testing.assert_allclose(ts.dimensions, [20, 20, 20, 90, 90, 90])
    assert ts.data["step"] == 20 and ts.time == pytest.approx(0.004)
    assert ts.data["pe"] == pytest.approx(-2 * 96.4853321233) and ts.data["temp"] == 300.0
    assert u.trajectory.dt == pytest.approx(0.002)


def _meta_record(path, frames=40, atoms=6):
    sink = TrajectorySink(path, atoms, Units("nm", "ps", "eV"), meta_keys=["pe"])
    for i in range(frames):
        x = np.arange(atoms * 3, dtype=np.float64).reshape(atoms, 3) * 0.01 + 0.1 * i
        sink.append(x, cell=np.eye(3) * (2.0 + 0.01 * i), step=i, time=0.5 * i, meta={"pe": -1.0 * i})
    sink.close()
    return str(path)


def test_trajectory_9_iteration_reads_meta_and_cells_with_each_batch(tmp_path, monkeypatch):
    """``u.trajectory`` reads a batch's per-step meta and cells in one planned read
    (``read_frames``) with its coordinates: no per-frame read of the record; the values equal
    the record's own series."""
    import molrec_raw.integrations.trajectories as trajectories
    monkeypatch.setattr(trajectories, "BATCH_BYTES", 6 * 8 * 3 * 7)  # batches of 7 frames
    path = _meta_record(tmp_path / "m.mrec")
    calls = {"read_columns": [], "read_frames": []}
    for name in calls:
        original = getattr(mr.MrecReader, name)

        def counted(self, *args, _name=name, _original=original, **kwargs):
            calls[_name].append(np.asarray(args[0]).tolist())
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(mr.MrecReader, name, counted)
    u = mda.Universe(path)
    seen = [(ts.frame, ts.data["pe"], ts.dimensions[0]) for ts in u.trajectory]
    batches = [list(range(k, min(k + 7, 40))) for k in range(0, 40, 7)]
    # one read per batch of 7 frames, and MDAnalysis's rewind to frame 0 after the last one
    assert calls == {"read_columns": [], "read_frames": batches + batches[:1]}
    with mr.MrecReader(path) as r:
        pe = r.meta_series("pe") * 96.4853321233
        sides = [r.box_at(i).vectors[0, 0] * 10 for i in range(len(r))]
    assert [f for f, _, _ in seen] == list(range(40))
    np.testing.assert_allclose([v for _, v, _ in seen], pe)
    np.testing.assert_allclose([d for _, _, d in seen], sides, rtol=1e-6)


@pytest.mark.parametrize("start, stop, step, order, select", [
    (None, None, None, "fac", None), (3, 37, 4, "afc", "index 1 4 5"), (35, 2, -3, "caf", None),
    (0, 40, 13, "fca", "index 0"),
])
def test_timeseries_through_the_engine_equals_mdanalysis_frame_by_frame(tmp_path, monkeypatch, start, stop, step,
                                                                         order, select):
    """``u.trajectory.timeseries`` reads batches through the read engine and equals
    MDAnalysis's own frame-by-frame implementation (``ReaderBase.timeseries``); the current
    frame stays where it was."""
    from MDAnalysis.coordinates.base import ReaderBase
    import molrec_raw.integrations.trajectories as trajectories
    monkeypatch.setattr(trajectories, "BATCH_BYTES", 6 * 8 * 3 * 5)  # batches of 5 frames
    u = mda.Universe(_meta_record(tmp_path / "t.mrec"))
    group = None if select is None else u.select_atoms(select)
    u.trajectory[9]
    got = u.trajectory.timeseries(atomgroup=group, start=start, stop=stop, step=step, order=order)
    assert u.trajectory.ts.frame == 9
    want = ReaderBase.timeseries(u.trajectory, atomgroup=group, start=start, stop=stop, step=step, order=order)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="Unrecognized order"):
        u.trajectory.timeseries(order="fxc")
    with pytest.raises(ValueError, match="Repeated or missing"):
        u.trajectory.timeseries(order="ffc")


def test_record_without_units_is_refused_unless_the_caller_states_them_13_5(tmp_path):
    """§13.5: coordinates have no default unit — a reader needing one must find it declared;
    the door refuses, naming the unit, and reads with the units the caller states."""
    path = tmp_path / "plain.mrec"
    frame = mr.Frame({}, {"atoms": mr.Block({c: np.array([1.0, 2.0]) for c in "xyz"})})
    mr.write_mrec_trajectory(path, [frame])
    with pytest.raises(MolrecError, match="states no length unit.*assume_units"):
        mda.Universe(str(path))
    nm = mda.Universe(str(path), assume_units={"length": "nm"}, to_guess=())
    assert nm.atoms.positions[1, 0] == pytest.approx(20.0)
    assert mda.Universe(str(path), assume_units={"length": "angstrom"}).atoms.positions[1, 0] == 2.0


def test_frame_only_record_is_one_frame_without_cell(tmp_path):
    atoms = mr.Block({"x": np.arange(3.0), "y": np.zeros(3), "z": np.zeros(3), "name": np.array(["O", "H", "H"], object),
                      "element": np.array(["O", "H", "H"], object)})
    mr.write_mrec_frame(tmp_path / "w.mrec", mr.Frame({"units": mr.MetaValue("json", {"length": "angstrom"})},
                                                      {"atoms": atoms}))
    u = mda.Universe(str(tmp_path / "w.mrec"))
    assert len(u.trajectory) == 1 and list(u.atoms.names) == ["O", "H", "H"]
    assert u.dimensions is None and u.atoms.positions[2, 0] == 2.0


def test_writer_precision_rounds_positions_frame_and_types_8(tmp_path):
    source = mda.Universe(PSF, DCD)
    source.trajectory[0]
    path = _copy(source, tmp_path / "p.mrec", precision=1e-3)
    copy = mda.Universe(path)
    quantum = 2.0 ** -10                                                # p = 1e-3 -> q = 2^(e-1), e = -9
    np.testing.assert_allclose(copy.atoms.positions, source.trajectory[0].positions, atol=quantum / 2 + 1e-5)
    assert not np.array_equal(copy.atoms.positions, source.atoms.positions)


def test_pickled_reader_reopens_by_path_and_parallel_analysis_matches_serial(tmp_path):
    from MDAnalysis.analysis import rms

    u = mda.Universe(PSF, _copy(mda.Universe(PSF, DCD), tmp_path / "adk.mrec"))
    u.trajectory[10]
    state = u.trajectory.__getstate__()
    assert state["_src"] is None and state["_batch"] is None           # no open handle pickled
    clone = pickle.loads(pickle.dumps(u.trajectory))
    assert clone.ts.frame == 10 and np.array_equal(clone.ts.positions, u.trajectory.ts.positions)
    assert clone.next().frame == 11
    serial = rms.RMSD(u, select="name CA").run().results.rmsd
    # MDAnalysis's pool takes the default start method; forkserver workers inherit nothing (the
    # universe reaches them pickled, its reader by path) and the suite's threads are not forked
    import multiprocessing
    previous = multiprocessing.get_start_method(allow_none=True)
    multiprocessing.set_start_method("forkserver", force=True)
    try:
        parallel = rms.RMSD(u, select="name CA").run(backend="multiprocessing", n_workers=2).results.rmsd
    finally:
        multiprocessing.set_start_method(previous, force=True)
    assert np.array_equal(serial, parallel)


def test_changing_atom_count_is_refused(tmp_path):
    path = tmp_path / "ragged.mrec"
    schema = SequenceSchema()
    for c in "xyz":
        schema.declare_column("atoms", c, "f64")
    with MrecWriter(path, schema) as w:
        for n in (3, 3, 4):
            w.append(mr.Frame({}, {"atoms": mr.Block({c: np.zeros(n) for c in "xyz"})}))
    with pytest.raises(MolrecError, match="row count.*one atom count"):
        mda.Universe(str(path), assume_units={})


def test_writer_refuses_steps_that_do_not_increase_and_wrong_sizes(tmp_path):
    u = mda.Universe(PSF, DCD)
    with pytest.raises(ValueError, match="does not follow"):
        with MRECWriter(tmp_path / "s.mrec", u.atoms.n_atoms) as w:
            w.write(u.atoms)
            w.write(u.atoms)                                               # the same step again
    with pytest.raises(ValueError, match="3341"):
        with MRECWriter(tmp_path / "n.mrec", 5) as w:
            w.write(u.atoms)


def test_a_cell_the_tool_would_rotate_is_named_frame_and_types_10(tmp_path):
    """MDAnalysis keeps lengths and angles only: a cell whose vectors are not a along x, b in
    the xy plane (an fcc primitive cell, as ASE writes it) comes back rotated against the
    positions — said in one warning, not silently."""
    frame = mr.Frame({}, {"atoms": mr.Block({c: np.zeros(1) for c in "xyz"})},
                     mr.Box(np.array([[0.0, 1.8, 1.8], [1.8, 0.0, 1.8], [1.8, 1.8, 0.0]]).T.copy()))
    mr.write_mrec_frame(tmp_path / "fcc.mrec", mr.Frame({"units": mr.MetaValue("json", {"length": "angstrom"})},
                                                        frame.blocks, frame.box))
    with pytest.warns(UserWarning, match="rotated against the positions"):
        mda.Universe(str(tmp_path / "fcc.mrec"), to_guess=())
    upright = mr.Frame({"units": mr.MetaValue("json", {"length": "angstrom"})}, frame.blocks,
                       mr.Box(np.diag([3.0, 4.0, 5.0])))
    mr.write_mrec_frame(tmp_path / "box.mrec", upright)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        mda.Universe(str(tmp_path / "box.mrec"), to_guess=())
