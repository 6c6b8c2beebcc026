"""``step`` and ``time`` (trajectory §3): exact progressions held as attributes, materialized
as arrays (born complete) the first time a value breaks the progression.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from molrec_raw.record.trajectory import extents as ext
from molrec_raw.record.trajectory.common import float_bits, spec_error
from molrec_raw.record.trajectory.storage import born, grow
from molrec_raw.zarr import Array, Group


class Series:
    """``step`` (exact integers) or ``time`` (binary64, bitwise) over ordinals (§3.1)."""

    def __init__(self, name: str, is_float: bool) -> None:
        self.name, self.is_float = name, is_float
        self.start: Any = None
        self.stride: Any = None
        self.prog = True  # still a progression
        self.n = 0  # values known (committed + pending)
        self.committed = 0
        self.pending: List[Any] = []
        self.array: Optional[Array] = None  # attached on-disk array (array form)
        self.last: Any = None

    def value(self, i: int) -> Any:
        if i == 0:
            return self.start
        return self.start + float(i) * self.stride if self.is_float else self.start + i * self.stride

    def _same(self, a: Any, b: Any) -> bool:
        return float_bits(a) == float_bits(b) if self.is_float else a == b

    def push(self, v: Any) -> None:
        if self.prog and self.n >= 2 and not self.is_float:  # an integer progression: exact steps
            if v != self.last + self.stride:
                self.prog = False
        elif self.prog:
            if self.is_float and not math.isfinite(v):
                self.prog = False  # not JSON: always the array form
            elif self.n == 0:
                self.start = v
            elif self.n == 1:
                stride = v - self.start
                if (self.is_float and not math.isfinite(stride)) or not self._same(self.start + 1.0 * stride if self.is_float else self.start + stride, v):
                    self.prog = False
                else:
                    self.stride = stride
            elif not self._same(self.value(self.n), v):
                self.prog = False
        self.pending.append(v)
        self.n += 1
        self.last = v

    def attribute(self) -> Optional[Dict[str, Any]]:
        if not self.prog or self.n == 0:
            return None
        return {"start": self.start} if self.n == 1 else {"start": self.start, "stride": self.stride}

    def commit(self, parent: Group, touched: List[str]) -> None:
        """Land the pending values when the series is (or just became) an array."""
        if self.prog:
            self.committed, self.pending = self.n, []
            return
        dtype = np.float64 if self.is_float else np.int64
        tag = "f64" if self.is_float else "i64"
        if self.array is None:  # materialize: the whole history, born complete
            history = [self.value(i) for i in range(self.committed)]
            self.array = born(parent, self.name, np.asarray(history + self.pending, dtype=dtype),
                              ext.DENSE_ROWS, ext.DENSE_CHUNKS_PER_SHARD, ext.dense_codecs(tag), touched)
        elif self.pending:
            grow(self.array, self.committed, np.asarray(self.pending, dtype=dtype), touched)
        self.committed, self.pending = self.n, []


def check_progression(attrs: Dict[str, Any], name: str, nstep: int, is_float: bool) -> Optional[Tuple[Any, Any]]:
    """(start, stride) of a stored progression, or None when absent (``trajectory#R5``)."""
    raw = attrs.get(name)
    if raw is None and name not in attrs:
        return None
    def ok_num(v: Any) -> bool:
        return type(v) in (int, float) if is_float else type(v) is int
    if type(raw) is not dict or "start" not in raw or set(raw) - {"start", "stride"} or \
            not all(ok_num(v) for v in raw.values()):
        raise spec_error("R5", f"{name} {raw!r} is not {{start[, stride]}} of numbers")
    if nstep >= 2 and "stride" not in raw:
        raise spec_error("R5", f"{name} has no stride but {nstep} frames need one")
    start, stride = raw["start"], raw.get("stride", 0)
    return (float(start), float(stride)) if is_float else (start, stride)


def expand_progression(prog: Tuple[Any, Any], n: int, is_float: bool) -> List[Any]:
    start, stride = prog
    if is_float:
        return [start if i == 0 else start + float(i) * stride for i in range(n)]
    return [start + i * stride for i in range(n)]


