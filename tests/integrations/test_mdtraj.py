"""The mdtraj integration: load_mrec/save_mrec in nm with unit-cell vectors as rows (a record
holds them as columns, frame-and-types §10), topology to and from system/ (§13.2-§13.3),
units stated in the record (§13.5)."""
import numpy as np
import pytest

md = pytest.importorskip("mdtraj", reason="mdtraj is not installed (pip install 'molrec-raw[mdtraj]')")

import molrec_raw as mr  # noqa: E402
from molrec_raw.integrations.conventions import MDTRAJ_UNITS, units_of  # noqa: E402
from molrec_raw.integrations.mdtraj import load_mrec, save_mrec  # noqa: E402


def _topology(n_residues=4):
    top = md.Topology()
    chains = [top.add_chain(chain_id="A"), top.add_chain(chain_id="B")]
    for r in range(n_residues):
        residue = top.add_residue("HOH", chains[r * 2 // n_residues], resSeq=r + 1)
        o = top.add_atom("OW", md.element.oxygen, residue)
        for name in ("HW1", "HW2"):
            top.add_bond(o, top.add_atom(name, md.element.hydrogen, residue))
    return top


def _triclinic(frames=6, seed=0):
    rng = np.random.default_rng(seed)
    top = _topology()
    xyz = rng.normal(size=(frames, top.n_atoms, 3)).astype(np.float32)
    lengths = rng.uniform(2.0, 4.0, size=(frames, 3)).astype(np.float32)
    angles = rng.uniform(60.0, 120.0, size=(frames, 3)).astype(np.float32)
    return md.Trajectory(xyz, top, time=np.arange(frames) * 0.25, unitcell_lengths=lengths, unitcell_angles=angles)


def test_round_trip_of_a_triclinic_trajectory_is_exact_10(tmp_path):
    traj = _triclinic()
    path = save_mrec(traj, tmp_path / "t.mrec")
    back = load_mrec(path)
    assert np.array_equal(back.xyz, traj.xyz) and back.xyz.dtype == np.float32
    assert np.array_equal(back.unitcell_lengths, traj.unitcell_lengths)
    assert np.array_equal(back.unitcell_angles, traj.unitcell_angles)
    assert np.array_equal(back.time, traj.time)
    assert back.topology == traj.topology
    assert [c.chain_id for c in back.topology.chains] == ["A", "B"]
    assert [r.resSeq for r in back.topology.residues] == [1, 2, 3, 4]
    # on disk: units nm, lattice vectors as the COLUMNS of box/vectors
    assert units_of(mr.read_mrec_system(path)).same_as(MDTRAJ_UNITS)
    with mr.MrecReader(path) as r:
        np.testing.assert_allclose(r.box_at(3).vectors.T, traj.unitcell_vectors[3], rtol=1e-6)


def test_stride_atom_indices_and_frame_select_as_mdtraj_load(tmp_path):
    traj = _triclinic(frames=9)
    path = save_mrec(traj, tmp_path / "t.mrec")
    strided = load_mrec(path, stride=4, atom_indices=[0, 4, 5])
    assert strided.n_frames == 3 and strided.n_atoms == 3
    assert np.array_equal(strided.xyz, traj.xyz[::4][:, [0, 4, 5]])
    assert np.array_equal(strided.time, traj.time[::4])
    assert [a.name for a in strided.topology.atoms] == ["OW", "HW1", "HW2"]
    last = load_mrec(path, frame=-1)
    assert last.n_frames == 1 and np.array_equal(last.xyz[0], traj.xyz[-1])


def test_a_record_written_by_mdanalysis_loads_in_nm_13_5(tmp_path):
    mda = pytest.importorskip("MDAnalysis", reason="MDAnalysis is not installed")
    pytest.importorskip("MDAnalysisTests", reason="MDAnalysisTests is not installed")
    from MDAnalysisTests.datafiles import GRO, XTC

    import molrec_raw.integrations.mdanalysis  # noqa: F401  (registers MREC)

    u = mda.Universe(GRO, XTC)
    with mda.Writer(str(tmp_path / "a.mrec"), n_atoms=u.atoms.n_atoms) as w:
        for _ in u.trajectory[:3]:
            w.write(u.atoms)
    traj = load_mrec(tmp_path / "a.mrec")
    reference = md.load(XTC, top=GRO)[:3]
    np.testing.assert_allclose(traj.xyz, reference.xyz, atol=1e-6)        # Å on disk -> nm
    np.testing.assert_allclose(traj.unitcell_vectors, reference.unitcell_vectors, rtol=1e-5, atol=1e-6)
    assert traj.n_residues == reference.n_residues
    assert [a.name for a in traj.topology.atoms] == list(u.atoms.names)          # names as MDAnalysis read them


def test_top_argument_replaces_the_record_topology(tmp_path):
    traj = _triclinic(frames=2)
    path = save_mrec(traj, tmp_path / "t.mrec")
    pdb = tmp_path / "top.pdb"
    traj[0].save_pdb(str(pdb))
    assert load_mrec(path, top=str(pdb)).n_atoms == traj.n_atoms
    assert load_mrec(path, top=traj).topology == traj.topology
    with pytest.raises(ValueError, match="atoms"):
        load_mrec(path, top=_topology(n_residues=2))


def test_without_cell_and_with_precision(tmp_path):
    traj = md.Trajectory(np.linspace(0, 1, 3 * 12 * 3, dtype=np.float32).reshape(3, 12, 3), _topology())
    back = load_mrec(save_mrec(traj, tmp_path / "n.mrec", precision=1e-3))
    assert back.unitcell_lengths is None
    np.testing.assert_allclose(back.xyz, traj.xyz, atol=2.0 ** -11 + 1e-7)   # q = 2^-10 nm
