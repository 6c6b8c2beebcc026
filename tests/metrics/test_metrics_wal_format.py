"""The WAL line format and what the writer accepts (documents §4.1, §5.2; decisions 8, 10)."""
from __future__ import annotations

import datetime as dt
import json
import math
import re

import numpy as np
import orjson
import pytest

from molrec_raw.errors import InvalidValueError, SpecViolationError, StoreError
from molrec_raw.record.documents import is_rfc3339
from molrec_raw.record.metrics import MetricsWriter, read_metrics

from metrics_helpers import wal_of

W = "2026-08-04T12:00:00Z"


def lines_of(path) -> list:
    """The event lines of a WAL: blank lines (the padding that ends a durable flush at a
    4096-byte boundary) are skipped, as readers skip them (documents#9.15)."""
    return [line for line in path.read_bytes().decode("utf-8").splitlines() if line]


def test_documents_5_2_compact_line_keys_in_order(record) -> None:
    with MetricsWriter(record) as writer:
        writer.log("train/loss", 0.42, step=120, wall_time=W)
    assert lines_of(wal_of(record)) == ['{"t":"scalar","k":"train/loss","s":120,"w":"2026-08-04T12:00:00Z","v":0.42}']


def test_documents_10_run_minimal_golden_three_lines_are_233_bytes(record) -> None:
    """The fixture run-minimal: 78 + 79 + 76 = 233 bytes of lines, all covered by the watermark."""
    with MetricsWriter(record) as writer:
        writer.log("train/loss", 0.5, step=1, wall_time="2026-08-04T00:00:01+00:00")
        writer.log("train/loss", 0.25, step=2, wall_time="2026-08-04T00:00:02+00:00")
        writer.log("eval/MAE", 0.1, step=2, wall_time="2026-08-04T00:00:02+00:00")
    raw = wal_of(record).read_bytes()
    # the three lines, then the blank lines that end the durable close at a 4096-byte boundary
    # (spec-notes/metrics.md "Power cuts"): 4096 - 233 = 3863 of them, counted by the watermark
    assert [len(line) + 1 for line in raw.split(b"\n")[:-1]] == [78, 79, 76] + [1] * 3863
    catalog = json.loads((record / "metrics" / "zarr.json").read_text())["attributes"]
    assert catalog == {
        "wal": {"lines": 3 + 3863, "bytes": 4096},
        "series": {
            "train/loss": {"type": "scalar", "count": 2, "latest_step": 2,
                           "latest_timestamp": "2026-08-04T00:00:02+00:00"},
            "eval/MAE": {"type": "scalar", "count": 1, "latest_step": 2,
                         "latest_timestamp": "2026-08-04T00:00:02+00:00"},
        },
    }


def test_documents_5_2_optional_keys_omitted_never_null(record) -> None:
    with MetricsWriter(record) as writer:
        writer.log("lr", 1e-3, wall_time=W)
        writer.log("loss", 2.0, step=1, wall_time=W, tags=None)
        writer.log_many({"a": 1.0, "b": 2.0})
    for line in lines_of(wal_of(record)):
        assert "null" not in line
        assert '"tags"' not in line
    obj = orjson.loads(lines_of(wal_of(record))[0])
    assert list(obj) == ["t", "k", "w", "v"]


def test_documents_4_1_tags_are_kept_in_the_wal_only(record) -> None:
    with MetricsWriter(record) as writer:
        writer.log("loss", 1.0, step=1, tags={"phase": "warmup", "gpu": [0, 1]}, wall_time=W)
    (line,) = lines_of(wal_of(record))
    assert line == '{"t":"scalar","k":"loss","s":1,"w":"2026-08-04T12:00:00Z","v":1.0,"tags":{"phase":"warmup","gpu":[0,1]}}'
    assert read_metrics(record)["loss"].values.tolist() == [1.0]


def test_decision_8_tags_never_hold_nan(record) -> None:
    with MetricsWriter(record) as writer:
        with pytest.raises(SpecViolationError):
            writer.log("loss", 1.0, tags={"x": math.nan})
        with pytest.raises(InvalidValueError):
            writer.log("loss", 1.0, tags=["not", "a", "mapping"])


def test_decision_8_non_finite_values_are_strings_in_the_wal_and_ieee_in_dense(record) -> None:
    with MetricsWriter(record) as writer:
        for i, value in enumerate([math.nan, math.inf, -math.inf, np.float64("nan"), 1.5]):
            writer.log("x", value, step=i, wall_time=W)
    values = [orjson.loads(line)["v"] for line in lines_of(wal_of(record))]
    assert values == ["NaN", "Infinity", "-Infinity", "NaN", 1.5]
    series = read_metrics(record)["x"]
    assert series.values.dtype == np.float64
    assert np.isnan(series.values[0]) and series.values[1] == np.inf and series.values[2] == -np.inf
    assert np.isnan(series.values[3]) and series.values[4] == 1.5
    raw = (record / "metrics" / "zarr.json").read_text()
    assert "NaN" not in raw and "Infinity" not in raw  # JSON documents never hold NaN


def test_decision_8_reader_accepts_only_the_three_non_finite_strings(run_dir) -> None:
    path = run_dir / "artifacts"
    path.mkdir()
    wal = path / "m.mlp.jsonl"
    wal.write_text('{"t":"scalar","k":"a","w":"2026-08-04T12:00:00Z","v":"nan"}\n')
    from molrec_raw.errors import CorruptDataError
    with pytest.raises(CorruptDataError, match="NaN"):
        read_metrics(wal)


