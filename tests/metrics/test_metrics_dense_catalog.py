"""Dense layout and catalog (documents §4.2, §4.4, §5.5; checklist #9.11, #9.13; decision 16)."""
from __future__ import annotations


import numpy as np
import pytest

from molrec_raw import read_mrec, section_names, validate, write_mrec
from molrec_raw.errors import CorruptDataError, SpecViolationError
from molrec_raw.record.metrics import MetricsWriter, check_metrics_group, read_metrics
from molrec_raw.zarr import open_group

from metrics_helpers import SeamLog, catalog_of, wal_of

W = "2026-08-04T00:00:0{}Z"


def _write_some(record) -> None:
    with MetricsWriter(record) as writer:
        writer.log("train/loss", 0.5, step=1, wall_time=W.format(1))
        writer.log("train/loss", 0.25, step=2, wall_time=W.format(2))
        writer.log("lr", 0.1, wall_time=W.format(3))


def test_documents_9_11_series_steps_wall_time_aligned_with_their_dtypes(record) -> None:
    _write_some(record)
    group = open_group(record, "r")["metrics"]
    loss = [group[f"{sub}/train%2Floss"] for sub in ("series", "steps", "wall_time")]
    assert [a.metadata.dtype.name for a in loss] == ["float64", "int64", "string"]
    assert [a.shape for a in loss] == [(2,)] * 3
    assert loss[0][:].tolist() == [0.5, 0.25] and loss[1][:].tolist() == [1, 2]
    assert loss[2][:].tolist() == [W.format(1), W.format(2)]
    assert "lr" in group["series"] and "lr" in group["wall_time"]
    assert "lr" not in group["steps"]  # no steps array for a step-less series


def test_documents_9_13_catalog_series_entries_and_watermark(record) -> None:
    _write_some(record)
    catalog = catalog_of(record)
    assert catalog["series"] == {
        "train/loss": {"type": "scalar", "count": 2, "latest_step": 2, "latest_timestamp": W.format(2)},
        "lr": {"type": "scalar", "count": 1, "latest_step": None, "latest_timestamp": W.format(3)},
    }
    raw = wal_of(record).read_bytes()
    assert catalog["wal"] == {"lines": raw.count(b"\n"), "bytes": len(raw)}


def test_documents_1_2_unknown_catalog_keys_are_kept(record) -> None:
    root = open_group(record, "r+")
    root.create_group("metrics", attributes={
        "producer": {"name": "molnex"}, "nothing": None,
        "series": {"old": {"type": "scalar", "count": 0, "latest_step": None, "latest_timestamp": None,
                           "colour": "red"}},
    })
    _write_some(record)
    catalog = catalog_of(record)
    assert catalog["producer"] == {"name": "molnex"} and catalog["nothing"] is None
    assert catalog["series"]["old"]["colour"] == "red"
    with MetricsWriter(record) as writer:
        writer.log("old", 1.0)
    catalog = catalog_of(record)
    assert catalog["series"]["old"]["colour"] == "red" and catalog["series"]["old"]["count"] == 1
    assert catalog["producer"] == {"name": "molnex"}


def test_documents_4_5_densify_lands_data_before_metadata_and_the_watermark_last(record) -> None:
    seam = SeamLog(record)
    with MetricsWriter(record, fileops=seam) as writer:
        writer.log("a", 1.0, step=1)
        writer.flush()
        seam.renamed.clear()
        for step in range(2, 5000):
            writer.log("a", float(step), step=step)
        writer.log("b", 1.0)
        writer.flush()
    order = seam.renamed
    assert order[-1] == "metrics/zarr.json"  # the catalog (watermark) is the commit, last
    for sub, name in (("series", "a"), ("steps", "a"), ("wall_time", "a"), ("series", "b")):
        chunks = [i for i, key in enumerate(order) if key.startswith(f"metrics/{sub}/{name}/c")]
        assert chunks and max(chunks) < len(order) - 1
        last_meta = max(i for i, key in enumerate(order) if key == f"metrics/{sub}/{name}/zarr.json")
        assert max(chunks) < last_meta, (sub, name)  # chunk bytes land before the shape is published


def test_documents_4_5_dense_points_only_grow(record) -> None:
    with MetricsWriter(record) as writer:
        seen = []
        for round_ in range(6):
            for i in range(1500):
                writer.log("x", float(round_ * 1500 + i), step=round_ * 1500 + i)
            writer.flush(durable=False)
            values = open_group(record, "r")["metrics/series/x"][:]
            assert values[:len(seen)].tolist() == seen  # history unchanged
            seen = values.tolist()
    assert seen == [float(i) for i in range(9000)]


def test_documents_4_5_the_wal_is_kept_whole(record) -> None:
    with MetricsWriter(record) as writer:
        writer.log("a", 1.0)
        writer.flush()
        before = wal_of(record).read_bytes()
        writer.log("a", 2.0)
        writer.flush()
    after = wal_of(record).read_bytes()
    assert after.startswith(before) and [line for line in after.split(b"\n") if line][-1].endswith(b"2.0}")
    assert len(before) == 4096 and len(after) == 8192  # each durable flush ends at a 4096-byte boundary


