"""Array plumbing of the commit protocol (trajectory §10–§11): positional growth, arrays
born complete, shard tails ended at a sector boundary at durable points, node removal, the
committed prefix of an index and the ``nstep`` marker.
"""
from __future__ import annotations

import itertools
from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np

from molrec_raw.record import documents
from molrec_raw.record.doors import RecordInput, check_record_path, record_source
from molrec_raw.record.trajectory.common import PROGRESSIONS, spec_error
from molrec_raw.zarr import Array, Group, PathLike, Store, open_group
from molrec_raw.zarr.array import EncodeScratch, prepare_landings
from molrec_raw.zarr.codecs.sharding import align_up


def read_nstep(tgroup: Group, attrs: Dict[str, Any]) -> int:
    if "nstep" in attrs:
        n = attrs["nstep"]
        if type(n) is not int or n < 0:
            raise spec_error("R3", f"nstep {n!r} is not a non-negative integer")
        return n
    if any(k in attrs for k in PROGRESSIONS):
        raise spec_error("R4", "a progression attribute without nstep: the commit marker is missing")
    step = tgroup.get("step")
    return int(step.shape[0]) if isinstance(step, Array) else 0


def grow(arr: Array, start: int, values: np.ndarray, touched: List[str]) -> None:
    """Land ``values`` at row ``start`` (positional shard writes), then publish the shape."""
    stop = start + values.shape[0]
    shape = (stop,) + arr.shape[1:]
    touched.extend(arr.land(slice(start, stop), values, shape=shape, positional=True))
    touched.append(arr.publish(shape))


def land_all(lands: List[Tuple[Array, np.ndarray]], start: int, touched: List[str], threads: int,
             scratch: Optional[EncodeScratch] = None) -> None:
    """``grow`` of several arrays by the same rows from ``start``: every inner chunk of all
    of them encoded in one batch (zstd on up to ``threads`` threads inside zstandard; the
    byte shuffles into the writer's ``scratch``), then array by array its chunk bytes and
    its zarr.json, in the order given."""
    requests = []
    for arr, values in lands:
        stop = start + values.shape[0]
        requests.append((arr, slice(start, stop), values, (stop,) + arr.shape[1:]))
    for (arr, _, _, shape), landing in zip(requests, prepare_landings(requests, threads, scratch)):
        touched.extend(landing.land())
        touched.append(arr.publish(shape))


def tail_shards(arr: Array, rows: int) -> List[str]:
    """Keys of the shards holding row ``rows - 1`` of a positional array: the ones the next
    landing appends to (none for an empty array)."""
    if rows <= 0 or arr.ndim == 0:
        return []
    k = (rows - 1) // arr.metadata.chunk_shape[0]
    return [arr.chunk_key(coords) for coords in itertools.product([k], *(range(g) for g in arr.metadata.grid_shape[1:]))]


def align_tails(store: Store, keys: Iterable[str], *, rewrite: bool = False) -> None:
    """End each shard (that exists) at a ``SECTOR_ALIGN`` boundary with zero bytes, before a
    durable point syncs it: the next append then starts in a sector of its own, and no
    later write shares a sector with bytes made durable now — on a device without
    powersafe overwrite a torn sector loses all of them (spec-notes/trajectory.md "Power
    cuts"; at most 4 KiB per shard, outside every indexed range).  The zeros are appended
    in place, which is safe for bytes written since the last durable point; ``rewrite``
    (bytes that may already be durable: a reopened record's tails) writes the padded shard
    as a new file and renames it over the old one instead (``replace_durable``), so that no
    write ever lands in a sector holding them."""
    for key in keys:
        size = store.size(key)
        if size is None or align_up(size) == size:
            continue
        pad = bytes(align_up(size) - size)
        if rewrite:
            data = store.get(key)
            if data is not None:
                store.replace_durable(key, data + pad)
        else:
            store.write_at(key, size, pad)


def relay_tails(store: Store, shards: Iterable[Tuple[str, Any]]) -> None:
    """Lay out again each ``(key, sharding codec)`` shard whose chunk data starts inside its
    index page's sectors (``ShardingCodec.relaid``: another writer's layout, or this
    package's without alignment), ended at a ``SECTOR_ALIGN`` boundary, as a new file renamed
    over the old one (``replace_durable``).  A reopening writer does it before its first
    in-place index rewrite: on a device without powersafe overwrite a torn rewrite would
    garble the durable chunks sharing those sectors (spec-notes/trajectory.md)."""
    for key, codec in shards:
        data = store.get(key)
        relaid = None if data is None else codec.relaid(data)
        if relaid is not None:
            store.replace_durable(key, relaid + bytes(align_up(len(relaid)) - len(relaid)))


def delete_node(group: Group, name: str) -> None:
    """Remove a child node, its zarr.json first (never a node claiming half-gone chunks)."""
    store, prefix = group.store, f"{group.path}/{name}/"
    keys = list(store.list(prefix))
    if prefix + "zarr.json" in keys:
        store.delete(prefix + "zarr.json")
    for key in keys:
        if key != prefix + "zarr.json":
            store.delete(key)


def born(group: Group, name: str, values: np.ndarray, rows: int, per_shard: int,
         codecs: List[Dict[str, Any]], touched: List[str]) -> Array:
    """A new sharded array that appears complete: its chunk bytes land BEFORE its first
    zarr.json, so no reader ever sees it half-filled (a stale node is removed first)."""
    from molrec_raw.zarr.group import build_array_metadata
    trailing = tuple(values.shape[1:])
    dtype = str if values.dtype == object else values.dtype
    metadata, pipeline = build_array_metadata(
        shape=values.shape, dtype=dtype, chunks=(rows,) + trailing, shards=(rows * per_shard,) + trailing,
        codecs=codecs, fill_value=None, attributes=None, dimension_names=None, chunk_key_encoding=None,
        shard_index_location="start", limits=group.limits)
    delete_node(group, name)
    arr = Array(group.store, f"{group.path}/{name}", metadata, pipeline=pipeline, threads=1, limits=group.limits)
    if values.shape[0]:
        touched.extend(arr.land(slice(0, values.shape[0]), values, positional=True))
    touched.append(arr.publish())
    return arr


def prefix_below(ordinals: np.ndarray, nstep: int) -> int:
    """Length of the prefix of ``ordinals`` with entries < nstep (§11)."""
    beyond = np.flatnonzero(ordinals >= nstep)
    return int(beyond[0]) if beyond.size else int(ordinals.size)


def open_root(path: RecordInput, mode: str) -> Group:
    """The record root (one thread per array read: frames are small, a pool per read costs
    more than it saves) with its version checked (``trajectory#R1``); ``path`` may be a URL
    or an open store when reading."""
    from molrec_raw.record.violations import refuse
    if mode == "r":
        root = open_group(record_source(path), mode=mode, threads=1)
    else:
        assert not isinstance(path, (Store, bytes, bytearray, memoryview)), "writers take a path"
        root = open_group(check_record_path(path), mode=mode, threads=1)
    meta = root.get("meta")
    refuse(documents.check_meta(dict(meta.attrs) if isinstance(meta, Group) else {}))
    return root
