"""Helpers shared by the metrics tests."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict


def wal_of(record: Path) -> Path:
    return record / "metrics" / "metrics.jsonl"


def catalog_of(record: Path) -> Dict[str, Any]:
    return json.loads((record / "metrics" / "zarr.json").read_text())["attributes"]
