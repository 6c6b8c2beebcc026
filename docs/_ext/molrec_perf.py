"""The Performance page's charts, drawn at build time from the benchmarks' current figures.

``bench/results/current.json`` holds one entry per workload (title, unit, whether lower or
higher is better, the rows, where and when they were measured, the command); on
``builder-inited`` each becomes ``docs/generated/performance/<id>.png`` (matplotlib, Agg), and
the ``perf-figures`` directive of ``docs/performance.md`` puts every chart with its table and
provenance on the page.  The figures are the ones ``bench/README.md`` ("Current figures")
states; nothing is re-measured by a build.
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any, Dict, List

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

FIGURES = Path(__file__).resolve().parents[2] / "bench" / "results" / "current.json"


def workloads() -> List[Dict[str, Any]]:
    """The workloads of ``bench/results/current.json``, in its order."""
    return list(json.loads(FIGURES.read_text(encoding="utf-8"))["workloads"])


def draw(workload: Dict[str, Any], path: Path) -> None:
    """One horizontal bar chart: molrec_raw's rows highlighted, each bar labelled with its
    value; a ratio chart marks 1 (parity)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [textwrap.fill(row[0], 34) for row in workload["rows"]]
    values = [float(row[1]) for row in workload["rows"]]
    ratio = workload["unit"].startswith("ratio")
    colours = ["#1f77b4" if ratio or label.startswith("molrec_raw") else "#9e9e9e" for label in labels]
    fig, ax = plt.subplots(figsize=(8.0, 0.5 * len(labels) + 1.3), dpi=100)
    ax.barh(range(len(labels)), values, color=colours)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    if max(values) / max(min(values), 1e-12) > 50:
        ax.set_xscale("log")
    for i, value in enumerate(values):
        ax.annotate(f"{value:g}", (value, i), xytext=(3, 0), textcoords="offset points", va="center", fontsize=8)
    if ratio:
        ax.axvline(1.0, color="black", linewidth=0.8, linestyle="--")
    better = "lower is better" if workload["better"] == "lower" else "higher is better"
    ax.set_xlabel(f"{workload['unit']} ({better})")
    fig.suptitle(textwrap.fill(workload["title"], 80), fontsize=10)
    ax.margins(x=0.15)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


def markdown(workload: Dict[str, Any]) -> List[str]:
    """The chart, its table and where the figures come from, as MyST Markdown."""
    lines = [f"**{workload['title']}**", "",
             f"![{workload['title']}](generated/performance/{workload['id']}.png)", "",
             f"| | {workload['unit']} |", "|---|---:|"]
    lines += [f"| {label} | {value:g} |" for label, value in workload["rows"]]
    lines += ["", f"Measured: {workload['measured']}; recorded in bench/README.md by commit "
              f"`{workload['recorded']}`. Command: `{workload['command']}`.", ""]
    return lines


class PerfFigures(SphinxDirective):
    """``perf-figures``: every workload of ``bench/results/current.json``, chart and table."""

    def run(self) -> List[nodes.Node]:
        self.env.note_dependency(str(FIGURES))
        text = [line for workload in workloads() for line in markdown(workload)]
        container = nodes.container()
        self.state.nested_parse(StringList(text, source=str(FIGURES)), self.content_offset, container)
        return list(container.children)


def generate(app: Any) -> None:
    """Draw every chart into ``docs/generated/performance/`` (``builder-inited``)."""
    out = Path(app.srcdir) / "generated" / "performance"
    for workload in workloads():
        draw(workload, out / f"{workload['id']}.png")


def setup(app: Any) -> Dict[str, Any]:
    """Sphinx entry point."""
    app.connect("builder-inited", generate)
    app.add_directive("perf-figures", PerfFigures)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
