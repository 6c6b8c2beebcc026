"""Min/max decimation per pixel bucket: what a line drawn ``buckets`` pixels wide needs.

The x range ``[lo, hi]`` is cut into ``buckets`` equal columns.  Of the finite points in each
column this keeps the first, the last, the smallest and the largest (the "M4" choice: the
column's vertical extent and both joins to its neighbours are drawn exactly as from every
point, so a one-point spike is never lost).  Non-finite values are gaps: wherever a gap lies
between two kept finite points, the first non-finite point after the earlier one is kept too,
so a decimated line is never joined across a gap.  Fully vectorised (no per-bucket Python).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from molrec_raw.errors import InvalidValueError

__all__ = ["decimate"]


def _first_per_segment(hit: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Index of the first True of ``hit`` in each segment beginning at ``starts`` that has one."""
    where = np.flatnonzero(hit)
    segment = np.searchsorted(starts, where, side="right") - 1
    first = np.ones(where.shape[0], dtype=bool)
    first[1:] = segment[1:] != segment[:-1]
    return where[first]


def decimate(x: np.ndarray, y: np.ndarray, buckets: int, lo: Optional[float] = None,
             hi: Optional[float] = None) -> np.ndarray:
    """Sorted indices of the points of ``(x, y)`` to draw (``x`` non-decreasing).

    ``lo``/``hi`` (default: the range of ``x``) fix the bucket edges, so panels sharing an x
    axis share pixel columns.  Series of at most ``4 * buckets`` points are kept whole."""
    n = int(y.shape[0])
    if buckets < 1:
        raise InvalidValueError(f"decimation needs at least one bucket, got {buckets}")
    if n <= 4 * buckets:
        return np.arange(n, dtype=np.int64)
    xf = np.asarray(x, dtype=np.float64)
    lo = float(xf[0]) if lo is None else float(lo)
    hi = float(xf[-1]) if hi is None else float(hi)
    span = hi - lo
    if span > 0:
        column = np.clip(((xf - lo) * (buckets / span)).astype(np.int64), 0, buckets - 1)
    else:
        column = np.zeros(n, dtype=np.int64)
    finite = np.isfinite(y)
    fx = np.flatnonzero(finite)
    if fx.shape[0] == 0:
        return np.array([0], dtype=np.int64)  # nothing drawable: one gap marker
    fy = y[fx]
    fcol = column[fx]
    starts = np.flatnonzero(np.concatenate(([True], fcol[1:] != fcol[:-1])))
    ends = np.concatenate((starts[1:], [fx.shape[0]])) - 1
    lengths = ends - starts + 1
    low = np.repeat(np.minimum.reduceat(fy, starts), lengths)
    high = np.repeat(np.maximum.reduceat(fy, starts), lengths)
    keep_f = np.concatenate((starts, ends, _first_per_segment(fy == low, starts),
                             _first_per_segment(fy == high, starts)))
    kept = fx[np.unique(keep_f)]
    gaps = np.flatnonzero(~finite)
    if gaps.shape[0]:
        before = np.cumsum(~finite)  # non-finite points at or before each index
        between = before[kept[1:]] - before[kept[:-1]] > 0
        after = gaps[np.searchsorted(gaps, kept[:-1][between])]
        kept = np.union1d(kept, after)
    result: np.ndarray = kept.astype(np.int64, copy=False)
    return result
