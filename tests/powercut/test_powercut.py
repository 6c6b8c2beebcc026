"""Power cuts (issue 10): the crash-state simulator proves every durability promise.

``test_powercut_campaign`` runs the four workloads of ``powercut_workloads`` through the
recording file seam and checks at least 2,000 post-crash states (fixed seed) in well under
three minutes; ``bench/powercut.py`` runs the long campaign with the same code.  The other
tests pin the simulator itself: its log is complete, its persistence model produces the
states it claims, and it does find a hole where one exists.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from molrec_raw.errors import MolrecError
from molrec_raw.zarr import DirectoryStore, open_array
from powercut_sim import CrashModel, Recorder, State, Variant, enumerate_states, materialize, snapshot
from powercut_workloads import campaign

SUITE_STATES = {"trajectory": 1500, "metrics": 300, "pack": 250, "doors": 150}
SEED = 20261211


def test_powercut_campaign_every_promise_holds_in_2000_crash_states(tmp_path: Path) -> None:
    started = time.monotonic()
    results = campaign(list(SUITE_STATES), SUITE_STATES, SEED, tmp_path, deep_every=40)
    elapsed = time.monotonic() - started
    report = "\n".join(f"== {name}\n{outcome.table()}" for name, outcome in results.items())
    print(report, f"\n{elapsed:.0f} s")
    assert sum(o.total for o in results.values()) >= 2000
    assert all(o.failed == 0 for o in results.values()), report
    assert elapsed < 180


def _record(tmp_path: Path, work) -> CrashModel:
    rec = Recorder(str(tmp_path))
    work(rec)
    return CrashModel({}, rec.log)


def test_model_an_unsynced_replace_can_leave_an_empty_file_under_the_new_name(tmp_path: Path) -> None:
    """The rename persists, the data does not: the hole a zarr.json replaced without an
    fsync before its rename falls into."""
    def work(rec: Recorder) -> None:
        store = DirectoryStore(tmp_path / "s", fileops=rec)
        store.set("a", b"old")
        store.sync(["a"])
        store.set("a", b"new")
        rec.fsync_dir(str(tmp_path / "s"))  # the directory only, as a later sync would
    model = _record(tmp_path, work)
    trees = {tuple(sorted(model.build(s).items())) for s in enumerate_states(model, seed=1)}
    assert (("s", None), ("s/a", b"")) in trees  # the name moved, the bytes never arrived
    assert (("s", None), ("s/a", b"new")) in trees


def test_model_an_in_place_page_write_tears_at_sectors(tmp_path: Path) -> None:
    def work(rec: Recorder) -> None:
        store = DirectoryStore(tmp_path / "s", fileops=rec)
        store.write_at("f", 0, b"A" * 1024)
        store.sync(["f"])
        store.write_at("f", 0, b"B" * 1024)
    model = _record(tmp_path, work)
    write = len(model.ops) - 1
    assert model.in_place_sectors(write) == 2
    mixed = model.build(State("torn", len(model.ops), variant=Variant(write, mask=("new", "old"))))
    assert mixed["s/f"] == b"B" * 512 + b"A" * 512
    garbage = model.build(State("torn", len(model.ops), variant=Variant(write, mask=("garbage", "new")), seed=3))
    assert garbage["s/f"][512:] == b"B" * 512 and garbage["s/f"][:512] not in (b"A" * 512, b"B" * 512)


def test_model_an_append_may_persist_its_length_with_zeros(tmp_path: Path) -> None:
    def work(rec: Recorder) -> None:
        store = DirectoryStore(tmp_path / "s", fileops=rec)
        store.write_at("f", 0, b"head")
        store.sync(["f"])
        store.write_at("f", 4, b"tail")
    model = _record(tmp_path, work)
    zeros = model.build(State("zeros", len(model.ops), variant=Variant(len(model.ops) - 1, zeros=True)))
    assert zeros["s/f"] == b"head\x00\x00\x00\x00"
    assert model.build(State("prefix-drop", len(model.ops), keep_pending=False))["s/f"] == b"head"


def test_model_finds_the_hole_of_an_unsynced_shard_index_rewrite(tmp_path: Path) -> None:
    """A positional shard whose index page is rewritten in place without an fsync, after a
    durable first landing: some crash state makes the durable rows unreadable — the
    simulator sees the hole that the trajectory checkpoint closes one layer up."""
    codecs = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]

    def work(rec: Recorder) -> None:
        store = DirectoryStore(tmp_path / "s", fileops=rec)
        a = open_array(store, "x", mode="w", shape=(0,), dtype="float64", chunks=(4,), shards=(1024,),
                       codecs=codecs, shard_index_location="start")
        a.land(slice(0, 4), np.arange(4.0), shape=(4,), positional=True)
        a.publish((4,))
        store.sync(list(store.list("")))
        durable.append(len(rec.log))
        a.land(slice(4, 8), np.arange(4.0, 8.0), shape=(8,), positional=True)  # not synced
    durable: list = []
    model = _record(tmp_path, work)
    broken = 0
    for n, state in enumerate(enumerate_states(model, seed=1)):
        if state.t < durable[0]:
            continue
        root = tmp_path / f"state-{n}"
        materialize(model.build(state), str(root))
        try:
            open_array(DirectoryStore(root / "s"), "x")[0:4]
        except MolrecError:
            broken += 1
    assert broken > 0


def test_recorder_sees_every_mutation_of_a_record_write(tmp_path: Path) -> None:
    """Replaying the log of a whole-record write gives the tree on disk byte for byte."""
    import molrec_raw as mr
    from powercut_sim import check_replay

    rec = Recorder(str(tmp_path))
    mr.write_mrec_frame(tmp_path / "w.mrec", mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(3)})}), fileops=rec)
    model = CrashModel({}, rec.log)
    check_replay(model, str(tmp_path))
    assert snapshot(str(tmp_path)) == model.live(len(model.ops))
    assert any(op.kind == "fsync" for op in rec.log) and any(op.kind == "fsync_dir" for op in rec.log)
