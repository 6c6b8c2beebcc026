"""The host surface: which files of a run directory are metrics, which are records.

documents §5.6, checklist #9.17; root-layout "host" layout.  A host keeps metrics ONLY as
``*.mlp.jsonl`` WAL files (the surface that activates UIs).  Leftover ``<stem>.mlp.zarr/``
(an old dense store) and ``<stem>.mlp.index.json`` (an old cache) are recognised solely so
that they can be ignored — never a surface, never a trigger, and nothing inside
``*.mlp.zarr/`` is looked at.  A scientific record under the host is a ``*.mrec/``
directory with a root ``zarr.json`` (or a ``*.mrec.zip`` holding one), never a ``*.mlp.*``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import List, Tuple

from molrec_raw.errors import MolrecError, StoreError
from molrec_raw.record.metrics.writer import HOST_SUFFIX
from molrec_raw.zarr.store import PathLike

__all__ = ["Discovered", "discover_metrics"]



@dataclass(frozen=True)
class Discovered:
    """What ``discover_metrics`` found under a run directory (each tuple sorted by path).

    ``metrics``: the ``*.mlp.jsonl`` WAL files (read each with ``read_metrics``).
    ``records``: scientific records (``*.mrec/`` with a root ``zarr.json``, ``*.mrec.zip``
    with a root ``zarr.json`` entry); their own metrics are read with ``read_metrics`` too.
    ``ignored``: leftover ``*.mlp.zarr/`` and ``*.mlp.index.json`` — listed, never used.
    """

    metrics: Tuple[Path, ...]
    records: Tuple[Path, ...]
    ignored: Tuple[Path, ...]


def _is_zip_record(path: Path) -> bool:
    from molrec_raw.zarr import ZipStore  # only discovery looks into zips

    try:
        with ZipStore(path) as store:
            return store.size("zarr.json") is not None
    except MolrecError:
        return False


def discover_metrics(run_dir: PathLike) -> Discovered:
    """Walk ``run_dir`` (not into records or leftover stores) and classify what is there."""
    top = Path(run_dir)
    if not top.is_dir():
        raise StoreError(f"{run_dir} is not a directory")
    metrics: List[Path] = []
    records: List[Path] = []
    ignored: List[Path] = []
    for current, dirs, files in os.walk(top):
        here = Path(current)
        keep = []
        for name in sorted(dirs):
            lower = name.lower()
            if lower.endswith(".mlp.zarr"):
                ignored.append(here / name)  # never descended: not even its zarr.json counts
            elif lower.endswith(".mrec"):
                if (here / name / "zarr.json").is_file():
                    records.append(here / name)
                # a record is one unit; a *.mrec without root zarr.json is nothing of ours
            else:
                keep.append(name)
        dirs[:] = keep
        for name in sorted(files):
            lower = name.lower()
            path = here / name
            if lower.endswith(HOST_SUFFIX):
                metrics.append(path)
            elif lower.endswith(".mlp.index.json"):
                ignored.append(path)
            elif lower.endswith(".mrec.zip") and _is_zip_record(path):
                records.append(path)
    return Discovered(tuple(sorted(metrics)), tuple(sorted(records)), tuple(sorted(ignored)))
