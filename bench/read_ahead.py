#!/usr/bin/env python
"""Read-ahead (issue 37): W6 and the MDAnalysis rows, before and after, in one run.

Inputs are built once (by the tree this file is run from): W1's record (10,000 atoms x
``--frames``, x y z f64 at precision 1e-3, bench/trajectory.py) and its h5py twin (H5MD's
layout: one frame a chunk, gzip 1 + shuffle); a trajectory written by MDAnalysis's writers
as DCD and as MREC lossless and at precision 1e-3 (bench/integrations.py's ``write_all``).
Then, for ``--rounds`` rounds, each tree (``--tree name=path``: a directory holding a
``molrec_raw`` package) runs in a child process of its own, the trees in a fresh random
order each round; a child times, interleaved in a random order, each case the fastest of
``--best-of`` back-to-back calls (wall and CPU time):

  W6 ours        ``sum(1 for _ in reader)``, the reader opened outside the timing
  W6 h5py        ``ds[i]`` for every frame
  MDA <format>   ``u.load_new(file)`` and one ``for ts in u.trajectory`` (integrations.iterate)
  ..., read-ahead off   (trees that have it) W6 ours and MDA MREC with each batch read on the
                 caller's thread when its turn comes (the same code, no thread): read-ahead's
                 own effect, formed in one process

and the ratios are formed inside the child (h5py time / ours; MREC frames/s / DCD frames/s),
so both sides of a ratio meet the same phase of the machine.

    python bench/read_ahead.py --tree before=/tmp/before --tree after=. --rounds 5
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
import time
from pathlib import Path
from typing import Any, Dict, List

HERE = Path(__file__).resolve().parent

CHILD = r"""
import gc, json, os, random, sys, time, warnings
warnings.filterwarnings("ignore")
tree, work, frames, best_of = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
import molrec_raw
assert os.path.realpath(molrec_raw.__file__).startswith(os.path.realpath(tree)), molrec_raw.__file__
sys.path.insert(1, sys.argv[5])
import numpy as np
import trajectory as T
import integrations as I
from molrec_raw.record.trajectory import MrecReader

rec = os.path.join(work, "w1.mrec")
fh, ds = T.h5_open(os.path.join(work, "w1.h5"))
mda = {"DCD": os.path.join(work, "mda", "t.dcd"), "MREC": os.path.join(work, "mda", "t.mrec"),
       "MREC 1e-3": os.path.join(work, "mda", "t3.mrec")}
readers = []

def ours():
    reader = MrecReader(rec)
    readers.append(reader)
    return lambda: sum(1 for _ in reader)

cases = {"W6 ours": ours, "W6 h5py": lambda: (lambda: sum(1 for i in range(frames) if ds[i] is not None))}
for name, path in mda.items():
    cases["MDA " + name] = lambda path=path: (lambda: I.iterate(I.Path(path), 10000))
try:
    from molrec_raw.record.trajectory import engine, readahead
    import molrec_raw.integrations.trajectories as sources
except ImportError:  # a tree without read-ahead
    engine = None


class Inline:  # read-ahead's stand-in, reading on the caller's thread when made: the same code, no thread

    def __init__(self, read, pending=None):
        self.value = read()

    def result(self):
        return self.value

    def wait(self, keep=False):
        pass


def without_read_ahead(make):
    def run():
        engine.ReadAhead = sources.ReadAhead = Inline
        try:
            make()()
        finally:
            engine.ReadAhead = sources.ReadAhead = readahead.ReadAhead
    return lambda: run


if engine is not None:
    cases["W6 ours, read-ahead off"] = without_read_ahead(ours)
    cases["MDA MREC, read-ahead off"] = without_read_ahead(cases["MDA MREC"])
for path in mda.values():  # warm up: MDAnalysis's lazy imports, the files' pages
    I.iterate(I.Path(path), 10000)
sum(1 for _ in MrecReader(rec))
out = {}
names = list(cases)
random.shuffle(names)
for name in names:
    runs = []
    for _ in range(best_of):
        fn = cases[name]()
        gc.collect()
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t0, time.process_time() - c0))
    out[name] = min(runs)
