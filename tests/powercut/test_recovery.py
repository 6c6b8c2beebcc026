"""Recovery after a power cut (issue 10; trajectory §10–§11, spec-notes/trajectory.md
"Power cuts"): the three known holes made by hand on a real record, and every entry point —
``MrecReader`` (reads a crashed record correctly without writing, from a zip too),
``MrecWriter.open`` (recovers, then continues), ``molrec-raw repair [--dry-run]`` and
``molrec-raw validate`` — plus the landed-index check that tells "not written" from "fill".
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict

import numpy as np
import pytest

import molrec_raw as mr
from molrec_raw.cli import main
from molrec_raw.errors import CorruptDataError
from molrec_raw.record.trajectory.recovery import CHECKPOINT, MANIFEST
from molrec_raw.zarr import DirectoryStore, open_array
from powercut_sim import snapshot
from powercut_workloads import same_frame, traj_expected, traj_frame, traj_schema, traj_step, traj_time, zarr_python_reads

X_SHARD = "trajectory/atoms/x/c/0"


def crashed(path: Path, durable: int = 6, automatic: int = 6) -> Dict[str, bytes]:
    """``durable`` frames made durable by ``flush()``, then ``automatic`` more committed by
    automatic commits (flush_every 3), and the writer never closed (the process died).
    Returns the index page of atoms/x as it was at the durable point."""
    w = mr.MrecWriter(path, traj_schema(), flush_every=3)
    for i in range(durable):
        w.append(traj_frame(i), step=traj_step(i), time=traj_time(i))
    w.flush()
    page = (path / X_SHARD).read_bytes()[:4096]
    for i in range(durable, durable + automatic):
        w.append(traj_frame(i), step=traj_step(i), time=traj_time(i))
    assert w.committed == durable + automatic
    return {"x-page": page}


def frames_ok(path: Path, n: int) -> None:
    with mr.MrecReader(path) as r:
        assert len(r) == n
        assert r.step == [traj_step(i) for i in range(n)]
        for i in range(n):
            assert same_frame(r[i], traj_expected(i)), i


def test_trajectory_10_a_clean_close_leaves_no_checkpoint_and_a_killed_writer_keeps_one(tmp_path: Path) -> None:
    path = tmp_path / "t.mrec"
    crashed(path)
    assert (path / CHECKPOINT).is_file()
    with mr.MrecReader(path) as r:  # a killed process: every automatic commit is kept
        assert len(r) == 12 and r.source == "live"
    w = mr.MrecWriter.open(path)
    w.close()
    assert not (path / CHECKPOINT).exists()
    attrs = json.loads((path / "trajectory" / "zarr.json").read_bytes())["attributes"]
    assert attrs[MANIFEST]["nstep"] == 12 and attrs[MANIFEST]["arrays"]["atoms/x"] == 8 * 3 + 4 * 4


def test_trajectory_10_hole_1_a_torn_index_page_falls_back_to_the_durable_commit(tmp_path: Path) -> None:
    path = tmp_path / "t.mrec"
    crashed(path)
    shard = path / X_SHARD
    raw = bytearray(shard.read_bytes())
    raw[512:1024] = bytes(range(256)) * 2  # one sector of the in-place index rewrite is garbage
    shard.write_bytes(bytes(raw))
    before = snapshot(str(path))
    frames_ok(path, 6)  # the frames flush() made durable, all of them, bit for bit
    with mr.MrecReader(path) as r:
        assert r.source == "checkpoint" and "crc32c" in (r.recovery_reason or "")
    assert snapshot(str(path)) == before  # reading wrote nothing


def test_trajectory_10_hole_2_an_empty_marker_falls_back_to_the_durable_commit(tmp_path: Path) -> None:
    path = tmp_path / "t.mrec"
    crashed(path)
    (path / "trajectory" / "zarr.json").write_bytes(b"")  # the rename persisted, its bytes did not
    (path / "trajectory" / "atoms" / "x" / "zarr.json").write_bytes(b"")
    frames_ok(path, 6)


def test_trajectory_10_hole_3_a_marker_without_its_index_is_never_read_as_fill(tmp_path: Path) -> None:
    """The commit marker persisted, the shard's new index did not: rows 18..35 of atoms/x
    are not written, and the reader must not return the fill value for them.  The marker's
    manifest records where the index of every shard landed in since the durable point ended;
    the old index ends before that, so the live state is refused and the checkpoint read."""
    path = tmp_path / "t.mrec"
    saved = crashed(path)
    attrs = json.loads((path / "trajectory" / "zarr.json").read_bytes())["attributes"]
    end = attrs[MANIFEST]["index_ends"]["atoms/x"]["c/0"]
    shard = path / X_SHARD
    raw = bytearray(shard.read_bytes())
    raw[:4096] = saved["x-page"]  # the index as the durable point left it; nstep says 12
    shard.write_bytes(bytes(raw))
    frames_ok(path, 6)
    with mr.MrecReader(path) as r:
        assert r.source == "checkpoint" and "never written" in (r.recovery_reason or "")
    x = open_array(DirectoryStore(path, read_only=True), "trajectory/atoms/x")
    with pytest.raises(CorruptDataError, match="never written"):
        x.check_landed({X_SHARD: end})
    sharding = x.pipeline.sharding
    durable_end = sharding.index_end(sharding.decode_index(saved["x-page"][:sharding.index_size], None))
    x.check_landed({X_SHARD: durable_end})  # the index is the durable point's, whole and valid


def test_zarr_7_a_positional_landing_only_moves_the_index_end_forward(tmp_path: Path) -> None:
    """Each positional landing that changes an index makes it end further (it appends, and
    stores the fill chunk rather than emptying a stored one), so "at least as new as landing
    L" is "ends at or past L's end"; a landing of all-fill rows into a new shard stores it."""
    codecs = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]
    a = open_array(tmp_path / "s.zarr", "x", mode="w", shape=(0,), dtype="float64", chunks=(4,), shards=(16,),
                   codecs=codecs, shard_index_location="start")
    a.land(slice(0, 6), np.zeros(6), shape=(6,), positional=True)
    a.publish((6,))
    key = a.chunk_key((0,))
    assert a.landed_ends == {key: 0}  # stored, every inner chunk empty
    a.check_landed({key: 0})
    a.land(slice(6, 7), np.ones(1), shape=(7,), positional=True)
    a.publish((7,))
    first = a.landed_ends[key]
    assert first > 0
    a.land(slice(6, 8), np.zeros(2), shape=(8,), positional=True)  # the stored chunk [4, 8) becomes all fill
    a.publish((8,))
    assert a.landed_ends[key] > first
    np.testing.assert_array_equal(a[0:8], np.zeros(8))
    a.check_landed({key: a.landed_ends[key]})
    with pytest.raises(CorruptDataError, match="never written"):
        a.check_landed({key: a.landed_ends[key] + 1})
    with pytest.raises(CorruptDataError, match="not stored"):
        a.check_landed({a.chunk_key((1,)): 0})


