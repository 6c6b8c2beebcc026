"""``--vega``: a Vega-Lite v5 specification valid against the v5 JSON schema, rendered by
vl-convert with the data in the picture; the host's ``artifacts/<stem>.mlp.vl.json``."""
from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any, Dict, List

import pytest

import molrec_raw as mr
from molrec_raw.cli import main
from molrec_raw.record.runplot.decimate import decimate
from molrec_raw.record.runplot.load import load_run_series
from molrec_raw.record.runplot.vegalite import PANEL_WIDTH, VEGA_LITE_SCHEMA, spec_bytes
from plot_helpers import GAP, line_pixels, rgb, runs


def _v5_schema() -> Dict[str, Any]:
    """The Vega-Lite v5 JSON schema as altair 5 ships it (read as a file, offline)."""
    spec = importlib.util.find_spec("altair")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("altair 5 (which ships the Vega-Lite v5 JSON schema) is not installed")
    path = Path(list(spec.submodule_search_locations)[0]) / "vegalite" / "v5" / "schema" / "vega-lite-schema.json"
    if not path.is_file():
        pytest.skip(f"this altair ships no Vega-Lite v5 schema ({path} is missing; altair >= 6 ships v6)")
    return json.loads(path.read_text(encoding="utf-8"))


def _validate(spec: Dict[str, Any]) -> None:
    jsonschema = pytest.importorskip("jsonschema", reason="validating needs jsonschema (a test dependency)")
    schema = _v5_schema()
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(spec), key=lambda e: list(e.path))
    assert not errors, "; ".join(f"{list(e.path)}: {e.message[:200]}" for e in errors[:5])


def _render(spec: Dict[str, Any]) -> bytes:
    vl_convert = pytest.importorskip("vl_convert", reason="rendering needs vl-convert-python (a test dependency)")
    return bytes(vl_convert.vegalite_to_png(spec, vl_version="5.20"))


def test_vega_spec_validates_against_the_vega_lite_v5_schema(md_record: Path, gap_record: Path, tmp_path: Path) -> None:
    for record, x in ((md_record, "time"), (gap_record, "step")):
        out = tmp_path / f"{record.stem}.mlp.vl.json"
        assert main(["plot", str(record), "--vega", str(out), "--x", x]) == 0
        spec = json.loads(out.read_text(encoding="utf-8"))
        assert spec["$schema"] == VEGA_LITE_SCHEMA
        _validate(spec)
    broken = dict(spec, vconcat=[dict(spec["vconcat"][0], mark={"type": "lines"})])
    with pytest.raises(AssertionError):  # the validator does reject what v5 does not define
        _validate(broken)
    assert not (tmp_path / "gap.png").exists()  # --vega alone draws no image


def test_vega_inline_values_equal_the_decimated_series(gap_record: Path) -> None:
    """Each chart's rows are exactly the decimated points (a gap as null); the data really is
    decimated (1000 points > 4 x 200 buckets) and keeps each bucket's extremes."""
    spec = mr_vega(gap_record, width=200)
    run = load_run_series(gap_record)
    lo, hi = run.x_range()
    assert [chart["title"] for chart in spec["vconcat"]] == ["a", "train/loss"]
    for panel in run.panels:
        kept = decimate(panel.x, panel.y, 200, lo, hi)
        assert kept.shape[0] < panel.y.shape[0]
        expected = [[int(x), None if not math.isfinite(y) else float(y)] for x, y in zip(panel.x[kept], panel.y[kept])]
        rows = [[r["x"], r["y"]] for r in series_rows(spec, panel.key)]
        assert rows == expected
    a_rows = series_rows(spec, "a")
    assert any(r["y"] is None and r["x"] in GAP for r in a_rows)  # the gap is in the data
    assert spec["vconcat"][1]["encoding"]["y"]["scale"] == {"type": "log"}


def series_rows(spec: Dict[str, Any], key: str) -> List[Dict[str, Any]]:
    """The rows of the one chart that draws ``key`` (each chart carries its own data)."""
    charts = [c for c in spec["vconcat"] if {r["series"] for r in c["data"]["values"]} == {key}]
    assert len(charts) == 1, f"{len(charts)} charts draw {key!r}"
    return list(charts[0]["data"]["values"])


