"""molplot (the MolCrafts charting library: Vega-Lite drawn with matplotlib) draws every
panel of ``plot``'s Vega-Lite specification, data on its axes (documents §5.6 artifact).

molplot renders one view or one ``layer`` at a time; each chart of our ``vconcat`` is such a
view with its own data, so a viewer renders the panels one by one."""
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
