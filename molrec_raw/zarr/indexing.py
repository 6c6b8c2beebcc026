"""Basic numpy indexing mapped onto a regular chunk grid (zarr-v3-subset §4).

A selection (ints, negative ints, slices with any step, Ellipsis) is first
normalised per dimension; ``project`` then yields, for each chunk the selection
touches, the chunk's grid coordinates, the selection inside the chunk and the
place in the output.  Negative steps are read ascending and flipped at the end.
The same projection serves arrays (chunks) and shards (inner chunks).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Iterator, List, Tuple, Union

import numpy as np

from molrec_raw.errors import InvalidValueError

__all__ = ["DimSelection", "normalize_selection", "project", "selection_shape"]

Local = Union[int, slice]


@dataclass(frozen=True)
class DimSelection:
    """Indices ``start, start+step, …`` (``count`` of them, step > 0) of one axis.

    ``drop`` marks an integer index (the axis vanishes from the result);
    ``reverse`` marks a negative-step slice (the result axis is flipped).
    """

    start: int
    step: int
    count: int
    drop: bool = False
    reverse: bool = False


def _normalize_dim(index: Any, size: int, axis: int) -> DimSelection:
    if isinstance(index, (int, np.integer)) and not isinstance(index, (bool, np.bool_)):
        i = int(index)
        if not -size <= i < size:
            raise InvalidValueError(f"index {i} is out of bounds for axis {axis} with size {size}")
        return DimSelection(i % size, 1, 1, drop=True)
    if isinstance(index, slice):
        start, stop, step = index.indices(size)
        indices = range(start, stop, step)
        count = len(indices)
        if step > 0 or count == 0:
            return DimSelection(indices.start if count else 0, abs(step), count)
        return DimSelection(indices[-1], -step, count, reverse=True)
    raise InvalidValueError(
        f"unsupported index {index!r} on axis {axis}: only ints, slices and Ellipsis are supported"
    )


def normalize_selection(selection: Any, shape: Tuple[int, ...]) -> List[DimSelection]:
    """Expand a basic-indexing key against ``shape``."""
    if not isinstance(selection, tuple):
        selection = (selection,)
    if sum(1 for s in selection if s is Ellipsis) > 1:
        raise InvalidValueError("an index can only have a single Ellipsis")
    if Ellipsis in [s for s in selection if s is Ellipsis]:
        at = next(i for i, s in enumerate(selection) if s is Ellipsis)
        fill = len(shape) - (len(selection) - 1)
        selection = selection[:at] + (slice(None),) * max(fill, 0) + selection[at + 1:]
    if len(selection) > len(shape):
        raise InvalidValueError(f"too many indices: {len(selection)} for {len(shape)} dimensions")
    selection = selection + (slice(None),) * (len(shape) - len(selection))
    return [_normalize_dim(index, size, axis) for axis, (index, size) in enumerate(zip(selection, shape))]


def selection_shape(dims: List[DimSelection]) -> Tuple[int, ...]:
    return tuple(d.count for d in dims if not d.drop)


def _project_dim(dim: DimSelection, chunk: int) -> List[Tuple[int, Local, Any]]:
    """(chunk index, selection inside that chunk, output slice or None) for one axis."""
    if dim.count == 0:
        return []
    if dim.drop:
        return [(dim.start // chunk, dim.start % chunk, None)]
    start, step, count = dim.start, dim.step, dim.count
    last = start + step * (count - 1)
    out: List[Tuple[int, Local, Any]] = []
    if step <= chunk:  # every chunk between first and last holds at least one index
        for c in range(start // chunk, last // chunk + 1):
            lo = max(start, c * chunk)
            k0 = -(-(lo - start) // step)
            k1 = min(count, -(-(min(last + 1, (c + 1) * chunk) - start) // step))
            first = start + k0 * step - c * chunk
            out.append((c, slice(first, first + (k1 - k0 - 1) * step + 1, step), slice(k0, k1)))
        return out
    positions = start + step * np.arange(count, dtype=np.int64)
    ids = positions // chunk
    for k in range(count):  # bounded by the number of chunks: step > chunk
        local = int(positions[k] - ids[k] * chunk)
        out.append((int(ids[k]), slice(local, local + 1, 1), slice(k, k + 1)))
    return out


def project(
    dims: List[DimSelection], chunk_shape: Tuple[int, ...]
) -> Iterator[Tuple[Tuple[int, ...], Tuple[Local, ...], Tuple[slice, ...]]]:
    """Yield (chunk coords, selection in chunk, selection in output) for every touched chunk."""
    per_dim = [_project_dim(d, c) for d, c in zip(dims, chunk_shape)]
    for combo in itertools.product(*per_dim):
        coords = tuple(c for c, _, _ in combo)
        local = tuple(sel for _, sel, _ in combo)
        out = tuple(o for _, _, o in combo if o is not None)
        yield coords, local, out


def finish(result: np.ndarray, dims: List[DimSelection]) -> np.ndarray:
    """Flip the result axes that came from negative-step slices."""
    flips = tuple(
        slice(None, None, -1) if d.reverse else slice(None) for d in dims if not d.drop
    )
    return result[flips] if any(d.reverse for d in dims) else result


def covers(local: Tuple[Local, ...], extent: Tuple[int, ...]) -> bool:
    """Does a chunk-local selection cover every in-bounds element ``[0, extent)``?"""
    for sel, size in zip(local, extent):
        if isinstance(sel, int):
            if size != 1:
                return False
        elif not (sel.start == 0 and sel.step == 1 and sel.stop >= size):
            return False
    return True
