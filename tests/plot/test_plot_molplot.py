"""molplot (the MolCrafts charting library: Vega-Lite drawn with matplotlib) draws every
panel of ``plot``'s Vega-Lite specification, data on its axes (documents §5.6 artifact).

molplot renders one view or one ``layer`` at a time; each chart of our ``vconcat`` is such a
view with its own data, and every ``*.mlp.vl.json`` comes with one single-view file per panel
(issue 36), which a host renders file by file."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest

molplot = pytest.importorskip("molplot", reason="molplot (molcrafts-molplot, Python >= 3.12) is the peer renderer")
pytest.importorskip("matplotlib", reason="molplot draws with matplotlib")


def vega(path: Path, **options: Any) -> Dict[str, Any]:
    from molrec_raw import plot
    return plot.vega_spec(path, **options)


def drawn(panel: Dict[str, Any]) -> List[Any]:
    """The lines molplot puts on the axes of one panel (the figure closed afterwards)."""
    import matplotlib.pyplot as plt

    fig, ax = molplot.render(panel)
    try:
        assert ax.get_xlabel() == panel["encoding"]["x"]["axis"]["title"]
        assert ax.get_ylabel() == (panel["encoding"]["y"]["axis"]["title"] or "")
        return [(np.asarray(line.get_xdata(), dtype=float), np.asarray(line.get_ydata(), dtype=float))
                for line in ax.get_lines()]
    finally:
        plt.close(fig)


def test_documents_5_6_every_panel_renders_in_molplot_with_its_data(md_record: Path, gap_record: Path) -> None:
    for record in (md_record, gap_record):
        spec = vega(record)
        assert len(spec["vconcat"]) >= 2
        for panel in spec["vconcat"]:
            lines = drawn(panel)
            assert len(lines) == 1, panel["title"]
            x, y = lines[0]
            rows = panel["data"]["values"]
            assert x.tolist() == [float(r["x"]) for r in rows]            # every point, in order
            want = np.array([math.nan if r["y"] is None else r["y"] for r in rows], dtype=float)
            assert np.array_equal(y, want, equal_nan=True)                 # a gap stays a gap
            assert np.isfinite(y).sum() > 0


def test_documents_5_6_the_whole_vconcat_is_not_a_single_view(md_record: Path) -> None:
    """What molplot does with the stacked specification itself: one empty axes (it draws single
    views and layers only) — why the panels, not the stack, are what a molplot viewer renders."""
    spec = vega(md_record)
    lines = drawn({**spec, "encoding": {"x": {"axis": {"title": ""}}, "y": {"axis": {"title": ""}}}})
    assert lines == []


def host_render(artifacts: Path) -> Dict[str, List[Any]]:
    """What a host does with a run's artifacts: find every ``*.mlp.vl.json`` (the host layout's
    plot artifacts, root-layout) and hand each file, parsed, to molplot's entry point
    ``molplot.render``; the lines on each file's axes, by file name."""
    import json

    import matplotlib.pyplot as plt

    out: Dict[str, List[Any]] = {}
    for path in sorted(artifacts.glob("*.mlp.*")):
        if not path.name.endswith(".mlp.vl.json"):
            continue
        fig, ax = molplot.render(json.loads(path.read_text()))
        try:
            out[path.name] = [(np.asarray(line.get_xdata(), dtype=float), np.asarray(line.get_ydata(), dtype=float))
                              for line in ax.get_lines()]
        finally:
            plt.close(fig)
    return out


def _rows_xy(chart: Dict[str, Any]) -> Any:
    rows = chart["data"]["values"]
    return (np.array([r["x"] for r in rows], dtype=float),
            np.array([math.nan if r["y"] is None else r["y"] for r in rows], dtype=float))


def test_documents_5_6_a_host_renders_every_panel_of_the_host_artifact_with_molplot(tmp_path: Path) -> None:
    """The host writer's ``<stem>.mlp.vl.json`` (a vconcat: one empty axes in molplot) comes with
    one single-view ``<stem>.panel-<safe key>.mlp.vl.json`` per panel; rendered file by file as
    a host would, every panel file draws one line holding exactly its panel's points."""
    import json

    import molrec_raw as mr
    from molrec_raw.record.runplot.vegalite import PANEL_WIDTH

    run_dir = tmp_path / "executions" / "e1"
    run_dir.mkdir(parents=True)
    with mr.MetricsWriter.for_host(run_dir, "train", plot=True) as w:
        for s in range(3000):
            w.log("train/loss", 1.0 / (s + 1), step=s)
            if s % 10 == 0:
                w.log("lr", math.nan if 100 <= s < 200 else 0.01 * (1 - s / 3000), step=s)
    artifacts = run_dir / "artifacts"
    drawn_by_file = host_render(artifacts)
    stack = json.loads((artifacts / "train.mlp.vl.json").read_text())
    panels = {"train.panel-lr.mlp.vl.json": "lr", "train.panel-train%2Floss.mlp.vl.json": "train/loss"}
    assert set(drawn_by_file) == {"train.mlp.vl.json", *panels}, sorted(drawn_by_file)
    assert drawn_by_file["train.mlp.vl.json"] == []  # the stack itself: nothing molplot draws
    charts = {c["title"]: c for c in stack["vconcat"]}
    for name, key in panels.items():
        lines = drawn_by_file[name]
        assert len(lines) == 1, name
        x, y = lines[0]
        want_x, want_y = _rows_xy(charts[key])
        assert np.array_equal(x, want_x) and np.array_equal(y, want_y, equal_nan=True), name
        assert 300 <= x.shape[0] <= 4 * PANEL_WIDTH  # decimated, yet every column's extremes kept
        view = json.loads((artifacts / name).read_text())
        assert "vconcat" not in view and view["title"] == key and view["data"] == charts[key]["data"]
    lr_y = drawn_by_file["train.panel-lr.mlp.vl.json"][0][1]
    assert int(np.isnan(lr_y).sum()) >= 1 and np.isfinite(lr_y).sum() > 250  # the gap stays a gap
    assert mr.discover_metrics(run_dir).metrics == (artifacts / "train.mlp.jsonl",)  # no new metrics surface


def test_documents_5_6_plot_vega_writes_the_panels_and_removes_stale_ones(md_record: Path, tmp_path: Path) -> None:
    """``plot --vega X.mlp.vl.json`` writes the same panel files; drawing fewer series removes
    the panel files of the series no longer drawn (a host never finds a stale panel)."""
    from molrec_raw.cli import main

    out = tmp_path / "md.mlp.vl.json"
    assert main(["plot", str(md_record), "--vega", str(out)]) == 0
    everything = host_render(tmp_path)
    spec = vega(md_record)
    assert len(everything) == 1 + len(spec["vconcat"]) >= 3
    for chart in spec["vconcat"]:
        from molrec_raw.record.runplot.vegalite import panel_name

        (x, y), = everything[panel_name(out.name, chart["data"]["values"][0]["series"])]
        want_x, want_y = _rows_xy(chart)
        assert np.array_equal(x, want_x) and np.array_equal(y, want_y, equal_nan=True)
    first = spec["vconcat"][0]["data"]["values"][0]["series"]
    assert main(["plot", str(md_record), "--vega", str(out), "--series", first]) == 0
    assert sorted(host_render(tmp_path)) == sorted([out.name, f"md.panel-{first}.mlp.vl.json"])
    other = tmp_path / "plain.vl.json"  # not named as a host artifact: the stack alone
    assert main(["plot", str(md_record), "--vega", str(other)]) == 0
    assert not list(tmp_path.glob("plain.panel-*"))