@pytest.mark.interop
def test_zarr_7_positional_shards_read_by_zarr_python_and_tensorstore(tmp_path: Path) -> None:
    """Positional shards (index page padding, superseded chunks) hold only bytes outside
    every indexed range besides their chunks: other readers read them."""
    zarr = pytest.importorskip("zarr")
    ts = pytest.importorskip("tensorstore")
    codecs = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "gzip", "configuration": {"level": 1}},
              {"name": "crc32c"}]
    a = open_array(tmp_path / "s.zarr", "x", mode="w", shape=(0, 3), dtype="int64", chunks=(4, 3), shards=(64, 3),
                   codecs=codecs, shard_index_location="start")
    data = np.arange(3 * 50, dtype=np.int64).reshape(50, 3)
    for lo in range(0, 50, 7):  # grown in place, a landing at a time, as a trajectory column
        hi = min(50, lo + 7)
        a.land(slice(lo, hi), data[lo:hi], shape=(hi, 3), positional=True)
        a.publish((hi, 3))
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "s.zarr"), path="x", mode="r")[...], data)
    store = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(tmp_path / "s.zarr" / "x")}}).result()
    np.testing.assert_array_equal(store.read().result(), data)


def test_trajectory_10_reader_recovers_a_zip_of_a_crashed_record(tmp_path: Path) -> None:
    path = tmp_path / "t.mrec"
    crashed(path)
    (path / "trajectory" / "zarr.json").write_bytes(b"")
    packed = mr.pack_mrec_zip(path, check=False)  # a crashed record packs as it stands when forced
    with mr.MrecReader(packed) as r:
        assert len(r) == 6 and r.source == "checkpoint"
        assert same_frame(r[5], traj_expected(5))


def test_trajectory_10_writer_open_recovers_then_continues(tmp_path: Path) -> None:
    path = tmp_path / "t.mrec"
    crashed(path)
    raw = bytearray((path / X_SHARD).read_bytes())
    raw[0:512] = b"\x00" * 512
    (path / X_SHARD).write_bytes(bytes(raw))
    w = mr.MrecWriter.open(path)
    assert w.committed == 6
    for i in range(6, 9):
        w.append(traj_frame(i), step=traj_step(i), time=traj_time(i))
    w.close()
    frames_ok(path, 9)


@pytest.mark.interop
def test_trajectory_10_zarr_python_reads_records_recovered_by_a_writer_and_by_repair(tmp_path: Path) -> None:
    pytest.importorskip("zarr", reason="zarr-python 3 (the [test] extra, Python 3.11+)")
    for recover in (lambda p: mr.MrecWriter.open(p).close(), mr.repair_mrec):
        path = tmp_path / f"t{len(list(tmp_path.iterdir()))}.mrec"
        crashed(path)
        raw = bytearray((path / X_SHARD).read_bytes())
        raw[0:512] = b"\x00" * 512
        (path / X_SHARD).write_bytes(bytes(raw))
        recover(path)
        frames_ok(path, 6)
        assert zarr_python_reads(path) is None


