"""``molrec-raw convert IN... DIR --records-per-shard N`` (or ``--shards N``): many inputs
into a directory of shards (issue 35; ``molrec_raw.write_dataset``), written by ``--workers W``
Dask worker processes (a ``LocalCluster``, the [dask] extra) or by this process.

Inputs are ASE's (extended XYZ, an ASE database, any file ASE reads: each image a record,
``--group-by`` as for one collection) or trajectory records with ``--frames-as-records``
(each frame a record).  Record order is input order (the inputs in the order given, each
in its own order); the index holds ``source`` (the input's place on the command line) and
``image`` or ``frame`` (the ordinal inside it).  Rerunning the same command over the same
directory keeps the shards already finished (``dataset#D7``).
"""
from __future__ import annotations

import argparse
import math
import os
from itertools import chain
from typing import Any, Dict, Iterator, List, Optional

from molrec_raw.cli.convert import _COLLECTION, _RECORD, _printing_warnings, _through, units_option
from molrec_raw.errors import MolrecError

__all__ = ["run_convert_dataset"]


def _image_items(sources: List[str], args: argparse.Namespace) -> Dict[str, Any]:
    declaration = _through("molrec_raw.integrations.extxyz", "image_declaration")
    records_of = _through("molrec_raw.integrations.extxyz", "ImageRecords")
    units = _through("molrec_raw.integrations.extxyz", "ASE_COLLECTION_UNITS")
    schema, images = declaration(sources, args.format)
    parts = [records_of(source, schema, group_by=args.group_by, in_format=args.format, extra_index={"source": i})
             for i, source in enumerate(sources)]
    return {"parts": parts, "schema": schema, "units": units, "index_schema": {"source": "i64", "image": "i64"},
            "records": None if args.group_by else images, "converted_by": "molrec-raw convert (ASE)"}


def _frame_items(sources: List[str], args: argparse.Namespace) -> Dict[str, Any]:
    from molrec_raw.integrations.frames_as_records import FrameRecords

    parts = [FrameRecords(source, units=units_option(args.units), extra_index={"source": i})
             for i, source in enumerate(sources)]
    first = parts[0]
    for part in parts[1:]:
        if part.units != first.units:
            raise MolrecError(f"{part.source}: its units {part.units} are not {first.source}'s {first.units}: the "
                              "shards of one dataset share one declaration", rule="dataset#D1")
        if part.schema.to_json() != first.schema.to_json():
            raise MolrecError(f"{part.source}: its trajectory's sequence_schema is not {first.source}'s: the shards "
                              "of one dataset share one declaration", rule="dataset#D1")
    return {"parts": parts, "schema": first.schema, "units": first.units,
            "index_schema": {"source": "i64", "frame": "i64"}, "records": sum(p.frames for p in parts),
            "converted_by": "molrec-raw convert --frames-as-records"}


def _records_per_shard(args: argparse.Namespace, records: Optional[int]) -> int:
    if args.records_per_shard is not None:
        if args.shards is not None:
            raise MolrecError("--shards and --records-per-shard: give one of them")
        return int(args.records_per_shard)
    if args.shards is None:
        raise MolrecError("several inputs convert into a directory of shards: give --records-per-shard N or --shards N")
    if records is None:
        raise MolrecError("--shards with --group-by: the number of records is known only after reading every "
                          "input; give --records-per-shard N")
    return max(1, math.ceil(records / int(args.shards)))


def _client(workers: int) -> Any:
    """A LocalCluster of ``workers`` single-threaded worker processes and its client."""
    try:
        import distributed
    except ImportError:
        raise MolrecError("--workers needs Dask's distributed: pip install 'molrec-raw[dask]'") from None
    make = distributed.LocalCluster
    cluster = make(n_workers=workers, processes=True, threads_per_worker=1,  # type: ignore[no-untyped-call]
                   dashboard_address=":0", host="127.0.0.1")
    return cluster, distributed.Client(cluster)  # type: ignore[no-untyped-call]


def run_convert_dataset(args: argparse.Namespace) -> int:
    """The command (module docstring)."""
    from molrec_raw.dataset import write_dataset

    sources = [str(s) for s in (args.source if isinstance(args.source, list) else [args.source])]
    target = str(args.target)
    unfit = [o for o, v in (("--topology", args.topology), ("--precision", args.precision), ("--frames", args.frames),
                            ("--stride", args.stride != 1 or None), ("--force", args.force)) if v]
    if unfit:
        raise MolrecError(f"{', '.join(unfit)}: not for a directory of shards")
    if target.endswith(_COLLECTION) or os.path.isfile(target):
        raise MolrecError(f"{target}: shards go into a directory (made when missing), not a file")
    workers = 1 if args.workers is None else int(args.workers)
    if workers < 1 or (args.records_per_shard is not None and args.records_per_shard < 1) or (
            args.shards is not None and args.shards < 1):
        raise MolrecError("--workers, --shards and --records-per-shard are positive integers")
    records_kind = [s.endswith(_RECORD) for s in sources]
    if any(records_kind) and not all(records_kind):
        raise MolrecError("the inputs are all records (*.mrec, with --frames-as-records) or all files ASE reads")
    if all(records_kind):
        if not args.frames_as_records:
            raise MolrecError("records into a collection: each frame becomes a record, say so with --frames-as-records")
        if args.group_by:
            raise MolrecError("--group-by groups ASE images, not a record's frames")
        plan = _frame_items(sources, args)
    else:
        if args.frames_as_records or args.units:
            raise MolrecError("--frames-as-records and --units convert records (*.mrec); images from ASE are in "
                              "ASE's units (angstrom, eV)")
        plan = _image_items(sources, args)
    per_shard = _records_per_shard(args, plan["records"])
    parts = plan["parts"]
    items: Iterator[Dict[str, Any]] = chain.from_iterable(parts)
    meta = {"sources": [os.path.basename(s) for s in sources], "converted_by": plan["converted_by"]}
    options = dict(units=plan["units"], records_per_shard=per_shard, schema=plan["schema"],
                   index_schema=plan["index_schema"], meta=meta)
    with _printing_warnings():
        if workers > 1:
            cluster, client = _client(workers)
            with cluster, client:
                paths = write_dataset(items, target, client=client, **options)
        else:
            paths = write_dataset(items, target, **options)
        for part in parts:
            getattr(part, "warn_skipped", lambda: None)()
    records = sum(getattr(p, "records", getattr(p, "frames", 0)) for p in parts)
    atoms = sum(p.atoms for p in parts)
    print(f"{target}: {records} records in {len(paths)} shards of up to {per_shard} ({atoms} atoms in all) from "
          f"{len(sources)} input{'s' if len(sources) != 1 else ''}" + (f", {workers} workers" if workers > 1 else ""))
    return 0
