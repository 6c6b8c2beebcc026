#!/usr/bin/env python
"""Power-cut campaign (issues 10 and 23): every state of every class, per device model.

Each workload (trajectory, metrics, write_mrec_frame over a record with the atomic exchange
and with it refused — the two-rename fallback —, pack_mrec_zip) is run once through the
recording file seam; the simulator of ``tests/powercut`` (one implementation, shared with
the suite) enumerates the crash states of its log class by class — ``prefix-keep``,
``prefix-drop``, ``omit-one``, ``torn``, ``torn-alone``, ``zeros``, ``zeros-alone``, defined
in ``powercut_sim.enumerate_states`` — builds each post-crash tree on the device model
(``--device``: ``torn-4096`` = no powersafe overwrite, a torn 4 KiB sector garbles all of
it; ``torn-512``; ``psow-512`` = the powersafe model of issue 10; ``all``) and checks every
distinct tree once.  By default EVERY systematic state is run (``--sample N``: an even share
per class of N states per workload instead; ``--random N``: N seeded random states on top;
``--unaligned``: the layout before issue 23, a negative control).
Prints, per workload, the states and the distinct trees per class, the violations by symptom
and class, and the states that held in a documented way (notes).  Exit status 1 when any
state violates a promise.

    nice python bench/powercut.py [--device torn-4096] [--jobs 2] [--workloads trajectory,metrics,...]
                                  [--sample N] [--random N] [--seed 1] [--deep-every 25] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests" / "powercut"), str(HERE.parent)]

import powercut_workloads as workloads  # noqa: E402  (the simulator and checks of the suite)
from powercut_sim import CLASSES, DEVICES  # noqa: E402


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (the forked checkers)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> int:
    """Run the campaign on each device model asked for and print the counts."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="torn-4096", choices=sorted(DEVICES) + ["all"])
    parser.add_argument("--workloads", default=",".join(workloads.WORKLOADS))
    parser.add_argument("--sample", type=int, default=None, help="states per workload (default: every state)")
    parser.add_argument("--random", type=int, default=0, help="seeded random states per workload, on top")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2, help="forked checker processes")
    parser.add_argument("--deep-every", type=int, default=25,
                        help="one distinct trajectory tree in N is also read by zarr-python (0: none)")
    parser.add_argument("--json", default=None, help="write the counts here")
    parser.add_argument("--unaligned", action="store_true",
                        help="negative control: the layout before issue 23 (sharding.SECTOR_ALIGN = 1)")
    args = parser.parse_args()
    if args.unaligned:
        import molrec_raw.zarr.codecs.sharding as sharding
        sharding.SECTOR_ALIGN = 1
    names = [n for n in args.workloads.split(",") if n]
    devices = sorted(DEVICES) if args.device == "all" else [args.device]
    budget = None if args.sample is None else {n: args.sample for n in names}
    if not workloads.zarr_python_available():
        print("zarr-python is not installed: the deep reads are not run", file=sys.stderr)
    failed, out = 0, {}
    for device_name in devices:
        started, cpu = time.time(), cpu_seconds()

        def progress(name: str, done: int, total: int) -> None:
            print(f"  {device_name} {name}: {done}/{total} distinct trees, {time.time() - started:.0f} s",
                  file=sys.stderr, flush=True)
        results = workloads.campaign(names, args.seed, Path(tempfile.mkdtemp(prefix="molrec-powercut-")),
                                     device=DEVICES[device_name], budget=budget, random_states=args.random,
                                     deep_every=args.deep_every, jobs=args.jobs, progress=progress)
        print(f"# device {device_name}")
        for name, outcome in results.items():
            print(f"== {name} ({outcome.ops} logged operations)")
            print(outcome.table())
            failed += outcome.failed
        total = sum(o.total for o in results.values())
        print(f"total on {device_name}: {total} states, {sum(o.distinct for o in results.values())} distinct trees, "
              f"{sum(o.failed for o in results.values())} violations; seed {args.seed}; "
              f"{time.time() - started:.0f} s wall, {cpu_seconds() - cpu:.0f} s CPU\n", flush=True)
        out[device_name] = {name: {"ops": o.ops, "states": o.states, "distinct": o.distinct,
                                   "distinct_by_class": o.distinct_by_kind,
                                   "violations": {f"{s} / {k}": v for (s, k), v in o.violations.items()},
                                   "notes": {f"{s} / {k}": v for (s, k), v in o.notes.items()}}
                            for name, o in results.items()}
    if args.json:
        Path(args.json).write_text(json.dumps({"classes": list(CLASSES), "seed": args.seed, "results": out}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