def test_trajectory_10_repair_cli_dry_run_repair_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.mrec"
    crashed(path)
    raw = bytearray((path / X_SHARD).read_bytes())
    raw[0:512] = bytes(range(256)) * 2
    (path / X_SHARD).write_bytes(bytes(raw))
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert "trajectory#10" in out and "needs repair" in out
    before = snapshot(str(path))
    assert main(["repair", "--dry-run", str(path)]) == 1
    out = capsys.readouterr().out
    assert "would: page trajectory/atoms/x/c/0" in out and "needs repair" in out
    assert snapshot(str(path)) == before  # a dry run changes nothing
    assert main(["repair", str(path)]) == 0
    out = capsys.readouterr().out
    assert "trajectory: 6 committed frames, read from its checkpoint" in out and out.rstrip().endswith("sound")
    assert not (path / CHECKPOINT).exists()
    repaired = snapshot(str(path))
    assert main(["repair", str(path)]) == 0  # twice: nothing left to do, not a byte changed
    assert "nothing to repair" in capsys.readouterr().out
    assert snapshot(str(path)) == repaired
    assert main(["validate", str(path)]) == 0
    frames_ok(path, 6)


@pytest.mark.interop
def test_trajectory_10_tensorstore_reads_a_repaired_record(tmp_path: Path) -> None:
    ts = pytest.importorskip("tensorstore")
    path = tmp_path / "t.mrec"
    crashed(path)
    (path / "trajectory" / "bonds" / "atomi" / "zarr.json").write_bytes(b"")
    assert mr.repair_mrec(path).sound
    for rel in ("trajectory/bonds/atomi", "trajectory/atoms/_validity/q", "trajectory/meta/pe"):
        store = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path / rel)}}).result()
        ours = open_array(path, rel)[...]
        np.testing.assert_array_equal(store.read().result(), ours)


def test_trajectory_10_recovery_is_deterministic(tmp_path: Path) -> None:
    """Two writers given the same frames leave byte-identical records, checkpoint included;
    repairing two copies of one crashed record gives byte-identical results."""
    a, b = tmp_path / "a" / "t.mrec", tmp_path / "b" / "t.mrec"
    for p in (a, b):
        p.parent.mkdir()
        crashed(p)
    assert snapshot(str(a.parent)) == snapshot(str(b.parent))
    for p in (a, b):
        (p / "trajectory" / "zarr.json").write_bytes(b"")
        mr.repair_mrec(p)
    assert snapshot(str(a.parent)) == snapshot(str(b.parent))


def test_metrics_wal_zero_filled_tail_is_ignored_and_cut(tmp_path: Path) -> None:
    """A power cut kept the WAL's new length but not its bytes: readers stop at the first
    NUL, the next writer (or repair) cuts it off; every durable event is read back."""
    record = tmp_path / "m.mrec"
    mr.write_mrec_frame(record, mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(2)})}))
    with mr.MetricsWriter(record) as m:
        for step in range(5):
            m.log("loss", float(step), step=step)
    wal = record / "metrics" / "metrics.jsonl"
    durable = wal.read_bytes()
    wal.write_bytes(durable + b"\x00" * 40 + b'{"t":"scalar","k":"loss","s":9,"w":"2026-01-01T00:00:00Z","v":9}\n')
    assert mr.read_metrics(record)["loss"].steps.tolist() == [0, 1, 2, 3, 4]
    report = mr.repair_mrec(record, dry_run=True)
    assert any("metrics.jsonl" in c for c in report.changes) and not report.sound
    assert mr.repair_mrec(record).sound
    assert wal.read_bytes() == durable
    with mr.MetricsWriter(record) as m:
        m.log("loss", 5.0, step=5)
    assert mr.read_metrics(record)["loss"].steps.tolist() == [0, 1, 2, 3, 4, 5]


def test_write_mrec_frame_swaps_with_one_atomic_exchange(tmp_path: Path) -> None:
    """Replacing a record is one exchange of names (never a moment without a record)."""
    from powercut_sim import Recorder

    path = tmp_path / "r.mrec"
    mr.write_mrec_frame(path, traj_frame(0))
    rec = Recorder(str(tmp_path))
    mr.write_mrec_frame(path, traj_frame(1), fileops=rec, overwrite=True)
    renames = [op for op in rec.log if op.kind in ("rename", "exchange") and op.path.count("/") == 0]
    assert [op.kind for op in renames] == ["exchange"] and renames[0].arg == "r.mrec"
    swap = rec.log.index(renames[0])
    assert any(op.kind == "fsync_dir" and op.path == "" for op in rec.log[swap:])  # the swap is durable
    assert same_frame(mr.read_mrec_frame(path), traj_frame(1))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.mrec"]


def test_trajectory_10_validate_is_quiet_about_a_killed_writer(tmp_path: Path) -> None:
    """Killed, not power-cut: the live state is whole, nothing needs repair (the checkpoint
    is only tidied away by repair)."""
    path = tmp_path / "t.mrec"
    crashed(path)
    assert mr.validate(path) == []
    report = mr.repair_mrec(path, dry_run=True)
    assert report.source == "live" and report.nstep == 12
    assert report.changes == [f"remove {CHECKPOINT}: the record is durable as it stands"]
