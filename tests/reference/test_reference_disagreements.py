"""Where molrs 0.19 writes what the spec says it must not, each case kept true by a test: it
asserts molrs's current behaviour and ours, so it fails when either changes (then the row
in spec-notes/conformance.md "Records the reference writes differently" goes or changes).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

molrs = pytest.importorskip("molrs", reason="molrs (molcrafts-molrs) ships wheels for CPython >= 3.12 only")

import molrec_raw as mr  # noqa: E402
from molrec_raw.errors import SpecViolationError  # noqa: E402
from molrec_raw.record.model import Block, Box, Frame  # noqa: E402
from reference_helpers import assert_same_reading, molrs_peer, to_peer_frame  # noqa: E402

PEER = molrs_peer(molrs)


def _atoms(x: float) -> Frame:
    return Frame(meta={}, blocks={"atoms": Block(columns={"x": np.array([x])})}, box=None)


def _run(path: Path, times, ours: bool) -> Path:
    frames = [_atoms(float(i)) for i in range(len(times))]
    if ours:
        with mr.MrecWriter(path, mr.SequenceSchema.from_frames(frames), durable=False) as w:
            for f, t in zip(frames, times):
                w.append(f, time=t)
    else:
        theirs = [to_peer_frame(PEER, f) for f in frames]
        with PEER.mrec.MrecWriter(path, PEER.mrec.SequenceSchema.from_frames(theirs), durable=False) as w:
            for f, t in zip(theirs, times):
                w.append(f, time=t)
    return path


def _attrs(path: Path) -> dict:
    return json.loads((path / "trajectory" / "zarr.json").read_text(encoding="utf-8"))["attributes"]


def test_trajectory_3_1_time_progression_second_value_checked_bitwise(tmp_path):
    """trajectory §3.1 (README#decision-7): a time series stays a progression only while every
    value, the second included, equals ``start + i*stride`` bit for bit.  Times 0.2, 0.9 give
    stride 0.7 and 0.2 + 1.0*0.7 = 0.8999999999999999: we store the array; molrs 0.19 stores
    the progression, so every reader (molrs's too) hands back 0.8999999999999999."""
    ours = _run(tmp_path / "ours.mrec", [0.2, 0.9], ours=True)
    assert "time_progression" not in _attrs(ours)
    assert assert_same_reading(PEER, ours)["trajectory"]["time"] == [0.2, 0.9]
    theirs = _run(tmp_path / "theirs.mrec", [0.2, 0.9], ours=False)
    assert _attrs(theirs)["time_progression"] == {"start": 0.2, "stride": 0.7}
    assert assert_same_reading(PEER, theirs)["trajectory"]["time"] == [0.2, 0.8999999999999999]


def test_trajectory_3_1_time_progression_negative_zero_is_a_break(tmp_path):
    """trajectory §3.1 (README#decision-7, bitwise): times 0.0, -0.0, 0.0 are no progression.
    We store the array and read -0.0 back; molrs 0.19 compares with float ``==``, stores
    ``{start: 0.0, stride: -0.0}`` and every reader hands back 0.0 for the second time."""
    times = [0.0, -0.0, 0.0]
    ours = _run(tmp_path / "ours.mrec", times, ours=True)
    assert "time_progression" not in _attrs(ours)
    got = np.array(assert_same_reading(PEER, ours)["trajectory"]["time"], dtype=np.float64)
    assert np.signbit(got).tolist() == [False, True, False]
    theirs = _run(tmp_path / "theirs.mrec", times, ours=False)
    assert _attrs(theirs)["time_progression"] == {"start": 0.0, "stride": -0.0}
    got = np.array(assert_same_reading(PEER, theirs)["trajectory"]["time"], dtype=np.float64)
    assert np.signbit(got).tolist() == [False, False, False]


@pytest.mark.parametrize("meta", [{"creator": "molrs"}, {"creator": {"version": "1"}},
                                  {"created_at": "2026-01-01T00:00:00"}])
def test_frame_and_types_14_21_molrs_writes_meta_documents_the_rule_refuses(tmp_path, meta):
    """frame-and-types#14.21: ``creator`` is an object with a ``name``; ``created_at`` is RFC
    3339 with an explicit offset.  molrs 0.19 writes and reads back such meta documents; we
    refuse to write them and refuse to read the record, naming the rule."""
    path = tmp_path / "meta.mrec"
    molrs.io.write_mrec(path, frame=to_peer_frame(PEER, _atoms(1.0)), meta=meta)
    assert PEER.mrec.MrecFile(path).meta() == meta
    with pytest.raises(SpecViolationError) as refused:
        mr.read_mrec_frame(path)
    assert refused.value.rule == "frame-and-types#14.21"
    with pytest.raises(SpecViolationError) as refused:
        mr.write_mrec_frame(tmp_path / "ours.mrec", _atoms(1.0), meta=meta)
    assert refused.value.rule == "frame-and-types#14.21"


@pytest.mark.parametrize("vectors", [np.zeros((3, 3)), np.diag([np.nan, 1.0, 1.0]), np.diag([1.0, np.inf, 1.0])])
def test_frame_and_types_10_singular_or_non_finite_defined_cell(tmp_path, vectors):
    """frame-and-types §10 states no rule on a defined cell's matrix (only an undefined cell's
    vectors are ignored, and the refusals of §14 name none): we store and read back a singular
    or non-finite cell as given.  molrs 0.19 refuses to write one ("the cell matrix is
    singular") and refuses to read a record holding one ("invalid box: SingularCell")."""
    frame = Frame(meta={}, blocks={"atoms": Block(columns={"x": np.zeros(1)})}, box=Box(vectors=vectors))
    path = mr.write_mrec_frame(tmp_path / "cell.mrec", frame)
    np.testing.assert_array_equal(mr.read_mrec_frame(path).box.vectors, vectors)
    with pytest.raises(ValueError, match="SingularCell"):
        PEER.mrec.MrecFile(path).frame()
    with pytest.raises(ValueError, match="singular"):
        PEER.core.Box(vectors)


def test_frame_and_types_2_trailing_nul_in_strings_molrs_python_drops_it(tmp_path):
    """frame-and-types §2: a ``string`` cell is any UTF-8 text, NUL included.  Both writers
    store ``"\\x00"`` and ``"a\\x00"`` as given (we read them back); molrs's Python hands string
    columns back as numpy fixed-width unicode, which drops trailing NULs, so molrs's reading
    says ``""`` and ``"a"``.  A binding limitation, not a format one: the bytes are right."""
    frame = Frame(meta={}, blocks={"atoms": Block(columns={"s": np.array(["\x00", "a\x00", "b"], dtype=object)})},
                  box=None)
    for path in (tmp_path / "ours.mrec", tmp_path / "theirs.mrec"):
        if path.name == "ours.mrec":
            mr.write_mrec_frame(path, frame)
        else:
            molrs.io.write_mrec(path, frame=to_peer_frame(PEER, frame))
        assert mr.read_mrec_frame(path).blocks["atoms"].columns["s"].tolist() == ["\x00", "a\x00", "b"]
        assert PEER.mrec.MrecFile(path).frame()["atoms"]["s"].tolist() == ["", "a", "b"]
