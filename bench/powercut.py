#!/usr/bin/env python
"""Power-cut campaign (issue 10): many more crash states than the suite runs.

Each workload (trajectory, metrics, write_mrec_frame over a record, pack_mrec_zip) is run
once through the recording file seam; the simulator of ``tests/powercut`` (one
implementation, shared with the suite) builds post-crash trees under the persistence model
of ``tests/powercut/powercut_sim.py`` — systematic states (every prefix with pending
operations kept and dropped, omit-one reorderings per barrier window, every sector mask of
each in-place write plus one garbage sector, zeros for each append) sampled or topped up
with seeded random states — and checks every distinct tree.  Exit status 1 when any state
violates a promise.

    python bench/powercut.py [--states 20000] [--seed 1] [--workloads trajectory,metrics,doors,pack]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests" / "powercut"), str(HERE.parent)]

import powercut_workloads as workloads  # noqa: E402  (the simulator and checks of the suite)

SHARES = {"trajectory": 0.70, "metrics": 0.12, "pack": 0.10, "doors": 0.08}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--states", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workloads", default=",".join(SHARES))
    parser.add_argument("--deep-every", type=int, default=25,
                        help="every N-th distinct trajectory state is also read by zarr-python")
    args = parser.parse_args()
    names = [n for n in args.workloads.split(",") if n]
    share = sum(SHARES[n] for n in names)
    budget = {n: int(round(args.states * SHARES[n] / share)) for n in names}
    budget[names[0]] += args.states - sum(budget.values())
    started = time.time()

    def progress(name: str, done: int, total: int) -> None:
        print(f"  {name}: {done}/{total} states, {time.time() - started:.0f} s", file=sys.stderr, flush=True)

    results = workloads.campaign(names, budget, args.seed, Path(tempfile.mkdtemp(prefix="molrec-powercut-")),
                                 deep_every=args.deep_every, progress=progress)
    failed = 0
    for name, outcome in results.items():
        print(f"== {name} ({outcome.ops} logged operations)")
        print(outcome.table())
        failed += outcome.failed
    total = sum(o.total for o in results.values())
    print(f"total: {total} states, {sum(o.distinct for o in results.values())} distinct trees, "
          f"{failed} violations; seed {args.seed}; {time.time() - started:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
