"""Record writer set-up, packed records, the host surface and discovery
(documents §5.1, §5.6, checklist #9.17; root-layout host layout)."""
from __future__ import annotations

import os
import zipfile

import numpy as np
import pytest

from molrec_raw import write_mrec_frame, Block, Frame
from molrec_raw.errors import InvalidValueError, ReadOnlyError, SpecViolationError, StoreError
from molrec_raw.record.metrics import Discovered, MetricsWriter, discover_metrics, host_wal_path, read_metrics

from metrics_helpers import wal_of


def _pack(directory, archive) -> None:
    """A *.mrec.zip: stored entries named relative to the record root, sorted, no directories."""
    names = sorted(str(p.relative_to(directory)).replace(os.sep, "/") for p in directory.rglob("*") if p.is_file())
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as zf:
        for name in names:
            zf.write(directory / name, name)


def test_documents_5_1_record_writer_creates_the_metrics_group_of_an_existing_record(record) -> None:
    assert not (record / "metrics").exists()
    with MetricsWriter(record) as writer:
        assert writer.wal_path == record / "metrics" / "metrics.jsonl"
        writer.log("loss", 1.0, step=1)
    assert (record / "metrics" / "zarr.json").is_file() and wal_of(record).is_file()


def test_documents_1_1_record_writer_refuses_what_is_not_a_writable_record(tmp_path, record) -> None:
    with pytest.raises(StoreError, match="no such file or directory"):  # the one answer (errors.NotARecordError)
        MetricsWriter(tmp_path / "missing.mrec")
    (tmp_path / "empty.mrec").mkdir()
    with pytest.raises(StoreError, match="not a MolRec record"):
        MetricsWriter(tmp_path / "empty.mrec")
    with pytest.raises(SpecViolationError, match="mrec"):
        MetricsWriter(tmp_path / "x.zarr")
    _pack(record, tmp_path / "run.mrec.zip")
    with pytest.raises(ReadOnlyError):
        MetricsWriter(tmp_path / "run.mrec.zip")


def test_documents_5_5_a_packed_record_reads_dense_and_tail_through_the_zip(record, tmp_path) -> None:
    with MetricsWriter(record) as writer:
        for step in range(100):
            writer.log("loss", 1.0 / (step + 1), step=step)
        writer.flush()
        writer.log("loss", 9.0, step=5)  # replaces a dense point
        writer.log("acc", 0.5)
        writer._write_buffer()  # past the watermark: a tail inside the zip
        expected = read_metrics(record)
        archive = tmp_path / "run.mrec.zip"
        _pack(record, archive)
        writer.flush()
    got = read_metrics(archive)
    assert got == expected and got["loss"].values[5] == 9.0 and got["acc"].values.tolist() == [0.5]


def test_documents_5_1_host_writer_keeps_only_the_wal(run_dir) -> None:
    assert host_wal_path(run_dir) == run_dir / "artifacts" / "metrics.mlp.jsonl"
    with MetricsWriter.for_host(run_dir) as writer:
        writer.log("loss", 1.0, step=1)
        writer.log("lr", 0.1)
    with MetricsWriter.for_host(run_dir, stem="eval") as writer:
        writer.log("mae", 0.5, step=1)
    files = sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*"))
    assert files == ["artifacts", "artifacts/eval.mlp.jsonl", "artifacts/metrics.mlp.jsonl"]  # no meta/, status/, zarr
    got = read_metrics(run_dir / "artifacts" / "metrics.mlp.jsonl")
    assert got["loss"].steps.tolist() == [1] and got["lr"].values.tolist() == [0.1]
    with MetricsWriter.for_host(run_dir) as writer:  # reopen: appends
        writer.log("loss", 2.0, step=2)
        with pytest.raises(SpecViolationError):
            writer.log("lr", 1.0, step=3)  # the shape of 'lr' is learnt from the file
    assert read_metrics(run_dir / "artifacts" / "metrics.mlp.jsonl")["loss"].values.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("stem", ["", ".", "..", "a/b", "a\\b", "x\x00"])
def test_documents_5_1_host_stem_must_be_a_file_name_part(run_dir, stem) -> None:
    with pytest.raises(InvalidValueError):
        MetricsWriter.for_host(run_dir, stem=stem)


def test_documents_5_1_host_run_dir_must_exist(tmp_path) -> None:
    with pytest.raises(StoreError):
        MetricsWriter.for_host(tmp_path / "nope")


