"""The Vega-Lite v5 picture of a run, and the host's ``artifacts/<stem>.mlp.vl.json``.

root-layout "host" layout and documents §5.6: ``<name>.mlp.vl.json`` is an optional Vega-Lite
plot artifact beside the ``*.mlp.jsonl`` WAL, which web UIs render.  The specification is
plain JSON built with the standard library: one line chart per panel stacked in a
``vconcat`` over one shared x scale, a log y scale where the panel asks for one.  Each chart
is a self-contained single view: its own decimated points inline (``data.values`` rows
``{"series", "x", "y"}``, a gap as ``"y": null``), no transform — so a renderer that draws
one view at a time (molplot's ``render``) draws any panel as it stands.  Deterministic: the same series give the same bytes
(keys in a fixed order, shortest round-trip floats, no time stamps, the source by file name).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from molrec_raw.errors import InvalidValueError
from molrec_raw.record.metrics.series import Series, merge
from molrec_raw.record.metrics.wal import complete_part, parse_wal
from molrec_raw.record.runplot.panels import RunSeries, run_series_from_metrics
from molrec_raw.zarr.store import DirectoryStore

__all__ = ["VEGA_LITE_SCHEMA", "HOST_PLOT_SUFFIX", "vega_lite_spec", "spec_bytes", "HostPlot"]

VEGA_LITE_SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"
HOST_PLOT_SUFFIX = ".mlp.vl.json"
PANEL_WIDTH = 600  # pixels per chart: also the number of decimation buckets
PANEL_HEIGHT = 110


def _gaps_as_null(y: np.ndarray) -> List[Any]:
    values: List[Any] = y.tolist()
    for i in np.flatnonzero(~np.isfinite(y)).tolist():
        values[i] = None
    return values


def vega_lite_spec(run: RunSeries, *, width: int = PANEL_WIDTH, height: int = PANEL_HEIGHT) -> Dict[str, Any]:
    """The specification (a dict) drawing every panel of ``run``, decimated ``width`` buckets wide."""
    if width < 1 or height < 1:
        raise InvalidValueError(f"a chart needs a positive size, got {width}x{height}")
    lo, hi = run.x_range()
    charts: List[Dict[str, Any]] = []
    for panel, kept in run.decimated(width):
        xs = panel.x[kept].tolist()
        rows = [{"series": panel.key, "x": x, "y": y} for x, y in zip(xs, _gaps_as_null(panel.y[kept]))]
        y_scale: Dict[str, Any] = {"type": "log"} if panel.log_y else {"zero": False}
        charts.append({
            "title": panel.title, "width": width, "height": height,
            "data": {"values": rows},
            "mark": {"type": "line", "clip": True},
            "encoding": {
                "x": {"field": "x", "type": "quantitative", "axis": {"title": run.x_title},
                      "scale": {"domain": [lo, hi], "nice": False}},
                "y": {"field": "y", "type": "quantitative", "axis": {"title": panel.unit}, "scale": y_scale},
            },
        })
    return {"$schema": VEGA_LITE_SCHEMA, "description": f"molrec-raw plot of {Path(run.source).name}",
            "vconcat": charts, "resolve": {"scale": {"x": "shared"}}}


def spec_bytes(spec: Dict[str, Any]) -> bytes:
    """Plain JSON text of a specification, compact, UTF-8, one trailing newline."""
    return json.dumps(spec, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8") + b"\n"


class HostPlot:
    """Keeps a host's ``artifacts/<stem>.mlp.vl.json`` current for its WAL (one per writer).

    ``update(read, end)`` folds the complete WAL lines in ``[offset, end)`` (``read(start,
    end)`` gives the bytes) into the series it holds — so each flush parses only what is new
    — and replaces the artifact atomically.  Until a stepped series exists there is nothing
    to draw and no artifact is written."""

    def __init__(self, wal_path: Path, artifact: Path) -> None:
        self.wal_path = wal_path
        self.artifact = artifact
        self._store = DirectoryStore(artifact.parent)
        self._offset = 0
        self._series: Dict[str, Series] = {}

    def update(self, read: Callable[[int, int], bytes], end: int) -> Optional[Path]:
        data = complete_part(read(self._offset, end))
        where = str(self.wal_path)
        # lenient: bad lines written by someone else are skipped here, as by the writer's open
        parsed = parse_wal(data, source=where, first_offset=self._offset, lenient=True)
        for key, events in parsed.series.items():
            self._series[key] = merge(self._series.get(key), events, where=where)
        self._offset += len(data)
        try:
            run = run_series_from_metrics(self._series, where)
        except InvalidValueError:  # nothing drawable yet
            return None
        self._store.replace_atomic(self.artifact.name, spec_bytes(vega_lite_spec(run)))
        return self.artifact
