"""The Vega-Lite v5 picture of a run, and the host's ``artifacts/<stem>.mlp.vl.json``.

root-layout "host" layout and documents §5.6: ``<name>.mlp.vl.json`` is an optional Vega-Lite
plot artifact beside the ``*.mlp.jsonl`` WAL, which web UIs render.  The specification is
plain JSON built with the standard library: one line chart per panel stacked in a
``vconcat`` over one shared x scale, a log y scale where the panel asks for one.  Each chart
is a self-contained single view: its own decimated points inline (``data.values`` rows
``{"series", "x", "y"}``, a gap as ``"y": null``), no transform — so a renderer that draws
one view at a time (molplot's ``render``) draws any panel as it stands.  Deterministic: the same series give the same bytes
(keys in a fixed order, shortest round-trip floats, no time stamps, the source by file name).

Beside a ``<name>.mlp.vl.json`` stack, :func:`write_plot_artifact` writes every panel as a
single-view artifact of its own, ``<name>.panel-<safe key>.mlp.vl.json`` (the key through the
documents#9.10 safe-name codec): molplot's ``render`` draws a ``vconcat`` as one empty axes, and
a host that finds ``*.mlp.vl.json`` files and renders each draws every panel from these.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from molrec_raw.errors import InvalidValueError
from molrec_raw.record.metrics.safe_name import encode_safe_name
from molrec_raw.record.metrics.series import Series, merge
from molrec_raw.record.metrics.wal import complete_part, parse_wal
from molrec_raw.record.runplot.panels import RunSeries, run_series_from_metrics
from molrec_raw.zarr.store import DirectoryStore

__all__ = ["VEGA_LITE_SCHEMA", "HOST_PLOT_SUFFIX", "PANEL_INFIX", "vega_lite_spec", "spec_bytes", "single_views",
           "panel_name", "write_plot_artifact", "HostPlot"]

VEGA_LITE_SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"
HOST_PLOT_SUFFIX = ".mlp.vl.json"
PANEL_INFIX = ".panel-"  # <name>.panel-<safe key>.mlp.vl.json: one panel as a single view
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


def single_views(run: RunSeries, spec: Dict[str, Any]) -> List[Tuple[str, Dict[str, Any]]]:
    """Each chart of ``spec`` (``vega_lite_spec(run)``) as a specification of its own, with the
    key of its panel: one view, its data inline, the stack's x domain kept."""
    return [(panel.key, {"$schema": VEGA_LITE_SCHEMA,
                         "description": f"molrec-raw plot of {Path(run.source).name}: {panel.key}", **chart})
            for panel, chart in zip(run.panels, spec["vconcat"])]


def panel_name(artifact_name: str, key: str) -> str:
    """The file name of panel ``key``'s single view beside the artifact ``<name>.mlp.vl.json``:
    ``<name>.panel-<safe key>.mlp.vl.json`` (documents#9.10 keeps names of distinct keys distinct)."""
    stem = artifact_name[: -len(HOST_PLOT_SUFFIX)]
    return f"{stem}{PANEL_INFIX}{encode_safe_name(key)}{HOST_PLOT_SUFFIX}"


def write_plot_artifact(artifact: Path, run: RunSeries) -> List[Path]:
    """Replace ``artifact`` with the stacked specification of ``run``; when it is named like
    the host's plot artifact (``*.mlp.vl.json``), also one single-view file per panel beside
    it (:func:`panel_name`), and remove the panel files of that name an earlier drawing left
    for keys no longer drawn.  Each file is replaced atomically; returns the files written."""
    store = DirectoryStore(artifact.parent)
    spec = vega_lite_spec(run)
    store.replace_atomic(artifact.name, spec_bytes(spec))
    written = [artifact]
    if not artifact.name.lower().endswith(HOST_PLOT_SUFFIX) or len(artifact.name) == len(HOST_PLOT_SUFFIX):
        return written
    names = []
    for key, view in single_views(run, spec):
        names.append(panel_name(artifact.name, key))
        store.replace_atomic(names[-1], spec_bytes(view))
        written.append(artifact.with_name(names[-1]))
    lead = artifact.name[: -len(HOST_PLOT_SUFFIX)] + PANEL_INFIX
    for name in store.list_dir("")[0]:
        if name.startswith(lead) and name.endswith(HOST_PLOT_SUFFIX) and name not in names:
            store.delete(name)
    return written


class HostPlot:
    """Keeps a host's ``artifacts/<stem>.mlp.vl.json`` current for its WAL (one per writer).

    ``update(read, end)`` folds the complete WAL lines in ``[offset, end)`` (``read(start,
    end)`` gives the bytes) into the series it holds — so each flush parses only what is new
    — and replaces the artifact atomically.  Until a stepped series exists there is nothing
    to draw and no artifact is written."""

    def __init__(self, wal_path: Path, artifact: Path) -> None:
        self.wal_path = wal_path
        self.artifact = artifact
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
        write_plot_artifact(self.artifact, run)
        return self.artifact
