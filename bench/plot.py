#!/usr/bin/env python
"""Benchmark ``molrec-raw plot`` on 10^6 points (issue 17): one process, medians, ratios.

    python bench/plot.py [--points N] [--repeats R] [--dir PARENT] [--frames F]

1. The command end to end, as a user runs it: ``molrec-raw plot big.mrec --out big.png``
   (a fresh interpreter: imports, reading the record, decimation, drawing, PNG, atomic
   replace) on a record with one metrics series of N points (a random walk with one spike).
   Target: < 2 s.  Also ``--vega`` alone (no matplotlib), and the interpreter's fixed cost
   (``python -c "import molrec_raw.plot, matplotlib.figure"``) for scale.
2. In-process breakdown: reading the series, decimation, drawing + PNG.  Peer: matplotlib
   drawing the same N points undecimated (same figure size, same PNG) — the ratio is
   peer / ours, > 1 means decimating first is faster.
3. With ``--frames F``: the same command on a trajectory of F frames whose per-step meta
   ``pe`` is the series (reading through ``MrecReader.meta_series``).

Warm page cache; every timing is the median of --repeats runs.
"""
from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, List

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import molrec_raw as mr  # noqa: E402
from molrec_raw import plot  # noqa: E402
from molrec_raw.record.runplot.load import load_run_series  # noqa: E402


def series(n: int) -> np.ndarray:
    rng = np.random.default_rng(17)
    y = np.cumsum(rng.normal(size=n))
    y[n // 3] += 500.0  # one spike: must survive decimation
    return y


def metrics_record(path: str, y: np.ndarray) -> str:
    mr.write_mrec_frame(path, mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(1)})}), durable=False)
    with mr.MetricsWriter(path) as m:
        for step, value in enumerate(y.tolist()):
            m.log("energy", value, step=step)
    return path


def trajectory_record(path: str, y: np.ndarray) -> str:
    schema = mr.SequenceSchema().declare_block("atoms", rows=1).declare_column("atoms", "x", "f64")
    schema.declare_meta("pe", "f64")
    atoms = mr.Block({"x": np.zeros(1)})
    with mr.MrecWriter(path, schema, flush_every=65536) as w:
        for step, value in enumerate(y.tolist()):
            w.append(mr.Frame({"pe": value}, {"atoms": atoms}), step=step)
    return path


def median(fn: Callable[[], object], repeats: int) -> float:
    times: List[float] = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def command(*args: str) -> Callable[[], object]:
    exe = [sys.executable, "-m", "molrec_raw", *args]
    return lambda: subprocess.run(exe, check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--frames", type=int, default=0, help="also a trajectory of this many frames")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="bench-plot-", dir=args.dir)
    try:
        y = series(args.points)
        started = time.perf_counter()
        record = metrics_record(os.path.join(scratch, "big.mrec"), y)
        print(f"wrote {args.points} metric points in {time.perf_counter() - started:.1f} s")
        png = os.path.join(scratch, "big.png")
        vega = os.path.join(scratch, "big.mlp.vl.json")
        fixed = median(lambda: subprocess.run([sys.executable, "-c", "import molrec_raw.plot, matplotlib.figure"],
                                              check=True), args.repeats)
        cli_png = median(command("plot", record, "--out", png), args.repeats)
        cli_vega = median(command("plot", record, "--vega", vega), args.repeats)
        print(f"\n1. command, {args.points} points (median of {args.repeats}; target < 2 s)")
        print(f"   molrec-raw plot big.mrec --out big.png           {cli_png:6.3f} s")
        print(f"   molrec-raw plot big.mrec --vega big.mlp.vl.json  {cli_vega:6.3f} s")
        print(f"   python -c 'import molrec_raw.plot, matplotlib'   {fixed:6.3f} s  (fixed cost inside the above)")

        run = load_run_series(record)
        read = median(lambda: load_run_series(record), args.repeats)
        decimate = median(lambda: run.decimated(1000), args.repeats)

        def ours() -> None:
            plot._draw(run, (1000, 300)).savefig(io.BytesIO(), format="png", dpi=plot.DPI)

        def undecimated() -> None:
            from matplotlib.figure import Figure
            fig = Figure(figsize=(10, 3), dpi=plot.DPI, layout="constrained")
            ax = fig.subplots()
            ax.plot(run.panels[0].x, run.panels[0].y, color=plot.LINE_COLOR, linewidth=1.0)
            fig.savefig(io.BytesIO(), format="png", dpi=plot.DPI)

        draw = median(ours, args.repeats)
        peer = median(undecimated, args.repeats)
        kept = run.decimated(1000)[0][1]
        print(f"\n2. in process ({kept.shape[0]} of {args.points} points drawn; the spike kept: "
              f"{bool(np.isin(args.points // 3, kept))})")
        print(f"   read the series          {read:6.3f} s")
        print(f"   decimate (1000 buckets)  {decimate:6.3f} s")
        print(f"   draw + PNG, decimated    {draw:6.3f} s")
        print(f"   draw + PNG, all points   {peer:6.3f} s  (matplotlib alone; ratio {peer / draw:.1f}x)")

        if args.frames:
            started = time.perf_counter()
            traj = trajectory_record(os.path.join(scratch, "traj.mrec"), series(args.frames))
            print(f"\n3. trajectory of {args.frames} frames (written in {time.perf_counter() - started:.1f} s)")
            t_png = median(command("plot", traj, "--out", png), args.repeats)
            print(f"   molrec-raw plot traj.mrec --out big.png  {t_png:6.3f} s")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
