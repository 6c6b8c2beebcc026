"""Fixtures of the dataset tests; the whole directory needs the [lmdb] extra."""
from __future__ import annotations

import pytest

pytest.importorskip("lmdb", reason="datasets of collections need the [lmdb] extra (pip install 'molrec-raw[lmdb]')")
