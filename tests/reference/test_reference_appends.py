"""Appends by another conforming writer, both directions (trajectory §10–§11, the reopen
rule; spec-notes/zarr.md "Positional landings", spec-notes/record.md): molrs 0.19
(``molrs.io.mrec.MrecWriter.open``) continues a trajectory this package wrote, and
``MrecWriter.open`` here continues one molrs wrote — with flushes inside each writer's run,
after a writer killed right after a flush, with ragged blocks and a cell per frame.  After
every hand-over both implementations read every frame, values compared bit for bit, and
``validate`` reports nothing.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Sequence

import numpy as np
import pytest

import molrec_raw as mr
from molrec_raw.record.model import Block, Box, Frame

molrs = pytest.importorskip("molrs", reason="molrs (the reference implementation) ships wheels for Python >= 3.12 "
                                            "only: the cross-writer append tests need it")
from molrs.io import mrec as molrs_mrec  # noqa: E402

COLUMNS = "xyz"


class Run:
    """The frames of one trajectory: per frame its atom count, its values, its cell and step."""

    def __init__(self, sizes: Sequence[int], cells: bool, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.values: List[Dict[str, np.ndarray]] = [{c: rng.normal(size=n) * 10.0 for c in COLUMNS} for n in sizes]
        for frame in self.values:  # the bit patterns a float comparison would hide
            frame["x"][:2] = [-0.0, 5e-324][:len(frame["x"][:2])]
        self.cells = [self.cell(i) for i in range(len(sizes))] if cells else None
        self.steps = [10 * i + 3 for i in range(len(sizes))]

    @staticmethod
    def cell(i: int) -> np.ndarray:
        return np.array([[10.0 + i, 0.5, 0.0], [0.0, 11.0, 0.25 * i], [0.0, 0.0, 12.0 + 1e-9 * i]])

    def __len__(self) -> int:
        return len(self.values)

    def ours(self, i: int) -> Frame:
        box = None if self.cells is None else Box(self.cells[i])
        return Frame({}, {"atoms": Block(dict(self.values[i]))}, box)

    def theirs(self, i: int) -> Any:
        if self.cells is None:
            return molrs.Frame({"atoms": dict(self.values[i])})
        return molrs.Frame({"atoms": dict(self.values[i])}, box=molrs.Box(self.cells[i]))


def our_schema() -> mr.SequenceSchema:
    schema = mr.SequenceSchema().declare_block("atoms")
    for c in COLUMNS:
        schema.declare_column("atoms", c, "f64")
    return schema


def their_schema() -> Any:
    schema = molrs_mrec.SequenceSchema.from_frames([])
    schema.declare_block("atoms")
    for c in COLUMNS:
        schema.declare_column("atoms", c, "f64")
    return schema


def append(writer: Any, run: Run, frames: range, flush_at: Sequence[int], theirs: bool) -> None:
    """Append ``frames`` of ``run``; ``flush()`` after each frame in ``flush_at``."""
    for i in frames:
        writer.append(run.theirs(i) if theirs else run.ours(i), step=run.steps[i])
        if i in flush_at:
            writer.flush()


def ours_extends(path: Path, run: Run, frames: range, flush_at: Sequence[int] = ()) -> None:
    writer = mr.MrecWriter.open(path) if (path / "trajectory").exists() else mr.MrecWriter(path, our_schema())
    append(writer, run, frames, flush_at, theirs=False)
    writer.close()


def molrs_extends(path: Path, run: Run, frames: range, flush_at: Sequence[int] = ()) -> None:
    if (path / "trajectory").exists():
        writer = molrs_mrec.MrecWriter.open(path)
        assert writer.committed == frames.start
    else:
        writer = molrs_mrec.MrecWriter(path, their_schema(), meta={"creator": {"name": "molrs"}})
    append(writer, run, frames, flush_at, theirs=True)
    writer.close()


def same_bits(got: Any, want: np.ndarray) -> bool:
    got = np.asarray(got)
    return got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


def both_read(path: Path, run: Run, n: int) -> None:
    """Every frame read here and by molrs, bit for bit; ``validate`` reports nothing."""
    with mr.MrecReader(path) as reader:
        assert len(reader) == n and reader.step == run.steps[:n] and reader.source == "live"
        for i in range(n):
            frame = reader[i]
            assert all(same_bits(frame.blocks["atoms"][c], run.values[i][c]) for c in COLUMNS), i
            if run.cells is not None:
                assert frame.box is not None and same_bits(frame.box.vectors, run.cells[i]), i
    theirs = molrs_mrec.MrecReader(path)
    assert len(theirs) == n and list(theirs.step) == run.steps[:n]
    for i in range(n):
        frame = theirs[i]
        assert all(same_bits(frame["atoms"][c], run.values[i][c]) for c in COLUMNS), i
        if run.cells is not None:
            assert same_bits(frame.box.matrix, run.cells[i]), i
    assert mr.validate(path) == []


def test_trajectory_11_molrs_extends_our_trajectory_of_1000_atom_frames(tmp_path: Path) -> None:
    """The issue's case: 4 frames of 1,000 atoms here, 4 more by molrs — once refused here
    ("the index of shard [0] was written for 4000 of its rows, not 8000") — then 2 more here."""
    path, run = tmp_path / "t.mrec", Run([1000] * 10, cells=False, seed=1)
    ours_extends(path, run, range(0, 4))
    molrs_extends(path, run, range(4, 8))
    both_read(path, run, 8)
    ours_extends(path, run, range(8, 10))
    both_read(path, run, 10)


def test_trajectory_11_ragged_frames_with_a_cell_each_change_hands_after_flushes(tmp_path: Path) -> None:
    """Ragged updates (the block indexed by step_index/offset) and a cell per frame, each
    writer flushing inside its run: ours, molrs, ours, molrs."""
    sizes = [5, 5, 7, 3, 6, 6, 2, 8, 4, 4, 9, 1, 3, 3]
    path, run = tmp_path / "t.mrec", Run(sizes, cells=True, seed=2)
    ours_extends(path, run, range(0, 4), flush_at=[1])
    molrs_extends(path, run, range(4, 7), flush_at=[4, 5])
    both_read(path, run, 7)
    ours_extends(path, run, range(7, 11), flush_at=[8])
    both_read(path, run, 11)
    molrs_extends(path, run, range(11, 14), flush_at=[12])
    both_read(path, run, 14)


def test_trajectory_11_we_extend_a_trajectory_molrs_wrote_leaving_its_meta_as_written(tmp_path: Path) -> None:
    """molrs writes an unstamped record (no molrec_version): reopened here like our own
    (README#decision-1), its meta/ left byte for byte as molrs wrote it (spec-notes/record.md),
    then molrs continues what we appended."""
    sizes = [3, 3, 4, 4, 2, 6, 6, 5, 5]
    path, run = tmp_path / "t.mrec", Run(sizes, cells=True, seed=3)
    molrs_extends(path, run, range(0, 3), flush_at=[0])
    meta = (path / "meta" / "zarr.json").read_bytes()
    assert "molrec_version" not in mr.read_mrec_meta(path)
    ours_extends(path, run, range(3, 6), flush_at=[4])
    assert (path / "meta" / "zarr.json").read_bytes() == meta
    both_read(path, run, 6)
    molrs_extends(path, run, range(6, 9))
    both_read(path, run, 9)


_KILLED_AFTER_A_FLUSH = """
import os, sys
import numpy as np
import molrec_raw as mr
from molrec_raw.record.model import Block, Frame
schema = mr.SequenceSchema().declare_block("atoms")
for c in "xyz":
    schema.declare_column("atoms", c, "f64")
writer = mr.MrecWriter(sys.argv[1], schema, flush_every=2)
for i in range(6):
    writer.append(Frame({}, {"atoms": Block({c: np.full(4, 10.0 * i + k) for k, c in enumerate("xyz")})}), step=i)
    if i == 2:
        writer.flush()
os._exit(0)  # killed: an automatic commit after the flush, a frame buffered, the checkpoint left
"""


def test_trajectory_10_molrs_continues_a_writer_killed_after_a_flush(tmp_path: Path) -> None:
    """Our writer dies after a flush and an automatic commit (its checkpoint stays); molrs
    reopens and appends; our reader takes the live state (the manifest of the commit it knew
    no longer applies: molrs wrote another nstep), and our next writer recovers nothing."""
    path = tmp_path / "t.mrec"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    subprocess.run([sys.executable, "-c", _KILLED_AFTER_A_FLUSH, str(path)], check=True, env=env)
    assert (path / "trajectory" / "__molrec_checkpoint").is_file()
    writer = molrs_mrec.MrecWriter.open(path)
    assert writer.committed == 5  # 2 automatic, 1 flushed, 2 automatic; the sixth frame was lost
    for i in range(5, 8):
        writer.append(molrs.Frame({"atoms": {c: np.full(4, 10.0 * i + k) for k, c in enumerate(COLUMNS)}}), step=i)
    writer.close()

    def check(n: int) -> None:
        with mr.MrecReader(path) as reader:
            assert len(reader) == n and reader.source == "live"
            assert [reader[i].blocks["atoms"]["z"].tolist() for i in range(n)] == [[10.0 * i + 2] * 4 for i in range(n)]
        theirs = molrs_mrec.MrecReader(path)
        assert [np.asarray(theirs[i]["atoms"]["x"]).tolist() for i in range(n)] == [[10.0 * i] * 4 for i in range(n)]
        assert mr.validate(path) == []

    check(8)
    ours = mr.MrecWriter.open(path)
    ours.append(Frame({}, {"atoms": Block({c: np.full(4, 80.0 + k) for k, c in enumerate(COLUMNS)})}), step=8)
    ours.close()
    assert not (path / "trajectory" / "__molrec_checkpoint").exists()
    check(9)
