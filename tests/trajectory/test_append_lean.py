"""The lean append of issue 37 keeps the general path's answers: a meta value taken as given
is what ``meta_cell`` stores (or refuses, under the same rule), two updates of one checked
shape compare as the general comparison does, an integer step progression breaks where the
general rule breaks it, and a commit of a chain without a compressor starts no thread pool
(its bytes those of the one-thread path)."""
import math
import os
import struct
from pathlib import Path
from typing import Any, List
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from molrec_raw import MrecReader, MrecWriter, SequenceSchema
from molrec_raw.errors import SpecViolationError
from molrec_raw.record.model import Block, Frame
from molrec_raw.record.trajectory.blocks import Update, compare
from molrec_raw.record.trajectory.meta import MetaWriter, meta_cell
from molrec_raw.record.trajectory.progressions import Series
from molrec_raw.record.trajectory.schema import MetaSpec
from molrec_raw.zarr import open_group
from molrec_raw.zarr.codecs.threads import POOL_MIN_BYTES, CodecThreads
from file_trees import files_under

TAGS = ["f64", "i32", "i64", "u32", "u64", "bool", "string", "json"]
EDGES = [-(2**63) - 1, -(2**63), -(2**31) - 1, -(2**31), -1, 0, 1, 2**31 - 1, 2**31, 2**32 - 1, 2**32,
         2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64]
VALUES = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2**65), 2**65),
                   st.sampled_from(EDGES), st.booleans(), st.text(max_size=3), st.none(),
                   st.floats(width=32).map(np.float32), st.integers(-100, 100).map(np.int64))


def _stored(tag: str, value: Any) -> Any:
    """(kind, bits) of what ``meta_cell`` answers: the value, or the refusal's rule."""
    try:
        out = meta_cell(tag, "k", value)
    except SpecViolationError as exc:
        return ("refused", exc.rule)
    if type(out) is float:
        return (float, struct.pack("<d", out) if not math.isnan(out) else "nan")
    return (type(out), out)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(TAGS), VALUES)
def test_trajectory_W23_a_meta_value_taken_as_given_is_what_meta_cell_stores(tag: str, value: Any) -> None:
    writer = MetaWriter("k", MetaSpec(tag))
    try:
        got = writer.cell(value)
    except SpecViolationError as exc:
        assert _stored(tag, value) == ("refused", exc.rule)
        return
    if type(got) is float:
        assert _stored(tag, value) == (float, struct.pack("<d", got) if not math.isnan(got) else "nan")
    else:
        assert _stored(tag, value) == (type(got), got)


COLUMN = st.lists(st.sampled_from([0.0, -0.0, 1.5, math.nan, math.inf, 2.0]), min_size=0, max_size=4)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(COLUMN, COLUMN), min_size=3, max_size=3), st.sets(st.sampled_from("xyz")))
def test_trajectory_I15_one_checked_shape_compares_as_the_general_comparison(pairs: List[Any], precise: Any) -> None:
    rows = min(len(a) for pair in pairs for a in pair)
    before = {c: np.asarray(a[:rows], np.float64) for c, (a, _) in zip("xyz", pairs)}
    after = {c: np.asarray(b[:rows], np.float64) for c, (_, b) in zip("xyz", pairs)}
    shape = object()  # one checked shape: compared by identity
    fast = compare(Update(0, rows, before, {}, shape=shape), Update(1, rows, after, {}, shape=shape),  # type: ignore[arg-type]
                   frozenset(precise))
    general = compare(Update(0, rows, before, {}), Update(1, rows, after, {}), frozenset(precise))
    assert fast == general


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(2**62), 2**62), min_size=1, max_size=8, unique=True))
def test_trajectory_W16_an_integer_progression_holds_exactly_while_the_steps_do(values: List[int]) -> None:
    steps = sorted(values)
    series = Series("step", False)
    for v in steps:
        series.push(v)
    diffs = {b - a for a, b in zip(steps, steps[1:])}
    assert series.prog == (len(diffs) <= 1)
    if series.prog:
        assert [series.value(i) for i in range(len(steps))] == steps


def _plain_record(path: Path, frames: int = 600) -> None:
    schema = SequenceSchema().declare_block("atoms")
    for c in "xyz":
        schema.declare_column("atoms", c, "f64")
    schema.declare_meta("pe", "f64")
    rng = np.random.default_rng(3)
    xyz = rng.normal(size=(frames, 3, 64))
    with MrecWriter(path, schema, flush_every=250) as w:
        for i in range(frames):
            w.append(Frame({"pe": float(i)}, {"atoms": Block({c: xyz[i, k] for k, c in enumerate("xyz")})}), step=i)


def test_trajectory_I7_a_plain_commit_starts_no_pool_and_writes_the_one_thread_bytes(tmp_path: Path) -> None:
    pools: List[int] = []
    real = CodecThreads.map_runs

    def counted(self: CodecThreads, *args: Any, **kwargs: Any) -> Any:
        pools.append(1)
        return real(self, *args, **kwargs)

    with mock.patch.object(CodecThreads, "map_runs", counted):
        _plain_record(tmp_path / "two.mrec")
    assert pools == []  # bytes + crc32c chunks of a commit: the batch path, no threads
    with mock.patch("molrec_raw.record.trajectory.writer.COMMIT_THREADS", 1):
        _plain_record(tmp_path / "one.mrec")
    two, one = files_under(tmp_path / "two.mrec"), files_under(tmp_path / "one.mrec")
    assert two.keys() == one.keys() and all(two[k] == one[k] for k in one)
    assert len(MrecReader(tmp_path / "two.mrec")) == 600


def test_zarr_a_gzip_chain_write_codes_on_the_threads_from_the_floor(tmp_path: Path) -> None:
    """Gzip has no batch API: the chunks of a write of at least POOL_MIN_BYTES are coded on the
    node's codec threads, those of a smaller one on the caller's (spec-notes/zarr.md, "Threads
    for codec work"); the values read back either way."""
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    try:
        group = open_group(tmp_path / "g.zarr", mode="w", threads=2)
        for n, handed in ((4096, 0), (POOL_MIN_BYTES // 8 * 2, 1)):
            arr = group.create_array(f"a{n}", shape=(n,), dtype="f8", chunks=(n // 16,),
                                     codecs=[{"name": "bytes", "configuration": {"endian": "little"}},
                                             {"name": "gzip", "configuration": {"level": 1}}])
            before = group.codec_threads.handed
            arr[...] = np.arange(float(n))
            assert group.codec_threads.handed - before == handed
            assert np.array_equal(arr[...], np.arange(float(n)))
        group.close()
    finally:
        monkeypatch.undo()
