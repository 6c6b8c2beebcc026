#!/usr/bin/env python
"""Benchmark against the reference, molrs 0.19 (the Rust implementation, ``molrs.io.mrec``):
streaming writes and random / in-order reads of 64-atom trajectory frames, each side on its
own store and on the other's (issue 27 item 9; issue 29's targets against molrs).

The frames: 64 atoms, ``x y z`` f64 declared at precision 1e-3 (the values already on the
grid, so both writers store the same numbers) and a per-step ``pe`` (f64).

  append      ``--frames`` frames, one ``append`` per frame, durable (the default of both),
              each side's own frame objects built inside the loop (what a producer pays)
  random      ``reader[i]`` for ``--picks`` random frames, the columns and ``pe`` touched;
              a reader opened just before each timed call (nothing cached from before)
  in order    the first ``--sequential`` frames in order (ours ``iter_frames``, molrs the
              reader's iterator), the columns and ``pe`` touched

Each read runs four ways: ours on our store, ours on molrs's, molrs on molrs's, molrs on
ours.  Cases are interleaved in a fresh random order each round (the machine is shared);
figures are medians over ``--rounds``, per frame, wall and CPU (process) time; a ratio is
molrs's time / ours (> 1: ours faster), formed inside the run.  Where molrs is not installed
(Python < 3.12) every molrs row says so.

    python bench/reference.py [--frames 20000] [--picks 2000] [--sequential 20000] [--rounds 3] [--json out.json]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from molrec_raw.record.model import Block, Frame  # noqa: E402
from molrec_raw.record.precision import round_to_precision  # noqa: E402
from molrec_raw.record.trajectory import MrecReader, MrecWriter, SequenceSchema  # noqa: E402

ATOMS = 64
PRECISION = 1e-3
TARGETS = {"append": 0.75, "random": 1.0, "in order": 1.0}  # molrs time / ours


def molrs_mrec() -> Optional[Any]:
    """``molrs.io.mrec``, or None when molrs is not installed."""
    try:
        import molrs.io.mrec as mrec
    except ImportError:
        return None
    return mrec


def positions(count: int) -> np.ndarray:
    """``count`` frames of 64 atoms, (count, 64, 3), on the precision grid."""
    base = np.random.default_rng(0).uniform(0, 20, size=(ATOMS, 3))
    k = np.arange(count, dtype=np.float64)
    walk = base[None] + 0.001 * k[:, None, None] + 0.01 * np.sin(k[:, None, None] * 0.37 + base[None])
    return np.ascontiguousarray(round_to_precision(walk, PRECISION).transpose(0, 2, 1))  # (count, 3, 64)


def ours_schema() -> SequenceSchema:
    schema = SequenceSchema().declare_block("atoms")
    for c in "xyz":
        schema.declare_column("atoms", c, "f64").declare_precision("atoms", c, PRECISION)
    return schema.declare_meta("pe", "f64")


def ours_append(path: str, xyz: np.ndarray) -> None:
    with MrecWriter(path, ours_schema()) as writer:
        for i in range(xyz.shape[0]):
            writer.append(Frame({"pe": -0.5 * i}, {"atoms": Block({"x": xyz[i, 0], "y": xyz[i, 1], "z": xyz[i, 2]})}),
                          step=i)


def molrs_append(path: str, xyz: np.ndarray) -> None:
    import molrs
    mrec = molrs_mrec()
    assert mrec is not None
    first = molrs.Frame({"atoms": {"x": xyz[0, 0], "y": xyz[0, 1], "z": xyz[0, 2]}}, meta={"pe": 0.0})
    schema = mrec.SequenceSchema.from_frames([first])
    for c in "xyz":
        schema.declare_precision("atoms", c, PRECISION)
    schema.declare_meta("pe", "f64")
    writer = mrec.MrecWriter(Path(path), schema, durable=True)
    for i in range(xyz.shape[0]):
        writer.append(molrs.Frame({"atoms": {"x": xyz[i, 0], "y": xyz[i, 1], "z": xyz[i, 2]}}, meta={"pe": -0.5 * i}),
                      step=i)
    writer.close()


def ours_random(path: str, picks: List[int]) -> Callable[[], Any]:
    reader = MrecReader(path)

    def run() -> None:
        for i in picks:
            frame = reader[i]
            columns = frame.blocks["atoms"].columns
            columns["x"], columns["y"], columns["z"], frame.meta["pe"]
    return run


def ours_in_order(path: str, count: int) -> Callable[[], Any]:
    reader = MrecReader(path)

    def run() -> None:
        for frame in reader.iter_frames(0, count):
            columns = frame.blocks["atoms"].columns
            columns["x"], columns["y"], columns["z"], frame.meta["pe"]
    return run


def molrs_random(path: str, picks: List[int]) -> Callable[[], Any]:
    mrec = molrs_mrec()
    assert mrec is not None
    reader = mrec.MrecReader(Path(path))

    def run() -> None:
        for i in picks:
            frame = reader[i]
            atoms = frame["atoms"]
            atoms["x"], atoms["y"], atoms["z"], frame.meta["pe"]
    return run


def molrs_in_order(path: str, count: int) -> Callable[[], Any]:
    mrec = molrs_mrec()
    assert mrec is not None
    reader = mrec.MrecReader(Path(path))

    def run() -> None:
        for n, frame in enumerate(reader):
            atoms = frame["atoms"]
            atoms["x"], atoms["y"], atoms["z"], frame.meta["pe"]
            if n + 1 == count:
                break
    return run


def same_values(ours_path: str, molrs_path: str, probe: List[int]) -> bool:
    """Both stores hold the same numbers, read by both readers (a bench of equal work)."""
    mrec = molrs_mrec()
    assert mrec is not None
    readers = [MrecReader(ours_path), MrecReader(molrs_path)]
    theirs = [mrec.MrecReader(Path(ours_path)), mrec.MrecReader(Path(molrs_path))]
    for i in probe:
        got = [np.stack([r[i].blocks["atoms"].columns[c] for c in "xyz"]) for r in readers]
        got += [np.stack([np.asarray(r[i]["atoms"][c]) for c in "xyz"]) for r in theirs]
        if any(not np.array_equal(got[0], g) for g in got[1:]):
            return False
    return True


def run(args: argparse.Namespace) -> Dict[str, Any]:
    have_molrs = molrs_mrec() is not None
    xyz = positions(args.frames)
    work = Path(tempfile.mkdtemp(prefix="molrec-bench-reference-", dir=args.dir))
    stores = {"ours": str(work / "ours.mrec"), "molrs": str(work / "molrs.mrec")}
    ours_append(stores["ours"], xyz)
    if have_molrs:
        molrs_append(stores["molrs"], xyz)
    picks = np.random.default_rng(42).integers(0, args.frames, args.picks).tolist()
    sequential = min(args.sequential, args.frames)
    out: Dict[str, Any] = {"frames": args.frames, "picks": args.picks, "sequential": sequential, "rounds": args.rounds,
                           "molrs": have_molrs, "load": [os.getloadavg()], "wall": {}, "cpu": {}, "per": {}}
    cases: List[Tuple[str, int, Callable[[], Callable[[], Any]]]] = []

    def appending(kind: str) -> Callable[[], Any]:
        target = str(work / f"append-{kind}.mrec")
        shutil.rmtree(target, ignore_errors=True)
        return lambda: (ours_append if kind == "ours" else molrs_append)(target, xyz)

    readers = {"ours": (ours_random, ours_in_order), "molrs": (molrs_random, molrs_in_order)}
    sides = ["ours", "molrs"] if have_molrs else ["ours"]
    for side in sides:
        cases.append((f"append {side}", args.frames, lambda side=side: appending(side)))
        for store in sides:
            random_of, in_order_of = readers[side]
            cases.append((f"random {side} on {store}'s", len(picks),
                          lambda r=random_of, s=store: r(stores[s], picks)))
            cases.append((f"in order {side} on {store}'s", sequential,
                          lambda r=in_order_of, s=store: r(stores[s], sequential)))
    if have_molrs:
        out["same_values"] = same_values(stores["ours"], stores["molrs"], picks[:20])
    order = np.random.default_rng(7)
    try:
        for _ in range(args.rounds):
            for j in order.permutation(len(cases)):
                name, frames, make = cases[int(j)]
                fn = make()
                gc.collect()
                c0, t0 = time.process_time(), time.perf_counter()
                fn()
                out["wall"].setdefault(name, []).append(time.perf_counter() - t0)
                out["cpu"].setdefault(name, []).append(time.process_time() - c0)
                out["per"][name] = frames
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out["load"].append(os.getloadavg())
    return out


def report(out: Dict[str, Any]) -> str:
    per = out["per"]
    wall = {k: statistics.median(v) / per[k] for k, v in out["wall"].items()}
    cpu = {k: statistics.median(v) / per[k] for k, v in out["cpu"].items()}
    lines = [f"64-atom frames: {out['frames']} appended, {out['picks']} random, {out['sequential']} in order; "
             f"median of {out['rounds']} rounds; load average {out['load'][0][0]:.1f} -> {out['load'][-1][0]:.1f}", "",
             "| case | µs per frame (wall / CPU) |", "|---|---|"]
    lines += [f"| {k} | {wall[k] * 1e6:.1f} / {cpu[k] * 1e6:.1f} |" for k in sorted(wall)]
    lines += ["", "| vs molrs (molrs time / ours) | wall | CPU | target |", "|---|---|---|---|"]
    if not out["molrs"]:
        lines.append("| every molrs row | molrs is not installed (molcrafts-molrs needs Python >= 3.12) | | |")
        return "\n".join(lines)
    rows = [("streaming appends, durable", "append molrs", "append ours", TARGETS["append"]),
            ("random, each on its own store", "random molrs on molrs's", "random ours on ours's", TARGETS["random"]),
            ("random, on molrs's store", "random molrs on molrs's", "random ours on molrs's", TARGETS["random"]),
            ("random, on our store", "random molrs on ours's", "random ours on ours's", TARGETS["random"]),
            ("in order, each on its own store", "in order molrs on molrs's", "in order ours on ours's",
             TARGETS["in order"]),
            ("in order, on molrs's store", "in order molrs on molrs's", "in order ours on molrs's", TARGETS["in order"]),
            ("in order, on our store", "in order molrs on ours's", "in order ours on ours's", TARGETS["in order"])]
    for label, theirs, ours, target in rows:
        lines.append(f"| {label} | {wall[theirs] / wall[ours]:.2f}x | {cpu[theirs] / cpu[ours]:.2f}x | >= {target}x "
                     f"{'met' if cpu[theirs] / cpu[ours] >= target else 'MISSED'} (CPU) |")
    lines.append(f"\nboth stores hold the same values, read by both readers: {out.get('same_values')}")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=20000)
    parser.add_argument("--picks", type=int, default=2000)
    parser.add_argument("--sequential", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default=None, help="parent of the scratch directory")
    parser.add_argument("--json", default=None, help="write the raw figures here")
    args = parser.parse_args(argv)
    out = run(args)
    print(report(out))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
