"""Records in memory against the reference: molrs reads the packed record our doors write into
a ``bytearray``, and we read the ``bytearray`` molrs's ``write_mrec`` fills — values compared
bit for bit (zarr-v3-subset#9.2, trajectory#15)."""
from __future__ import annotations

import numpy as np
import pytest

molrs = pytest.importorskip("molrs", reason="molrs (molcrafts-molrs, Python >= 3.12) is the reference implementation")
from molrs.io import write_mrec as molrs_write_mrec  # noqa: E402
from molrs.io.mrec import MrecFile, MrecReader as MolrsReader  # noqa: E402

import molrec_raw as mr  # noqa: E402
from molrec_raw.record.trajectory import MrecReader  # noqa: E402

CELL = np.array([[9.0, 1.0, 0.0], [0.0, 8.0, 0.5], [0.0, 0.0, 7.0]])  # lattice vectors as columns
ORIGIN = np.array([1.0, -2.0, 3.0])
ELEMENTS = ["O", "H", "H"]


def positions(i: int) -> np.ndarray:
    rng = np.random.default_rng(i)
    return rng.normal(size=(3, 3)) * 10.0 ** rng.integers(-3, 3)


def ours(i: int) -> mr.Frame:
    x, y, z = positions(i)
    return mr.Frame({}, {"atoms": mr.Block({"x": x, "y": y, "z": z})}, mr.Box(CELL, ORIGIN))


def theirs(i: int) -> "molrs.Frame":
    x, y, z = positions(i)
    return molrs.Frame({"atoms": {"x": x, "y": y, "z": z}}, box=molrs.Box(CELL, origin=ORIGIN))


def bitwise(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def test_trajectory_15_molrs_reads_the_bytes_our_doors_write():
    system = mr.Frame({}, {"atoms": mr.Block({"element": np.array(ELEMENTS, dtype=object)})})
    frames = [ours(i) for i in range(4)]
    packed = mr.write_mrec(bytearray(), mr.MolRec(meta={"title": "ours", "n": 3}, system=system, frame=ours(9),
                                                  trajectory=mr.Trajectory(frames, np.array([0, 10, 20, 40]),
                                                                           np.array([0.0, 0.5, 1.0, 2.0]))))
    record = MrecFile(bytes(packed))
    assert sorted(record.sections()) == ["frame", "meta", "system", "trajectory"]
    assert record.meta()["title"] == "ours" and record.meta()["n"] == 3
    snapshot = record.frame()
    for k, column in enumerate("xyz"):
        assert bitwise(snapshot["atoms"][column], positions(9)[k])
    assert bitwise(snapshot.box.matrix, CELL) and bitwise(snapshot.box.origin, ORIGIN)
    assert list(record.system()["atoms"]["element"]) == ELEMENTS
    reader = MolrsReader(bytes(packed))
    assert len(reader) == 4 and list(reader.step) == [0, 10, 20, 40] and list(reader.time) == [0.0, 0.5, 1.0, 2.0]
    for i in range(4):
        for k, column in enumerate("xyz"):
            assert bitwise(reader[i]["atoms"][column], positions(i)[k])


def test_trajectory_15_we_read_the_bytearray_molrs_writes():
    buffer = bytearray()
    trajectory = molrs.Trajectory([theirs(i) for i in range(5)], step=np.array([1, 2, 3, 5, 8]),
                                  time=np.array([0.1, 0.2, 0.3, 0.5, 0.8]))
    molrs_write_mrec(buffer, meta={"title": "theirs", "tags": ["a", "b"]}, frame=theirs(9), trajectory=trajectory)
    assert buffer[:4] == b"PK\x03\x04"
    for source in (buffer, bytes(buffer), memoryview(buffer)):
        assert mr.validate(source) == []
        assert mr.read_mrec_meta(source) == {"title": "theirs", "tags": ["a", "b"]}
        snapshot = mr.read_mrec_frame(source)
        for k, column in enumerate("xyz"):
            assert bitwise(snapshot.blocks["atoms"].columns[column], positions(9)[k])
        assert bitwise(snapshot.box.vectors, CELL) and bitwise(snapshot.box.origin, ORIGIN)
        with MrecReader(source) as reader:
            assert list(reader.step) == [1, 2, 3, 5, 8]
            assert bitwise(np.asarray(reader.time), np.array([0.1, 0.2, 0.3, 0.5, 0.8]))
            for i in range(5):
                for k, column in enumerate("xyz"):
                    assert bitwise(reader[i].blocks["atoms"].columns[column], positions(i)[k])


def test_trajectory_15_the_same_bytes_on_disk_read_both_ways(tmp_path):
    """A packed record in memory is the ``*.mrec.zip`` file: each side writes bytes, the
    other opens them as a file."""
    ours_zip = mr.write_mrec_trajectory(tmp_path / "ours.mrec.zip", [ours(i) for i in range(3)])
    with MolrsReader(ours_zip) as reader:
        assert len(reader) == 3 and bitwise(reader[2]["atoms"]["y"], positions(2)[1])
    buffer = bytearray()
    molrs_write_mrec(buffer, meta={}, frame=theirs(4))
    (tmp_path / "theirs.mrec.zip").write_bytes(buffer)
    assert mr.validate(tmp_path / "theirs.mrec.zip") == []
    assert bitwise(mr.read_mrec_frame(tmp_path / "theirs.mrec.zip").blocks["atoms"].columns["z"], positions(4)[2])
