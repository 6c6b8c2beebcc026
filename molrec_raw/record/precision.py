"""Declared precision of f64 columns (frame-and-types §8).

``check_precision`` checks a declaration (read: ``#14.20``; write: ``#14.34`` dtype,
``#14.35`` value); ``round_to_precision`` computes the stored copy (``#14.45``); a reader
never re-rounds (``#14.27``).
"""
from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from molrec_raw.errors import SpecViolationError
from molrec_raw.record.violations import Checks, Violation

__all__ = ["PRECISION_MIN", "PRECISION_MAX", "check_precision", "quantum", "round_to_precision"]

PRECISION_MIN = 2.0**-1000
PRECISION_MAX = 2.0**1000

R_READ = "frame-and-types#14.20"
R_DTYPE = "frame-and-types#14.34"
R_VALUE = "frame-and-types#14.35"


def _value_problem(p: Any) -> str | None:
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, float, np.integer, np.floating)):
        return f"precision must be a number, got {type(p).__name__} {p!r}"
    try:
        f = float(p)
    except OverflowError:
        return f"precision {p!r} is not a finite binary64"
    if not math.isfinite(f) or f != p:
        return f"precision {p!r} is not a finite binary64"
    if not PRECISION_MIN <= f <= PRECISION_MAX:
        return f"precision {p!r} is outside [2^-1000, 2^1000]"
    return None


def _is_f64(dtype: Any) -> bool:
    if isinstance(dtype, str) and dtype == "f64":
        return True
    if dtype is None:  # np.dtype(None) would be float64
        return False
    try:
        dt: np.dtype = np.dtype(dtype)
    except (TypeError, ValueError):
        return False
    return dt.kind == "f" and dt.itemsize == 8


def check_precision(p: Any, dtype: Any, where: str = "", *, write: bool = False) -> Checks:
    """Yield what is wrong with precision ``p`` declared on a column of ``dtype``.

    ``dtype``: ``"f64"`` or anything ``np.dtype`` takes (``"float64"``).  Rule ids:
    ``#14.20`` on read; ``#14.35`` (value) / ``#14.34`` (dtype) with ``write=True``.
    """
    problem = _value_problem(p)
    if problem is not None:
        yield Violation(R_VALUE if write else R_READ, where, problem)
    if not _is_f64(dtype):
        yield Violation(
            R_DTYPE if write else R_READ, where, f"precision declared on a non-f64 column ({dtype})"
        )


def quantum(p: Any) -> float:
    """q = the largest power of two ≤ p (§8: p = m·2^e, 0.5 ≤ m < 1, q = 2^(e−1))."""
    problem = _value_problem(p)
    if problem is not None:
        raise SpecViolationError(problem, rule=R_VALUE)
    return math.ldexp(1.0, math.frexp(float(p))[1] - 1)


def round_to_precision(values: np.ndarray, p: Any, out: Optional[np.ndarray] = None) -> np.ndarray:
    """The stored copy of ``values`` under precision ``p`` (§8, ``#14.45``); a new array, or
    ``out`` (a float64 array of the same shape, not sharing memory with ``values``: a writer
    reusing one buffer from commit to commit) filled and returned.

    NaN (bits kept), ±inf and |x| ≥ 2^52·q unchanged; else roundTiesToEven(x/q)·q with the
    sign of x (so −q/2 ≤ x < 0 gives −0.0).  Idempotent.  Spec gap: where that product
    overflows binary64 (only q ≥ 2^972, |x| within q/2 of 2^1024) x is kept, never ±inf.
    """
    q = quantum(p)
    x = np.asarray(values)
    if not _is_f64(x.dtype):
        raise SpecViolationError(f"precision needs f64 values, not {x.dtype}", rule=R_DTYPE)
    x = x.astype(np.float64, copy=False)
    if out is None:
        rounded = np.empty(x.shape, np.float64)  # a new array, also for 0-d input
    else:
        assert out.shape == x.shape and out.dtype == np.float64 and not np.shares_memory(out, x), "a separate float64 buffer"
        rounded = out
    with np.errstate(invalid="ignore", over="ignore"):
        # x·(1/q) equals x/q exactly (q is a power of two); rint keeps the sign of zero, so a
        # small negative becomes −0.0 without a copysign pass.  Where |x| ≥ 2^52·q, x/q is
        # already an integer and the round trip gives x back bit for bit, so only NaN (its
        # bits), ±inf and an overflowing quotient or product need x restored — all of which
        # leave a non-finite value behind, which one cheap sum detects.
        np.multiply(x, 1.0 / q, out=rounded)
        np.rint(rounded, out=rounded)
        rounded *= q
        if math.isfinite(rounded.sum()):
            return rounded
        keep = ~(np.abs(x) < 2.0**52 * q)
        if q >= 2.0**972:
            keep |= ~np.isfinite(rounded)
    np.copyto(rounded, x, where=keep)
    return rounded
