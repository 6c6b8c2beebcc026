"""The collection writer's per-shape fast paths (a plain system's shape checked once, a
trajectory block of the shape checked last time, encoding plans kept by shape) write exactly
the bytes of the general path and refuse exactly what it refuses — also after a long streak
of good records of one shape (lmdb#L9–#L17, collection#C2–#C11, trajectory#W16–#W26)."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import molrec_raw as mr
from collection_helpers import UNITS
from molrec_raw.collection import binding
from molrec_raw.collection import writer as writer_module
from molrec_raw.errors import MolrecError
from molrec_raw.record.model import Block, Box, Frame, MetaValue
from molrec_raw.record.trajectory import blocks as blocks_module
from molrec_raw.record.trajectory.schema import SequenceSchema

ELEMENTS = ["H", "C", "N", "O", "Na", "é"]


@contextlib.contextmanager
def general_path() -> Iterator[None]:
    """The writer with every fast path off: no plain system shape, every block checked whole,
    every frame encoded without a plan (the behaviour the fast paths must reproduce)."""
    plain_encode = writer_module.encode_frame

    def encode(blocks: Any, **kwargs: Any) -> bytes:
        kwargs.pop("cache", None)
        kwargs.pop("shape", None)
        return plain_encode(blocks, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(writer_module, "_plain_shape", lambda system: None)
        patch.setattr(writer_module, "prepare_update", blocks_module._prepare_whole)
        patch.setattr(writer_module, "encode_frame", encode)
        yield


Outcome = Tuple[str, Optional[str], Optional[str], str]


def _write(path: Path, records: List[Dict[str, Any]], schema: Optional[SequenceSchema]) -> List[Any]:
    """Add every record (refusals kept as what they name); the file's key/value pairs after close."""
    outcomes: List[Any] = []
    with mr.CollectionWriter(path, units=UNITS, schema=schema, commit_every=7) as w:
        for record in records:
            try:
                outcomes.append(w.add_record(**record))
            except MolrecError as exc:
                outcomes.append((type(exc).__name__, exc.rule, exc.node, exc.message))
    handle = binding.acquire(path)
    try:
        with handle.env.begin() as txn:
            pairs = [(bytes(k), bytes(v)) for k, v in txn.cursor()]
    finally:
        handle.release()
    return [outcomes, pairs]


# -- records of a few shapes, some of them refused -------------------------------------------------------
def _floats(draw: Any, n: int) -> np.ndarray:
    return np.array(draw(st.lists(st.floats(width=64) | st.sampled_from([0.0, -0.0, 1.5]), min_size=n, max_size=n)),
                    dtype=np.float64)


def _layout(draw: Any, values: np.ndarray) -> Any:
    """The caller's array as it is, a strided view, big-endian, a list, or integers."""
    kind = draw(st.sampled_from(["as is"] * 6 + ["strided", "big-endian", "list", "integers"]))
    if kind == "strided":
        return np.repeat(values, 2)[::2]
    if kind == "big-endian":
        return values.astype(">f8")
    if kind == "list":
        return values.tolist()
    if kind == "integers":
        return np.arange(values.shape[0], dtype=np.int64)
    return values


def _strings(draw: Any, n: int) -> np.ndarray:
    items: List[Any] = draw(st.lists(st.sampled_from(ELEMENTS), min_size=n, max_size=n))
    if n and draw(st.integers(0, 19)) == 0:  # a value the column cannot hold
        items[draw(st.integers(0, n - 1))] = draw(st.sampled_from([3, None, "\ud800"]))
    out = np.empty(n, dtype=object)
    out[:] = items
    return out


