"""Crash safety (trajectory §10–§11): a child process appends frames of known content with
explicit flushes and is SIGKILLed at a random moment; the record then opens at the last
commit, every frame equals what the child appended, and a reopened writer continues.

The child reports ``committed`` through its stdout pipe each time a commit returned, so the
reader must hold at least the last number reported (a lower bound that a lost commit would
break).  Each child is killed a random time after its own k-th report (k in 1..10): on a busy
machine the children just take longer, and every trial has committed frames to lose."""
import random
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from molrec_raw.record.trajectory import MrecReader, MrecWriter

from traj_helpers import crash_expected, crash_frame, crash_step, crash_time, same_frame

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TRIALS = 50

CHILD = r"""
import sys, random
sys.path[:0] = [sys.argv[4], sys.argv[5]]
from traj_helpers import crash_frame, crash_schema, crash_step, crash_time
from molrec_raw.record.trajectory import MrecWriter
path, seed, durable = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
rng = random.Random(seed)
w = MrecWriter(path, crash_schema(), flush_every=rng.randint(2, 9), durable=durable)
print("ready", flush=True)
reported = 0
for i in range(100000):
    w.append(crash_frame(i), step=crash_step(i), time=crash_time(i))
    if rng.random() < 0.3:
        w.flush()
    if w.committed != reported:  # a commit returned: the parent may count on it
        reported = w.committed
        print(reported, flush=True)
"""


def check(path, extra=3, at_least=0):
    """The record holds at least ``at_least`` frames, each what the child appended; a
    reopened writer continues after them.  Returns the frames found."""
    with MrecReader(path) as r:
        n = len(r)
        assert n >= at_least, f"{n} frames, but the child had reported {at_least} committed"
        assert r.step == [crash_step(i) for i in range(n)]
        assert r.time == ([crash_time(i) for i in range(n)] if n else None)
        for i in range(n):
            got, want = r[i], crash_expected(i)
            assert same_frame(got, want) and got.meta == want.meta and got.box == want.box, i
    w = MrecWriter.open(path)
    assert w.committed == n
    for i in range(n, n + extra):
        w.append(crash_frame(i), step=crash_step(i), time=crash_time(i))
    w.close()
    with MrecReader(path) as r:
        assert len(r) == n + extra
        assert r.step == [crash_step(i) for i in range(n + extra)]
        for i in range(max(0, n - 2), n + extra):
            got, want = r[i], crash_expected(i)
            assert same_frame(got, want) and got.meta == want.meta and got.box == want.box, i
    return n


def start_child(path, seed, durable):
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(seed), "1" if durable else "0", str(HERE), str(ROOT)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_ready(proc):
    line = proc.stdout.readline()
    assert line.strip() == b"ready", proc.stderr.read().decode()


class Reports:
    """Reads a child's committed counts from its stdout; kills it ``delay`` seconds after
    its ``kill_after``-th report."""

    def __init__(self, proc, kill_after, delay):
        self.proc, self.kill_after, self.delay = proc, kill_after, delay
        self.last = 0
        self.count = 0
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            if not line.endswith(b"\n"):
                break  # a number cut by the kill is not a report
            self.last = int(line)
            self.count += 1
            if self.count == self.kill_after:
                threading.Timer(self.delay, self._kill).start()

    def _kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)


HANG_GUARD = 600  # seconds a child may take to reach its kill point: a hang, not a speed limit


def run_campaign(workdir, trials, rnd, max_delay, seed_base=0):
    """Kill ``trials`` children (five side by side, each ``uniform(0, max_delay)`` seconds
    after its k-th commit report, k in 1..10) and check every record against the last count
    its child reported; returns the committed frame counts.  Shared with the long campaign in
    bench/trajectory_crash.py."""
    counts = []
    for first in range(0, trials, 5):
        running = []
        for t in range(first, min(first + 5, trials)):
            path = workdir / f"c{t}.mrec"
            proc = start_child(path, t + seed_base, durable=(t % 5 == 0))
            wait_ready(proc)
            running.append((path, proc, Reports(proc, rnd.randint(1, 10), rnd.uniform(0.0, max_delay))))
        for path, proc, reports in running:
            try:
                proc.wait(timeout=HANG_GUARD)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise AssertionError(f"child {path.name} did not reach its kill point") from None
            reports.thread.join()
            assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()
            counts.append(check(path, at_least=reports.last))
    return counts


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
# the default run's 5 trials: one batch of children side by side, a durable writer among them
# (trial 0) and four that are not (issue 36: 6 trials took two batches)
@pytest.mark.parametrize("trials", [5, pytest.param(TRIALS, marks=pytest.mark.campaign)])
def test_trajectory_crash_sigkill_at_random_moments(tmp_path, trials):
    rnd = random.Random(20261130 + trials)
    counts = run_campaign(tmp_path, trials, rnd, 0.6)
    print("committed frames per trial:", sorted(counts))
    assert len(counts) == trials


def test_trajectory_crash_unflushed_frames_are_lost_committed_stay(tmp_path):
    """3 flushed + 2 buffered, then the process dies without close -> 3 frames."""
    path = tmp_path / "u.mrec"
    code = r"""
import os, sys
sys.path[:0] = [sys.argv[2], sys.argv[3]]
from traj_helpers import crash_frame, crash_schema, crash_step, crash_time
from molrec_raw.record.trajectory import MrecWriter
w = MrecWriter(sys.argv[1], crash_schema(), flush_every=100)
for i in range(5):
    w.append(crash_frame(i), step=crash_step(i), time=crash_time(i))
    if i == 2:
        w.flush()
os._exit(0)
"""
    subprocess.run([sys.executable, "-c", code, str(path), str(HERE), str(ROOT)], check=True)
    assert check(path, extra=2) == 3
