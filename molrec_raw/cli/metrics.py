"""``molrec-raw metrics``: the latest value of every series; ``--follow`` tails the WAL."""
from __future__ import annotations

import argparse
from typing import List

import numpy as np

from molrec_raw.errors import MolrecError
from molrec_raw.record.metrics import follow_metrics, read_metrics
from molrec_raw.zarr.remote import is_url


def _metrics_table(path: str) -> List[str]:
    series = read_metrics(path)
    if not series:
        return [f"{path}: no metrics"]
    rows = [("series", "points", "last step", "last value", "min", "max")]
    for key, s in sorted(series.items()):
        values = np.asarray(s.values, dtype=np.float64)
        finite = values[np.isfinite(values)]
        last_step = "-" if s.steps is None or not len(s.steps) else str(int(s.steps[-1]))
        rows.append((key, str(len(values)), last_step, f"{values[-1]:.6g}" if len(values) else "-",
                     f"{finite.min():.6g}" if finite.size else "-", f"{finite.max():.6g}" if finite.size else "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
            for row in rows]


def run_metrics(args: argparse.Namespace) -> int:
    """The table, then (``--follow``) every event logged from now on (``step key value``),
    through ``follow_metrics``: a torn last line waits for its newline, a bad complete line
    is an error, the run's end (a record's status) or ``--timeout`` stops it."""
    if args.follow and is_url(args.path):
        raise MolrecError("--follow tails the WAL of a local record; a record named by URL is read once")
    events = follow_metrics(args.path, args.interval, args.timeout, stop_after=args.stop_after) \
        if args.follow else None  # the offset is taken before the table: nothing logged meanwhile is missed
    print("\n".join(_metrics_table(args.path)), flush=True)
    if events is not None:
        print(f"following {args.path} (Ctrl-C to stop)", flush=True)
        try:
            for event in events:
                print(f"{'-' if event.step is None else event.step}\t{event.key}\t{event.value:.6g}", flush=True)
        except KeyboardInterrupt:
            pass
    return 0