@st.composite
def records(draw: Any) -> Dict[str, Any]:
    n = draw(st.sampled_from([1, 2, 3]))
    record: Dict[str, Any] = {}
    if draw(st.integers(0, 5)):
        columns: Dict[str, Any] = {"element": _strings(draw, n)}
        masks: Dict[str, np.ndarray] = {}
        if draw(st.booleans()):
            columns["mass"] = _layout(draw, _floats(draw, n))
            if draw(st.integers(0, 4)) == 0:
                masks["mass"] = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
        if draw(st.integers(0, 4)) == 0:
            columns["id"] = np.arange(n, dtype=np.uint64)
        if draw(st.integers(0, 3)) == 0:  # a buffer that needs padding
            columns["formal_charge"] = np.array(draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n)), np.int8)
        precision = {"mass": 0.01} if "mass" in columns and draw(st.integers(0, 5)) == 0 else {}
        count = n + 1 if draw(st.integers(0, 30)) == 0 else None
        meta = draw(st.sampled_from([{}, {}, {}, {"charge": 0}, {"label": MetaValue("i32", 3)}, {"bad": float("nan")}]))
        record["system"] = Frame(meta, {"atoms": Block(columns, masks, precision, count=count)})
    if draw(st.integers(0, 5)):
        frames = []
        for _ in range(draw(st.integers(0, 3))):
            meta: Dict[str, Any] = {"pe": draw(st.floats(width=64) | st.integers(-2**60, 2**60) |
                                               st.sampled_from([np.float64(2.5), "high", None]))}
            blocks: Dict[str, Block] = {}
            if draw(st.integers(0, 9)):
                x = _layout(draw, _floats(draw, n))
                columns = {"x": x, "y": _floats(draw, n)}
                if draw(st.integers(0, 6)) == 0:
                    columns = {"y": columns["y"], "x": x}  # the declared columns in another order
                masks = {"x": np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)} \
                    if draw(st.integers(0, 6)) == 0 else {}
                precision = {"y": 0.001} if draw(st.integers(0, 8)) == 0 else {}
                count = n + 1 if draw(st.integers(0, 30)) == 0 else None
                blocks["atoms"] = Block(columns, masks, precision, count=count)
            if draw(st.integers(0, 3)) == 0:
                blocks["labels"] = Block({"tag": _strings(draw, draw(st.sampled_from([1, 2])))})
            if draw(st.integers(0, 2)) == 0:  # buffers that need padding, of a few row counts
                m = draw(st.sampled_from([1, 3]))
                blocks["extra"] = Block({"k": np.array(draw(st.lists(st.integers(-2**31, 2**31 - 1), min_size=m,
                                                                     max_size=m)), np.int32),
                                         "on": np.array(draw(st.lists(st.booleans(), min_size=m, max_size=m)), bool),
                                         "v": _floats(draw, m)})
            box = Box(np.diag([2.0, 3.0, 4.0])) if draw(st.integers(0, 4)) == 0 else None
            frames.append(Frame(meta, blocks, box))
        record["frames"] = frames
        if frames and draw(st.integers(0, 3)) == 0:
            start = draw(st.sampled_from([0, 2**53 - 1, 2**62]))
            record["steps"] = [start + 3 * j for j in range(len(frames))]
        if frames and draw(st.integers(0, 3)) == 0:
            record["times"] = [0.5 * j for j in range(len(frames))]
    if not record:
        record["frames"] = []
    if draw(st.integers(0, 9)) == 0:
        record["meta"] = {"name": "r", "value": draw(st.floats(width=64))}
    return record


def _declared() -> SequenceSchema:
    schema = SequenceSchema()
    schema.declare_block("atoms")
    schema.declare_column("atoms", "x", "f64")
    schema.declare_column("atoms", "y", "f64")
    schema.declare_nullable("atoms", "x")
    schema.declare_precision("atoms", "y", 0.001)
    schema.declare_block("labels")
    schema.declare_column("labels", "tag", "string")
    schema.declare_block("extra")
    schema.declare_column("extra", "k", "i32")
    schema.declare_column("extra", "on", "bool")
    schema.declare_column("extra", "v", "f64")
    schema.declare_meta("pe", "f64")
    return schema


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(records(), min_size=1, max_size=14), st.booleans())
def test_lmdb_L9_the_fast_paths_write_the_general_paths_bytes_and_refusals(tmp_path_factory: Any,
                                                                           given_records: List[Dict[str, Any]],
                                                                           declared: bool) -> None:
    """Every record twice (the fast paths, then all off): the same outcomes (record numbers,
    or the refusal's type, rule, path and message) and the same key/value pairs, byte for
    byte — shape changes between records, masks, strings, typed meta, refusals in between."""
    work = tmp_path_factory.mktemp("fast")
    schema = _declared() if declared else None
    fast = _write(work / "fast.mrec.lmdb", given_records, schema)
    with general_path():
        slow = _write(work / "slow.mrec.lmdb", given_records, schema)
    assert fast[0] == slow[0]
    assert fast[1] == slow[1]


def test_lmdb_L9_a_streak_of_one_shape_uses_the_kept_plans_and_writes_the_same_bytes(tmp_path: Path) -> None:
    """Thirty records of one shape (the checks' fast paths taken from the second on, the
    encoding plans from the third) against the general path: the same pairs; the plans kept
    are one per shape (system, frame)."""
    rng = np.random.default_rng(3)
    given_records = [{"system": Frame({}, {"atoms": Block({"element": np.array(rng.choice(ELEMENTS, 4), object)})}),
                      "frames": [Frame({"pe": float(rng.normal())}, {"atoms": Block({"x": rng.normal(size=4),
                                                                                     "y": rng.normal(size=4)})})]}
                     for _ in range(30)]
    fast = _write(tmp_path / "fast.mrec.lmdb", given_records, None)
    with general_path():
        slow = _write(tmp_path / "slow.mrec.lmdb", given_records, None)
    assert fast == slow and fast[0] == list(range(30))
    w = mr.CollectionWriter(tmp_path / "plans.mrec.lmdb", units=UNITS)
    try:
        for record in given_records:
            w.add_record(**record)
        kinds = sorted("by blocks" if type(k) is tuple and type(k[0]) is tuple else "keyed" for k in w._encodes.plans)
        assert len(w._system_shapes) == 1 and w._states["atoms"].shape is not None
        assert kinds == ["keyed", "keyed"]  # one plan for the system's shape, one for the frame's
    finally:
        w.abort()


