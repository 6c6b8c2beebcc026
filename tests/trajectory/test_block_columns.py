"""MrecReader.block_columns: many frames of a block at once, resolved as §9 resolves each frame
(regular and indexed layouts, carry-forward), equal to read_columns frame by frame."""
import numpy as np
import pytest

from molrec_raw.errors import InvalidValueError
from molrec_raw.record.model import Block, Frame
from molrec_raw.record.trajectory import MrecReader, MrecWriter, SequenceSchema


def _xyz(i, n=4):
    return {c: np.arange(n, dtype=float) * (k + 1) + 100.0 * i for k, c in enumerate("xyz")}


def test_block_columns_regular_block_equals_read_columns_9(tmp_path):
    path = tmp_path / "r.mrec"
    schema = SequenceSchema().declare_block("atoms", rows=4)
    for c in "xyz":
        schema.declare_column("atoms", c, "f64")
    with MrecWriter(path, schema, flush_every=3) as w:
        for i in range(7):
            w.append(Frame({}, {"atoms": Block(_xyz(i))}))
    with MrecReader(path) as r:
        whole = r.block_columns("atoms")
        assert set(whole) == {"x", "y", "z"} and whole["x"].shape == (7, 4)
        for i in range(7):
            frame = r.read_columns(i, [("atoms", "y")])
            assert np.array_equal(whole["y"][i], frame.blocks["atoms"].columns["y"])
        assert np.array_equal(r.block_columns("atoms", ["x"], frames=slice(1, None, 3))["x"][:, 0], [100.0, 400.0])
        picked = r.block_columns("atoms", ["z"], frames=[-1, 0, 6])["z"]
        assert np.array_equal(picked[:, 1], [603.0, 3.0, 603.0])
        assert r.block_columns("atoms", [], frames=range(3)) == {}
        with pytest.raises(IndexError):
            r.block_columns("atoms", ["x"], frames=[7])
        with pytest.raises(InvalidValueError, match="not a declared column"):
            r.block_columns("atoms", ["vx"])


def test_block_columns_carries_an_update_forward_and_refuses_ragged_or_absent_blocks_9(tmp_path):
    path = tmp_path / "c.mrec"
    schema = SequenceSchema().declare_column("atoms", "x", "f64").declare_column("late", "q", "f64")
    schema.declare_column("sites", "x", "f64").declare_nullable("sites", "x")
    with MrecWriter(path, schema) as w:
        for i in range(6):
            blocks = {}
            if i in (0, 2, 3):  # updates at 0, 2, 3; frames 1, 4, 5 carry forward
                blocks["atoms"] = Block({"x": np.full(3, float(i))})
            if i >= 2:
                blocks["late"] = Block({"q": np.full(2 if i < 5 else 1, float(i))})
            w.append(Frame({}, blocks))
    with MrecReader(path) as r:
        assert r.block_columns("atoms")["x"][:, 0].tolist() == [0.0, 0.0, 2.0, 3.0, 3.0, 3.0]
        assert r.block_columns("atoms", frames=[5, 1])["x"][:, 2].tolist() == [3.0, 0.0]
        assert r.block_columns("late", frames=range(2, 5))["q"].shape == (3, 2)
        with pytest.raises(InvalidValueError, match="changes its row count"):
            r.block_columns("late", frames=range(2, 6))
        with pytest.raises(InvalidValueError, match="absent at frame 0"):
            r.block_columns("late")
        with pytest.raises(InvalidValueError, match="nullable"):
            r.block_columns("sites")
