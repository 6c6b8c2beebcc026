"""``molrec-raw plot`` on bad input (one line, exit 2), ``--follow``, and the demo's picture."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

import molrec_raw as mr
from molrec_raw.cli import main
from plot_helpers import line_pixels, panel_frames, rgb


def _one_line_error(capsys: Any) -> str:
    err = capsys.readouterr().err
    assert err.startswith("molrec-raw plot: error: ") and err.count("\n") == 1, err
    return err


def test_a_record_with_no_series_says_so_in_one_line(tmp_path: Path, capsys: Any) -> None:
    path = mr.write_mrec_frame(tmp_path / "still.mrec", mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(3)})}))
    assert main(["plot", str(path)]) == 2
    assert "nothing to plot: no per-step meta series and no metrics series" in _one_line_error(capsys)
    assert not (tmp_path / "still.png").exists()
    with mr.MetricsWriter(path) as m:
        m.log("note", 1.0)  # a step-less series: there is a series, but none that can be drawn
    assert main(["plot", str(path), "--vega", str(tmp_path / "v.json")]) == 2
    assert "that can be drawn (note: a step-less metrics series" in _one_line_error(capsys)


def test_an_unknown_series_key_names_the_keys_that_exist(md_record: Path, tmp_path: Path, capsys: Any) -> None:
    assert main(["plot", str(md_record), "--series", "pe", "energy", "--out", str(tmp_path / "x.png")]) == 2
    err = _one_line_error(capsys)
    assert "unknown series 'energy'" in err and "has: pe, temp, thermo/pressure, note" in err
    assert main(["plot", str(md_record), "--series", "note", "--vega", str(tmp_path / "v.json")]) == 2
    assert "'note' " in _one_line_error(capsys)  # exists, but is text: said so
    assert not list(tmp_path.glob("x.png")) and not list(tmp_path.glob("v.json"))


@pytest.mark.parametrize("args, message", [
    (["--x", "time"], "--x time needs a trajectory with times"),
    (["--out", "run.gif"], "an image is .png, .svg, .pdf"),
    (["--size", "50x50"], "too small"),
])
def test_other_bad_input_is_one_line_too(gap_record: Path, tmp_path: Path, capsys: Any, monkeypatch: Any,
                                         args: Any, message: str) -> None:
    pytest.importorskip("matplotlib", reason="images need matplotlib (the [plot] extra)")
    monkeypatch.chdir(tmp_path)
    assert main(["plot", str(gap_record), *args]) == 2
    assert message in _one_line_error(capsys)


def test_series_selection_and_time_axis(md_record: Path) -> None:
    """--series keeps the order given; --x time puts metrics at the time of the frame with
    their step (frames every 10 steps, 0.5 time units apart)."""
    from molrec_raw.record.runplot.load import load_run_series

    run = load_run_series(md_record, keys=["thermo/pressure", "pe"], x="time")
    assert [p.key for p in run.panels] == ["thermo/pressure", "pe"]
    pressure = run.panels[0]
    assert pressure.x[:3].tolist() == [0.0, 1.5, 3.0] and run.x_title == "time (ps)"


def test_a_key_in_both_meta_and_metrics_is_qualified(tmp_path: Path) -> None:
    from plot_helpers import trajectory_record
    from molrec_raw.record.runplot.load import load_run_series

    path = trajectory_record(tmp_path / "both.mrec", 5, {"pe": "f64"}, lambda key, i: float(i))
    with mr.MetricsWriter(path) as m:
        m.log("pe", 1.0, step=0)
    assert [p.key for p in load_run_series(path).panels] == ["meta:pe", "metrics:pe"]


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 600.0) -> None:
    """Poll ``condition``; ``timeout`` guards against a hang (it is no speed limit)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_follow_redraws_as_a_live_run_logs_and_replaces_atomically(tmp_path: Path) -> None:
    """--follow polls; each redraw replaces the image and the specification by rename (a new
    inode each time, never a partial file, no temporary file left behind)."""
    pytest.importorskip("matplotlib", reason="images need matplotlib (the [plot] extra)")
    record = mr.write_mrec_frame(tmp_path / "live.mrec", mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(2)})}))
    image, spec = tmp_path / "live.png", tmp_path / "live.mlp.vl.json"
    out_log, err_log = tmp_path.parent / f"{tmp_path.name}.out", tmp_path.parent / f"{tmp_path.name}.err"
    with open(out_log, "w") as out_file, open(err_log, "w") as err_file:
        follower = subprocess.Popen(
            [sys.executable, "-m", "molrec_raw", "plot", str(record), "--out", str(image), "--vega", str(spec),
             "--follow", "--interval", "0.05", "--stop-after", "60"], stdout=out_file, stderr=err_file)
    try:
        _wait_for(lambda: "nothing to plot" in err_log.read_text(), "the follower to wait for data")
        assert not image.exists()  # nothing logged yet: it waits instead of failing
        writer = mr.MetricsWriter(record)
        for s in range(20):
            writer.log("loss", 1.0 / (s + 1), step=s)
        writer.flush()
        _wait_for(lambda: spec.exists() and image.exists() and b'"x":19' in spec.read_bytes(), "the first drawing")
        first = image.stat().st_ino
        for s in range(20, 40):
            writer.log("loss", 1.0 / (s + 1), step=s)
            writer.log("lr", 0.1, step=s)
        writer.close()
        _wait_for(lambda: b'"x":39' in spec.read_bytes() and image.stat().st_ino != first, "the redraw")
        time.sleep(0.3)  # let a redraw in progress finish
        assert len(panel_frames(rgb(str(image)))) == 2  # loss and lr
    finally:
        follower.terminate()
        follower.wait(timeout=20)
    out = out_log.read_text()
    assert out.startswith("following") and f"wrote {image}" in out and f"wrote {spec}" in out
    assert err_log.read_text().startswith("molrec-raw plot: waiting: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["live.mlp.vl.json", "live.mrec",
                                                          "live.panel-loss.mlp.vl.json", "live.panel-lr.mlp.vl.json",
                                                          "live.png"]


def test_follow_of_an_unreadable_source_fails_at_once(tmp_path: Path, capsys: Any) -> None:
    assert main(["plot", str(tmp_path / "missing.mrec"), "--vega", str(tmp_path / "v.json"), "--follow",
                 "--stop-after", "5"]) == 2
    assert "missing.mrec" in _one_line_error(capsys)


def test_demo_ends_by_drawing_demo_png_beside_the_record(tmp_path: Path, capsys: Any) -> None:
    pytest.importorskip("matplotlib", reason="the demo's picture needs matplotlib (the [plot] extra)")
    assert main(["demo", str(tmp_path / "demo.mrec"), "--frames", "40"]) == 0
    out = capsys.readouterr().out
    picture = tmp_path / "demo.png"
    assert f"drew {picture}" in out
    image = rgb(str(picture))
    frames = panel_frames(image)
    assert len(frames) == 7  # pe, ke, temp and four metrics series
    lines = line_pixels(image)
    assert all(lines[top + 2:bottom - 1].sum() > 50 for top, bottom in frames)
    from molrec_raw import plot
    titles = [ax.get_title(loc="left") for ax in plot.figure(tmp_path / "demo.mrec").axes]
    assert titles[:3] == ["pe (kcal/mol)", "ke (kcal/mol)", "temp (K)"]
