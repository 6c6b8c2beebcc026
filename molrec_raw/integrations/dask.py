"""Dask arrays over MolRec trajectories (the optional extra ``molrec-raw[dask]``).

``block_array(path_or_url, block="atoms", columns=("x", "y", "z"))`` is the lazy, chunked
counterpart of :meth:`MrecReader.block_array`: a Dask array of shape
``(frames, rows, len(columns))`` for a block with a fixed row count, chunked along frames on
inner-chunk boundaries (each task decodes whole inner chunks, none twice).  The task graph
holds only the record's location, the block and column names and frame ranges — every task
opens the record itself (on a ``distributed`` cluster: in the worker's process), so the
graph pickles small and never carries an open file or connection.
"""
from __future__ import annotations

import os
from math import gcd
from typing import Any, Dict, Sequence, Tuple, Union

import numpy as np

try:
    import dask.array as da
    from dask.base import tokenize
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("molrec_raw.integrations.dask needs dask: pip install 'molrec-raw[dask]'") from exc

from molrec_raw.errors import InvalidValueError
from molrec_raw.record.trajectory import MrecReader

__all__ = ["block_array", "read_frames", "DEFAULT_CHUNK_BYTES"]

DEFAULT_CHUNK_BYTES = 32 * 1024 * 1024  # aimed size of one task's result


def read_frames(location: str, block: str, columns: Tuple[str, ...], start: int, stop: int) -> np.ndarray:
    """One task: frames ``start:stop`` of the block (opens and closes the record)."""
    with MrecReader(location) as reader:
        return reader.block_array(block, list(columns), slice(start, stop))


def _location(path_or_url: Any) -> str:
    if isinstance(path_or_url, (str, os.PathLike)):
        return str(os.fspath(path_or_url))
    raise InvalidValueError("block_array takes a local path or a URL (workers open the record themselves), "
                            f"not a {type(path_or_url).__name__}")


def block_array(path_or_url: Union[str, "os.PathLike[str]"], block: str = "atoms",
                columns: Sequence[str] = ("x", "y", "z"), *, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> Any:
    """A lazy Dask array ``(frames, rows, len(columns))`` of a block with a fixed row count
    (the rules of :meth:`MrecReader.block_array`: refused for a ragged block, trailing axes,
    mixed dtypes, a block absent at frame 0).  Chunks hold whole inner chunks, about
    ``chunk_bytes`` each."""
    location = _location(path_or_url)
    names = tuple(str(c) for c in ([columns] if isinstance(columns, str) else columns))
    with MrecReader(location) as reader:
        frames = len(reader)
        info = reader.block_info(block)
        empty = reader.block_array(block, list(names), [])  # checks the block and the columns
        if frames and (not info.ordinals.size or int(info.ordinals[0]) != 0):
            raise InvalidValueError(f"block {block!r} is absent at frame 0 (its first update is at frame "
                                    f"{int(info.ordinals[0]) if info.ordinals.size else 'never'})")
    rows = empty.shape[1]
    chunk_rows = info.columns[names[0]].chunk_rows if names else None
    dense = bool(info.ordinals.size == frames and np.array_equal(info.ordinals, np.arange(frames)))
    unit = chunk_rows // gcd(chunk_rows, rows) if dense and chunk_rows and rows else 1  # frames per chunk edge
    frame_bytes = max(1, rows * len(names) * empty.dtype.itemsize)
    per_task = max(unit, (max(1, chunk_bytes // frame_bytes) // unit) * unit)
    bounds = [(start, min(start + per_task, frames)) for start in range(0, frames, per_task)]
    if not bounds:  # no committed frame: nothing to read
        return da.from_array(empty, chunks=empty.shape)  # type: ignore[no-untyped-call]
    name = "molrec-block-" + tokenize(location, block, names, frames, per_task)
    graph: Dict[Any, Any] = {
        (name, k, 0, 0): (read_frames, location, block, names, start, stop) for k, (start, stop) in enumerate(bounds)
    }
    chunks = (tuple(stop - start for start, stop in bounds), (rows,), (len(names),))
    return da.Array(graph, name, chunks, dtype=empty.dtype)  # type: ignore[no-untyped-call]
