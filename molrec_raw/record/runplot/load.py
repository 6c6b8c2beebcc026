"""Load every drawable series of a record or host WAL as panels (see ``panels``).

Trajectory per-step meta (trajectory §5) — numeric scalar tags only (bool, integers, f64;
fills included, a NaN fill is a gap) — then the metrics (documents §5.5: dense series plus
WAL tail; a host ``*.mlp.jsonl`` WAL read leniently, a bad line skipped with a warning).
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from molrec_raw.errors import InvalidValueError
from molrec_raw.record.doors import open_record
from molrec_raw.record.metrics.reader import is_host_wal, read_metrics
from molrec_raw.record.runplot.panels import (Panel, RunSeries, check_x, choose_panels, metric_panels, qualify,
                                              run_series_from_metrics, sort_by_x)
from molrec_raw.record.trajectory import MrecReader
from molrec_raw.record.units import declared_units, unit_of_meta_key
from molrec_raw.zarr import Group
from molrec_raw.zarr.store import PathLike

__all__ = ["load_run_series"]

_NUMERIC_TAGS = ("bool", "i32", "i64", "u32", "u64", "f64")


def _meta_panels(reader: MrecReader, x: str, units: Dict[str, str],
                 left_out: List[Tuple[str, str]]) -> List[Panel]:
    panels = []
    xs: np.ndarray = (np.asarray(reader.step, dtype=np.int64) if x == "step"
                      else np.asarray(reader.time, dtype=np.float64))
    for key, tag in reader.schema.meta_keys():
        if tag not in _NUMERIC_TAGS:
            left_out.append((key, f"per-step meta of tag {tag} is not one number per step"))
            continue
        values = reader.meta_series(key).astype(np.float64)
        px, py = sort_by_x(xs, values)
        panels.append(Panel(key, "meta", unit_of_meta_key(key, units), px, py))
    return panels


def load_run_series(path: PathLike, *, keys: Optional[Sequence[str]] = None, x: str = "step",
                    log_y: Optional[Iterable[str]] = None) -> RunSeries:
    """Every drawable series of ``path`` — a ``*.mrec`` directory, a ``*.mrec.zip`` or a host
    ``*.mlp.jsonl`` WAL (read leniently: a bad line is skipped with a warning) — or the
    ``keys`` named, in that order.  Raises ``InvalidValueError`` naming the keys that exist
    for an unknown key, and when there is nothing to draw."""
    check_x(x)
    source = str(path)
    p = Path(path)
    if is_host_wal(p):
        return run_series_from_metrics(read_metrics(p, lenient=True), source, x=x, keys=keys, log_y=log_y)
    root = open_record(p)
    try:
        units = declared_units(root)
        has_trajectory = isinstance(root.get("trajectory"), Group)
    finally:
        root.store.close()
    left_out: List[Tuple[str, str]] = []
    panels: List[Panel] = []
    frame_steps = frame_times = None
    if has_trajectory:
        with MrecReader(p) as reader:
            if x == "time" and reader.time is None:
                raise InvalidValueError(f"{source}: --x time needs trajectory times; this trajectory has none "
                                        "(use --x step)")
            frame_steps = np.asarray(reader.step, dtype=np.int64)
            times = reader.time
            frame_times = None if times is None else np.asarray(times, dtype=np.float64)
            panels += _meta_panels(reader, x, units, left_out)
    elif x == "time":
        raise InvalidValueError(f"{source}: --x time needs a trajectory with times; this record has no "
                                "trajectory (use --x step)")
    panels += metric_panels(read_metrics(p), x, frame_steps, frame_times, left_out)
    qualify(panels)
    run = RunSeries(source, x, units.get("time") if x == "time" else None, panels, left_out)
    return choose_panels(run, keys, log_y)