def all_rows(spec: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [r for chart in spec["vconcat"] for r in chart["data"]["values"]]


def mr_vega(path: Path, **options: Any) -> Dict[str, Any]:
    from molrec_raw import plot
    return plot.vega_spec(path, **options)


def _blue_rows(png: bytes) -> List[Any]:
    return runs(line_pixels(rgb(png)).any(axis=1), bridge=3)


def test_vl_convert_renders_the_plotted_data(md_record: Path, gap_record: Path) -> None:
    """The rendered picture holds one band of line pixels per chart; without the data it holds
    none; the chart with a NaN gap is drawn in two pieces."""
    spec = mr_vega(md_record)
    png = _render(spec)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(_blue_rows(png)) == 3  # pe, temp, thermo/pressure
    empty = dict(spec, vconcat=[dict(chart, data={"values": []}) for chart in spec["vconcat"]])
    assert not line_pixels(rgb(_render(empty))).any()

    gap = mr_vega(gap_record, series=["a"])
    image = rgb(_render(gap))
    pieces = runs(line_pixels(image).any(axis=0))
    assert len(pieces) == 2, pieces
    hole, plotted = pieces[1][0] - pieces[0][1], pieces[1][1] - pieces[0][0]
    assert 0.15 < hole / plotted < 0.25


def test_vega_bytes_are_deterministic_and_plain_json(md_record: Path, tmp_path: Path) -> None:
    one, two = tmp_path / "one.mlp.vl.json", tmp_path / "two.mlp.vl.json"
    assert main(["plot", str(md_record), "--vega", str(one)]) == 0
    assert main(["plot", str(md_record), "--vega", str(two)]) == 0
    data = one.read_bytes()
    assert data == two.read_bytes() and data.endswith(b"\n") and b"NaN" not in data
    assert spec_bytes(json.loads(data)) == data


def test_host_writer_keeps_the_plot_artifact_current(tmp_path: Path) -> None:
    """root-layout host layout: artifacts/<stem>.mlp.vl.json beside artifacts/<stem>.mlp.jsonl,
    replaced at each flush with every stepped series; a reopened writer continues it."""
    run_dir = tmp_path / "executions" / "e1"
    run_dir.mkdir(parents=True)
    artifact = run_dir / "artifacts" / "train.mlp.vl.json"
    w = mr.MetricsWriter.for_host(run_dir, "train", plot=True)
    w.log("note", 1.0)  # step-less: nothing drawable yet, no artifact
    w.flush()
    assert not artifact.exists()
    for s in range(100):
        w.log("train/loss", 1.0 / (s + 1), step=s)
    w.flush()
    first = json.loads(artifact.read_text())
    _validate(first)
    assert {r["x"] for r in all_rows(first)} == set(range(100))
    inode = artifact.stat().st_ino
    for s in range(100, 3000):
        w.log("train/loss", 1.0 / (s + 1), step=s)
        w.log("lr", 0.01 * (1 - s / 3000), step=s)
    w.close()
    second = json.loads(artifact.read_text())
    assert artifact.stat().st_ino != inode  # replaced (rename), never rewritten in place
    assert [c["title"] for c in second["vconcat"]] == ["lr", "train/loss"]
    loss = series_rows(second, "train/loss")
    assert loss[-1] == {"series": "train/loss", "x": 2999, "y": 1 / 3000} and len(loss) <= 4 * PANEL_WIDTH
    # the artifact is what a fresh reading of the WAL draws: same bytes
    wal = run_dir / "artifacts" / "train.mlp.jsonl"
    from molrec_raw import plot
    assert spec_bytes(plot.vega_spec(wal)) == artifact.read_bytes()
    with mr.MetricsWriter.for_host(run_dir, "train", plot=True) as again:
        again.log("train/loss", 0.0001, step=3000)
    third = json.loads(artifact.read_text())
    assert series_rows(third, "train/loss")[-1]["x"] == 3000
    assert sorted(p.name for p in artifact.parent.iterdir()) == [
        "train.mlp.jsonl", "train.mlp.vl.json", "train.panel-lr.mlp.vl.json", "train.panel-train%2Floss.mlp.vl.json"]
    assert mr.discover_metrics(run_dir).metrics == (wal,)  # the artifact is no metrics surface
    rendered = rgb(_render(third))
    assert len(_blue_rows(_render(third))) == 2 and rendered.shape[1] > PANEL_WIDTH


def test_host_writer_without_plot_writes_no_artifact(tmp_path: Path) -> None:
    with mr.MetricsWriter.for_host(tmp_path) as w:
        w.log("loss", 0.5, step=1)
    assert sorted(p.name for p in (tmp_path / "artifacts").iterdir()) == ["metrics.mlp.jsonl"]


def test_vega_spec_needs_no_plotting_library(gap_record: Path) -> None:
    """The specification is built by the core alone: in a fresh interpreter, building it
    imports neither matplotlib nor any Vega package."""
    import subprocess
    import sys

    code = ("import sys, molrec_raw.plot as p; p.vega_spec(sys.argv[1]); "
            "print(sorted(m for m in ('matplotlib', 'altair', 'vl_convert', 'jsonschema') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(gap_record)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_log_scale_of_a_series_with_non_positive_values_is_refused(gap_record: Path, tmp_path: Path,
                                                                   capsys: Any) -> None:
    out = tmp_path / "x.mlp.vl.json"
    assert main(["plot", str(gap_record), "--vega", str(out), "--log-y", "a"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'a' has values <= 0" in err and not out.exists()
