"""Read-ahead in the MDAnalysis and mdtraj readers (issue 37): the next batch read on a
thread while the tool works on the current one — the values of reading without it, no
thread left behind, a batch read ahead handed over only to the call that asks for it."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, List

import numpy as np
import pytest

import molrec_raw as mr
import molrec_raw.integrations.trajectories as trajectories
from molrec_raw.integrations.conventions import Units
from molrec_raw.integrations.trajectories import TrajectorySink, TrajectorySource

ATOMS = 6


def ahead_threads() -> List[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "molrec-read-ahead" and t.is_alive()]


def record(path: Path, frames: int = 40) -> str:
    sink = TrajectorySink(path, ATOMS, Units("nm", "ps", "eV"), meta_keys=["pe"])
    for i in range(frames):
        x = np.arange(ATOMS * 3, dtype=np.float64).reshape(ATOMS, 3) * 0.01 + 0.1 * i
        sink.append(x, cell=np.eye(3) * (2.0 + 0.01 * (i // 5)), step=i, time=0.5 * i, meta={"pe": -1.0 * i})
    sink.close()
    return str(path)


@pytest.fixture
def batches_of_7(monkeypatch: pytest.MonkeyPatch) -> List[Any]:
    """Batches of 7 frames; the read-aheads made are listed."""
    monkeypatch.setattr(trajectories, "BATCH_BYTES", ATOMS * 8 * 3 * 7)
    made: List[Any] = []

    class Counted(trajectories.ReadAhead):  # type: ignore[name-defined,misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            made.append(self)
            super().__init__(*args, **kwargs)
    monkeypatch.setattr(trajectories, "ReadAhead", Counted)
    return made


def test_trajectory_9_source_hands_a_batch_read_ahead_only_to_the_call_asking_for_it(
        tmp_path: Path, batches_of_7: List[Any]) -> None:
    """``TrajectorySource.read(..., ahead=)``: the next call for exactly those frames gets
    the batch read ahead (equal to reading it now); a call for other frames drops it and
    reads what it asks for; ``close`` leaves no thread."""
    source = TrajectorySource(record(tmp_path / "m.mrec"))
    first = source.read(range(0, 7), ahead=range(7, 14))
    assert len(batches_of_7) == 1
    second = source.read(range(7, 14))
    fresh = source._read_now(np.arange(7, 14), ("x", "y", "z"))
    for name in ("x", "y", "z"):
        assert np.array_equal(second.columns[name], fresh.columns[name])
    assert source.meta(8)["pe"] == -8.0 and first.frames.tolist() == list(range(7))
    source.read(range(0, 7), ahead=range(7, 14))
    other = source.read([30, 31])  # not what was read ahead: dropped, these read now
    assert other.frames.tolist() == [30, 31] and source.meta(31)["pe"] == -31.0 and source._ahead is None
    source.read(range(0, 7), ahead=range(7, 14))
    source.close()
    assert ahead_threads() == [] and len(batches_of_7) == 3


def test_trajectory_9_mdanalysis_iteration_reads_ahead_with_the_same_values(tmp_path: Path,
                                                                            batches_of_7: List[Any]) -> None:
    """``for ts in u.trajectory`` over 40 frames in batches of 7: a read-ahead per batch
    from the second on (none at the rewind to frame 0), the positions, cells, meta and times
    of the record; a ``break`` and ``close`` leave no thread."""
    mda = pytest.importorskip("MDAnalysis", reason="MDAnalysis is not installed (pip install 'molrec-raw[mdanalysis]')")
    import molrec_raw.integrations.mdanalysis  # noqa: F401

    path = record(tmp_path / "m.mrec")
    u = mda.Universe(path)
    seen = [(ts.frame, ts.positions.copy(), ts.dimensions[0], ts.data["pe"], ts.time) for ts in u.trajectory]
    assert len(batches_of_7) == 4  # batches 7-13, ..., 35-39 read ahead while the one before was handed out
    with mr.MrecReader(path) as r:
        for frame, positions, side, pe, time in seen:
            want = r[frame]
            xyz = np.stack([want.blocks["atoms"][c] for c in ("x", "y", "z")], axis=1) * 10.0  # nm -> Å
            assert np.allclose(positions, xyz.astype(np.float32), rtol=1e-6)
            assert side == pytest.approx(want.box.vectors[0, 0] * 10.0, rel=1e-6)
            assert pe == pytest.approx(-96.4853321233 * frame) and time == pytest.approx(0.5 * frame)
    for ts in u.trajectory:
        if ts.frame == 10:
            break
    u.trajectory.close()
    assert ahead_threads() == []


def test_trajectory_9_mdtraj_load_reads_ahead_with_the_same_values(tmp_path: Path, batches_of_7: List[Any]) -> None:
    """``load_mrec`` (every frame, and a stride) reads its batches ahead: the coordinates of
    the record, no thread afterwards."""
    pytest.importorskip("mdtraj", reason="mdtraj is not installed (pip install 'molrec-raw[mdtraj]')")
    from molrec_raw.integrations.mdtraj import load_mrec

    path = record(tmp_path / "m.mrec")
    with mr.MrecReader(path) as r:
        want = np.stack([np.stack([f.blocks["atoms"][c] for c in ("x", "y", "z")], axis=1)
                         for f in r.read_frames(slice(None))])
    traj = load_mrec(path)
    assert len(batches_of_7) == 5 and np.allclose(traj.xyz, want.astype(np.float32))
    strided = load_mrec(path, stride=3)
    assert np.allclose(strided.xyz, want[::3].astype(np.float32))
    assert ahead_threads() == []
