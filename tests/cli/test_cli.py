"""The molrec-raw command line: exit codes and output on real records."""
import json
import subprocess
import sys

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
    assert report["trajectory"] == {"nstep": 4, "blocks": ["atoms"], "steps": [0, 30], "times": [0.0, 1.5]}
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