def test_reference_2_19_non_float64_series_refused_on_read(record) -> None:
    root = open_group(record, "r+")
    group = root.create_group("metrics")
    group.create_group("series").create_array("steps", shape=(2,), dtype=np.uint64)
    with pytest.raises(SpecViolationError, match="steps.*float64|float64.*steps"):
        read_metrics(record)


@pytest.mark.parametrize("sub,dtype", [("steps", np.int32), ("steps", np.float64), ("wall_time", np.float64)])
def test_documents_9_11_companion_arrays_of_the_wrong_dtype_refused(record, sub, dtype) -> None:
    group = open_group(record, "r+").create_group("metrics")
    group.create_group("series").create_array("a", shape=(1,), dtype=np.float64)
    group.create_group(sub).create_array("a", shape=(1,), dtype=dtype)
    with pytest.raises(SpecViolationError, match=sub):
        read_metrics(record)


def test_documents_9_11_misaligned_arrays_refused(record) -> None:
    group = open_group(record, "r+").create_group("metrics")
    group.create_group("series").create_array("a", shape=(3,), dtype=np.float64)
    group.create_group("steps").create_array("a", shape=(2,), dtype=np.int64)
    with pytest.raises(SpecViolationError, match="differ"):
        read_metrics(record)
    group.create_group("steps", overwrite=True).create_array("b", shape=(2,), dtype=np.int64)
    with pytest.raises(SpecViolationError, match="no series array"):
        read_metrics(record)


def test_documents_5_5_dense_without_watermark_is_the_whole_record(record) -> None:
    """A molrs-style section: series arrays (no steps/wall_time) and a catalog without wal;
    a stray metrics.jsonl beside them is tolerated and not read (reference §2.19)."""
    group = open_group(record, "r+").create_group("metrics")
    group.create_group("series").create_array("train%2Floss", shape=(3,), dtype=np.float64)[:] = [1, 0.5, 0.25]
    wal_of(record).write_text('{"t":"scalar","k":"train/loss","w":"2026-08-04T00:00:00Z","v":9}\n')
    got = read_metrics(record)
    assert list(got) == ["train/loss"] and got["train/loss"].values.tolist() == [1, 0.5, 0.25]
    assert got["train/loss"].steps is None and got["train/loss"].wall_time is None


def test_documents_5_5_writer_refuses_a_wal_that_is_not_part_of_the_record(record) -> None:
    group = open_group(record, "r+").create_group("metrics")
    group.create_group("series").create_array("a", shape=(1,), dtype=np.float64)
    wal_of(record).write_text('{"t":"scalar","k":"a","w":"2026-08-04T00:00:00Z","v":9}\n')
    with pytest.raises(SpecViolationError, match="watermark"):
        MetricsWriter(record)


def test_documents_5_5_writer_adopts_dense_series_without_a_watermark(record) -> None:
    group = open_group(record, "r+").create_group("metrics")
    group.create_group("series").create_array("a", shape=(2,), dtype=np.float64)[:] = [1.0, 2.0]
    group.create_group("wall_time").create_array("a", shape=(2,), dtype=str)[:] = [W.format(1), W.format(2)]
    with MetricsWriter(record) as writer:
        writer.log("a", 3.0, wall_time=W.format(3))
    got = read_metrics(record)["a"]
    assert got.values.tolist() == [1.0, 2.0, 3.0]
    assert got.wall_time.tolist() == [W.format(1), W.format(2), W.format(3)]
    assert catalog_of(record)["series"]["a"]["count"] == 3


def test_documents_5_5_no_dense_series_the_wal_alone(record) -> None:
    (record / "metrics").mkdir()
    open_group(record, "r+").create_group("metrics")
    wal_of(record).write_text('{"t":"scalar","k":"a","s":1,"w":"2026-08-04T00:00:00Z","v":9}\n'
                              '{"t":"scalar","k":"a","s":1,"w":"2026-08-04T00:00:01Z","v":8}\n')
    got = read_metrics(record)["a"]
    assert got.values.tolist() == [8.0] and got.steps.tolist() == [1]


def test_documents_9_13_uncommitted_leftovers_of_an_interrupted_densify_are_not_read(record) -> None:
    """Arrays longer than the catalog count, and arrays without a catalog entry, are what a
    densify landed before it crashed: readers skip them, the next densify overwrites them."""
    with MetricsWriter(record) as writer:
        writer.log("a", 1.0, step=1)
    group = open_group(record, "r+")["metrics"]
    for sub, value in (("series", 99.0), ("steps", 99), ("wall_time", "x")):
        group[f"{sub}/a"].append(np.array([value], dtype=group[f"{sub}/a"].dtype))
    ghost = group["series"].create_array("ghost", shape=(1,), dtype=np.float64)
    ghost[:] = [5.0]
    assert list(read_metrics(record)) == ["a"] and read_metrics(record)["a"].values.tolist() == [1.0]
    with MetricsWriter(record) as writer:
        writer.log("a", 2.0, step=2)
        writer.log("ghost", 7.0)
    got = read_metrics(record)
    assert got["a"].values.tolist() == [1.0, 2.0] and got["a"].steps.tolist() == [1, 2]
    assert got["ghost"].values.tolist() == [7.0]


