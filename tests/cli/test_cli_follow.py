"""``molrec-raw cat PATH --follow`` and ``inspect PATH --follow`` (issue 12 §1): one line
per committed frame (step, time, per-step meta) as a live writer commits, a redrawn
summary per commit; both end by themselves when the run's status says it is over."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import molrec_raw as mr


def frame(i: int) -> mr.Frame:
    return mr.Frame({"pe": -1.5 * i, "note": {"i": i}, "flag": bool(i % 2)},
                    {"atoms": mr.Block({"x": np.full(3, float(i))})})


def _follow(args: list, path: Path, frames: int) -> str:
    """Start the command on a running record, commit ``frames`` frames while it runs, close."""
    w = mr.MrecWriter(path, mr.SequenceSchema.from_frames([frame(0)]), flush_every=1)
    w.append(frame(0), step=0, time=0.0)
    proc = subprocess.Popen([sys.executable, "-m", "molrec_raw", *args, str(path), "--follow", "--interval", "0.02",
                             "--timeout", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    for i in range(1, frames):
        w.append(frame(i), step=10 * i, time=0.5 * i)
        time.sleep(0.05)
    w.close()
    out, err = proc.communicate(timeout=60)  # ends by itself: the status says succeeded
    assert proc.returncode == 0, err
    return out


def test_cat_follow_prints_step_time_and_meta_of_every_frame_as_it_commits(tmp_path: Path) -> None:
    out = _follow(["cat"], tmp_path / "c.mrec", 6)
    lines = out.splitlines()
    assert lines[0] == "frame\tstep\ttime\tpe\tnote\tflag"
    assert lines[1:] == [f"{i}\t{10 * i}\t{0.5 * i:.6g}\t{-1.5 * i:.6g}\t{{\"i\":{i}}}\t{'true' if i % 2 else 'false'}"
                         for i in range(6)]


def test_cat_follow_from_the_newest_frame(tmp_path: Path) -> None:
    path = tmp_path / "n.mrec"
    with mr.MrecWriter(path, mr.SequenceSchema.from_frames([frame(0)])) as w:
        for i in range(5):
            w.append(frame(i))
    run = subprocess.run([sys.executable, "-m", "molrec_raw", "cat", str(path), "--follow", "--frame", "-2"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and [line.split("\t")[0] for line in run.stdout.splitlines()[1:]] == ["3", "4"]


def test_inspect_follow_redraws_the_summary_after_each_commit(tmp_path: Path) -> None:
    """Each commit is made only once the previous drawing is out (no timing assumption)."""
    path = tmp_path / "i.mrec"
    w = mr.MrecWriter(path, mr.SequenceSchema.from_frames([frame(0)]), flush_every=1)
    w.append(frame(0), step=0, time=0.0)
    proc = subprocess.Popen([sys.executable, "-m", "molrec_raw", "inspect", str(path), "--follow", "--interval",
                             "0.02", "--timeout", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    out: list = []

    def drawn(n: int) -> None:
        while True:
            line = proc.stdout.readline()
            assert line, f"the follower ended early: {proc.stderr.read() if proc.stderr else ''}"
            out.append(line)
            if line.startswith("run: "):
                assert line.rstrip("\n") == f"run: running; {n} committed frames", line
                return
    for i in range(1, 4):
        drawn(i)
        w.append(frame(i), step=10 * i, time=0.5 * i)
    drawn(4)
    w.close()
    rest, err = proc.communicate(timeout=60)  # ends by itself, after one more drawing with the end state
    assert proc.returncode == 0, err
    runs = [line for line in rest.splitlines() if line.startswith("run: ")]
    assert runs == ["run: succeeded; 4 committed frames"]
    assert "trajectory: 4 committed frames" in "".join(out) + rest