# -- refusals after a streak of good records ------------------------------------------------------------
def _good(r: int) -> Dict[str, Any]:
    return {"system": Frame({}, {"atoms": Block({"element": np.array(["C", "H", "O"], object)})}),
            "frames": [Frame({"pe": -1.0 * r, "n": r}, {"atoms": Block({"x": np.arange(3.0) + r, "q": np.zeros(3)})})]}


def _bad_dtype() -> Dict[str, Any]:
    record = _good(0)
    record["frames"][0].blocks["atoms"].columns["q"] = np.arange(3, dtype=np.int32)
    return record


def _bad_string() -> Dict[str, Any]:
    record = _good(0)
    record["system"].blocks["atoms"].columns["element"] = np.array(["C", 6, "O"], object)
    return record


def _nan_count() -> Dict[str, Any]:
    record = _good(0)
    record["frames"][0].meta["n"] = float("nan")
    return record


def _nan_meta() -> Dict[str, Any]:
    return {**_good(0), "meta": {"energy": float("nan")}}


def _wrong_count() -> Dict[str, Any]:
    record = _good(0)
    record["frames"][0].blocks["atoms"].count = 4
    return record


def _wrong_rows() -> Dict[str, Any]:
    record = _good(0)
    record["frames"][0].blocks["atoms"] = Block({"x": np.arange(4.0), "q": np.zeros(4)})
    return record


def _system_count() -> Dict[str, Any]:
    record = _good(0)
    record["system"].blocks["atoms"].count = 2
    return record


def _bad_meta_type() -> Dict[str, Any]:
    record = _good(0)
    record["frames"][0].meta["pe"] = "low"
    return record


def _undeclared_column() -> Dict[str, Any]:
    record = _good(0)
    record["frames"][0].blocks["atoms"].columns["z"] = np.zeros(3)
    return record


def _missing_column() -> Dict[str, Any]:
    record = _good(0)
    del record["frames"][0].blocks["atoms"].columns["q"]
    return record


def _trailing() -> Dict[str, Any]:
    record = _good(0)
    record["frames"][0].blocks["atoms"].columns["x"] = np.zeros((3, 1))
    return record


@pytest.mark.parametrize("bad,rule,node,words", [
    (_bad_dtype, "collection#C4", "/records/40/trajectory/atoms/q", "expected f64"),
    (_bad_string, "frame-and-types#14.37", "/records/40/system/atoms/element", "not one of the 13 column dtypes"),
    (_nan_count, "trajectory#W23", "/records/40/trajectory/meta/n", "i64"),
    (_nan_meta, "frame-and-types#14.41", "/records/40/meta", "finite"),
    (_wrong_count, "collection#C4", "/records/40/trajectory/atoms", "count 4"),
    (_wrong_rows, "collection#C9", "/records/40/trajectory/atoms", "/system/atoms has 3"),
    (_system_count, "frame-and-types#14.6", "/records/40/system/atoms/element", "count=2"),
    (_bad_meta_type, "trajectory#W23", "/records/40/trajectory/meta/pe", "f64"),
    (_undeclared_column, "collection#C4", "/records/40/trajectory/atoms/z", "not declared"),
    (_missing_column, "collection#C4", "/records/40/trajectory/atoms", "lacks declared column"),
    (_trailing, "collection#C4", "/records/40/trajectory/atoms/x", "one value per row"),
])
def test_collection_C4_a_bad_record_after_forty_good_ones_of_its_shape_is_refused_naming_path_and_rule(
        path: Path, bad: Any, rule: str, node: str, words: str) -> None:
    """Forty records of one shape set every fast path up; the forty-first breaks one rule:
    refused with the rule and the path (as the general path refuses it), nothing of it
    written, and the writer goes on."""
    with mr.CollectionWriter(path, units=UNITS) as w:
        for r in range(40):
            w.add_record(**_good(r))
        assert w._states["atoms"].shape is not None and w._system_shapes  # the fast paths are set up
        with pytest.raises(MolrecError) as caught:
            w.add_record(**bad())
        assert (caught.value.rule, caught.value.node) == (rule, node), caught.value
        assert words in caught.value.message and caught.value.store == str(path)
        assert w.add_record(**_good(40)) == 40
    c = mr.read_collection(path)
    assert len(c) == 41 and float(c[40].trajectory[0].meta["pe"]) == -40.0
    assert c[40].trajectory[0].blocks["atoms"].columns["x"].tolist() == [40.0, 41.0, 42.0]
    records = [_good(r) for r in range(40)] + [bad(), _good(40)]
    fast = _write(path.with_name("fast.mrec.lmdb"), records, None)
    with general_path():
        slow = _write(path.with_name("slow.mrec.lmdb"), records, None)
    assert fast == slow and fast[0][40] == ("SpecViolationError", rule, node, caught.value.message)
