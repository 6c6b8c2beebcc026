"""``CollectionWriter.add_records``: many records as columns write the store ``add_record``
writes for the same records, byte for byte (every LMDB key and value: frames, systems, record
meta, the index, ``meta``), refuse what it refuses at the same record, and refuse columns that
do not hold their records' rows before adding any (collection#C13)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import molrec_raw as mr
from collection_helpers import UNITS, stored_pairs
from molrec_raw.errors import MolrecError, SpecViolationError

ELEMENTS = ["H", "C", "N", "O", "Na", "é"]



def _one_by_one(path: Path, columns: Dict[str, Any], schema: Optional[mr.SequenceSchema] = None,
                commit_every: int = 7) -> Tuple[Any, List[Tuple[bytes, bytes]]]:
    """The same records through ``add_record`` (row slices of the columns), up to the first refusal."""
    rows, system, frame = columns["rows"], columns.get("system"), columns.get("frame")
    frame_meta, meta, index = columns.get("frame_meta") or {}, columns.get("meta"), columns.get("index")
    bounds = {name: np.concatenate([[0], np.cumsum(counts)]) for name, counts in rows.items()}

    def blocks(section: Dict[str, Dict[str, Any]], r: int) -> Dict[str, mr.Block]:
        return {name: mr.Block({c: np.asarray(v)[bounds[name][r]:bounds[name][r + 1]] for c, v in cols.items()})
                for name, cols in section.items()}

    outcome: Any = None
    with mr.CollectionWriter(path, units=UNITS, schema=schema, commit_every=commit_every) as w:
        for r in range(len(next(iter(rows.values())))):
            fm = {k: (v.tolist() if isinstance(v, np.ndarray) else list(v))[r] for k, v in frame_meta.items()}
            try:
                w.add_record(meta=None if meta is None else meta[r],
                             system=None if system is None else mr.Frame({}, blocks(system, r)),
                             frames=None if frame is None else [mr.Frame(fm, blocks(frame, r))],
                             index=None if index is None else {c: v[r] for c, v in index.items()})
            except MolrecError as exc:
                outcome = (type(exc).__name__, exc.rule, exc.node, exc.message)
                break
        outcome = (outcome, w.n_records)
    return outcome, stored_pairs(path)


def _at_once(path: Path, columns: Dict[str, Any], schema: Optional[mr.SequenceSchema] = None,
             commit_every: int = 7) -> Tuple[Any, List[Tuple[bytes, bytes]]]:
    outcome: Any = None
    with mr.CollectionWriter(path, units=UNITS, schema=schema, commit_every=commit_every) as w:
        try:
            numbers = w.add_records(**columns)
            assert numbers == range(0, w.n_records)
        except MolrecError as exc:
            outcome = (type(exc).__name__, exc.rule, exc.node, exc.message)
        outcome = (outcome, w.n_records)
    return outcome, stored_pairs(path)


def _training_set(n: int, seed: int = 0) -> Dict[str, Any]:
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 5, n)
    total = int(counts.sum())
    return {"rows": {"atoms": counts},
            "system": {"atoms": {"element": np.array(ELEMENTS, dtype=object)[rng.integers(0, 6, total)],
                                 "mass": rng.random(total)}},
            "frame": {"atoms": {c: rng.normal(size=total) for c in ("x", "y", "z")}},
            "frame_meta": {"pe": rng.normal(size=n)},
            "meta": [{"source": f"m{r}"} for r in range(n)],
            "index": {"n_heavy": rng.integers(0, 9, n)}}


def test_collection_C13_add_records_writes_the_bytes_of_add_record(tmp_path: Path) -> None:
    columns = _training_set(200)
    one = _one_by_one(tmp_path / "one.mrec.lmdb", columns)
    many = _at_once(tmp_path / "many.mrec.lmdb", columns)
    assert one[0] == many[0] == (None, 200)
    assert len(many[1]) == 3 * 200 + 2  # f, r, s per record; index, meta
    assert many[1] == one[1]
    c = mr.read_collection(tmp_path / "many.mrec.lmdb")
    lo, hi = int(np.sum(columns["rows"]["atoms"][:7])), int(np.sum(columns["rows"]["atoms"][:8]))
    assert c[7].system["atoms"]["element"].tolist() == columns["system"]["atoms"]["element"][lo:hi].tolist()
    assert np.array_equal(c[7].trajectory[0]["atoms"]["x"], columns["frame"]["atoms"]["x"][lo:hi])
    assert c[7].trajectory[0].meta["pe"] == columns["frame_meta"]["pe"][7]
    c.close()


def test_collection_C13_add_records_most_records_skip_the_objects(tmp_path: Path, monkeypatch: Any) -> None:
    """Records of a shape already checked are encoded from the columns: add_record sees only
    the first ones of each shape (two while a derived declaration settles)."""
    calls: List[int] = []
    plain = mr.CollectionWriter.add_record

    def counted(self: Any, *args: Any, **kwargs: Any) -> int:
        calls.append(1)
        return plain(self, *args, **kwargs)

    monkeypatch.setattr(mr.CollectionWriter, "add_record", counted)
    columns = _training_set(300)
    columns["rows"]["atoms"] = np.full(300, 3)
    columns["system"]["atoms"] = {c: np.resize(v, 900) for c, v in columns["system"]["atoms"].items()}
    columns["frame"]["atoms"] = {c: np.resize(v, 900) for c, v in columns["frame"]["atoms"].items()}
    with mr.CollectionWriter(tmp_path / "c.mrec.lmdb", units=UNITS) as w:
        w.add_records(**columns)
        assert w.n_records == 300
    assert len(calls) == 2


def test_collection_C13_precision_and_nonfinite_meta_as_add_record(tmp_path: Path) -> None:
    """A declared precision rounds each record's rows as add_record rounds them; NaN / inf
    per-step meta take their typed JSON form; a system-only and a frame-only call."""
    schema = mr.SequenceSchema().declare_column("atoms", "x", "f64").declare_precision("atoms", "x", 0.001)
    schema.declare_meta("pe", "f64")
    columns = _training_set(40, seed=3)
    columns["frame"]["atoms"] = {"x": columns["frame"]["atoms"]["x"]}
    columns["frame_meta"]["pe"][[3, 9]] = [np.nan, np.inf]
    one = _one_by_one(tmp_path / "one.mrec.lmdb", columns, schema)
    many = _at_once(tmp_path / "many.mrec.lmdb", columns, schema)
    assert one == many and many[0] == (None, 40)
    system_only = {k: columns[k] for k in ("rows", "system", "meta")}
    assert _one_by_one(tmp_path / "s1.mrec.lmdb", system_only) == _at_once(tmp_path / "s2.mrec.lmdb", system_only)
    frame_only = {k: columns[k] for k in ("rows", "frame", "frame_meta")}
    assert _one_by_one(tmp_path / "f1.mrec.lmdb", frame_only, schema) == \
        _at_once(tmp_path / "f2.mrec.lmdb", frame_only, schema)


@pytest.mark.parametrize("bad", [7, "\ud800"], ids=["a number", "a lone surrogate"])
def test_collection_C13_a_refused_record_is_named_and_the_ones_before_it_stay(tmp_path: Path, bad: Any) -> None:
    columns = _training_set(30, seed=5)
    at = int(np.sum(columns["rows"]["atoms"][:12]))
    columns["system"]["atoms"]["element"][at] = bad  # record 12: a string column holding what no string column holds
    one = _one_by_one(tmp_path / "one.mrec.lmdb", columns)
    many = _at_once(tmp_path / "many.mrec.lmdb", columns)
    assert many[0][1] == 12 and many[0][0] is not None and many[0][0][1] is not None
    assert one == many
    if bad == 7:
        assert many[0][0][2].startswith("/records/12")


@st.composite
def record_columns(draw: Any) -> Dict[str, Any]:
    n = draw(st.integers(1, 12))
    counts = np.array(draw(st.lists(st.sampled_from([0, 1, 2, 2, 3]), min_size=n, max_size=n)), np.int64)
    total = int(counts.sum())
    strings = np.empty(total, dtype=object)
    strings[:] = draw(st.lists(st.sampled_from(ELEMENTS), min_size=total, max_size=total))
    if total and draw(st.integers(0, 9)) == 0:
        strings[draw(st.integers(0, total - 1))] = draw(st.sampled_from([3, None, "\ud800"]))
    floats = st.floats(width=64) | st.sampled_from([0.0, -0.0, 1.5])
    system: Dict[str, Any] = {"element": strings}
    if draw(st.booleans()):
        system["id"] = np.concatenate([np.arange(k, dtype=np.uint64) for k in counts]) if total else \
            np.zeros(0, np.uint64)
    frame = {"x": np.array(draw(st.lists(floats, min_size=total, max_size=total)), np.float64)}
    if draw(st.booleans()):
        frame["q"] = np.array(draw(st.lists(st.integers(-3, 3), min_size=total, max_size=total)), np.int8)
    pe = draw(st.lists(st.floats(width=64) | st.integers(-2**60, 2**60) | st.sampled_from(["high"]),
                       min_size=n, max_size=n))
    out: Dict[str, Any] = {"rows": {"atoms": counts}, "system": {"atoms": system}, "frame": {"atoms": frame},
                           "frame_meta": {"pe": pe}}
    if draw(st.booleans()):
        out["index"] = {"k": draw(st.lists(st.integers(0, 9) | st.none(), min_size=n, max_size=n))}
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(columns=record_columns(), precise=st.booleans())
def test_collection_C13_any_columns_write_and_refuse_as_add_record(tmp_path_factory: Any, columns: Dict[str, Any],
                                                                    precise: bool) -> None:
    tmp = tmp_path_factory.mktemp("c13")
    schema = None
    if precise:
        schema = mr.SequenceSchema().declare_column("atoms", "x", "f64").declare_precision("atoms", "x", 0.5)
        if "q" in columns["frame"]["atoms"]:
            schema.declare_column("atoms", "q", "i8")
        schema.declare_meta("pe", "f64")
    one = _one_by_one(tmp / "one.mrec.lmdb", columns, schema, commit_every=3)
    many = _at_once(tmp / "many.mrec.lmdb", columns, schema, commit_every=3)
    assert many == one


# -- input that does not hold its records' rows (C13): refused before any record -------------------------
def _refused(path: Path, **columns: Any) -> SpecViolationError:
    with mr.CollectionWriter(path, units=UNITS) as w:
        with pytest.raises(SpecViolationError) as caught:
            w.add_records(**columns)
        assert w.n_records == 0
    return caught.value


def test_collection_C13_a_column_of_other_rows_is_refused_naming_it_and_a_record(path: Path) -> None:
    rows = {"atoms": np.array([2, 3, 2])}
    exc = _refused(path, rows=rows, frame={"atoms": {"x": np.zeros(7), "y": np.zeros(6)}})
    assert exc.rule == "collection#C13" and exc.node == "/records/trajectory/atoms/y"
    assert "'y'" in exc.message and "6 rows" in exc.message and "sum to 7" in exc.message and "record 2" in exc.message
    assert exc.store == str(path)


def test_collection_C13_ragged_counts_and_per_record_columns_are_refused(path: Path) -> None:
    frame = {"atoms": {"x": np.zeros(4)}}
    cases = [
        (dict(rows={"atoms": np.array([2, -1, 3])}, frame=frame), "/records/1/atoms", "record 1"),
        (dict(rows={"atoms": np.array([[2, 2]])}, frame=frame), "/records/atoms", "one integer row count"),
        (dict(rows={"atoms": [2, 2], "bonds": [1]}, frame=frame), "/records/bonds", "1 counts"),
        (dict(rows={"atoms": [2, 2]}, frame=frame, frame_meta={"pe": [1.0]}), "/records/trajectory/meta/pe",
         "one value per record (2)"),
        (dict(rows={"atoms": [2, 2]}, frame=frame, meta=[{}]), "/records/meta", "one value per record"),
        (dict(rows={"atoms": [2, 2]}, frame=frame, index={"k": [1, 2, 3]}), "/index/records/k", "got 3"),
        (dict(rows={"atoms": [2, 2]}, frame={"bonds": {"i": np.zeros(4)}}), "/records/trajectory/bonds",
         "rows['bonds'] is missing"),
        (dict(rows={"atoms": [2, 2], "extra": [0, 0]}, frame=frame), "/records/extra", "no system or frame column"),
        (dict(rows={"atoms": [2, 2]}, system={"atoms": {"x": np.zeros(4)}}, frame_meta={"pe": [1.0, 2.0]}),
         "/records/trajectory/meta", "needs a frame"),
    ]
    for k, (columns, node, words) in enumerate(cases):
        exc = _refused(path.with_name(f"c{k}.mrec.lmdb"), **columns)
        assert (exc.rule, exc.node) == ("collection#C13", node), (k, exc)
        assert words in exc.message, (k, exc.message)
    exc = _refused(path.with_name("neither.mrec.lmdb"), rows={"atoms": [1]})
    assert exc.rule == "collection#C8"
