#!/usr/bin/env python
"""Live-reading campaign (issue 12): one writer process, ``--readers`` reader processes.

The writer appends frames of known content with an automatic commit after every frame, a
durable ``flush()`` every 10 frames, a topology change every 150 frames, a cell change every
100 and a numbering that stops being a progression at frame 300, for ``--seconds``; the
readers ``refresh()``, read the newest frame and four random committed ones and compare them
with what was appended, bit for bit, until the run's status says it is over (then every
frame once more).  The code is tests/live/live_campaign.py (whose 3-second run is in the
suite).

    python bench/live.py [--seconds 20] [--readers 2] [--interval 0.005] [--seed 1] [--runs 1]

Prints reads/s (all readers together), commit→visibility lag (median, p99 over every frame
each reader saw appear), wrong frames, non-library errors and library errors (a read that
still failed after its bounded retries).  Exit status 1 when a wrong frame or a
non-library error occurred, or a reader did not see the run end.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests" / "live")]

import live_campaign  # noqa: E402  (the writer, the readers and the checks of the test suite)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--interval", type=float, default=0.005, help="the writer's least time per frame (s)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print every run's summary as JSON")
    args = parser.parse_args()
    failed = False
    print(f"{'run':>3} {'frames':>7} {'reads/s':>9} {'refresh/s':>9} {'lag med ms':>10} {'lag p99 ms':>10} "
          f"{'wrong':>5} {'other':>5} {'library':>7} end")
    for k in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="molrec-live-") as work:
            r = live_campaign.run(Path(work), args.seconds, args.readers, args.interval, args.seed + k)
        print(f"{k:>3} {r['frames']:>7} {r['reads_per_s']:>9.0f} {r['refreshes_per_s']:>9.0f} "
              f"{r['lag_ms_median']:>10.2f} {r['lag_ms_p99']:>10.2f} {r['wrong_frames']:>5} "
              f"{r['other_errors']:>5} {r['library_errors']:>7} {'yes' if r['saw_end'] else 'NO'}")
        if args.json:
            print(json.dumps(r))
        failed |= bool(r["wrong_frames"] or r["other_errors"] or not r["saw_end"])
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
