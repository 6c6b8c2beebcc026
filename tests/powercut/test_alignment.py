"""Durable points without powersafe overwrite (issue 23 item 4; spec-notes/trajectory.md and
spec-notes/metrics.md "Power cuts"): no write after a durable point shares a sector with the
bytes it made durable.

- A positional shard's index page owns its sectors: its first inner chunk starts at the
  next 4096-byte boundary after the index (``zarr-v3-subset#7``:
  bytes outside the indexed ranges are unused), so rewriting the index never touches chunk
  data.
- ``flush()``, ``close()`` and a reopening writer end every shard they landed in (or will
  append to) at a 4096-byte boundary with zeros, before the fsync they already make.
- A durable metrics flush ends the WAL at a 4096-byte boundary with blank lines, which
  readers skip (``documents#9.15``) and the watermark counts (``README#decision-16``).

zarr-python and tensorstore read what the padding surrounds; ``explain`` names it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import List

import numpy as np
import pytest

import molrec_raw as mr
import molrec_raw.zarr.codecs.sharding as sharding
from molrec_raw.record.metrics.wal import parse_wal
from molrec_raw.record.trajectory.storage import align_tails
from molrec_raw.zarr import DirectoryStore, MemoryStore, open_array
from powercut_sim import Recorder

SECTOR = 4096
CODECS = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]


def schema() -> mr.SequenceSchema:
    s = mr.SequenceSchema().declare_block("atoms", rows=3)
    s.declare_column("atoms", "x", "f64")
    s.declare_meta("pe", "f64")
    return s


def frame(i: int) -> mr.Frame:
    return mr.Frame({"pe": float(i)}, {"atoms": mr.Block({"x": np.arange(3.0) + i})})


def shards(path: Path) -> List[Path]:
    return sorted(p for p in (path / "trajectory").rglob("*") if p.is_file() and p.parent.name == "c")


def test_zarr_7_a_positional_shard_starts_its_chunks_at_a_sector_of_their_own() -> None:
    store = MemoryStore()
    a = open_array(store, "x", mode="w", shape=(0,), dtype="float64", chunks=(4,), shards=(64,), codecs=CODECS,
                   shard_index_location="start")
    a.land(slice(0, 6), np.arange(6.0), shape=(6,), positional=True)
    a.publish((6,))
    codec = a.pipeline.sharding
    assert codec is not None and codec.index_size == 16 * 16 + 4
    raw = store.get("x/c/0")
    index = codec.decode_index(raw[:codec.index_size], len(raw))
    assert int(index[:, 0].min()) == codec.first_chunk_offset() == SECTOR
    assert not any(raw[codec.index_size:SECTOR])  # zeros: outside every indexed range
    a.land(slice(6, 9), np.arange(6.0, 9.0), shape=(9,), positional=True)  # an append after it
    a.publish((9,))
    np.testing.assert_array_equal(open_array(store, "x")[...], np.arange(9.0))


def test_trajectory_durable_points_end_every_shard_at_a_sector_boundary(tmp_path: Path) -> None:
    """flush(), close() and a reopening writer: every shard file ends at a 4096 multiple;
    automatic commits between them do not pad (no durable point, no cost)."""
    path = tmp_path / "t.mrec"
    rec = Recorder(str(tmp_path))
    w = mr.MrecWriter(path, schema(), flush_every=2, fileops=rec)
    for i in range(5):
        w.append(frame(i))  # two automatic commits
    automatic = [p.stat().st_size for p in shards(path)]
    assert any(size % SECTOR for size in automatic)
    w.flush()
    assert all(p.stat().st_size % SECTOR == 0 for p in shards(path))
    w.append(frame(5))
    w.close()
    assert all(p.stat().st_size % SECTOR == 0 for p in shards(path))
    # the padding costs no fsync: one per shard file per durable point, as before
    fsyncs = [op for op in rec.log if op.kind == "fsync" and "/c/" in op.path]
    pads = [op for op in rec.log if op.kind == "write" and not any(op.data) and (op.arg + len(op.data)) % SECTOR == 0]
    assert pads and all(len(op.data) < SECTOR for op in pads)
    assert len(fsyncs) == 2 * len(shards(path))  # flush() and close(): each shard once
    # a shard left unaligned (a writer before issue 23, another tool) is aligned on reopen — by
    # a new file renamed over it, never by a write into the sector holding its durable bytes
    x = path / "trajectory" / "atoms" / "x" / "c" / "0"
    x.write_bytes(x.read_bytes()[:-7])
    rec = Recorder(str(tmp_path))
    w = mr.MrecWriter.open(path, fileops=rec)
    assert all(p.stat().st_size % SECTOR == 0 for p in shards(path))
    assert not [op for op in rec.log if op.kind == "write" and op.path == "t.mrec/trajectory/atoms/x/c/0"]
    assert [op.arg for op in rec.log if op.kind == "rename" and op.arg == "t.mrec/trajectory/atoms/x/c/0"]
    w.append(frame(6))
    w.close()
    with mr.MrecReader(path) as r:
        assert len(r) == 7 and r[6].blocks["atoms"].columns["x"].tolist() == [6.0, 7.0, 8.0]


def test_trajectory_a_whole_trajectory_door_leaves_aligned_shards(tmp_path: Path) -> None:
    """write_mrec_trajectory builds with durable=False and makes the record durable by its
    swap: its close() aligns the tails all the same, so a writer reopening it pads nothing."""
    path = mr.write_mrec_trajectory(tmp_path / "w.mrec", [frame(i) for i in range(5)])
    assert shards(path) and all(p.stat().st_size % SECTOR == 0 for p in shards(path))
    rec = Recorder(str(tmp_path))
    mr.MrecWriter.open(path, fileops=rec).close()
    assert not [op for op in rec.log if "/c/" in op.path and op.kind in ("write", "rename")]


@pytest.mark.interop
def test_zarr_7_padded_shards_read_by_zarr_python_and_tensorstore(tmp_path: Path) -> None:
    """Index page padding and durable-point padding lie outside every indexed range."""
    zarr = pytest.importorskip("zarr")
    ts = pytest.importorskip("tensorstore")
    path = tmp_path / "s.zarr"
    a = open_array(path, "x", mode="w", shape=(0, 3), dtype="int64", chunks=(4, 3), shards=(64, 3),
                   codecs=CODECS, shard_index_location="start")
    data = np.arange(3 * 50, dtype=np.int64).reshape(50, 3)
    for lo in range(0, 50, 7):  # grown in place, ended at a sector boundary after every landing
        hi = min(50, lo + 7)
        a.land(slice(lo, hi), data[lo:hi], shape=(hi, 3), positional=True)
        a.publish((hi, 3))
        align_tails(DirectoryStore(path), ["x/c/0/0"])
    assert (path / "x" / "c" / "0" / "0").stat().st_size % SECTOR == 0
    np.testing.assert_array_equal(zarr.open_array(str(path), path="x", mode="r")[...], data)
    store = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path / "x")}}).result()
    np.testing.assert_array_equal(store.read().result(), data)


def test_explain_names_the_index_page_padding(tmp_path: Path) -> None:
    from molrec_raw.record.explain import explain

    path = tmp_path / "e.mrec"
    s = mr.SequenceSchema().declare_block("atoms", rows=3)
    s.declare_column("atoms", "x", "f64")
    w = mr.MrecWriter(path, s, flush_every=2)
    for i in range(3):
        w.append(mr.Frame({}, {"atoms": mr.Block({"x": np.arange(3.0)})}))
    w.close()
    # a small index (16 inner chunks per shard), by hand: the page's zeros are named as such
    store = DirectoryStore(tmp_path / "small.mrec")
    mr.write_mrec_frame(tmp_path / "small.mrec", mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(2)})}))
    a = open_array(store, "trajectory/y", mode="w", shape=(0,), dtype="float64", chunks=(4,), shards=(64,),
                   codecs=CODECS, shard_index_location="start")
    a.land(slice(0, 6), np.arange(6.0), shape=(6,), positional=True)
    a.publish((6,))
    report = explain(tmp_path / "small.mrec", "trajectory/y/c/0")
    titles = [(sec.title, sec.offset, sec.length) for sec in report.sections]
    assert ("index page padding", 16 * 16 + 4, SECTOR - (16 * 16 + 4)) in titles
    report = explain(path, "trajectory/atoms/x/c/0")  # the writer's shard: its end padding is among the unused bytes
    tail = [sec for sec in report.sections if sec.title == "unused bytes"][-1]
    assert tail.offset + tail.length == (path / "trajectory/atoms/x/c/0").stat().st_size
    assert "4096-byte boundary" in tail.note


def test_metrics_a_durable_flush_ends_the_wal_at_a_sector_boundary_with_blank_lines(tmp_path: Path) -> None:
    record = tmp_path / "m.mrec"
    mr.write_mrec_frame(record, mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(2)})}))
    wal = record / "metrics" / "metrics.jsonl"
    with mr.MetricsWriter(record) as m:
        m.log("loss", 1.0, step=1)
        m.flush(durable=False)  # not a durable point: no padding
        assert len(wal.read_bytes()) % SECTOR != 0
        m.log("loss", 2.0, step=2)
        m.flush()
        assert len(wal.read_bytes()) == SECTOR
        m.log("loss", 3.0, step=3)
    raw = wal.read_bytes()
    assert len(raw) == 2 * SECTOR and raw[SECTOR:].startswith(b'{"t":"scalar"')
    assert set(raw[raw.index(b"\n", SECTOR) + 1:]) == {ord("\n")}  # only blank lines after the last event
    catalog = json.loads((record / "metrics" / "zarr.json").read_text())["attributes"]
    assert catalog["wal"] == {"lines": raw.count(b"\n"), "bytes": 2 * SECTOR}
    assert mr.read_metrics(record)["loss"].steps.tolist() == [1, 2, 3]
    assert parse_wal(raw, source="wal").lines == raw.count(b"\n")
    assert mr.validate(record) == []


def test_metrics_a_host_wal_is_padded_at_durable_flushes_too(tmp_path: Path) -> None:
    with mr.MetricsWriter.for_host(tmp_path) as m:
        m.log("loss", 1.0, step=1)
    wal = tmp_path / "artifacts" / "metrics.mlp.jsonl"
    assert len(wal.read_bytes()) == SECTOR
    with mr.MetricsWriter.for_host(tmp_path) as m:  # reopened: appends after the padding
        m.log("loss", 2.0, step=2)
    assert len(wal.read_bytes()) == 2 * SECTOR
    assert mr.read_metrics(wal)["loss"].steps.tolist() == [1, 2]


def test_without_alignment_the_old_layout_comes_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``SECTOR_ALIGN = 1`` turns every alignment off (the layout before issue 23: see
    tests/trajectory/test_store_bytes.py); the power-cut tests use it to show the holes."""
    monkeypatch.setattr(sharding, "SECTOR_ALIGN", 1)
    path = tmp_path / "t.mrec"
    w = mr.MrecWriter(path, schema(), flush_every=2)
    for i in range(3):
        w.append(frame(i))
    w.close()
    assert any(p.stat().st_size % SECTOR for p in shards(path))
