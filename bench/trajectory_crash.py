#!/usr/bin/env python
"""Crash campaign for the trajectory writer (issue 4): many SIGKILL trials, longer than the
50 the test suite runs.

Each trial starts a child that appends frames of reproducible content (seeded by the frame
index; the child of tests/trajectory/test_crash.py) with random explicit flushes, kills it
with SIGKILL at a random moment, then checks the record: ``len(reader) == nstep``, every
committed frame equals what the child appended, and ``MrecWriter.open`` appends frames that
read back. Five children run at a time.

    python bench/trajectory_crash.py [--trials 500] [--seed 1]
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests" / "trajectory"), str(HERE.parent)]

import test_crash as crash  # noqa: E402  (the child and the checker of the test suite)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rnd = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="molrec-crash-"))
    start = time.time()
    counts = crash.run_campaign(work, args.trials, rnd, 1.5, seed_base=1000 * args.seed)
    counts.sort()
    print(f"trials {len(counts)} all passed; committed frames: max {counts[-1]}, median "
          f"{counts[len(counts) // 2]}, zero {counts.count(0)}; {time.time() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
