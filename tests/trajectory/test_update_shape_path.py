"""``prepare_update``'s per-shape path (a block of exactly the shape checked whole last time
skips the per-column checks) writes the bytes the whole check writes and refuses what it
refuses, also after a long streak of one shape (trajectory#W18–#W26)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from molrec_raw.errors import MolrecError
from molrec_raw.record.model import Block, Frame
from molrec_raw.record.trajectory import MrecReader, MrecWriter
from molrec_raw.record.trajectory import blocks as blocks_module
from molrec_raw.record.trajectory import writer as writer_module
from molrec_raw.record.trajectory.schema import SequenceSchema


def _schema() -> SequenceSchema:
    schema = SequenceSchema()
    schema.declare_block("atoms")
    schema.declare_column("atoms", "x", "f64")
    schema.declare_column("atoms", "k", "i32")
    schema.declare_column("atoms", "v", "f64", (3,))
    schema.declare_nullable("atoms", "k")
    schema.declare_precision("atoms", "x", 0.01)
    schema.declare_meta("pe", "f64")
    return schema


def _files(root: Path) -> Dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _write(path: Path, frames: List[Frame], whole: bool) -> Tuple[List[Any], Dict[str, bytes]]:
    outcomes: List[Any] = []
    with pytest.MonkeyPatch.context() as patch:
        if whole:
            patch.setattr(writer_module, "prepare_update", blocks_module._prepare_whole)
        with MrecWriter(path, _schema(), flush_every=4, durable=False, status=False) as w:
            for frame in frames:
                try:
                    w.append(frame)
                    outcomes.append(None)
                except MolrecError as exc:
                    outcomes.append((type(exc).__name__, exc.rule, exc.node, exc.message))
    return outcomes, _files(path)


@st.composite
def frames(draw: Any) -> Frame:
    n = draw(st.sampled_from([2, 4]))
    x = np.array(draw(st.lists(st.floats(width=64), min_size=n, max_size=n)), np.float64)
    k: Any = np.array(draw(st.lists(st.integers(-2**31, 2**31 - 1), min_size=n, max_size=n)), np.int32)
    v: Any = np.arange(3.0 * n).reshape(n, 3) * draw(st.sampled_from([1.0, -0.5]))
    kind = draw(st.sampled_from(["plain"] * 8 + ["strided", "list", "i64", "wrong trailing", "f32"]))
    if kind == "strided":
        v = np.repeat(v, 2, axis=0)[::2]
    elif kind == "list":
        k = k.tolist()
    elif kind == "i64":
        k = k.astype(np.int64)
    elif kind == "wrong trailing":
        v = v.reshape(n, 3, 1)
    elif kind == "f32":
        x = x.astype(np.float32)
    masks = {"k": np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)} \
        if draw(st.integers(0, 5)) == 0 else {}
    count: Optional[int] = n + 1 if draw(st.integers(0, 7)) == 0 else None
    blocks = {"atoms": Block({"x": x, "k": k, "v": v}, masks, count=count)} if draw(st.integers(0, 7)) else {}
    return Frame({"pe": draw(st.floats(width=64))}, blocks)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(frames(), min_size=1, max_size=16))
def test_trajectory_W19_the_shape_path_writes_the_whole_checks_bytes(tmp_path_factory: Any,
                                                                     given_frames: List[Frame]) -> None:
    """Every frame appended twice (the per-shape path, then the whole check every time): the
    same refusals and the same store, file for file and byte for byte."""
    work = tmp_path_factory.mktemp("shape")
    fast = _write(work / "fast.mrec", given_frames, whole=False)
    slow = _write(work / "slow.mrec", given_frames, whole=True)
    assert fast == slow


def _good(i: int) -> Frame:
    return Frame({"pe": float(i)}, {"atoms": Block({"x": np.arange(2.0) + i, "k": np.arange(2, dtype=np.int32),
                                                    "v": np.zeros((2, 3))})})


@pytest.mark.parametrize("column,values,words", [
    ("k", np.arange(2, dtype=np.float64), "expected i32"),
    ("v", np.zeros((2, 4)), "trailing [3]"),
    ("x", np.array(["a", "b"], dtype=object), "must be f64[N]"),
])
def test_trajectory_W19_a_wrong_column_after_thirty_frames_of_its_shape_is_refused(
        tmp_path: Path, column: str, values: np.ndarray, words: str) -> None:
    with MrecWriter(tmp_path / "t.mrec", _schema(), flush_every=8, durable=False, status=False) as w:
        for i in range(30):
            w.append(_good(i))
        frame = _good(30)
        frame.blocks["atoms"].columns[column] = values
        with pytest.raises(MolrecError) as caught:
            w.append(frame)
        assert caught.value.rule == "trajectory#W19" and caught.value.node == f"/trajectory/atoms/{column}"
        assert words in caught.value.message
        bad_count = _good(30)
        bad_count.blocks["atoms"].count = 3
        with pytest.raises(MolrecError) as caught:
            w.append(bad_count)
        assert caught.value.rule == "trajectory#W19" and caught.value.node == "/trajectory/atoms"
        w.append(_good(30))
    with MrecReader(tmp_path / "t.mrec") as r:
        assert len(r) == 31 and r[30].blocks["atoms"].columns["x"].tolist() == [30.0, 31.0]
