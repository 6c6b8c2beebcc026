"""``molrec-raw salvage``: a new record of everything a damaged one still reads."""
from __future__ import annotations

import argparse
import json

from molrec_raw.record.salvage import salvage_mrec


def run_salvage(args: argparse.Namespace) -> int:
    """Write the salvaged record and say exactly what was lost; exit 0 when nothing was (the
    record read whole), 1 when frames, sections or damaged chunks were left behind."""
    report = salvage_mrec(args.damaged, args.out, overwrite=args.force)
    lost = bool(report.lost or report.sections_lost or report.damaged)
    if args.json:
        print(json.dumps(report.as_json(), indent=2))
        return 1 if lost else 0
    for first, last, nodes in report.lost_runs():
        frames = f"frame {first}" if first == last else f"frames {first}..{last} ({last - first + 1} frames)"
        print(f"lost: {frames}: {', '.join(nodes)}")
    for name, why in report.sections_lost.items():
        print(f"lost: section {name}: {why}")
    for damage in report.damaged:
        print(f"damaged: {damage}")
    held = f", {len(report.kept)} of {report.nstep} trajectory frame(s)" if report.nstep else ""
    print(f"{args.out}: salvaged from {args.damaged}{held}; validate it with 'molrec-raw validate {args.out}'")
    return 1 if lost else 0
