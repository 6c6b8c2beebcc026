"""``molrec-raw convert``: through MDAnalysis (the [mdanalysis] extra)."""
from __future__ import annotations

import argparse
import sys
import warnings

from molrec_raw.cli.progress import ProgressBar
from molrec_raw.errors import MolrecError


def run_convert(args: argparse.Namespace) -> int:
    try:
        from molrec_raw.integrations.convert import convert, parse_frames
    except ImportError as exc:  # the MDAnalysis extra is not installed
        raise MolrecError(str(exc)) from None
    with ProgressBar("convert") as bar, warnings.catch_warnings(record=True) as caught:
        report = convert(args.source, args.target, topology=args.topology, precision=args.precision,
                         stride=args.stride, frames=parse_frames(args.frames), in_format=args.format, progress=bar,
                         overwrite=args.force)
    shown = [w for w in caught if not issubclass(w.category, DeprecationWarning) and str(w.message).strip()]
    for message in dict.fromkeys(str(w.message).splitlines()[0] for w in shown):
        print(f"molrec-raw convert: warning: {message}", file=sys.stderr)
    print(f"{report.target}: {report.frames} frames of {report.atoms} atoms from {report.source} "
          f"in {report.seconds:.1f} s ({report.frames_per_second:.0f} frames/s)")
    return 0
