#!/usr/bin/env python
"""W1 appends (bench/trajectory.py) of two checkouts in the same run: is a change within
its cost budget? (issue 23: appends within 5 % of main.)

Each round starts one child process per checkout, in a fresh random order; a child puts
its checkout first on ``sys.path``, builds W1's frames once (bench/trajectory.py's
``frame_values``: 10,000 atoms x 500 frames, x/y/z f64 at precision 1e-3), then times
``--calls`` calls of that checkout's own ``ours_write`` (one ``MrecWriter.append`` per frame,
the default cadence), durable and ``durable=False``, each into a new record of a scratch
directory on the same file system (ext4 here: the fsyncs are real).  Reported per checkout
and case: the median and the fastest wall and CPU time over every call of every round, and
the ratios of each checkout's to the first one's (> 1: slower than the first).  On a shared
machine the fastest call is the work with the least interference; the median says how
often that holds.

    nice python bench/versions.py --tree main=/work/main --tree branch=. [--rounds 8] [--calls 5]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

CHILD = r"""
import json, os, shutil, sys, tempfile, time
tree, calls, atoms, frames, scratch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
sys.path[:0] = [tree, os.path.join(tree, "bench")]
import molrec_raw
assert os.path.realpath(molrec_raw.__file__).startswith(os.path.realpath(tree)), molrec_raw.__file__
import trajectory as bench
data = [bench.frame_values(i, atoms) for i in range(frames)]
out = {"durable": [], "durable=False": []}
for n in range(calls):
    for case, durable in (("durable", True), ("durable=False", False)):
        target = tempfile.mkdtemp(dir=scratch)
        wall, cpu = time.perf_counter(), time.process_time()
        bench.ours_write(os.path.join(target, "w1.mrec"), data, durable=durable)
        out[case].append((time.perf_counter() - wall, time.process_time() - cpu))
        shutil.rmtree(target)
print(json.dumps(out))
"""


def main() -> int:
    """Run the rounds and print the table (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", required=True, metavar="NAME=PATH",
                        help="a checkout to time (the first is the reference of the ratios)")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=5, help="timed calls per case per child")
    parser.add_argument("--atoms", type=int, default=10_000)
    parser.add_argument("--frames", type=int, default=500)
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument("--dir", default=None, help="parent of the scratch directory")
    args = parser.parse_args()
    trees = [(name, str(Path(path).resolve())) for name, path in (t.split("=", 1) for t in args.tree)]
    rng = random.Random(args.seed)
    times: Dict[str, Dict[str, List[List[float]]]] = {name: {"durable": [], "durable=False": []} for name, _ in trees}
    scratch = tempfile.mkdtemp(prefix="molrec-versions-", dir=args.dir)
    load = []
    for round_ in range(args.rounds):
        order = trees[:]
        rng.shuffle(order)
        for name, path in order:
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            done = subprocess.run([sys.executable, "-c", CHILD, path, str(args.calls), str(args.atoms),
                                   str(args.frames), scratch], capture_output=True, text=True, env=env)
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                return 1
            for case, pairs in json.loads(done.stdout.splitlines()[-1]).items():
                times[name][case].extend(pairs)
        load.append(os.getloadavg()[0])
        print(f"round {round_ + 1}/{args.rounds} done (load {load[-1]:.1f})", file=sys.stderr, flush=True)
    first = trees[0][0]
    print(f"W1: {args.atoms} atoms x {args.frames} frames; {args.rounds} rounds x {args.calls} calls per case and "
          f"checkout; load {min(load):.1f}-{max(load):.1f}")
    print(f"| checkout | case | wall median / fastest (s) | CPU median / fastest (s) | wall / {first} "
          f"(median, fastest) | CPU / {first} (median, fastest) |")
    print("|---|---|---:|---:|---:|---:|")
    for case in ("durable", "durable=False"):
        ref = times[first][case]
        ref_wall = (statistics.median(w for w, _ in ref), min(w for w, _ in ref))
        ref_cpu = (statistics.median(c for _, c in ref), min(c for _, c in ref))
        for name, _ in trees:
            got = times[name][case]
            wall = (statistics.median(w for w, _ in got), min(w for w, _ in got))
            cpu = (statistics.median(c for _, c in got), min(c for _, c in got))
            print(f"| {name} | {case} | {wall[0]:.3f} / {wall[1]:.3f} | {cpu[0]:.3f} / {cpu[1]:.3f} | "
                  f"{wall[0] / ref_wall[0]:.3f}x, {wall[1] / ref_wall[1]:.3f}x | "
                  f"{cpu[0] / ref_cpu[0]:.3f}x, {cpu[1] / ref_cpu[1]:.3f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
