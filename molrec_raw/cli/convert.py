"""``molrec-raw convert``: through MDAnalysis (the [mdanalysis] extra) between trajectories
and records; through ASE (the [ase] extra) from extended XYZ / ASE databases into a
collection and from a collection to extended XYZ; a record's frames into a collection
(``--frames-as-records``, no extra but [lmdb])."""
from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any, Callable, Dict, Iterator, Optional

from molrec_raw.cli.progress import ProgressBar
from molrec_raw.errors import InvalidValueError, MolrecError

_COLLECTION = ".mrec.lmdb"
_RECORD = (".mrec", ".mrec.zip")


def units_option(text: Optional[str]) -> Optional[Dict[str, str]]:
    """``--units length=nm,energy=kJ/mol`` as a units object (None when not given): the units a
    source record leaves unstated (frame-and-types §13.5), never a conversion of stated ones."""
    if text is None:
        return None
    out: Dict[str, str] = {}
    for item in text.split(","):
        quantity, sep, unit = item.partition("=")
        if not sep or not quantity.strip() or not unit.strip():
            raise InvalidValueError(f"--units is QUANTITY=UNIT[,QUANTITY=UNIT...], e.g. length=angstrom,energy=eV; "
                                    f"not {text!r}")
        out[quantity.strip()] = unit.strip()
    return out


def _printing_warnings() -> Any:
    """Warnings collected during a conversion, printed once each (first line) on exit."""
    from contextlib import contextmanager

    @contextmanager
    def block() -> Iterator[None]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
        shown = [w for w in caught if not issubclass(w.category, DeprecationWarning) and str(w.message).strip()]
        for message in dict.fromkeys(str(w.message).splitlines()[0] for w in shown):
            print(f"molrec-raw convert: warning: {message}", file=sys.stderr)
    return block()


def _through(module: str, name: str) -> Callable[..., Any]:
    """A conversion function of an integration; its missing tool is a one-line error."""
    import importlib

    try:
        return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]
    except ImportError as exc:
        raise MolrecError(str(exc)) from None


def _convert_collection(args: argparse.Namespace) -> int:
    source, target = str(args.source), str(args.target)
    mdanalysis_only = [o for o, v in (("--topology", args.topology), ("--precision", args.precision),
                                      ("--frames", args.frames), ("--stride", args.stride != 1 or None)) if v]
    if mdanalysis_only:
        raise MolrecError(f"{', '.join(mdanalysis_only)}: not for a collection (a record <-> trajectory option)")
    with ProgressBar("convert") as bar, _printing_warnings():
        if target.endswith(_COLLECTION) and source.endswith(_RECORD):
            if not args.frames_as_records:
                raise MolrecError("a record into a collection: each frame becomes a record, say so with "
                                  "--frames-as-records")
            from molrec_raw.integrations.frames_as_records import frames_as_records

            report = frames_as_records(source, target, units=units_option(args.units), progress=bar)
        elif target.endswith(_COLLECTION):
            if args.frames_as_records or args.units:
                raise MolrecError("--frames-as-records and --units convert a record (*.mrec); images from ASE are "
                                  "in ASE's units (angstrom, eV)")
            report = _through("molrec_raw.integrations.extxyz", "images_to_collection")(
                source, target, group_by=args.group_by, in_format=args.format, progress=bar)
        else:
            if not target.endswith((".xyz", ".extxyz")):
                raise MolrecError(f"{target}: a collection converts to extended XYZ (*.xyz, *.extxyz)")
            if args.group_by or args.frames_as_records or args.units:
                raise MolrecError("--group-by, --frames-as-records and --units are for conversions into a collection")
            report = _through("molrec_raw.integrations.extxyz", "collection_to_extxyz")(source, target, progress=bar)
    print(f"{report.target}: {report.records} records, {report.frames} frames ({report.atoms} atoms in all) from "
          f"{report.source}")
    return 0


def run_convert(args: argparse.Namespace) -> int:
    if args.records_per_shard is not None or args.shards is not None or args.workers is not None:
        from molrec_raw.cli.convert_dataset import run_convert_dataset

        return run_convert_dataset(args)
    if isinstance(args.source, list):
        raise MolrecError("several inputs convert into a directory of shards: give --records-per-shard N or --shards N")
    if str(args.source).endswith(_COLLECTION) or str(args.target).endswith(_COLLECTION):
        return _convert_collection(args)
    if args.group_by or args.frames_as_records:
        raise MolrecError("--group-by and --frames-as-records convert into a collection (*.mrec.lmdb)")
    if args.units and not str(args.source).endswith(_RECORD):
        raise MolrecError(f"--units states the units a source record (*.mrec, *.mrec.zip) leaves unstated; "
                          f"{args.source} is read in its own format's units")
    try:
        from molrec_raw.integrations.convert import convert, parse_frames
    except ImportError as exc:  # the MDAnalysis extra is not installed
        raise MolrecError(str(exc)) from None
    with ProgressBar("convert") as bar, warnings.catch_warnings(record=True) as caught:
        report = convert(args.source, args.target, topology=args.topology, precision=args.precision,
                         stride=args.stride, frames=parse_frames(args.frames), in_format=args.format, progress=bar,
                         overwrite=args.force, assume_units=units_option(args.units))
    shown = [w for w in caught if not issubclass(w.category, DeprecationWarning) and str(w.message).strip()]
    for message in dict.fromkeys(str(w.message).splitlines()[0] for w in shown):
        print(f"molrec-raw convert: warning: {message}", file=sys.stderr)
    print(f"{report.target}: {report.frames} frames of {report.atoms} atoms from {report.source} "
          f"in {report.seconds:.1f} s ({report.frames_per_second:.0f} frames/s)")
    return 0