def test_documents_4_1_values_are_real_numbers_written_as_shortest_round_trip_floats(record) -> None:
    values = [0.1, 1e-300, 1.7976931348623157e308, -0.0, 3, np.float32(0.1), np.int64(7), 2 ** 60]
    with MetricsWriter(record) as writer:
        for value in values:
            writer.log("v", value, wall_time=W)
        for bad in (True, "1.0", None, [1.0], 1j, 10 ** 400):
            with pytest.raises(InvalidValueError):
                writer.log("v", bad)
    got = read_metrics(record)["v"].values
    assert got.tolist() == [float(v) for v in values]
    assert math.copysign(1.0, got[3]) == -1.0
    texts = [line.split('"v":')[1][:-1] for line in lines_of(wal_of(record))]
    assert texts[0] == "0.1" and texts[4] == "3.0"


def test_documents_4_1_steps_are_int64(record) -> None:
    with MetricsWriter(record) as writer:
        writer.log("s", 1.0, step=np.int32(5), wall_time=W)
        writer.log("s", 1.0, step=2 ** 63 - 1, wall_time=W)
        writer.log("s", 1.0, step=-(2 ** 63), wall_time=W)
        for bad in (True, 1.0, "3", 2 ** 63, -(2 ** 63) - 1):
            with pytest.raises(InvalidValueError):
                writer.log("s", 1.0, step=bad)
    series = read_metrics(record)["s"]
    assert series.steps.dtype == np.int64
    assert series.steps.tolist() == [5, 2 ** 63 - 1, -(2 ** 63)]  # log order, not sorted


def test_documents_4_2_a_series_is_stepped_or_step_less_never_both(record) -> None:
    with MetricsWriter(record) as writer:
        writer.log("a", 1.0, step=1)
        writer.log("b", 1.0)
        with pytest.raises(SpecViolationError, match="step"):
            writer.log("a", 2.0)
        with pytest.raises(SpecViolationError, match="step"):
            writer.log("b", 2.0, step=3)
    with MetricsWriter(record) as writer:  # the shape is remembered across sessions
        with pytest.raises(SpecViolationError, match="step"):
            writer.log("a", 2.0)
    assert len(lines_of(wal_of(record))) == 2


def test_decision_10_default_wall_time_is_utc_rfc3339(record) -> None:
    before = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=1)
    with MetricsWriter(record) as writer:
        writer.log("a", 1.0)
        writer.log_many({"b": 1.0, "c": 2.0}, step=4)
    after = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=1)
    walls = [orjson.loads(line)["w"] for line in lines_of(wal_of(record))]
    for wall in walls:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", wall)
        assert is_rfc3339(wall)
        when = dt.datetime.strptime(wall, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc)
        assert before <= when <= after
    assert walls[1] == walls[2]  # log_many: one wall time for the call


def test_decision_10_wall_time_forms(record) -> None:
    with MetricsWriter(record) as writer:
        writer.log("a", 1.0, wall_time="2026-08-04T12:00:00.5+02:00")  # kept as given
        writer.log("a", 1.0, wall_time=dt.datetime(2026, 8, 4, 14, 0, tzinfo=dt.timezone(dt.timedelta(hours=2))))
        writer.log("a", 1.0, wall_time=0.25)
        for bad in ("2026-08-04T12:00:00", "2026-08-04 12:00:00Z", dt.datetime(2026, 8, 4), math.nan, b"x"):
            with pytest.raises(InvalidValueError):
                writer.log("a", 1.0, wall_time=bad)
    walls = [orjson.loads(line)["w"] for line in lines_of(wal_of(record))]
    assert walls == ["2026-08-04T12:00:00.5+02:00", "2026-08-04T12:00:00.000000Z", "1970-01-01T00:00:00.250000Z"]


def test_documents_5_2_log_many_writes_one_line_per_key_in_order(record) -> None:
    with MetricsWriter(record) as writer:
        writer.log_many({"a": 1.0, "b": math.nan, "c": 3}, step=7, wall_time=W)
    objs = [orjson.loads(line) for line in lines_of(wal_of(record))]
    assert [(o["k"], o["s"], o["v"]) for o in objs] == [("a", 7, 1.0), ("b", 7, "NaN"), ("c", 7, 3.0)]


def test_documents_4_3_keys_with_any_characters_round_trip(record) -> None:
    keys = ['a"b', "back\\slash", "tab\t", "é/ü", "emoji 😀", "__private", ".", ".."]
    with MetricsWriter(record) as writer:
        for i, key in enumerate(keys):
            writer.log(key, float(i), step=i)
    got = read_metrics(record)
    assert list(got) == keys
    assert [got[k].values[0] for k in keys] == [float(i) for i in range(len(keys))]


def test_documents_5_buffered_lines_reach_the_wal_within_a_second(tmp_path, monkeypatch):
    """Lines are buffered for speed, but a new wall-clock second writes them out: a process
    killed without flush() loses at most its last second of events."""
    from molrec_raw.record.metrics import writer as writer_module

    now = [1_000_000.25]
    monkeypatch.setattr(writer_module, "_time", lambda: now[0])
    w = MetricsWriter.for_host(tmp_path)
    w.log("loss", 0.5, step=1)
    w.log("loss", 0.25, step=2)
    wal = tmp_path / "artifacts" / "metrics.mlp.jsonl"
    assert not wal.exists() or wal.read_bytes() == b""  # still in memory (same second)
    now[0] += 1.0
    w.log("loss", 0.125, step=3)  # the clock entered a new second: the first two are written
    assert wal.read_bytes().count(b"\n") == 2  # an automatic write is not a durable point: no padding
    w.close()
    assert lines_of(wal) and len(lines_of(wal)) == 3 and len(wal.read_bytes()) == 4096
    with pytest.raises(StoreError, match="closed"):
        w.log("loss", 1.0, step=4)
