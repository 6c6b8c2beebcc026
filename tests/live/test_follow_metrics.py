"""``follow_metrics`` (issue 12 §1): events as they are logged, in log order, from a
record's WAL or a host ``*.mlp.jsonl``; a torn last line waits for its newline, a bad
complete line is refused (documents §5.4, #9.15), a truncated file is followed from its
new end; a record's run ending (its status) stops the follower."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import List

import numpy as np
import pytest

import molrec_raw as mr
from molrec_raw.errors import CorruptDataError
from molrec_raw.record.metrics import MetricEvent, follow_metrics

LINE = b'{"t":"scalar","k":"%s","s":%d,"w":"2026-11-30T00:00:00Z","v":%s}\n'


def _record(path: Path) -> Path:
    mr.write_mrec_frame(path, mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(2)})}))
    return path


def test_documents_5_4_events_in_log_order_as_they_are_logged(tmp_path: Path) -> None:
    record = _record(tmp_path / "m.mrec")
    with mr.MetricsWriter(record) as m:
        m.log("loss", 1.0, step=0)  # before the follower: not followed
    events = follow_metrics(record, poll=0.01, timeout=1.0)
    got: List[MetricEvent] = []

    def write() -> None:
        m = mr.MetricsWriter(record)
        for step in range(1, 4):
            m.log("loss", 1.0 / (step + 1), step=step)
            m.log("acc", float("nan"), step=step, tags={"split": "val"})
            m.flush(durable=False)
            time.sleep(0.05)
        m.close()
    thread = threading.Thread(target=write)
    thread.start()
    for event in events:
        got.append(event)
        if len(got) == 6:
            break
    thread.join()
    assert [(e.key, e.step) for e in got] == [(k, s) for s in range(1, 4) for k in ("loss", "acc")]
    assert got[0].value == 0.5 and np.isnan(got[1].value) and got[1].tags == {"split": "val"}
    assert got[0].type == "scalar" and got[0].wall_time.endswith("Z")
    wal = (record / "metrics" / "metrics.jsonl").read_bytes()
    assert all(wal[e.offset:].startswith(b'{"t":"scalar","k":"%s"' % e.key.encode()) for e in got)
    everything = list(follow_metrics(record, poll=0.01, timeout=0.01, from_start=True))
    assert [(e.key, e.step) for e in everything][:1] == [("loss", 0)] and len(everything) == 7


def test_documents_9_15_torn_tail_waits_bad_line_is_refused_truncation_restarts(tmp_path: Path) -> None:
    wal = tmp_path / "run" / "metrics.mlp.jsonl"
    events = follow_metrics(wal, poll=0.01, timeout=2.0)  # the host file does not exist yet
    wal.parent.mkdir()
    wal.write_bytes(LINE % (b"a", 1, b"1.5") + b'{"t":"scalar","k":"a","s":2,')  # a torn last line
    first = next(events)
    assert (first.key, first.step, first.value, first.offset) == ("a", 1, 1.5, 0)
    with open(wal, "ab") as fh:
        fh.write(b'"w":"2026-11-30T00:00:00Z","v":2.5}\n')
    assert next(events).value == 2.5
    wal.write_bytes(LINE % (b"b", 9, b"9"))  # truncated (rewritten) outside its writer

    def append() -> None:
        time.sleep(0.2)
        with open(wal, "ab") as fh:
            fh.write(LINE % (b"b", 10, b'"Infinity"'))
    thread = threading.Thread(target=append)
    thread.start()
    after = next(events)  # the shrink is seen first: followed from the new end
    thread.join()
    assert (after.key, after.step, after.value) == ("b", 10, float("inf"))
    with open(wal, "ab") as fh:
        fh.write(b'{"t":"scalar","k":"b"}\n')
    with pytest.raises(CorruptDataError, match=r"line 3 \(byte offset \d+\)"):
        next(events)


def test_follow_metrics_stops_when_the_record_run_is_over_or_cannot_change(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "r.mrec"
    schema = mr.SequenceSchema.from_frames([mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(2)})})])
    w = mr.MrecWriter(path, schema)  # status running
    with mr.MetricsWriter(path) as m:
        m.log("loss", 1.0, step=1)
    events = follow_metrics(path, poll=0.01, timeout=60, from_start=True)
    assert next(events).step == 1
    w.close()  # succeeded: the follower ends at its next poll, with nothing lost
    assert list(events) == []
    packed = mr.pack_mrec_zip(path)

    def no_wait(seconds: float) -> None:
        raise AssertionError(f"an archive cannot change, yet the follower waits {seconds} s for news")
    monkeypatch.setattr(time, "sleep", no_wait)  # one poll, no wait (not a clock: a call that must not happen)
    assert [e.step for e in follow_metrics(packed, poll=30.0, from_start=True)] == [1]
    assert list(follow_metrics(packed, poll=30.0)) == []
