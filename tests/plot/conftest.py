"""Records and host WALs to draw: made through the public API, with known series."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import molrec_raw as mr
from plot_helpers import GAP, trajectory_record


@pytest.fixture
def gap_record(tmp_path: Path) -> Path:
    """Metrics only: "a" (a sine, NaN over GAP) and "train/loss" (positive, decaying), 1000 steps."""
    path = tmp_path / "gap.mrec"
    mr.write_mrec_frame(path, mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(2)})}))
    with mr.MetricsWriter(path) as m:
        for s in range(1000):
            m.log("a", math.nan if s in GAP else math.sin(s / 80.0), step=s)
            m.log("train/loss", math.exp(-s / 300.0), step=s)
    return path


@pytest.fixture
def md_record(tmp_path: Path) -> Path:
    """A trajectory (pe, temp, a string key) with units stated on system/, plus one metric."""
    path = trajectory_record(
        tmp_path / "md.mrec", 300, {"pe": "f64", "temp": "f64", "note": "string"},
        lambda key, i: f"frame {i}" if key == "note" else (-100.0 + math.sin(i / 20.0) if key == "pe" else 300.0 + i % 7),
        units={"length": "nm", "energy": "kJ/mol", "time": "ps"})
    with mr.MetricsWriter(path) as m:
        for i in range(0, 300, 3):
            m.log("thermo/pressure", float(i % 11), step=10 * i)
    return path
