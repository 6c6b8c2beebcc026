"""molpy 0.20 (its own native MolRec core) against molrec_raw, both ways: the document
sections molrs's Python does not write — status, method, metrics, observables (documents
§9) — beside a frame, a force field and a trajectory; floats compared bit for bit.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

molpy = pytest.importorskip("molpy", reason="molpy (molcrafts-molpy) ships wheels for CPython >= 3.12 only")

import molpy.io  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
import molpy.io.mrec  # noqa: E402

import molrec_raw as mr  # noqa: E402
from molrec_raw.conformance.canonical import first_difference  # noqa: E402
from molrec_raw.record.model import Block, Frame, MetaValue  # noqa: E402
from molrec_raw.record.observables import Observable  # noqa: E402
from reference_helpers import assert_same_reading, molpy_peer, to_peer_frame  # noqa: E402

PEER = molpy_peer(molpy)
STATUS = {"state": "succeeded", "started_at": "2026-01-01T00:00:00Z", "ended_at": "2026-01-01T01:00:00+00:00",
          "progress": {"step": 1000, "total": 1000}, "extra": {"nested": [1, 2.5, None]}}
METHOD = {"type": "classical", "description": "NVT water", "engine": {"name": "lammps", "version": "2Aug2023"},
          "parameters": {"timestep": 0.5, "thermostat": "nose-hoover"}}
OBSERVABLES = {
    "energy": {"meta": {"kind": "scalar", "description": "potential energy", "unit": "eV", "axes": ["timestep"],
                        "time_dependent": True},
               "data": np.array([1.0, -0.0, 5e-324, np.inf, np.nan])},
    "rdf": {"meta": {"kind": "vector", "description": "g(r)", "time_dependent": False, "axes": ["r"]},
            "data": np.linspace(0.0, 1.0, 7)},
    "spectrum": {"meta": {"kind": "spectrum_density", "description": "unknown kind, carried", "time_dependent": False},
                 "data": np.arange(6, dtype=np.float64).reshape(2, 3)},
}
SERIES = {"train/loss": (np.array([1.0, 0.5, np.nan, -np.inf]), np.array([0, 1, 2, 5], dtype=np.int64)),
          "lr": (np.array([1e-3, 5e-4]), None), ".": (np.array([2.0]), np.array([7], dtype=np.int64))}
WALL = "2026-01-01T00:00:0{}Z"


def _frame() -> Frame:
    return Frame(meta={"temp": MetaValue("f64", 300.0)},
                 blocks={"atoms": Block(columns={"x": np.array([0.1, 0.2]), "element": np.array(["O", "H"], dtype=object)})},
                 box=None)


def _write_ours(path: Path) -> Path:
    rec = mr.MolRec(meta={"creator": {"name": "molrec_raw"}}, status=dict(STATUS), method=dict(METHOD), frame=_frame(),
                    observables={n: Observable(data=o["data"], meta=dict(o["meta"])) for n, o in OBSERVABLES.items()})
    mr.write_mrec(path, rec)
    w = mr.MetricsWriter(path)
    for key, (values, steps) in SERIES.items():
        for i, v in enumerate(values.tolist()):
            w.log(key, v, None if steps is None else int(steps[i]), wall_time=WALL.format(i))
    w.close()
    return path


def _write_molpy(path: Path) -> Path:
    metrics = {"series": {k: v for k, (v, _) in SERIES.items()},
               "steps": {k: s for k, (_, s) in SERIES.items() if s is not None},
               "wall_time": {k: np.array([WALL.format(i) for i in range(len(v))]) for k, (v, _) in SERIES.items()}}
    molpy.io.write_mrec(path, meta={"creator": {"name": "molpy"}}, status=STATUS, method=METHOD,
                        frame=to_peer_frame(PEER, _frame()), metrics=metrics,
                        observables={n: {"meta": o["meta"], "data": o["data"]} for n, o in OBSERVABLES.items()})
    return path


WRITERS = {"ours": _write_ours, "molpy": _write_molpy}


@pytest.mark.parametrize("writer", WRITERS)
def test_documents_9_status_method_metrics_observables_both_ways(tmp_path, writer):
    """documents §9: status and method documents, observables (unknown kind carried, NaN/inf
    data), metrics series with and without steps and wall times, safe names (``train/loss``,
    ``.``) written by one side read alike by both and as written."""
    path = WRITERS[writer](tmp_path / "docs.mrec")
    doc = assert_same_reading(PEER, path)
    assert {k: v for k, v in doc["status"].items()} == STATUS
    assert doc["method"] == METHOD
    assert sorted(doc["observables"]) == sorted(OBSERVABLES)
    assert doc["observables"]["spectrum"]["data"]["shape"] == [2, 3]
    assert doc["observables"]["energy"]["data"]["values"] == [1.0, -0.0, 5e-324, "Infinity", "NaN"]
    series = mr.read_metrics(path)  # the whole reading (dense + tail) equals the series logged
    assert sorted(series) == sorted(SERIES)
    for key, (values, steps) in SERIES.items():
        assert first_difference({"v": values.tolist()}, {"v": series[key].values.tolist()}) is None
        assert (series[key].steps is None) == (steps is None)
        if steps is not None:
            assert series[key].steps.tolist() == steps.tolist()
    assert not mr.validate(path), mr.validate(path)


def test_documents_9_16_molpy_hands_back_our_wal_text_as_stored(tmp_path):
    """molpy's ``metrics()`` hands back the WAL text as stored, the dense part and the catalog's
    watermark: our lines (README#decision-8 spellings of non-finite values) and our dense arrays."""
    path = tmp_path / "wal.mrec"
    mr.write_mrec(path, mr.MolRec(meta={}, status={"state": "running"}))
    w = mr.MetricsWriter(path)
    w.log("a", float("nan"), 1, wall_time=WALL.format(1))
    w.flush()
    w.log("a", 2.0, 2, wall_time=WALL.format(2))  # after the watermark: the tail
    w.close()
    got = molpy.io.mrec.MrecFile(path).metrics()
    assert got["wal"] == (path / "metrics" / "metrics.jsonl").read_text(encoding="utf-8")
    assert '"v":"NaN"' in got["wal"]
    # close densified both points: molpy's dense part is the whole series
    assert first_difference({"v": [float("nan"), 2.0]}, {"v": got["series"]["a"].tolist()}) is None
    assert got["steps"]["a"].tolist() == [1, 2]
    assert got["catalog"]["wal"]["bytes"] == len(got["wal"].encode("utf-8"))


@pytest.mark.parametrize("writer", ["ours", "molpy"])
def test_trajectory_18_molpy_runs_read_alike(tmp_path, writer):
    """A small ragged run written by molpy's MrecWriter or ours reads alike in both."""
    frames = [Frame(meta={"e": MetaValue("f64", -1.0 * k)},
                    blocks={"atoms": Block(columns={"x": np.arange(k + 1, dtype=np.float64) / 3})}, box=None)
              for k in range(4)]
    path = tmp_path / "run.mrec"
    if writer == "ours":
        with mr.MrecWriter(path, mr.SequenceSchema.from_frames(frames), durable=False) as w:
            for k, f in enumerate(frames):
                w.append(f, step=3 * k)
    else:
        theirs = [to_peer_frame(PEER, f) for f in frames]
        with PEER.mrec.MrecWriter(path, PEER.mrec.SequenceSchema.from_frames(theirs), durable=False) as w:
            for k, f in enumerate(theirs):
                w.append(f, step=3 * k)
    doc = assert_same_reading(PEER, path)
    assert doc["trajectory"]["step"] == [0, 3, 6, 9]


OBSERVABLE_DATA = {"i64": np.array([1, -2], dtype=np.int64), "bool": np.array([True, False]),
                   "string": np.array(["a", "bé"]), "scalar": np.float64(2.5), "c128": np.array([1 + 2j]),
                   "u8": np.array([1, 255], dtype=np.uint8)}


@pytest.mark.parametrize("dtype", OBSERVABLE_DATA)
@pytest.mark.parametrize("writer", ["ours", "molpy"])
def test_documents_9_observable_data_dtypes_both_ways(tmp_path, writer, dtype):
    """documents §9 observables: data of integer, bool, string, complex and 0-d dtypes read alike."""
    data = OBSERVABLE_DATA[dtype]
    meta = {"kind": "scalar", "description": dtype, "time_dependent": False}
    path = tmp_path / "obs.mrec"
    if writer == "ours":
        mr.write_mrec(path, mr.MolRec(meta={}, status={"state": "running"},
                                      observables={dtype: Observable(data=np.asarray(data), meta=meta)}))
    else:
        molpy.io.write_mrec(path, status={"state": "running"}, observables={dtype: {"meta": meta, "data": data}})
    doc = assert_same_reading(PEER, path)
    assert doc["observables"][dtype]["data"]["shape"] == list(np.shape(data))


def test_documents_9_13_molpy_dense_series_with_a_wal_tail_merge_here(tmp_path):
    """documents §9 (WAL watermark, README#decision-16): molpy writes a dense series, its catalog
    with the watermark (2 lines, their bytes) and a WAL holding one line more; we read the
    dense points then the tail, validate clean, and molpy's dense part equals ours."""
    wal = ('{"t":"scalar","k":"loss","s":1,"w":"2026-08-04T00:00:01Z","v":0.5}\n'
           '{"t":"scalar","k":"loss","s":2,"w":"2026-08-04T00:00:02Z","v":0.25}\n')
    tail = '{"t":"scalar","k":"loss","s":3,"w":"2026-08-04T00:00:03Z","v":0.125}\n'
    catalog = {"wal": {"lines": 2, "bytes": len(wal)},
               "series": {"loss": {"type": "scalar", "count": 2, "latest_step": 2,
                                   "latest_timestamp": "2026-08-04T00:00:02Z"}}}
    path = tmp_path / "tail.mrec"
    molpy.io.write_mrec(path, status={"state": "running"}, metrics={
        "catalog": catalog, "series": {"loss": np.array([0.5, 0.25])}, "steps": {"loss": np.array([1, 2])},
        "wall_time": {"loss": np.array(["2026-08-04T00:00:01Z", "2026-08-04T00:00:02Z"])}, "wal": wal + tail})
    assert_same_reading(PEER, path)
    series = mr.read_metrics(path)["loss"]
    assert series.values.tolist() == [0.5, 0.25, 0.125] and series.steps.tolist() == [1, 2, 3]
    assert mr.validate(path) == []


@st.composite
def metric_series(draw):
    out = {}
    for key in draw(st.lists(st.sampled_from(["loss", "a b", "é/x", "lr", "__q"]), min_size=1, max_size=3, unique=True)):
        n = draw(st.integers(1, 6))
        values = np.array(draw(st.lists(st.floats(width=64), min_size=n, max_size=n)), dtype=np.float64)
        stepped = draw(st.booleans())
        steps = np.array(sorted(draw(st.sets(st.integers(-2**40, 2**40), min_size=n, max_size=n))), dtype=np.int64)
        out[key] = (values, steps if stepped else None)
    return out


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(series=metric_series(), writer=st.sampled_from(["ours", "molpy"]))
def test_documents_9_hypothesis_metric_series_read_alike(tmp_path_factory, series, writer):
    """Random dense series (NaN, infinities, -0.0, stepped or not, escaped names) written by
    molpy or by our MetricsWriter read alike in both, and as written."""
    path = tmp_path_factory.mktemp("m") / "m.mrec"
    if writer == "ours":
        mr.write_mrec(path, mr.MolRec(meta={}, status={"state": "running"}))
        w = mr.MetricsWriter(path)
        for key, (values, steps) in series.items():
            for i, v in enumerate(values.tolist()):
                w.log(key, v, None if steps is None else int(steps[i]), wall_time=WALL.format(i % 10))
        w.close()
    else:
        molpy.io.write_mrec(path, status={"state": "running"}, metrics={
            "series": {k: v for k, (v, _) in series.items()},
            "steps": {k: s for k, (_, s) in series.items() if s is not None},
            "wall_time": {k: np.array([WALL.format(i % 10) for i in range(len(v))]) for k, (v, _) in series.items()}})
    assert_same_reading(PEER, path)
    got = mr.read_metrics(path)
    for key, (values, steps) in series.items():
        assert first_difference({"v": values.tolist()}, {"v": got[key].values.tolist()}) is None
        assert (None if steps is None else steps.tolist()) == (None if got[key].steps is None else got[key].steps.tolist())
