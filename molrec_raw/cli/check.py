"""``molrec-raw validate`` and ``molrec-raw repair``."""
from __future__ import annotations

import argparse
import os

from molrec_raw.cli.progress import ProgressBar
from molrec_raw.record.molrec import validate
from molrec_raw.record.repair import repair_mrec


def run_validate(args: argparse.Namespace) -> int:
    from molrec_raw.collection.inspection import is_collection_path

    with ProgressBar("validate") as bar:
        if is_collection_path(args.path):  # a collection: every record, and the rules of the lmdb and collection chapters
            from molrec_raw.collection.inspection import validate_collection

            violations = validate_collection(args.path, progress=bar)
        else:
            violations = validate(args.path, progress=bar)
    for v in violations:
        print(f"{v.rule}\t{v.node}\t{v.message}")
    if not violations:
        print(f"{args.path}: valid")
    return 1 if violations else 0


def run_repair(args: argparse.Namespace) -> int:
    """What a crash left is restored (``--dry-run``: listed); chunks no repair restores are
    named; exit 0 only when the record is sound afterwards (spec-notes/cli.md)."""
    from molrec_raw.collection.inspection import is_collection_path
    from molrec_raw.errors import MolrecError

    if is_collection_path(args.path):
        if not os.path.lexists(args.path):
            from molrec_raw.record.doors import not_a_record

            raise not_a_record(args.path, "no such file or directory")
        raise MolrecError(f"{args.path}: repair restores a record (*.mrec); a collection (*.mrec.lmdb) is never "
                          "half-written, so there is nothing to repair ('molrec-raw validate' checks it; a file "
                          "without its meta key is not a collection: write it again)", store=args.path,
                          rule="lmdb#L1")
    report = repair_mrec(args.path, dry_run=args.dry_run)
    verb = "would" if args.dry_run else "did"
    for change in report.changes:
        print(f"{verb}: {change}")
    for damage in report.damaged:
        print(f"damaged: {damage} (not restorable: restore the record from a copy)")
    if report.nstep is not None:
        where = "the live state" if report.source == "live" else f"its checkpoint ({report.reason})"
        print(f"trajectory: {report.nstep} committed frames, read from {where}")
    if not report.changes and not report.damaged:
        print(f"{args.path}: nothing to repair")
    if report.sound:
        verdict = "sound"
    elif report.damaged:
        verdict = (f"NOT sound: {len(report.damaged)} damaged node(s) or chunk(s) no repair can restore (restore "
                   f"the record from a copy, or 'molrec-raw salvage {args.path} OUT' writes what still reads)")
    else:
        verdict = "needs repair" if args.dry_run else "NOT sound"
    print(f"{args.path}: {verdict}")
    return 0 if report.sound else 1
