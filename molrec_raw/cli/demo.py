"""``molrec-raw demo``: write the sample record, inspect it, draw its picture when matplotlib is there."""
from __future__ import annotations

import argparse
import time

from molrec_raw.cli.inspect import inspect_lines


def run_demo(args: argparse.Namespace) -> int:
    from molrec_raw.demo import write_demo

    from molrec_raw import plot

    started = time.monotonic()
    path = write_demo(args.path, frames=args.frames, overwrite=args.force)
    print("\n".join(inspect_lines(str(path), False)))
    image = plot.default_image_path(path)
    try:
        print(f"\ndrew {plot.render(path, out=image)[0]}")
    except ImportError:  # the core installs without matplotlib; the record is complete anyway
        print(f"\n{image} not drawn: the picture needs matplotlib ({plot.EXTRA_HINT})")
    print(f"wrote {path} in {time.monotonic() - started:.1f} s; try: molrec-raw validate {path}, "
          f"molrec-raw metrics {path}, molrec-raw cat {path} --frame -1 --block bonds, "
          f"molrec-raw pack {path}")
    return 0
