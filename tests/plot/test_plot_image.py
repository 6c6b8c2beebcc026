"""``molrec-raw plot --out``: images checked by their pixels, not only by their existence."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import molrec_raw as mr
from molrec_raw.cli import main

pytest.importorskip("matplotlib", reason="images need matplotlib (the [plot] extra)")

from molrec_raw import plot  # noqa: E402
from plot_helpers import line_pixels, panel_frames, rgb, runs, trajectory_record  # noqa: E402


def test_png_has_the_requested_size_and_one_drawn_panel_per_key(md_record: Path, tmp_path: Path) -> None:
    out = tmp_path / "md.png"
    assert main(["plot", str(md_record), "--out", str(out), "--size", "900x640"]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = rgb(str(out))
    assert image.shape[:2] == (640, 900)
    frames = panel_frames(image)
    assert len(frames) == 3  # pe, temp (meta) and thermo/pressure (metrics); "note" is a string
    lines = line_pixels(image)
    for top, bottom in frames:
        inside = lines[top + 2:bottom - 1]
        assert inside.sum() > 200, f"panel rows {top}-{bottom} hold no drawn line"
        columns = runs(inside.any(axis=0))
        assert len(columns) == 1 and columns[0][1] - columns[0][0] > 0.8 * 900 * 0.85  # drawn across the axis
    assert not lines[:frames[0][0]].any() and not lines[frames[-1][1] + 2:].any()  # nothing outside the panels


def test_a_nan_gap_is_drawn_as_two_pieces(gap_record: Path, tmp_path: Path) -> None:
    out = tmp_path / "gap.png"
    assert main(["plot", str(gap_record), "--out", str(out), "--size", "1000x400"]) == 0
    image = rgb(str(out))
    (a_top, a_bottom), (loss_top, loss_bottom) = panel_frames(image)
    lines = line_pixels(image)
    a_pieces = runs(lines[a_top + 2:a_bottom - 1].any(axis=0))
    assert len(a_pieces) == 2, a_pieces
    hole = a_pieces[1][0] - a_pieces[0][1]
    plotted = a_pieces[1][1] - a_pieces[0][0]
    assert 0.15 < hole / plotted < 0.25  # steps 400-599 of 0-999: a fifth of the axis is empty
    assert len(runs(lines[loss_top + 2:loss_bottom - 1].any(axis=0))) == 1  # no gap: one piece


def test_figure_titles_carry_stated_units_and_losses_get_a_log_scale(md_record: Path, gap_record: Path) -> None:
    """frame-and-types#13.5: pe takes the energy unit, temp none (no temperature is stated),
    the x axis the time unit; a positive *loss* series is drawn on a log scale."""
    fig = plot.figure(md_record, x="time")
    assert [ax.get_title(loc="left") for ax in fig.axes] == ["pe (kJ/mol)", "temp", "thermo/pressure"]
    assert fig.axes[-1].get_xlabel() == "time (ps)"
    fig = plot.figure(gap_record)
    assert [ax.get_yscale() for ax in fig.axes] == ["linear", "log"]
    fig = plot.figure(gap_record, series=["train/loss"], log_y=[])
    assert [ax.get_yscale() for ax in fig.axes] == ["linear"]


def test_units_only_where_the_record_states_them(tmp_path: Path) -> None:
    """A preset stands for its quantities; system's units come before frame's; volume takes
    length cubed; keys without a §13.4 meaning take none; an unknown preset is refused."""
    def values(key: str, i: int) -> float:
        return i if key == "count" else float(i)

    keys = {"pe": "f64", "ke": "f64", "volume": "f64", "press": "f64", "count": "i64"}
    real = trajectory_record(tmp_path / "real.mrec", 4, keys, values, units="real")
    titles = [p.title for p in mr_panels(real)]
    assert titles == ["pe (kcal/mol)", "ke (kcal/mol)", "volume (angstrom^3)", "press", "count"]
    bare = trajectory_record(tmp_path / "bare.mrec", 4, keys, values)
    assert [p.unit for p in mr_panels(bare)] == [None] * 5
    stated = trajectory_record(tmp_path / "p.mrec", 4, {"press": "f64", "temp": "f64"}, values,
                               units={"pressure": "bar", "temperature": "K"}, section="frame")
    assert [p.title for p in mr_panels(stated)] == ["press (bar)", "temp (K)"]
    from molrec_raw.errors import UnsupportedFeatureError
    from molrec_raw.record.doors import open_record
    from molrec_raw.record.units import declared_units
    both = tmp_path / "both.mrec"  # system states the real preset with energy overridden; frame says nm
    mr.write_mrec_frame(both, mr.Frame({"units": {"length": "nm"}}, {"atoms": mr.Block({"x": np.zeros(2)})}),
                        system=mr.Frame({"units": {"preset": "real", "energy": "kJ/mol"}},
                                        {"atoms": mr.Block({"x": np.zeros(2)})}))
    units = declared_units(open_record(both))
    assert units["length"] == "angstrom" and units["energy"] == "kJ/mol" and units["time"] == "fs"
    odd = trajectory_record(tmp_path / "odd.mrec", 2, {"pe": "f64"}, values, units="lammps-real")
    with pytest.raises(UnsupportedFeatureError, match="unknown units preset 'lammps-real'"):
        mr_panels(odd)


def mr_panels(path: Path):  # type: ignore[no-untyped-def]
    from molrec_raw.record.runplot.load import load_run_series
    return load_run_series(path).panels


@pytest.mark.parametrize("kind, magic", [("svg", b"<?xml"), ("pdf", b"%PDF")])
def test_svg_and_pdf_outputs(gap_record: Path, tmp_path: Path, kind: str, magic: bytes) -> None:
    out = tmp_path / f"gap.{kind}"
    assert main(["plot", str(gap_record), "--out", str(out)]) == 0
    data = out.read_bytes()
    assert data.startswith(magic)
    assert main(["plot", str(gap_record), "--out", str(tmp_path / f"again.{kind}")]) == 0
    assert (tmp_path / f"again.{kind}").read_bytes() == data  # no time stamp inside: same bytes


def test_every_source_a_reader_opens(md_record: Path, tmp_path: Path) -> None:
    """A *.mrec directory, a packed *.mrec.zip and a host *.mlp.jsonl WAL; the default
    output is <stem>.png beside the source."""
    packed = mr.pack_mrec_zip(md_record)
    assert main(["plot", str(packed)]) == 0
    from_zip = tmp_path / "md.png"
    assert from_zip.exists()
    assert len(panel_frames(rgb(str(from_zip)))) == 3
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with mr.MetricsWriter.for_host(run_dir) as m:
        for s in range(50):
            m.log("train/loss", 1.0 / (s + 1), step=s)
            m.log("lr", 0.1, step=s)
    wal = run_dir / "artifacts" / "metrics.mlp.jsonl"
    assert main(["plot", str(wal)]) == 0
    image = rgb(str(run_dir / "artifacts" / "metrics.png"))
    assert len(panel_frames(image)) == 2 and line_pixels(image).sum() > 200


def test_a_million_points_are_drawn_decimated_with_their_spike(tmp_path: Path) -> None:
    """10^6 points, a single spike among them: decimated per pixel column, the spike stays
    visible.  (bench/plot.py times it — the < 2 s target — and the command end to end.)"""
    from molrec_raw.record.metrics import Series
    from molrec_raw.record.runplot.panels import run_series_from_metrics

    rng = np.random.default_rng(7)
    n = 1_000_000
    values = rng.normal(size=n)
    values[654_321] = 40.0  # a spike ten times the noise
    series = {"energy": Series("energy", "scalar", np.arange(n, dtype=np.int64), values, None)}
    run = run_series_from_metrics(series, "big")
    fig = plot._draw(run, (1000, 300))
    fig.savefig(tmp_path / "big.png", dpi=plot.DPI)
    (line,) = fig.axes[0].lines
    assert line.get_xydata().shape[0] <= 4 * 1000 and np.nanmax(line.get_ydata()) == 40.0


def test_no_gap_is_invented_and_none_is_joined(tmp_path: Path) -> None:
    """A fill (NaN) in per-step meta is a gap; +inf too (nothing to draw there)."""
    def values(key: str, i: int) -> float:
        return math.inf if i == 5 else float(i % 3)

    path = trajectory_record(tmp_path / "inf.mrec", 12, {"pe": "f64"}, values)
    fig = plot.figure(path)
    y = fig.axes[0].lines[0].get_ydata()
    assert np.isnan(y[5]) and np.isfinite(np.delete(y, 5)).all()
