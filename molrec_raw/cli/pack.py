"""``molrec-raw pack`` and ``molrec-raw unpack``: each prints the path it wrote as the user
gave it (pack: ``<stem>.mrec.zip`` beside the given directory; unpack: DEST as given), never
resolved to an absolute path (spec-notes/cli.md)."""
from __future__ import annotations

import argparse

from molrec_raw.cli.progress import ProgressBar
from molrec_raw.record.pack import pack_mrec_zip, unpack_mrec_zip


def run_pack(args: argparse.Namespace) -> int:
    with ProgressBar("pack") as bar:
        target = pack_mrec_zip(args.path, remove_source=args.remove_source, progress=bar,
                               overwrite=args.force, check=not args.force)
    print(target)
    return 0


def run_unpack(args: argparse.Namespace) -> int:
    with ProgressBar("unpack") as bar:
        unpack_mrec_zip(args.zip, args.dest, progress=bar, overwrite=args.force)
    print(args.dest)
    return 0
