"""The run's lifecycle in ``status/`` (documents §2; record/live.py) and following a run
with ``MrecReader.watch`` / ``follow`` (issue 12 §1): a follower yields every committed
frame once, in order, and stops when the status says the run is over, after ``timeout``
seconds without a commit, or ``stop_after`` seconds in all."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, List

import numpy as np
import pytest

import molrec_raw as mr
from molrec_raw.errors import InvalidValueError
from molrec_raw.record import live
from molrec_raw.record.documents import check_status
from molrec_raw.zarr import open_group

from live_campaign import same


def frame(i: int) -> mr.Frame:
    return mr.Frame({"pe": float(i)}, {"atoms": mr.Block({"x": np.full(3, float(i))})})


def schema() -> mr.SequenceSchema:
    return mr.SequenceSchema.from_frames([frame(0)])


def status(path: Path) -> Any:
    return live.read_status(open_group(path))


# ------------------------------------------------------------ what the writer records
def test_documents_2_writer_records_running_then_succeeded(tmp_path: Path) -> None:
    path = tmp_path / "s.mrec"
    w = mr.MrecWriter(path, schema())
    assert status(path) == {"state": "running"}
    w.append(frame(0))
    w.close()
    assert status(path) == {"state": "succeeded"}
    w.close()  # idempotent
    assert list(check_status(status(path))) == [] and mr.validate(path) == []
    mr.MrecWriter.open(path)
    assert status(path) == {"state": "running"}


def test_documents_2_with_block_left_by_an_exception_records_failed_with_the_error(tmp_path: Path) -> None:
    path = tmp_path / "f.mrec"
    with pytest.raises(RuntimeError):
        with mr.MrecWriter(path, schema(), flush_every=1) as w:
            w.append(frame(0))
            raise RuntimeError("the integrator blew up")
    assert status(path) == {"state": "failed", "error": {"message": "the integrator blew up", "type": "RuntimeError"}}
    assert list(check_status(status(path))) == [] and len(mr.MrecReader(path)) == 1
    w = mr.MrecWriter.open(path)  # a restart: running again, the old error gone
    assert status(path) == {"state": "running"}
    w.close()
    assert status(path) == {"state": "succeeded"}


def test_documents_2_keyboard_interrupt_records_cancelled(tmp_path: Path) -> None:
    path = tmp_path / "c.mrec"
    with pytest.raises(KeyboardInterrupt):
        with mr.MrecWriter(path, schema()):
            raise KeyboardInterrupt
    assert status(path)["state"] == "cancelled" and status(path)["error"]["type"] == "KeyboardInterrupt"


def test_documents_1_2_other_status_keys_are_kept(tmp_path: Path) -> None:
    """The writer owns ``state`` and ``error`` only (documents §1.2 preserve-unknown)."""
    path = tmp_path / "k.mrec"
    mr.write_mrec(path, mr.MolRec(status={"state": "pending", "stage": "simulate", "epoch": 3, "custom": [1, None]},
                                  frame=frame(0)))
    with mr.MrecWriter(path, schema()) as w:
        assert status(path) == {"state": "running", "stage": "simulate", "epoch": 3, "custom": [1, None]}
        w.append(frame(0))
    assert status(path) == {"state": "succeeded", "stage": "simulate", "epoch": 3, "custom": [1, None]}


def test_status_false_and_the_whole_sequence_door_write_no_status(tmp_path: Path) -> None:
    with mr.MrecWriter(tmp_path / "a.mrec", schema(), status=False) as w:
        w.append(frame(0))
    mr.write_mrec_trajectory(tmp_path / "b.mrec", [frame(0)])
    for name in ("a.mrec", "b.mrec"):
        assert status(tmp_path / name) is None
    with pytest.raises(RuntimeError):
        with mr.MrecWriter.open(tmp_path / "a.mrec", status=False):
            raise RuntimeError("x")
    assert status(tmp_path / "a.mrec") is None


def test_a_status_document_a_power_cut_left_empty_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "e.mrec"
    with mr.MrecWriter(path, schema()) as w:
        w.append(frame(0))
    (path / "status" / "zarr.json").write_bytes(b"")
    with mr.MrecReader(path) as reader:
        assert list(reader.watch(poll=0.01, timeout=0.05)) == [1]  # unreadable: not over, so the timeout ends it
    mr.MrecWriter.open(path).close()
    assert status(path) == {"state": "succeeded"}


def test_writers_with_status_stay_deterministic(tmp_path: Path) -> None:
    """No timestamps: the same input gives byte-identical records, status included."""
    trees = []
    for name in ("one.mrec", "two.mrec"):
        with mr.MrecWriter(tmp_path / name, schema(), flush_every=2) as w:
            for i in range(5):
                w.append(frame(i))
        trees.append({str(p.relative_to(tmp_path / name)): p.read_bytes()
                      for p in sorted((tmp_path / name).rglob("*")) if p.is_file()})
    assert trees[0] == trees[1] and "status/zarr.json" in trees[0]


# ------------------------------------------------------------ following a run
def _writer(path: Path, n: int, pause: float, fail: bool = False) -> threading.Thread:
    """A writer created here (the record is ``running`` before the follower opens it),
    appending in a thread."""
    writer = mr.MrecWriter(path, schema(), flush_every=1)

    def run() -> None:
        try:
            with writer as w:
                for i in range(n):
                    w.append(frame(i))
                    time.sleep(pause)
                if fail:
                    raise RuntimeError("stopped")
        except RuntimeError:
            pass
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_follow_yields_every_frame_once_in_order_and_stops_when_the_run_succeeds(tmp_path: Path) -> None:
    path = tmp_path / "r.mrec"
    w = mr.MrecWriter(path, schema(), flush_every=1)
    w.append(frame(0))
    reader = mr.MrecReader(path)
    got: List[int] = []
    for i, f in reader.follow(poll=0.01, timeout=60):  # the writer appends as the follower reads
        assert same(f, frame(i))
        got.append(i)
        if i < 30:
            w.append(frame(i + 1))
        elif i == 30:
            w.close()
    assert got == list(range(31)) and reader.run_status() == {"state": "succeeded"}
    reader.close()


def test_follow_stops_on_a_run_written_by_another_thread(tmp_path: Path) -> None:
    path = tmp_path / "t.mrec"
    thread = _writer(path, 40, 0.002)
    with mr.MrecReader(path) as reader:
        frames = [(i, f) for i, f in reader.follow(poll=0.005, timeout=60)]
    thread.join()
    assert [i for i, _ in frames] == list(range(40)) and all(same(f, frame(i)) for i, f in frames)


def test_follow_of_a_failed_run_yields_its_committed_frames_then_stops(tmp_path: Path) -> None:
    path = tmp_path / "x.mrec"
    thread = _writer(path, 12, 0.002, fail=True)
    with mr.MrecReader(path) as reader:
        got = [i for i, _ in reader.follow(poll=0.005, timeout=60)]
    thread.join()
    assert got == list(range(12)) and status(path)["state"] == "failed"


def test_follow_without_an_end_signal_stops_at_the_timeout(tmp_path: Path) -> None:
    """A run killed (or written by a tool that records no status) never says it ended:
    ``timeout`` counts seconds without a new commit."""
    path = tmp_path / "k.mrec"
    w = mr.MrecWriter(path, schema(), flush_every=1)  # never closed: status stays running
    for i in range(3):
        w.append(frame(i))
    with mr.MrecReader(path) as reader:
        started = time.monotonic()
        assert [i for i, _ in reader.follow(poll=0.01, timeout=0.3)] == [0, 1, 2]
        assert time.monotonic() - started >= 0.3
        assert [i for i, _ in reader.follow(poll=0.01, timeout=0.05, start=-1)] == [2]
        assert list(reader.watch(poll=0.01, stop_after=0.05)) == [3]  # stop_after: seconds in all


def test_timeout_counts_silence_not_the_consumers_time(tmp_path: Path) -> None:
    """The consumer spends longer than ``timeout`` on each length; the next commit comes
    0.2 s after it is done: still within the timeout, since its own time is not silence."""
    path = tmp_path / "q.mrec"
    w = mr.MrecWriter(path, schema(), flush_every=1)
    w.append(frame(0))
    with mr.MrecReader(path) as reader:
        lengths = []
        for n in reader.watch(poll=0.01, timeout=1.0):
            lengths.append(n)
            if n < 3:
                time.sleep(1.2)  # longer than the timeout
                threading.Timer(0.2, w.append, args=(frame(n),)).start()
    assert lengths == [1, 2, 3]
    w.close()


def test_follow_arguments_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "a.mrec"
    with mr.MrecWriter(path, schema()) as w:
        w.append(frame(0))
    with mr.MrecReader(path) as reader:
        for bad in (dict(poll=0), dict(poll=float("nan")), dict(timeout=-1), dict(stop_after="1")):
            with pytest.raises(InvalidValueError):
                reader.watch(**bad)
        with pytest.raises(InvalidValueError):
            reader.follow(start=1.5)  # type: ignore[arg-type]
        assert [i for i, _ in reader.follow(poll=0.01)] == [0]  # succeeded: no wait at all
