"""Fixtures of the metrics tests: an existing record to write metrics into, a host run dir."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from molrec_raw import Block, Frame, write_mrec_frame


@pytest.fixture
def record(tmp_path: Path) -> Path:
    """A small record (frame section only) created by the record layer, no metrics yet."""
    path = tmp_path / "run.mrec"
    write_mrec_frame(path, Frame(blocks={"atoms": Block({"x": np.zeros(2)})}), durable=False)
    return path


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    path = tmp_path / "executions" / "e1"
    path.mkdir(parents=True)
    return path
