"""``molrec-raw plot``: every per-step meta and metrics series, one panel per key."""
from __future__ import annotations

import argparse
import sys
from typing import Any, Dict


def run_plot(args: argparse.Namespace) -> int:
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