def test_documents_9_17_discovery_matches_mlp_jsonl_only(tmp_path) -> None:
    run = tmp_path / "run"
    artifacts = run / "executions" / "e1" / "artifacts"
    artifacts.mkdir(parents=True)
    (artifacts / "metrics.mlp.jsonl").write_text("")
    (artifacts / "eval.mlp.jsonl").write_text("")
    (artifacts / "plot.mlp.vl.json").write_text("{}")
    (artifacts / "notes.jsonl").write_text("")
    leftover = run / "metrics.mlp.zarr"
    (leftover / "series").mkdir(parents=True)
    (leftover / "zarr.json").write_text('{"zarr_format":3,"node_type":"group"}')
    (leftover / "inner.mlp.jsonl").write_text("")  # inside a leftover store: never looked at
    (run / "metrics.mlp.index.json").write_text("{}")
    frame = Frame(blocks={"atoms": Block({"x": np.zeros(1)})})
    write_mrec_frame(artifacts / "sample.mrec", frame, durable=False)
    (artifacts / "sample.mrec" / "stray.mlp.jsonl").write_text("")  # inside a record: not a host surface
    (artifacts / "broken.mrec").mkdir()  # no root zarr.json: not a record
    _pack(artifacts / "sample.mrec", artifacts / "packed.mrec.zip")
    (artifacts / "fake.mrec.zip").write_bytes(b"not a zip")
    found = discover_metrics(run)
    assert isinstance(found, Discovered)
    assert found.metrics == (artifacts / "eval.mlp.jsonl", artifacts / "metrics.mlp.jsonl")
    assert found.records == (artifacts / "packed.mrec.zip", artifacts / "sample.mrec")
    assert found.ignored == (run / "metrics.mlp.index.json", leftover)
    with pytest.raises(StoreError):
        discover_metrics(tmp_path / "absent")


def test_documents_5_6_a_record_under_the_host_keeps_its_own_metrics(tmp_path) -> None:
    artifacts = tmp_path / "run" / "artifacts"
    artifacts.mkdir(parents=True)
    record = artifacts / "model.mrec"
    write_mrec_frame(record, Frame(blocks={"atoms": Block({"x": np.zeros(1)})}), durable=False)
    with MetricsWriter(record) as writer:
        writer.log("energy", -1.0, step=0)
    with MetricsWriter.for_host(tmp_path / "run") as host:
        host.log("loss", 0.5, step=0)
    found = discover_metrics(tmp_path / "run")
    assert found.records == (record,) and found.metrics == (artifacts / "metrics.mlp.jsonl",)
    assert list(read_metrics(found.records[0])) == ["energy"]
    assert list(read_metrics(found.metrics[0])) == ["loss"]


def test_documents_5_1_writer_takes_the_host_wal_path_the_reader_takes(run_dir) -> None:
    """``MetricsWriter(path)`` with a ``*.mlp.jsonl`` path is ``for_host`` with that file
    (issue 12): the same lines, the same reopening, every path ``read_metrics`` takes."""
    path = run_dir / "artifacts" / "metrics.mlp.jsonl"
    with MetricsWriter(path) as writer:  # the artifacts/ directory is made, as for_host does
        assert writer.wal_path == path
        writer.log("loss", 1.0, step=1, wall_time="2026-01-01T00:00:00Z")
        writer.log("lr", 0.1, wall_time="2026-01-01T00:00:00Z")
    by_path = path.read_bytes()
    path.unlink()
    with MetricsWriter.for_host(run_dir) as writer:
        writer.log("loss", 1.0, step=1, wall_time="2026-01-01T00:00:00Z")
        writer.log("lr", 0.1, wall_time="2026-01-01T00:00:00Z")
    assert path.read_bytes() == by_path
    with MetricsWriter(path) as writer:  # reopening appends, and knows the shapes in the file
        writer.log("loss", 2.0, step=2)
        with pytest.raises(SpecViolationError):
            writer.log("lr", 1.0, step=3)
    assert read_metrics(path)["loss"].values.tolist() == [1.0, 2.0]
    with pytest.raises(StoreError, match="being written by another writer"):  # one writer per WAL, either way in
        with MetricsWriter.for_host(run_dir):
            MetricsWriter(path)
    assert sorted(p.name for p in run_dir.rglob("*")) == ["artifacts", "metrics.mlp.jsonl"]  # WAL only


def test_documents_5_1_a_host_wal_path_writer_draws_the_plot_and_checks_its_stem(tmp_path) -> None:
    path = tmp_path / "EVAL.MLP.JSONL"  # the suffix in any case, as read_metrics and discovery take it
    with MetricsWriter(path, plot=True) as writer:
        writer.log("mae", 0.5, step=1)
    assert (tmp_path / "EVAL.mlp.vl.json").is_file()
    assert list(read_metrics(path)) == ["mae"]
    with pytest.raises(InvalidValueError):
        MetricsWriter(tmp_path / ".mlp.jsonl")  # no stem
    with pytest.raises(StoreError):
        MetricsWriter(tmp_path / "missing" / "artifacts" / "m.mlp.jsonl")  # as for_host: its run dir must exist


def test_documents_5_1_plot_is_for_host_wal_files_only(record) -> None:
    with pytest.raises(InvalidValueError, match="host WAL"):
        MetricsWriter(record, plot=True)
