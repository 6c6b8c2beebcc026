"""``Series`` and the duplicate-step rule (documents §4.1, checklist #9.12, #9.16).

Within a series, events with equal ``step`` form ONE point: the point keeps the position
of the first such event and takes the value and wall time of the last ("later event
wins": a resumed run re-logging step 100 replaces it).  Events without a step are never
merged.  The same two functions serve the reader (dense points + WAL tail) and the
writer's densify (which must know which dense points a new event replaces).
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Tuple, Union

import numpy as np

from molrec_raw.errors import SpecViolationError

__all__ = ["Series", "fold", "match_steps", "merge"]

DUP_RULE = "documents#9.12"


class Series:
    """The points of one series, in log order after the duplicate-step rule.

    ``steps``: int64 array, or None for a step-less series.  ``values``: float64 (non-finite
    measurements as IEEE values).  ``wall_time``: object array of RFC 3339 strings, or None
    when a dense form stores no times (an item is None where only some points have one);
    decoded from the dense arrays on first access, since building a million Python strings
    costs more than reading everything else.  ``type``: ``"scalar"`` or a custom type.
    """

    __slots__ = ("key", "type", "steps", "values", "_wall_time", "_wall_loader")
    _wall_time: Optional[np.ndarray]
    _wall_loader: Optional[Callable[[], Optional[np.ndarray]]]

    def __init__(self, key: str, type: str, steps: Optional[np.ndarray], values: np.ndarray,
                 wall_time: Union[None, np.ndarray, Callable[[], Optional[np.ndarray]]]) -> None:
        self.key = key
        self.type = type
        self.steps = steps
        self.values = values
        if callable(wall_time):
            self._wall_time, self._wall_loader = None, wall_time
        else:
            self._wall_time, self._wall_loader = wall_time, None

    @property
    def wall_time(self) -> Optional[np.ndarray]:
        """The RFC 3339 time of each point (documents#4.2), loaded on first use; None when the
        series has none."""
        if self._wall_loader is not None:
            self._wall_time, self._wall_loader = self._wall_loader(), None
        return self._wall_time

    @wall_time.setter
    def wall_time(self, value: Optional[np.ndarray]) -> None:
        self._wall_time, self._wall_loader = value, None

    def wall_time_source(self) -> Union[None, np.ndarray, Callable[[], Optional[np.ndarray]]]:
        """The wall times without forcing a lazy load (an array, None or a loader)."""
        return self._wall_loader if self._wall_loader is not None else self._wall_time

    def __len__(self) -> int:
        return int(self.values.shape[0])

    def __repr__(self) -> str:
        steps = "None" if self.steps is None else f"{self.steps!r}"
        return f"Series(key={self.key!r}, type={self.type!r}, n={len(self)}, steps={steps}, values={self.values!r})"

    def take(self, index: np.ndarray) -> "Series":
        """The points at ``index`` (an integer or boolean index array) as a new Series, steps and
        wall times taken alike so the three stay aligned (documents#9.11)."""
        walls = self.wall_time
        return Series(self.key, self.type, None if self.steps is None else self.steps[index],
                      self.values[index], None if walls is None else walls[index])

    def __eq__(self, other: object) -> bool:  # arrays compared by content, NaN equal to NaN
        if not isinstance(other, Series):
            return NotImplemented
        def same(a: Optional[np.ndarray], b: Optional[np.ndarray]) -> bool:
            if a is None or b is None:
                return a is None and b is None
            return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
        return (self.key == other.key and self.type == other.type and same(self.steps, other.steps)
                and same(self.values, other.values) and same(self.wall_time, other.wall_time))

    __hash__ = None  # type: ignore[assignment]


def fold(series: Series) -> Series:
    """Apply the duplicate-step rule inside one run of events (documents#9.12)."""
    steps = series.steps
    if steps is None or steps.shape[0] < 2 or bool((steps[1:] > steps[:-1]).all()):
        return series
    n = steps.shape[0]
    _, first = np.unique(steps, return_index=True)
    _, from_end = np.unique(steps[::-1], return_index=True)
    last = n - 1 - from_end  # aligned with ``first`` (both in sorted-step order)
    order = np.argsort(first, kind="stable")
    return series.take(last[order])  # the content of the last event, at the first one's place


def match_steps(base: np.ndarray, steps: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """For folded ``steps``: (mask of those already in ``base``, their index in ``base``)."""
    if base.shape[0] == 0 or steps.shape[0] == 0:
        return np.zeros(steps.shape[0], dtype=bool), np.empty(0, dtype=np.int64)
    sorter = np.argsort(base, kind="stable")
    pos = np.searchsorted(base, steps, sorter=sorter)
    pos[pos == base.shape[0]] = 0
    hit = base[sorter[pos]] == steps
    return hit, sorter[pos[hit]]


def check_compatible(base: Series, new: Series, where: str) -> None:
    """A series keeps one type and is either stepped or step-less throughout."""
    if base.type != new.type:
        raise SpecViolationError(
            f"{where}: series {base.key!r} has type {base.type!r}, new events have {new.type!r}",
            rule="documents#4.1",
        )
    if len(base) and len(new) and (base.steps is None) != (new.steps is None):
        raise SpecViolationError(
            f"{where}: series {base.key!r} mixes events with and without a step "
            "(its steps array cannot hold 'no step')", rule="documents#4.2",
        )


def merge(base: Optional[Series], new: Series, where: str = "metrics") -> Series:
    """``base`` points followed by ``new`` events under the duplicate-step rule
    (documents#9.16): an event whose step is already a point replaces it in place,
    others append; step-less events always append."""
    new = fold(new)
    if base is None or len(base) == 0:
        return new
    if len(new) == 0:  # nothing to merge; an empty series is neither stepped nor step-less
        return base
    check_compatible(base, new, where)
    if new.steps is None:
        hit = np.zeros(len(new), dtype=bool)
        at = np.empty(0, dtype=np.int64)
    else:
        assert base.steps is not None  # check_compatible: two non-empty series agree on steps
        hit, at = match_steps(base.steps, new.steps)
    fresh = ~hit
    steps = None if new.steps is None else np.concatenate([base.steps, new.steps[fresh]])
    values = base.values
    new_walls = new.wall_time
    tail_walls = new_walls[fresh] if new_walls is not None else np.full(int(fresh.sum()), None, dtype=object)
    if at.shape[0]:  # replacements: the base's times are needed now
        values = values.copy()
        values[at] = new.values[hit]
        walls = base.wall_time
        walls = np.full(len(base), None, dtype=object) if walls is None else walls.copy()
        if new_walls is not None:
            walls[at] = new_walls[hit]
        wall_time: Any = np.concatenate([walls, tail_walls])
    else:  # appends only: keep the base's times lazy
        source = base.wall_time_source()
        if source is None:
            wall_time = None if new_walls is None else np.concatenate(
                [np.full(len(base), None, dtype=object), tail_walls])
        elif callable(source):
            wall_time = lambda: _concat_walls(source(), len(base), tail_walls)  # noqa: E731
        else:
            wall_time = np.concatenate([source, tail_walls])
    return Series(base.key, base.type, steps, np.concatenate([values, new.values[fresh]]), wall_time)


def _concat_walls(walls: Optional[np.ndarray], count: int, tail: np.ndarray) -> np.ndarray:
    head = np.full(count, None, dtype=object) if walls is None else walls
    return np.concatenate([head, tail])
