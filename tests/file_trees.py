"""Every file under a directory, for tests that prove a refused or failed write changed nothing."""
import os
from pathlib import Path
from typing import Dict


def files_under(path: Path) -> Dict[str, bytes]:
    """Every file under ``path``: its name relative to ``path`` -> its bytes."""
    out = {}
    for directory, _, names in os.walk(path):
        for name in names:
            full = Path(directory) / name
            out[str(full.relative_to(path))] = full.read_bytes()
    return out
