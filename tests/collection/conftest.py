"""Fixtures of the collection tests; the whole directory needs the [lmdb] extra."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("lmdb", reason="collections need the [lmdb] extra (pip install 'molrec-raw[lmdb]')")


@pytest.fixture
def path(tmp_path: Path) -> Path:
    """Where a test's collection goes."""
    return tmp_path / "c.mrec.lmdb"
