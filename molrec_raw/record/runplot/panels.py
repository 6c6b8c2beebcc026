"""What a picture of a run draws: one ``Panel`` per series, against step or time.

Series come from the trajectory's per-step meta (trajectory §5; numeric scalar tags — bool,
integers, f64; fills included, a NaN fill is a gap) and from the metrics (documents §4–§5:
a record's dense series plus WAL tail, or a host ``*.mlp.jsonl`` WAL).  Every series is drawn
against the shared x axis, sorted by x:

- ``x="step"``: the frame's step, the metric point's step.  Step-less metrics are left out.
- ``x="time"``: the trajectory's time; a metric point is placed at the time of the frame with
  its step, and points at a step no frame has are left out (never interpolated).

Units are only those the record states (``molrec_raw.record.units``).  A meta key and a
metrics key with the same name become ``meta:<key>`` and ``metrics:<key>``.  A log y scale is
chosen per panel: by default for every series whose key contains ``loss`` and whose finite
values are all positive; or exactly for the keys named.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from molrec_raw.errors import InvalidValueError
from molrec_raw.record.metrics.series import Series
from molrec_raw.record.runplot.decimate import decimate

__all__ = ["Panel", "RunSeries", "run_series_from_metrics", "X_AXES", "metric_panels", "choose_panels", "qualify", "check_x", "sort_by_x"]

X_AXES = ("step", "time")



@dataclass
class Panel:
    """One series to draw: ``x`` (non-decreasing) and ``y`` (float64, non-finite = gap)."""

    key: str
    source: str  # "meta" (trajectory per-step meta) or "metrics"
    unit: Optional[str]
    x: np.ndarray
    y: np.ndarray
    log_y: bool = False

    @property
    def title(self) -> str:
        return self.key if self.unit is None else f"{self.key} ({self.unit})"


@dataclass
class RunSeries:
    """The panels of one source, in drawing order, and the series that could not be drawn."""

    source: str
    x_name: str
    x_unit: Optional[str]
    panels: List[Panel]
    left_out: List[Tuple[str, str]] = field(default_factory=list)  # (key, why)

    @property
    def x_title(self) -> str:
        return self.x_name if self.x_unit is None else f"{self.x_name} ({self.x_unit})"

    def x_range(self) -> Tuple[float, float]:
        """Smallest and largest x over every panel (the shared axis); (0, 1) when empty."""
        ends = [float(v) for p in self.panels if p.x.shape[0] for v in (p.x[0], p.x[-1])]
        return (min(ends), max(ends)) if ends else (0.0, 1.0)

    def decimated(self, buckets: int) -> List[Tuple[Panel, np.ndarray]]:
        """Each panel with the indices of the points to draw ``buckets`` pixels wide (shared
        bucket edges, ``decimate``)."""
        lo, hi = self.x_range()
        return [(p, decimate(p.x, p.y, buckets, lo, hi)) for p in self.panels]


def sort_by_x(x: np.ndarray, y: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    if x.shape[0] > 1 and bool((x[1:] < x[:-1]).any()):
        order = np.argsort(x, kind="stable")
        return x[order], y[order]
    return x, y


def metric_panels(metrics: Mapping[str, Series], x: str, frame_steps: Optional[np.ndarray],
                   frame_times: Optional[np.ndarray], left_out: List[Tuple[str, str]]) -> List[Panel]:
    panels = []
    for key in sorted(metrics):
        s = metrics[key]
        if s.steps is None:
            left_out.append((key, "a step-less metrics series has no place on a step or time axis"))
            continue
        values = np.asarray(s.values, dtype=np.float64)
        xs: np.ndarray = np.asarray(s.steps, dtype=np.int64)
        if x == "time":
            assert frame_steps is not None and frame_times is not None
            if frame_steps.shape[0] == 0:
                left_out.append((key, "no trajectory frame gives its steps a time"))
                continue
            order = np.argsort(frame_steps, kind="stable")
            at = np.minimum(np.searchsorted(frame_steps, xs, sorter=order), frame_steps.shape[0] - 1)
            hit = frame_steps[order[at]] == xs
            if not hit.any():
                left_out.append((key, "none of its steps is the step of a trajectory frame"))
                continue
            xs, values = frame_times[order[at[hit]]], values[hit]
        xs, values = sort_by_x(xs, values)
        panels.append(Panel(key, "metrics", None, xs, values))
    return panels


def qualify(panels: List[Panel]) -> None:
    """A key drawn from both sources is named ``meta:<key>`` / ``metrics:<key>``."""
    seen: Dict[str, int] = {}
    for p in panels:
        seen[p.key] = seen.get(p.key, 0) + 1
    for p in panels:
        if seen[p.key] > 1:
            p.key = f"{p.source}:{p.key}"


def choose_panels(run: RunSeries, keys: Optional[Sequence[str]], log_y: Optional[Iterable[str]]) -> RunSeries:
    by_key = {p.key: p for p in run.panels}
    known = list(by_key) + [k for k, _ in run.left_out]
    if keys is not None:
        why = dict(run.left_out)
        for k in keys:
            if k in why:
                raise InvalidValueError(f"{run.source}: series {k!r} cannot be drawn: {why[k]}")
            if k not in by_key:
                raise InvalidValueError(f"{run.source}: unknown series {k!r}; it has: {', '.join(known) or 'none'}")
        run.panels = [by_key[k] for k in dict.fromkeys(keys)]
    if not run.panels:
        reasons = "; ".join(f"{k}: {why}" for k, why in run.left_out)
        raise InvalidValueError(f"{run.source}: nothing to plot: no per-step meta series and no metrics series"
                                + (f" that can be drawn ({reasons})" if reasons else ""))
    if log_y is None:
        for p in run.panels:
            finite = p.y[np.isfinite(p.y)]
            p.log_y = "loss" in p.key.lower() and finite.shape[0] > 0 and bool((finite > 0).all())
        return run
    wanted = list(log_y)
    for k in wanted:
        if k not in by_key:
            raise InvalidValueError(f"{run.source}: --log-y names an unknown series {k!r}; it has: "
                                    f"{', '.join(known)}")
        p = by_key[k]
        if bool((p.y[np.isfinite(p.y)] <= 0).any()):
            raise InvalidValueError(f"{run.source}: series {k!r} has values <= 0: it cannot be drawn on a log "
                                    "scale (leave it out of --log-y)")
    for p in run.panels:
        p.log_y = p.key in wanted
    return run


def check_x(x: str) -> None:
    if x not in X_AXES:
        raise InvalidValueError(f"the x axis is one of {', '.join(X_AXES)}, not {x!r}")


def run_series_from_metrics(metrics: Mapping[str, Series], source: str, *, x: str = "step",
                            keys: Optional[Sequence[str]] = None,
                            log_y: Optional[Iterable[str]] = None) -> RunSeries:
    """Panels of metrics series alone (a host WAL): against step only — they carry no time."""
    check_x(x)
    if x == "time":
        raise InvalidValueError(f"{source}: --x time needs a trajectory with times; metrics alone have "
                                "none (use --x step)")
    left_out: List[Tuple[str, str]] = []
    panels = metric_panels(metrics, x, None, None, left_out)
    return choose_panels(RunSeries(source, x, None, panels, left_out), keys, log_y)