def test_documents_9_13_catalog_shape_checked(record) -> None:
    for attrs in ({"wal": {"lines": -1, "bytes": 0}}, {"wal": {"lines": 1}}, {"wal": [1, 2]},
                  {"wal": {"lines": 0, "bytes": 5}}, {"series": []}, {"series": {"a": {"type": "scalar"}}},
                  {"series": {"a": {"type": "scalar", "count": 1.0}}},
                  {"series": {"a": {"type": "scalar", "count": 1, "latest_step": "1"}}}):
        open_group(record, "r+").create_group("metrics", attributes=attrs, overwrite=True)
        with pytest.raises(SpecViolationError):
            read_metrics(record)


def test_documents_9_13_catalog_count_beyond_the_arrays_is_corrupt(record) -> None:
    with MetricsWriter(record) as writer:
        writer.log("a", 1.0)
    group = open_group(record, "r+")["metrics"]
    attrs = group.attrs.asdict()
    attrs["series"]["a"]["count"] = 5
    group.attrs.put(attrs)
    with pytest.raises(CorruptDataError, match="count 5"):
        read_metrics(record)


def test_documents_4_1_custom_types_read_back_with_their_type(record) -> None:
    (record / "metrics").mkdir()
    open_group(record, "r+").create_group("metrics")
    wal_of(record).write_text('{"t":"histogram-mean","k":"h","s":1,"w":"2026-08-04T00:00:00Z","v":2}\n')
    assert read_metrics(record)["h"].type == "histogram-mean"
    with MetricsWriter(record) as writer:
        with pytest.raises(SpecViolationError, match="histogram-mean"):
            writer.log("h", 1.0, step=2)
    assert catalog_of(record)["series"]["h"]["type"] == "histogram-mean"
    assert read_metrics(record)["h"].type == "histogram-mean"


def test_documents_4_1_a_series_with_two_types_is_refused(run_dir) -> None:
    (run_dir / "artifacts").mkdir()
    wal = run_dir / "artifacts" / "metrics.mlp.jsonl"
    wal.write_text('{"t":"scalar","k":"h","w":"2026-08-04T00:00:00Z","v":2}\n'
                   '{"t":"other","k":"h","w":"2026-08-04T00:00:00Z","v":2}\n')
    with pytest.raises(SpecViolationError, match="line 2"):
        read_metrics(wal)


def test_documents_1_2_the_record_layer_keeps_the_metrics_section(record, tmp_path) -> None:
    _write_some(record)
    assert "metrics" in section_names(record)
    rec = read_mrec(record)
    copy = tmp_path / "copy.mrec"
    write_mrec(copy, rec, durable=False)
    assert read_metrics(copy) == read_metrics(record)
    assert wal_of(copy).read_bytes() == wal_of(record).read_bytes()
    assert validate(record) == []
    assert check_metrics_group(open_group(record, "r")["metrics"]) == []


def test_documents_4_5_a_durable_close_syncs_what_non_durable_flushes_landed(record) -> None:
    seam = SeamLog(record)
    synced = seam.synced
    with MetricsWriter(record, fileops=seam) as writer:
        synced.clear()
        writer.log("a", 1.0, step=1)
        writer.flush(durable=False)
        assert synced == []
    assert "metrics/zarr.json" in synced
    for sub in ("series", "steps", "wall_time"):
        assert any(key.startswith(f"metrics/{sub}/a/c") for key in synced), sub
        assert f"metrics/{sub}/a/zarr.json" in synced


@pytest.mark.interop
def test_documents_4_2_zarr_python_reads_the_dense_form(record) -> None:
    zarr = pytest.importorskip("zarr")
    import warnings
    with MetricsWriter(record) as writer:
        for step in range(10000):
            writer.log("train/loss", 1.0 / (step + 1), step=step, wall_time=W.format(step % 10))
            if step % 3000 == 0:
                writer.flush(durable=False)
        writer.log("lr", float("nan"), wall_time=W.format(1))
    ours = read_metrics(record)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        group = zarr.open_group(str(record), mode="r", path="metrics")
        assert group.attrs["series"]["train/loss"]["count"] == 10000
        np.testing.assert_array_equal(group["series/train%2Floss"][:], ours["train/loss"].values)
        np.testing.assert_array_equal(group["steps/train%2Floss"][:], ours["train/loss"].steps)
        assert list(group["wall_time/train%2Floss"][:]) == list(ours["train/loss"].wall_time)
        assert np.isnan(group["series/lr"][:]).all()