for r in readers:
    r.close()
fh.close()
print(json.dumps(out))
"""


def build(work: Path, frames: int, mda_frames: int) -> None:
    sys.path.insert(0, str(HERE))
    import numpy as np
    import integrations
    import trajectory

    data = [trajectory.frame_values(i, 10_000) for i in range(frames)]
    trajectory.ours_write(str(work / "w1.mrec"), data)
    positions = [np.stack([trajectory.round_to_precision(d[c], trajectory.PRECISION) for c in "xyz"], axis=1)
                 for d in data]
    trajectory.h5_write(str(work / "w1.h5"), positions)
    (work / "mda").mkdir()
    integrations.HAVE_H5PY = False
    integrations.write_all(work / "mda", 10_000, mda_frames, 20240601)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", required=True, metavar="NAME=PATH")
    parser.add_argument("--frames", type=int, default=200, help="frames of W1's record (W6)")
    parser.add_argument("--mda-frames", type=int, default=300, help="frames of the MDAnalysis trajectory")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--best-of", type=int, default=3)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    trees = dict(t.split("=", 1) for t in args.tree)
    work = Path(tempfile.mkdtemp(prefix="bench-read-ahead-", dir=args.dir))
    build(work, args.frames, args.mda_frames)
    results: Dict[str, List[Dict[str, Any]]] = {name: [] for name in trees}
    loads = [os.getloadavg()[0]]
    for rnd in range(args.rounds):
        order = list(trees)
        random.shuffle(order)
        for name in order:
            env = dict(os.environ, PYTHONPATH=os.path.abspath(trees[name]))
            run = subprocess.run([sys.executable, "-c", CHILD, os.path.abspath(trees[name]), str(work),
                                  str(args.frames), str(args.best_of), str(HERE)],
                                 env=env, cwd=str(work), capture_output=True, text=True)  # -c: cwd first on sys.path
            if run.returncode:
                raise SystemExit(f"tree {name}: {run.stderr}")
            results[name].append(json.loads(run.stdout.strip().splitlines()[-1]))
        loads.append(os.getloadavg()[0])
        print(f"round {rnd + 1} done (load {loads[-1]:.1f})", flush=True)
    print(f"\nload average (1 min) over the run: {min(loads):.1f}-{max(loads):.1f}; "
          f"{args.frames} W6 frames, {args.mda_frames} MDAnalysis frames, 10,000 atoms\n")
    print("| tree | row | CPU ratio median (range) | wall ratio median (range) |")
    print("|---|---|---|---|")
    rows = [("W6 x h5py (h5py time / ours)", "W6 h5py", "W6 ours"),
            ("MDAnalysis MREC lossless x DCD (DCD time / MREC)", "MDA DCD", "MDA MREC"),
            ("MDAnalysis MREC 1e-3 x DCD", "MDA DCD", "MDA MREC 1e-3")]
    rows += [("W6 read-ahead on x off (same tree, same process)", "W6 ours, read-ahead off", "W6 ours"),
             ("MDAnalysis MREC lossless read-ahead on x off", "MDA MREC, read-ahead off", "MDA MREC")]
    for name in trees:
        for label, peer, ours in rows:
            if peer not in results[name][0]:
                continue
            cells = []
            for k in (1, 0):  # CPU, wall
                ratios = [r[peer][k] / r[ours][k] for r in results[name]]
                cells.append(f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")
            print(f"| {name} | {label} | {cells[0]} | {cells[1]} |")
    print("\n| tree | case | CPU s median | wall s median |\n|---|---|---|---|")
    for name in trees:
        for case in results[name][0]:
            print(f"| {name} | {case} | {statistics.median(r[case][1] for r in results[name]):.3f} | "
                  f"{statistics.median(r[case][0] for r in results[name]):.3f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "loads": loads, "args": vars(args)}, indent=1))
    import shutil
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
