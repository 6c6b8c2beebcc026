#!/usr/bin/env python
"""W1 (10,000-atom appends) against "W1 limit + metadata", phase by phase (issue 37).

bench/trajectory.py's row "W1 append x limit + metadata" compares ``MrecWriter`` with
``durable=False`` (``ours_write``) against ``limit_append(..., metadata=docs)``.  This script runs
the same two calls on the same frames, in the same process, alternating, and splits each one's
time into phases by wrapping the functions that do them (exclusive times: a phase nested in
another is taken out of the outer one):

  ours   create     ``MrecWriter.__init__`` (the record's groups, arrays, lock, live state)
         buffer     ``BlockWriter.accept`` and the rounding to the precision grid
         encode     ``encode_groups`` (shuffle, zstd batch on 2 threads, crc32c)
         landing    ``Landing.land`` (the shard writes and index pages)
         metadata   ``DirectoryStore.replace_atomic`` (every zarr.json and the marker)
         close      ``MrecWriter.close`` (its last commit excepted: live state, tail alignment)
         python     the rest: ``append``'s checks, the commit's bookkeeping, the manifest
  limit  encode     gather, rounding, shuffle, zstd batch (2 threads), crc32c: the rest
         landing    ``os.pwrite`` / ``os.open`` / ``os.close`` of the shards
         metadata   ``_replace_metadata`` (zarr.json of x, y, z and the group, rename over)

Each phase: process CPU time (every thread) and wall, the median over ``--rounds``; and the
number of calls of each wrapped function (load-independent).  Frames are built before the
clock (the same ``frame_values`` as bench/trajectory.py).

    python bench/w1_breakdown.py --frames 200 --rounds 5
    python bench/w1_breakdown.py --frames 200 --only ours --profile   # cProfile of one case
    valgrind --tool=callgrind --callgrind-out-file=/dev/null python bench/w1_breakdown.py --only ours --bare 2
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import trajectory as T  # noqa: E402  (bench/trajectory.py: the same workload and limit)


class Meter:
    """Exclusive process-CPU and wall time per phase: entering a wrapped call pauses the
    phase around it."""

    def __init__(self) -> None:
        self.cpu: Dict[str, float] = {}
        self.wall: Dict[str, float] = {}
        self.calls: Dict[str, int] = {}
        self.stack: List[List[Any]] = []

    def _charge(self, now_cpu: float, now_wall: float) -> None:
        if self.stack:
            phase, c0, w0 = self.stack[-1]
            self.cpu[phase] = self.cpu.get(phase, 0.0) + now_cpu - c0
            self.wall[phase] = self.wall.get(phase, 0.0) + now_wall - w0

    def wrap(self, owner: Any, name: str, phase: str) -> Callable[[], None]:
        """Replace ``owner.name`` by a timed wrapper; returns the undo."""
        original = getattr(owner, name)
        meter = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            c, w = time.process_time(), time.perf_counter()
            meter._charge(c, w)
            meter.stack.append([phase, c, w])
            meter.calls[f"{phase}: {name}"] = meter.calls.get(f"{phase}: {name}", 0) + 1
            try:
                return original(*args, **kwargs)
            finally:
                c, w = time.process_time(), time.perf_counter()
                meter._charge(c, w)
                meter.stack.pop()
                if meter.stack:
                    meter.stack[-1][1:] = [c, w]

        setattr(owner, name, timed)
        return lambda: setattr(owner, name, original)

    def run(self, phase: str, fn: Callable[[], Any]) -> Tuple[float, float]:
        """``fn()`` with ``phase`` as the outermost one; (wall, CPU) of the whole call."""
        c, w = time.process_time(), time.perf_counter()
        self.stack.append([phase, c, w])
        try:
            fn()
        finally:
            c1, w1 = time.process_time(), time.perf_counter()
            self._charge(c1, w1)
            self.stack.pop()
        return w1 - w, c1 - c


def instrument(case: str, meter: Meter) -> List[Callable[[], None]]:
    undo = []
    if case == "ours":
        from molrec_raw.record.trajectory import blocks, writer
        from molrec_raw.zarr import array, store

        undo += [meter.wrap(writer.MrecWriter, "__init__", "create"),
                 meter.wrap(writer.MrecWriter, "close", "close"),
                 meter.wrap(writer.MrecWriter, "_commit", "python"),
                 meter.wrap(blocks.BlockWriter, "accept", "buffer"),
                 meter.wrap(blocks, "round_to_precision", "buffer"),
                 meter.wrap(array, "encode_groups", "encode"),
                 meter.wrap(array.Landing, "land", "landing"),
                 meter.wrap(store.DirectoryStore, "replace_atomic", "metadata")]
    else:
        undo += [meter.wrap(T, "_replace_metadata", "metadata"),
                 meter.wrap(os, "pwrite", "landing"),
                 meter.wrap(os, "open", "landing"),
                 meter.wrap(os, "close", "landing")]
    return undo


def main(argv: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--atoms", type=int, default=10_000)
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", choices=("ours", "limit"), default=None)
    parser.add_argument("--profile", action="store_true", help="cProfile the case(s) instead (tottime, top 30)")
    parser.add_argument("--bare", type=int, default=None, metavar="N",
                        help="only call the case(s) N times after the set-up, nothing measured (for valgrind "
                             "--tool=callgrind or strace -c: N=2 minus N=1 is one warm call)")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args(argv)
    data = [T.frame_values(i, args.atoms) for i in range(args.frames)]
    work = tempfile.mkdtemp(prefix="w1-breakdown-", dir=args.dir)
    try:
        record = os.path.join(work, "w1.mrec")
        T.ours_write(record, data)
        geo, docs, k = T.geometry(record), T._metadata_docs(record), T.cadence(args.atoms)
        calls = {"ours": lambda p: T.ours_write(p, data, durable=False),
                 "limit": lambda p: T.limit_append(p, data, geo, k, metadata=docs)}
        cases = [args.only] if args.only else ["ours", "limit"]
        if args.bare is not None:
            for case in cases:
                for r in range(args.bare):
                    calls[case](os.path.join(work, f"b{r}-{case}"))
            return 0
        for case in cases:  # warm-up
            calls[case](os.path.join(work, f"warm-{case}"))
        if args.profile:
            for case in cases:
                profile = cProfile.Profile()
                for r in range(args.rounds):
                    T.quiesce()
                    profile.enable()
                    calls[case](os.path.join(work, f"p{r}-{case}"))
                    profile.disable()
                print(f"\n== {case}: cProfile of {args.rounds} calls ({args.frames} frames of {args.atoms} atoms)")
                stats = pstats.Stats(profile)
                print(f"function calls per call: {stats.total_calls / args.rounds:.0f}")  # type: ignore[attr-defined]
                stats.sort_stats("tottime").print_stats(30)
            return 0
        usage: Dict[str, List[Tuple[float, float, int, int]]] = {case: [] for case in cases}
        per: Dict[str, List[Meter]] = {case: [] for case in cases}
        totals: Dict[str, List[Tuple[float, float]]] = {case: [] for case in cases}
        load = [os.getloadavg()[0]]
        for r in range(args.rounds):
            for case in (cases if r % 2 == 0 else cases[::-1]):
                T.quiesce()
                meter = Meter()
                undo = instrument(case, meter)
                before = resource.getrusage(resource.RUSAGE_SELF)
                try:
                    totals[case].append(meter.run("python" if case == "ours" else "encode",
                                                  lambda: calls[case](os.path.join(work, f"r{r}-{case}"))))
                    after = resource.getrusage(resource.RUSAGE_SELF)
                    usage[case].append((after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime,
                                        after.ru_minflt - before.ru_minflt, after.ru_nvcsw - before.ru_nvcsw))
                finally:
                    for u in undo:
                        u()
                per[case].append(meter)
        load.append(os.getloadavg()[0])
        print(f"W1 phases: {args.frames} frames of {args.atoms} atoms, K = {k}, medians of {args.rounds} rounds; "
              f"load average {load[0]:.1f} -> {load[1]:.1f}; {os.cpu_count()} CPU(s)\n")
        print("| phase | ours CPU ms | ours wall ms | limit + metadata CPU ms | limit + metadata wall ms |")
        print("|---|---:|---:|---:|---:|")
        phases = ["create", "buffer", "encode", "landing", "metadata", "close", "python"]
        for phase in phases:
            cells = []
            for case in ("ours", "limit"):
                if case not in per:
                    cells += ["", ""]
                    continue
                cells.append(f"{statistics.median(m.cpu.get(phase, 0.0) for m in per[case]) * 1e3:.1f}")
                cells.append(f"{statistics.median(m.wall.get(phase, 0.0) for m in per[case]) * 1e3:.1f}")
            print(f"| {phase} | " + " | ".join(cells) + " |")
        cells = []
        for case in ("ours", "limit"):
            if case in totals:
                cells.append(f"{statistics.median(c for _, c in totals[case]) * 1e3:.1f}")
                cells.append(f"{statistics.median(w for w, _ in totals[case]) * 1e3:.1f}")
            else:
                cells += ["", ""]
        print("| **total** | " + " | ".join(cells) + " |")
        if len(cases) == 2:
            ratio = [lc / oc for (_, oc), (_, lc) in zip(totals["ours"], totals["limit"])]
            print(f"\nlimit + metadata CPU / ours CPU per round: {' '.join(f'{x:.2f}' for x in ratio)} "
                  f"(median {statistics.median(ratio):.2f}x)")
        print("\nper write (median): user CPU ms, system CPU ms, minor page faults, voluntary context switches")
        for case in cases:
            print(f"  {case}: " + ", ".join(f"{statistics.median(u[i] for u in usage[case]) * (1e3 if i < 2 else 1):.1f}"
                                            for i in range(4)))
        print("\ncalls of the wrapped functions per write:")
        for case in cases:
            print(f"  {case}: " + ", ".join(f"{name} {n}" for name, n in sorted(per[case][0].calls.items())))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
