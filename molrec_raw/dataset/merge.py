"""Joining what many shards give into what one collection would give: their batches
(``CollectionReader.batch``'s arrays) and their index blocks.

A batch's arrays are of two kinds: per record (``n_<block>``, ``step``, ``time``, each
per-step meta key, the ``box/...`` arrays, ``record``) and per row (``<block>/<column>``,
``<block>/_validity/<column>``: a record's rows are its ``n_<block>`` consecutive rows).
One collection's batch of the same records in the same order holds: a block any record
has (``n_<block>`` 0 for the others); ``time`` only when every record has one; the cells
when any record has one (an undefined unit cell for the others); a ``_validity`` array
when any record's column is masked (all valid for the others).  The joins here give the
same, and refuse what one batch refuses: a column some records' block lacks, or a column
of two kinds (``collection#C2``).
"""
from __future__ import annotations

from typing import Dict, FrozenSet, List, Sequence, Set

import numpy as np

from molrec_raw.errors import SpecViolationError
from molrec_raw.record.model import Block

__all__ = ["join_batches", "join_indexes"]

C2 = "collection#C2"


def _undefined_cells(n: int) -> Dict[str, np.ndarray]:
    """The cell arrays of ``n`` records without a cell, as one batch gives them."""
    return {"box/vectors": np.broadcast_to(np.eye(3), (n, 3, 3)), "box/origin": np.zeros((n, 3)),
            "box/boundary": np.zeros((n, 3), bool), "box/cell_defined": np.zeros(n, bool)}


_BOX = frozenset(_undefined_cells(0))


def join_batches(parts: List[Dict[str, np.ndarray]], names: Sequence[str], order: np.ndarray,
                 meta_names: FrozenSet[str]) -> Dict[str, np.ndarray]:
    """One batch of the records of ``parts`` (each a shard's batch, ``names`` its file),
    whose record ``j`` in part order is the caller's record ``order[j]``: put in the
    caller's order."""
    if len(parts) == 1 and bool(np.all(order[1:] > order[:-1])):
        return parts[0]
    sizes = [len(part["record"]) for part in parts]
    keys: List[str] = []
    seen: Set[str] = set()
    for part in parts:
        keys += [k for k in part if k not in seen]
        seen.update(part)
    blocks = {k[2:] for k in keys if k.startswith("n_") and k not in meta_names}
    per_record = {"record", "step", "time", *_BOX, *meta_names, *(f"n_{b}" for b in blocks)}
    out: Dict[str, np.ndarray] = {}
    for k in keys:
        if k in per_record:
            if k == "time" and not all(k in part for part in parts):
                continue  # a record without time: one batch has no "time" either
            pieces = []
            for part, n in zip(parts, sizes):
                if k in part:
                    pieces.append(part[k])
                elif k in _BOX:
                    pieces.append(_undefined_cells(n)[k])
                else:  # n_<block> of records without the block
                    pieces.append(np.zeros(n, np.int64))
            out[k] = np.concatenate(pieces)
        else:
            out[k] = _rows(k, parts, names)
    return _reordered(out, order, blocks, per_record)


def _rows(k: str, parts: List[Dict[str, np.ndarray]], names: Sequence[str]) -> np.ndarray:
    """A per-row array joined over the parts (the same kind in each, ``collection#C2``)."""
    block = k.split("/", 1)[0]
    have = [part[k] for part in parts if k in part]
    kind = (have[0].dtype, have[0].shape[1:])
    pieces = []
    for part, name in zip(parts, names):
        values = part.get(k)
        if values is not None:
            if (values.dtype, values.shape[1:]) != kind:
                raise SpecViolationError(f"batch: column {k} is {values.dtype}{list(values.shape[1:])} in this shard "
                                         f"and {kind[0]}{list(kind[1])} in another", store=name, node=f"/{k}", rule=C2)
            pieces.append(values)
            continue
        rows = int(part[f"n_{block}"].sum()) if f"n_{block}" in part else 0
        if rows and "/_validity/" in k:
            pieces.append(np.ones(rows, bool))  # the shard's records have the column unmasked
        elif rows:
            lacking = int(part["record"][np.flatnonzero(part[f"n_{block}"])[0]])
            raise SpecViolationError(f"batch: record {lacking}'s block {block!r} has no column {k.split('/')[-1]!r}, "
                                     "which other records' have", store=name, node=f"/{k}", rule=C2)
    return np.concatenate(pieces) if len(pieces) > 1 else pieces[0]


def _reordered(out: Dict[str, np.ndarray], order: np.ndarray, blocks: Set[str],
               per_record: Set[str]) -> Dict[str, np.ndarray]:
    """``out`` (records in part order) with record ``j`` moved to place ``order[j]``."""
    n = len(order)
    if n < 2 or bool(np.all(order[1:] > order[:-1])):
        return out
    inverse = np.empty(n, np.int64)
    inverse[order] = np.arange(n)
    rows: Dict[str, np.ndarray] = {}
    for block in blocks:
        counts = out[f"n_{block}"].astype(np.int64)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        moved = counts[inverse]
        new_starts = np.concatenate([[0], np.cumsum(moved)[:-1]])
        rows[block] = np.repeat(starts[inverse] - new_starts, moved) + np.arange(int(moved.sum()))
    for k, values in out.items():
        if k in per_record:
            out[k] = values[inverse]
        else:
            out[k] = values[rows[k.split("/", 1)[0]]]
    return out


def join_indexes(indexes: List[Block]) -> Block:
    """Index blocks of one declaration joined in order: columns concatenated, a mask where
    any block has one (all valid for the others)."""
    columns = {c: np.concatenate([index.columns[c] for index in indexes]) for c in indexes[0].columns}
    masked = {c for index in indexes for c in index.masks}
    masks = {c: np.concatenate([index.masks[c] if c in index.masks else np.ones(index.nrows, bool)
                                for index in indexes]) for c in sorted(masked)}
    return Block(columns, masks, dict(indexes[0].precision), {}, None, {}, sum(i.nrows for i in indexes))
