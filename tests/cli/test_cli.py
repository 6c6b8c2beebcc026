"""The molrec-raw command line: exit codes and output on real records."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import molrec_raw as mr
from molrec_raw.cli import main
from molrec_raw.record.trajectory import write_mrec_trajectory
from molrec_raw.zarr import open_group


@pytest.fixture
def frame_record(tmp_path):
    frame = mr.Frame({"title": "w"}, {"atoms": mr.Block({"x": np.arange(3.0), "element": np.array(["C", "H", "O"], dtype=object)})})
    return str(mr.write_mrec_frame(tmp_path / "f.mrec", frame))


@pytest.fixture
def trajectory_record(tmp_path):
    frames = [mr.Frame({}, {"atoms": mr.Block({"x": np.arange(3.0) + i})}) for i in range(4)]
    write_mrec_trajectory(tmp_path / "t.mrec", frames, steps=[0, 10, 20, 30], times=[0.0, 0.5, 1.0, 1.5])
    return str(tmp_path / "t.mrec")


def test_inspect_text_and_json(frame_record, trajectory_record, capsys):
    assert main(["inspect", frame_record]) == 0
    text = capsys.readouterr().out
    assert "atoms/" in text and "x: float64[3]" in text and "vlen-utf8+gzip+crc32c" in text
    assert main(["inspect", trajectory_record, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["trajectory"] == {
        "nstep": 4, "steps": [0, 30], "times": [0.0, 1.5], "box_updates": 0, "meta_keys": [],
        "blocks": {"atoms": {"layout": "regular", "updates": 4, "last_rows": 3, "uncommitted_rows": 0}},
        "uncommitted_tail": False}
    assert report["tree"]["members"]["meta"]["attributes"]["molrec_version"] == 2


def test_validate_exit_codes(frame_record, tmp_path, capsys):
    assert main(["validate", frame_record]) == 0
    open_group(frame_record, mode="r+")["frame/atoms"].attrs["count"] = 7
    assert main(["validate", frame_record]) == 1
    assert "frame-and-types#14.6" in capsys.readouterr().out
    assert main(["validate", str(tmp_path / "missing.mrec")]) == 2


def test_pack_unpack_and_cat(frame_record, trajectory_record, tmp_path, capsys):
    assert main(["pack", frame_record]) == 0
    packed = capsys.readouterr().out.strip()
    assert packed.endswith("f.mrec.zip")
    assert main(["validate", packed]) == 0
    assert main(["unpack", packed, str(tmp_path / "back.mrec")]) == 0
    capsys.readouterr()
    assert main(["cat", str(tmp_path / "back.mrec"), "--block", "atoms"]) == 0
    out = capsys.readouterr().out
    assert "[atoms] 3 rows" in out and "H\t1.0" in out.replace("'", "")
    assert main(["cat", trajectory_record, "--frame", "-1"]) == 0
    assert "5.0" in capsys.readouterr().out


def test_errors_are_one_line_without_traceback(tmp_path):
    result = subprocess.run([sys.executable, "-m", "molrec_raw", "inspect", str(tmp_path / "nope.mrec")],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("molrec-raw inspect: error:")


def test_inspect_reports_update_counts_and_an_uncommitted_tail(trajectory_record, capsys):
    """Per block: layout, updates, rows; rows past nstep (a torn commit) are reported as a
    tail, on the directory and on the packed zip alike."""
    tgroup = open_group(trajectory_record, mode="r+")["trajectory"]
    tgroup.attrs["nstep"] = 3  # as if the 4th frame's commit never replaced zarr.json
    assert main(["inspect", trajectory_record]) == 0
    text = capsys.readouterr().out
    assert "trajectory: 3 committed frames, steps [0, 20]" in text
    assert "block atoms: regular, 3 update(s), last update 3 rows, 3 uncommitted row(s) past nstep" in text
    assert "uncommitted tail" in text
    packed = mr.pack_mrec_zip(trajectory_record)
    assert main(["inspect", str(packed), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["trajectory"]
    assert summary["nstep"] == 3 and summary["uncommitted_tail"] is True
    assert summary["blocks"]["atoms"]["uncommitted_rows"] == 3


def test_demo_writes_a_valid_record_that_opens_everywhere(tmp_path, capsys):
    """The main job: a sample run with every kind of content; it validates, packs, and the
    zip opens in zarr-python (when installed)."""
    path = tmp_path / "demo.mrec"
    assert main(["demo", str(path)]) == 0
    out = capsys.readouterr().out
    for expected in ("trajectory: 300 committed frames", "block atoms: regular, 300 update(s), last update 96 rows",
                     "block bonds: indexed, 2 update(s), last update 63 rows", "30 cell update(s)",
                     "per-step meta pe, ke, temp", "forcefield/", "observables/",
                     "metrics/", "x: float64[28800]", "numcodecs.shuffle"):
        assert expected in out, expected
    assert mr.validate(path) == []
    rec = mr.read_mrec(path)
    assert rec.status == {"state": "succeeded"} and set(rec.observables) == {"msd_oxygen"}
    assert sorted(rec.metrics) == ["energy/kinetic", "energy/potential", "thermo/pressure", "thermo/temperature"]
    with rec.trajectory as r:
        assert len(r) == 300 and r.step[-1] == 2990
        assert r[150].blocks["atoms"].masks["dipole"].sum() == 32          # oxygens only
        assert r[199].blocks["bonds"].nrows == 64 and r[200].blocks["bonds"].nrows == 63
        assert r.box_at(0) != r.box_at(299)
    assert main(["demo", str(path)]) == 2  # never overwrites
    assert main(["demo", str(tmp_path / "none.mrec"), "--frames", "0"]) == 2
    assert main(["demo", str(tmp_path / "short.mrec"), "--frames", "5"]) == 0
    assert mr.validate(tmp_path / "short.mrec") == []
    packed = mr.pack_mrec_zip(path)
    assert mr.validate(packed) == []
    zarr = pytest.importorskip("zarr")
    if not str(zarr.__version__).startswith("3"):
        pytest.skip("zarr-python 3 needed")
    store = zarr.storage.ZipStore(str(packed), mode="r")
    try:
        root = zarr.open_group(store, mode="r")
        assert root["trajectory"].attrs["nstep"] == 300
        with mr.MrecReader(packed) as r:
            x = root["trajectory/atoms/x"][96 * 7:96 * 8]
            assert np.array_equal(x, r[7].blocks["atoms"].columns["x"])
        assert np.array_equal(root["metrics/series/energy%2Fkinetic"][:], rec.metrics["energy/kinetic"].values)
        assert root["observables/msd_oxygen"].shape == (300,)
    finally:
        store.close()


def test_metrics_table_and_follow(tmp_path):
    """metrics prints the latest value per series; --follow prints events appended by a live
    writer (a torn last line waits for its newline)."""
    import threading
    import time

    record = tmp_path / "m.mrec"
    mr.write_mrec_frame(record, mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(2)})}))
    with mr.MetricsWriter(record) as m:
        for step in range(3):
            m.log("loss", 1.0 / (step + 1), step=step)
    proc = subprocess.Popen([sys.executable, "-m", "molrec_raw", "metrics", str(record), "--follow",
                             "--interval", "0.05", "--stop-after", "3"], stdout=subprocess.PIPE, text=True)
    header = [proc.stdout.readline() for _ in range(3)]
    assert header[0].split() == ["series", "points", "last", "step", "last", "value", "min", "max"]
    assert header[1].split() == ["loss", "3", "2", "0.333333", "0.333333", "1"]
    assert header[2].startswith("following ")

    def live_writer():
        w = mr.MetricsWriter(record)
        w.log("loss", 0.25, step=3)
        w.log("acc", 0.5, step=3)
        w.flush()
        with open(record / "metrics" / "metrics.jsonl", "ab") as fh:
            fh.write(b'{"t":"scalar","k":"loss","s":4,')  # torn: not printed yet
        time.sleep(0.3)
        with open(record / "metrics" / "metrics.jsonl", "ab") as fh:
            fh.write(b'"w":"2026-11-30T00:00:00Z","v":0.125}\n')

    thread = threading.Thread(target=live_writer)
    thread.start()
    out, _ = proc.communicate(timeout=30)
    thread.join()
    assert proc.returncode == 0
    lines = out.splitlines()
    assert lines == ["3\tloss\t0.25", "3\tacc\t0.5", "4\tloss\t0.125"] or \
        sorted(lines[:2]) == ["3\tacc\t0.5", "3\tloss\t0.25"] and lines[2:] == ["4\tloss\t0.125"]


def test_progress_bar_only_on_a_terminal(frame_record, tmp_path):
    import io

    from molrec_raw.cli import ProgressBar

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty, pipe = Tty(), io.StringIO()
    for stream in (tty, pipe):
        with ProgressBar("pack", stream) as bar:
            bar(0, 10)
            bar(10, 10)
    assert pipe.getvalue() == ""
    assert tty.getvalue().endswith("] 100.0%\n") and "\rpack [" in tty.getvalue()
    seen = []
    packed = mr.pack_mrec_zip(frame_record, progress=lambda done, total: seen.append((done, total)))
    files = [f for f in Path(frame_record).rglob("*") if f.is_file()]
    assert seen and seen[-1][0] == seen[-1][1] == sum(f.stat().st_size for f in files)
    seen.clear()
    mr.unpack_mrec_zip(packed, tmp_path / "u.mrec", progress=lambda done, total: seen.append((done, total)))
    assert seen[-1][0] == seen[-1][1] > 0
    # the command line draws nothing when stderr is not a terminal (as here)
    run = subprocess.run([sys.executable, "-m", "molrec_raw", "validate", frame_record], capture_output=True, text=True)
    assert run.returncode == 0 and run.stderr == ""


def test_broken_pipe_is_not_an_error(tmp_path):
    """`molrec-raw cat big.mrec | head -1`: the reader leaving early is not an error (the
    output is far larger than a pipe buffer, so the writer does meet the closed pipe)."""
    big = mr.write_mrec_frame(tmp_path / "big.mrec", mr.Frame({}, {"atoms": mr.Block({"x": np.arange(50_000.0)})}))
    run = subprocess.run(f"{sys.executable} -m molrec_raw cat {big} --rows 50000 | head -1",
                         shell=True, capture_output=True, text=True)
    assert run.stdout == "[atoms] 50000 rows\n" and run.stderr == ""
