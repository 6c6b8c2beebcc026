"""``molrec-raw plot``: every per-step meta and metrics series, one panel per key."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict


def _check_source(path: str) -> None:
    """The source named on the command line exists (a local one): an argument error is said
    before a missing extra (matplotlib) is."""
    from molrec_raw.record.doors import not_a_record
    from molrec_raw.zarr.remote import is_url

    if not is_url(path) and not os.path.lexists(path):
        raise not_a_record(path, "no such file or directory")


def run_plot(args: argparse.Namespace) -> int:
    _check_source(args.path)
    from molrec_raw import plot

    log_y = None if args.log_y is None else [k for k in args.log_y if k != "none"]
    options: Dict[str, Any] = dict(out=args.out, vega=args.vega, series=args.series, x=args.x, log_y=log_y,
                                   size=args.size)
    try:
        if args.follow:
            print(f"following {args.path} (Ctrl-C to stop)", flush=True)
            try:
                plot.follow(args.path, interval=args.interval, stop_after=args.stop_after,
                            report=lambda line: print(line, flush=True), **options)
            except KeyboardInterrupt:
                pass
        else:
            for written in plot.render(args.path, **options):
                print(written)
    except ImportError as exc:  # matplotlib missing: the message names the extra
        print(f"molrec-raw plot: error: {exc}", file=sys.stderr)
        return 2
    return 0
