#!/usr/bin/env python
"""Streaming appends of 64-atom frames (issue 37 item 1): the library of one or more source
trees against molrs 0.19, in one run, interleaved.

The workload the issue states: 64 atoms, ``x y z`` f64 (declared precision 1e-3 or none, both
rows; the values on the 1e-3 grid either way) and a per-step ``pe`` (f64); ``--frames`` frames,
one ``append`` per frame, durable (each side's default: the last commit is synced by
``close()``); every frame object built BEFORE the clock (what the writer costs, not what a
producer's objects cost — bench/reference.py's append row builds them inside the loop).

Each case runs in its own process (a tree's package first on ``sys.path``; molrs from the
venv), its CPU (process) and wall time taken around the appends and the close; the cases of a
round run in a fresh random order (the machine is shared), ``--rounds`` rounds.  A ratio is
molrs's time / the tree's (> 1: the tree faster), formed inside each round; the range over
the rounds is reported, with the medians of the per-frame times.  ``--append-only`` also
times the appends alone (``flush_every`` above the frame count, not durable, then
``abort()``): the per-append Python without the commit.  ``--profile``: each tree's cProfile
of the durable appends without precision (the calls per append and the top 20 lines).

    python bench/appends.py [--tree after=. --tree before=/tmp/before] [--frames 20000] [--rounds 5] [--json out.json]
    python bench/appends.py --profile [--tree ...]   # each tree's cProfile of the appends (no precision)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent.parent

CASE = r'''
import json, shutil, sys, tempfile, time
import numpy as np
side, frames_n, prec, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
q = 1e-3
base = np.random.default_rng(0).uniform(0, 20, size=(64, 3))
k = np.arange(frames_n, dtype=np.float64)
walk = base[None] + 0.001 * k[:, None, None] + 0.01 * np.sin(k[:, None, None] * 0.37 + base[None])
xyz = np.ascontiguousarray((np.round(walk / q) * q).transpose(0, 2, 1))
work = tempfile.mkdtemp(prefix="molrec-bench-appends-")
path = work + "/a.mrec"
if side == "molrs":
    import molrs, molrs.io.mrec as mrec
    from pathlib import Path
    frames = [molrs.Frame({"atoms": {"x": xyz[i, 0], "y": xyz[i, 1], "z": xyz[i, 2]}}, meta={"pe": -0.5 * i})
              for i in range(frames_n)]
    schema = mrec.SequenceSchema.from_frames([frames[0]])
    if prec:
        for c in "xyz":
            schema.declare_precision("atoms", c, q)
    schema.declare_meta("pe", "f64")
    c0, t0 = time.process_time(), time.perf_counter()
    writer = mrec.MrecWriter(Path(path), schema, durable=True)
    for i, f in enumerate(frames):
        writer.append(f, step=i)
    writer.close()
else:
    from molrec_raw.record.model import Block, Frame
    from molrec_raw.record.trajectory import MrecWriter, SequenceSchema
    frames = [Frame({"pe": -0.5 * i}, {"atoms": Block({"x": xyz[i, 0], "y": xyz[i, 1], "z": xyz[i, 2]})})
              for i in range(frames_n)]
    schema = SequenceSchema().declare_block("atoms")
    for c in "xyz":
        schema.declare_column("atoms", c, "f64")
        if prec:
            schema.declare_precision("atoms", c, q)
    schema.declare_meta("pe", "f64")
    options = {} if mode in ("durable", "profile") else {"flush_every": frames_n + 1, "durable": False}
    if mode == "profile":
        import cProfile
        profile = cProfile.Profile()
        profile.enable()
    c0, t0 = time.process_time(), time.perf_counter()
    writer = MrecWriter(path, schema, **options)
    for i, f in enumerate(frames):
        writer.append(f, step=i)
    if mode == "append only":
        writer.abort()
    else:
        writer.close()
    if mode == "profile":
        import pstats
        profile.disable()
        stats = pstats.Stats(profile, stream=sys.stderr)
        sys.stderr.write(f"{stats.total_calls / frames_n:.1f} function calls per append\n")
        stats.sort_stats("tottime").print_stats(20)
out = {"cpu": time.process_time() - c0, "wall": time.perf_counter() - t0}
if side != "molrs":
    import molrec_raw
    out["package"] = molrec_raw.__file__
shutil.rmtree(work, ignore_errors=True)
print(json.dumps(out))
'''


def run_case(side: str, tree: Optional[str], frames: int, prec: bool, mode: str) -> Dict[str, float]:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = tree
    # ``python -c`` puts its working directory first on sys.path: run in the tree itself (ours)
    # or in the temporary directory (molrs), never where another tree's package would be found
    out = subprocess.run([sys.executable, "-c", CASE, side, str(frames), "1" if prec else "0", mode],
                         env=env, cwd=tree if tree is not None else tempfile.gettempdir(), capture_output=True,
                         text=True, check=True)
    if mode == "profile":
        print(out.stderr)
    measured = json.loads(out.stdout.splitlines()[-1]).get("package")
    if tree is not None and not str(measured).startswith(str(Path(tree).resolve())):
        raise SystemExit(f"the case for {tree} measured {measured}")
    result: Dict[str, float] = {k: v for k, v in json.loads(out.stdout.splitlines()[-1]).items() if k != "package"}
    return result


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", default=[], help="NAME=PATH of a source tree (default: this one)")
    parser.add_argument("--frames", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--append-only", action="store_true", help="also time the appends without any commit")
    parser.add_argument("--profile", action="store_true",
                        help="only print each tree's cProfile of the durable appends without precision")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    trees: Dict[str, str] = dict(t.split("=", 1) for t in args.tree) or {"this": str(HERE)}
    if args.profile:
        for name, tree in trees.items():
            print(f"## {name}")
            run_case("ours", tree, args.frames, False, "profile")
        return 0
    try:
        import molrs.io.mrec  # noqa: F401
        have_molrs = True
    except ImportError:
        have_molrs = False
    import random
    order = random.Random(7)
    cases: List[Tuple[str, Optional[str], bool, str]] = []
    for prec in (False, True):
        for name, tree in trees.items():
            cases.append((name, tree, prec, "durable"))
            if args.append_only:
                cases.append((name, tree, prec, "append only"))
        if have_molrs:
            cases.append(("molrs", None, prec, "durable"))
    times: Dict[str, List[Dict[str, float]]] = {}
    load = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        shuffled = cases[:]
        order.shuffle(shuffled)
        for name, tree, prec, mode in shuffled:
            key = f"{name} {'1e-3' if prec else 'no precision'} {mode}"
            times.setdefault(key, []).append(run_case("molrs" if tree is None else "ours", tree, args.frames, prec, mode))
    load.append(os.getloadavg()[0])
    lines = [f"64-atom frames, {args.frames} appends a run, frames built before the clock, {args.rounds} rounds; "
             f"load average {load[0]:.1f} -> {load[1]:.1f} (2 cores)", "",
             "| case | µs a frame, CPU (median; range) | wall (median) |", "|---|---|---|"]
    for key, runs in sorted(times.items()):
        cpu = [r["cpu"] * 1e6 / args.frames for r in runs]
        wall = [r["wall"] * 1e6 / args.frames for r in runs]
        lines.append(f"| {key} | {statistics.median(cpu):.1f} ({min(cpu):.1f}–{max(cpu):.1f}) | {statistics.median(wall):.1f} |")
    if have_molrs:
        lines += ["", "| molrs time / ours, formed in each round | CPU (median; range) | wall (median; range) | target |",
                  "|---|---|---|---|"]
        for prec, target in ((False, 1.0), (True, 1.5)):
            label = "1e-3" if prec else "no precision"
            theirs = times[f"molrs {label} durable"]
            for name in trees:
                ours = times[f"{name} {label} durable"]
                ratios = {m: [t[m] / o[m] for t, o in zip(theirs, ours)] for m in ("cpu", "wall")}
                cells = [f"{statistics.median(r):.2f}x ({min(r):.2f}–{max(r):.2f})" for r in ratios.values()]
                lines.append(f"| {name}, {label} | {cells[0]} | {cells[1]} | >= {target}x (CPU) |")
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps({"frames": args.frames, "load": load, "times": times}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
