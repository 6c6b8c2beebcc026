"""Crash safety (trajectory §10–§11): a child process appends frames of known content with
explicit flushes and is SIGKILLed at a random moment; the record then opens at the last
commit, every frame equals what the child appended, and a reopened writer continues."""
import random
import signal
import subprocess
import sys
import time
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
for i in range(100000):
    w.append(crash_frame(i), step=crash_step(i), time=crash_time(i))
    if rng.random() < 0.3:
        w.flush()
"""


def check(path, extra=3):
    with MrecReader(path) as r:
        n = len(r)
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


def run_campaign(workdir, trials, rnd, max_delay, seed_base=0):
    """Kill ``trials`` children (five side by side, each at its own random moment after it is
    ready) and check every record; returns the committed frame counts. Shared with the long
    campaign in bench/trajectory_crash.py."""
    counts = []
    for first in range(0, trials, 5):
        procs = []
        for t in range(first, min(first + 5, trials)):
            path = workdir / f"c{t}.mrec"
            procs.append((path, start_child(path, t + seed_base, durable=(t % 5 == 0)), rnd.uniform(0.0, max_delay)))
        for _, proc, _ in procs:
            wait_ready(proc)
        t0 = time.monotonic()
        for _, proc, delay in sorted(procs, key=lambda p: p[2]):
            time.sleep(max(0.0, t0 + delay - time.monotonic()))
            proc.send_signal(signal.SIGKILL)
        for path, proc, _ in procs:
            proc.wait()
            assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()
            counts.append(check(path))
    return counts


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_trajectory_crash_sigkill_at_random_moments(tmp_path):
    rnd = random.Random(20261130)
    started = time.monotonic()
    counts = run_campaign(tmp_path, TRIALS, rnd, 0.6)
    print("committed frames per trial:", sorted(counts))
    assert len(counts) == TRIALS
    assert max(counts) > 0  # the children did commit frames before dying
    assert time.monotonic() - started < 60


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
