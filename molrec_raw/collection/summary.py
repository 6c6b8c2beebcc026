"""A collection's declaration and index read without opening a reader: what a dataset of
shards reads of each shard when it opens (``dataset#D1``).

:func:`read_summary` reads two values, ``meta`` and ``index`` (and ``ff`` when present), in
one read transaction and checks what it reads as :class:`CollectionReader` does on opening
(the binding fields of ``meta``, ``lmdb#L3``–``L6``; the index frame bytes, ``lmdb#L7``); the
declaration is kept as stored JSON (nothing parsed into a ``SequenceSchema``), so comparing
many shards' declarations is comparing plain values.  A record is never decoded.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, Optional

from molrec_raw.collection import binding
from molrec_raw.collection.binding import FF_KEY, INDEX_BLOCK, INDEX_KEY, META_KEY
from molrec_raw.collection.frame_bytes import decode_frame
from molrec_raw.collection.layout_cache import LayoutCache
from molrec_raw.collection.model import BINDING_COLUMNS, check_units
from molrec_raw.errors import MolrecError, SpecViolationError
from molrec_raw.record.columns import column_dtype_of
from molrec_raw.record.model import Block

__all__ = ["CollectionSummary", "read_summary", "read_summaries"]


@dataclass(frozen=True)
class CollectionSummary:
    """One collection file at a glance: ``n_records``, ``n_frames``, ``units``, the stored
    ``sequence_schema`` (JSON), ``index_columns`` (each own index column's declaration as
    JSON: dtype, trailing shape, nullable, precision), ``forcefield`` (the stored ``ff``
    value's bytes, or None) and ``index`` (the own index columns, read-only arrays)."""

    path: Path
    n_records: int
    n_frames: int
    units: Dict[str, str]
    sequence_schema: Dict[str, Any]
    index_columns: Dict[str, Dict[str, Any]]
    forcefield: Optional[bytes]
    index: Block

    def declaration(self) -> Dict[str, Any]:
        """What every shard of one dataset shares (``dataset#D1``), in the order a difference
        is reported: ``sequence_schema``, ``units``, ``index_columns``, ``forcefield``."""
        return {"sequence_schema": self.sequence_schema, "units": self.units, "index_columns": self.index_columns,
                "forcefield": self.forcefield}


def read_summary(path: Any, layouts: Optional[LayoutCache] = None) -> CollectionSummary:
    """The summary of the collection at ``path`` (``layouts``: a cache of index layouts
    shared over many files, so files of one build check their index layout once)."""
    where_path = Path(os.fspath(path))
    where = str(where_path)
    handle = binding.acquire(where_path)
    try:
        try:
            with handle.env.begin(buffers=True) as txn:
                meta_raw, index_raw, ff_raw = (txn.get(k) for k in (META_KEY, INDEX_KEY, FF_KEY))
                meta_raw = None if meta_raw is None else bytes(meta_raw)
                index_raw = None if index_raw is None else bytearray(index_raw)
                ff_raw = None if ff_raw is None else bytes(ff_raw)
        except Exception as exc:
            if binding.is_lmdb_error(exc):
                raise binding.read_failure(exc, where) from None
            raise
    finally:
        handle.release()
    doc = binding.read_meta_value(meta_raw, where)
    collection = doc["collection"]
    try:
        units = check_units(collection.get("units") if type(collection) is dict else None, "/meta/collection")
    except MolrecError as exc:
        raise exc.add_context(store=where, key="meta") from None
    if index_raw is None:
        raise SpecViolationError("no 'index' key: a collection's index is written with its meta", store=where,
                                 key="index", node="/index", rule="lmdb#L7")
    try:
        decoded = decode_frame(index_raw, "/index", layouts)
    except MolrecError as exc:
        raise exc.add_context(store=where, key="index") from None
    block = decoded.blocks.get(INDEX_BLOCK)
    if block is None or len(decoded.blocks) != 1 or block.nrows != doc["n_records"]:
        raise SpecViolationError(f"the index is one block {INDEX_BLOCK!r} of meta's n_records {doc['n_records']} "
                                 f"rows, found blocks {list(decoded.blocks)}", store=where, key="index",
                                 node="/index", rule="lmdb#L7")
    own = {c: v for c, v in block.columns.items() if c not in BINDING_COLUMNS}
    masks = {c: m for c, m in block.masks.items() if c in own}
    columns = {c: {"dtype": column_dtype_of(v), "trailing": list(v.shape[1:]), "nullable": c in masks,
                   "precision": block.precision.get(c)} for c, v in own.items()}
    for array in [*own.values(), *masks.values()]:
        array.flags.writeable = False
    index = Block(own, {c: m for c, m in masks.items() if not m.all()}, {c: p for c, p in block.precision.items()
                                                                         if c in own}, {}, None, {}, block.nrows)
    return CollectionSummary(where_path, int(doc["n_records"]), int(doc["n_frames"]), units,
                             doc["sequence_schema"], columns, ff_raw, index)



def read_summaries(paths: Iterable[Any]) -> Iterator[CollectionSummary]:
    """:func:`read_summary` of each path in turn, sharing one cache of index layouts (files
    of one build check their index layout once)."""
    layouts = LayoutCache()
    for path in paths:
        yield read_summary(path, layouts)
