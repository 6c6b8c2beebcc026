"""The duplicate-step rule and the dense + WAL-tail merge (documents#9.12, #9.16)."""
from __future__ import annotations

import random

import numpy as np
import pytest

from molrec_raw.record.metrics import MetricsWriter, read_metrics, read_wal_file
from molrec_raw.record.metrics.series import Series, fold, merge

from metrics_helpers import catalog_of, wal_of

W = "2026-08-04T12:00:0{}Z"


def test_documents_9_12_later_event_wins_step_less_never_merge(run_dir) -> None:
    with MetricsWriter.for_host(run_dir) as writer:
        writer.log("loss", 1.0, step=100, wall_time=W.format(1))
        writer.log("loss", 2.0, step=101, wall_time=W.format(2))
        writer.log("loss", 3.0, step=100, wall_time=W.format(3))  # a resumed run re-logs step 100
        writer.log("lr", 0.1, wall_time=W.format(1))
        writer.log("lr", 0.1, wall_time=W.format(1))  # identical, but step-less: two points
    got = read_metrics(writer.wal_path)
    assert got["loss"].steps.tolist() == [100, 101]
    assert got["loss"].values.tolist() == [3.0, 2.0]  # later wins, at the first event's place
    assert got["loss"].wall_time.tolist() == [W.format(3), W.format(2)]
    assert got["lr"].steps is None and got["lr"].values.tolist() == [0.1, 0.1]


def test_documents_9_12_fold_keeps_first_position_and_last_content() -> None:
    steps = np.array([5, 3, 5, 4, 3, 5], dtype=np.int64)
    values = np.arange(6, dtype=np.float64)
    walls = np.array([f"w{i}" for i in range(6)], dtype=object)
    got = fold(Series("k", "scalar", steps, values, walls))
    assert got.steps.tolist() == [5, 3, 4]
    assert got.values.tolist() == [5.0, 4.0, 3.0]
    assert got.wall_time.tolist() == ["w5", "w4", "w3"]


def test_documents_9_16_tail_event_replaces_a_dense_point_in_place(record) -> None:
    with MetricsWriter(record) as writer:
        for step in range(5):
            writer.log("loss", float(step), step=step, wall_time=W.format(1))
        writer.flush()  # steps 0..4 are dense now
        writer.log("loss", 40.0, step=4, wall_time=W.format(2))
        writer.log("loss", 20.0, step=2, wall_time=W.format(2))
        writer.log("loss", 5.0, step=5, wall_time=W.format(2))
        writer._write_buffer()  # in the WAL, past the watermark, not densified yet
        tail_read = read_metrics(record)["loss"]
    dense_read = read_metrics(record)["loss"]  # after close: all dense
    for got in (tail_read, dense_read):
        assert got.steps.tolist() == [0, 1, 2, 3, 4, 5]
        assert got.values.tolist() == [0.0, 1.0, 20.0, 3.0, 40.0, 5.0]
        assert got.wall_time.tolist() == [W.format(1)] * 2 + [W.format(2), W.format(1), W.format(2), W.format(2)]
    entry = catalog_of(record)["series"]["loss"]
    assert entry["count"] == 6 and entry["latest_step"] == 5


def test_documents_9_16_replacing_the_last_point_updates_latest_timestamp(record) -> None:
    with MetricsWriter(record) as writer:
        writer.log("loss", 1.0, step=1, wall_time=W.format(1))
        writer.flush()
        writer.log("loss", 2.0, step=1, wall_time=W.format(9))
    entry = catalog_of(record)["series"]["loss"]
    assert entry == {"type": "scalar", "count": 1, "latest_step": 1, "latest_timestamp": W.format(9)}
    assert read_metrics(record)["loss"].values.tolist() == [2.0]


def test_documents_9_16_lines_before_the_watermark_are_not_reapplied(record) -> None:
    """The dense series are authoritative up to the watermark: a reader does not fold the WAL
    prefix again (here the dense value is changed behind the writer's back to prove it)."""
    with MetricsWriter(record) as writer:
        writer.log("loss", 1.0, step=1)
        writer.flush()
        writer.log("loss", 2.0, step=2)
        writer._write_buffer()
        from molrec_raw.zarr import open_group
        array = open_group(record, "r+")["metrics/series/loss"]
        array[0:1] = np.array([111.0])
        assert read_metrics(record)["loss"].values.tolist() == [111.0, 2.0]
        writer.flush()


def test_documents_9_16_merge_appends_new_keys_and_step_less_events() -> None:
    base = Series("a", "scalar", None, np.array([1.0]), np.array(["w"], dtype=object))
    new = Series("a", "scalar", None, np.array([1.0, 2.0]), np.array(["x", "y"], dtype=object))
    got = merge(base, new)
    assert got.values.tolist() == [1.0, 1.0, 2.0] and got.wall_time.tolist() == ["w", "x", "y"]
    assert merge(None, new) is not None


@pytest.mark.parametrize("seed", range(6))
def test_documents_4_5_a_densify_never_loses_a_wal_line(record, seed: int) -> None:
    """Random events (duplicate steps, NaNs, step-less keys) with random flushes, reopenings
    and partial densifies: the record always reads as folding its whole WAL would."""
    rng = random.Random(seed)
    stepped_keys = ["loss", "acc", "x/y"]
    plain_keys = ["lr", "gpu mem"]
    writer = MetricsWriter(record)
    for _ in range(rng.randint(20, 60)):
        action = rng.random()
        if action < 0.7:
            for _ in range(rng.randint(1, 30)):
                if rng.random() < 0.75:
                    value = rng.choice([rng.random(), float("nan"), float(rng.randint(-5, 5))])
                    writer.log(rng.choice(stepped_keys), value, step=rng.randint(0, 40))
                else:
                    writer.log(rng.choice(plain_keys), rng.random())
        elif action < 0.85:
            writer.flush(durable=rng.random() < 0.3)
        elif action < 0.95:
            writer._write_buffer()  # lines past the watermark, left for the reader to merge
        else:
            writer._write_buffer()
            writer.abort()  # a crash: the lock goes, nothing is densified
            writer = MetricsWriter(record)
        expected = read_wal_file(wal_of(record))
        got = read_metrics(record)
        assert list(got) == list(expected)  # first-seen key order
        for key in expected:
            assert got[key] == expected[key], key
    writer.close()
    assert read_metrics(record) == read_wal_file(wal_of(record))


def test_documents_9_16_merging_an_empty_series_keeps_the_base():
    """An empty batch is neither stepped nor step-less: the base comes back unchanged (it
    used to lose a stepped base's steps, or raise on a step-less one)."""
    empty = Series("loss", "scalar", np.zeros(0, np.int64), np.zeros(0), None)
    for steps in (np.array([1, 2], np.int64), None):
        base = Series("loss", "scalar", steps, np.array([0.5, 0.25]), None)
        out = merge(base, empty)
        assert out.values.tolist() == [0.5, 0.25]
        assert (out.steps is None) if steps is None else out.steps.tolist() == [1, 2]
