"""A metric reader for the MolCrafts viewers (molpy's ``molcrafts.metric_readers`` group).

The viewers built on molpy (molplot through molexp) never parse a file themselves: they look a
reader up in the ``molcrafts.metric_readers`` entry-point group by its ``format`` and ask it
for records.  The protocol is structural — ``format``, ``patterns``, ``tailable``, ``sniff(path)``
and ``read(path, *, source, request)`` — so this module imports neither molpy nor any viewer.

:class:`MrecMetricSeriesReader` (format ``molrec_raw``) yields the metric series of

- a record (``*.mrec`` directory or ``*.mrec.zip``): its dense series merged with the WAL tail
  past the watermark (documents §5.4, §5.5; ``read_metrics``), and
- a host WAL (``*.mlp.jsonl``, documents §5.6): every complete line (a torn tail is not a
  record yet; a bad complete line is refused, never skipped: a skipped line would shift every
  later record's ``since`` index).

Each record is ``{"t": series type, "k": key, "s": step, "v": value, "tags": {"source": ...}}``.
``s`` is the point's step; a step-less series (documents §5.3) gives its ordinal.  Non-finite
measurements are IEEE floats (decision 8).  The *raw stream* — the order ``since`` counts in —
is series-major: keys sorted, each series' points in log order after the duplicate-step rule.

The request (molpy's ``ReadRequest``, matched by shape, every field read with ``getattr``):
``since`` raw records skipped (counted before the filters), ``metric_type`` and ``keys`` filters,
``stride`` every n-th sample of each series among the survivors, ``limit`` records at most
(``<= 0``: none), and ``progress.position`` written back as molpy documents it.  The selection is
computed on indices per series: points that are skipped are never turned into Python objects.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

from molrec_raw.errors import MolrecError
from molrec_raw.record.doors import open_record
from molrec_raw.record.metrics import Series, read_metrics

__all__ = ["MrecMetricSeriesReader"]

_RECORD_SUFFIXES = (".mrec", ".mrec.zip")


def _is_record_name(path: Path) -> bool:
    name = path.name.lower()
    return any(name.endswith(suffix) and len(name) > len(suffix) for suffix in _RECORD_SUFFIXES)


class MrecMetricSeriesReader:
    """molrec_raw's metric reader: a record's metric series (dense part and WAL tail) and host
    ``*.mlp.jsonl`` WAL files, for any viewer of the ``molcrafts.metric_readers`` group."""

    format = "molrec_raw"
    patterns = ("**/*.mrec", "**/*.mrec/", "**/*.mrec.zip", "**/*.mlp.jsonl")
    tailable = True  # a live run's WAL grows underneath the viewer

    def sniff(self, path: Path) -> bool:
        """True for a record this package opens (with or without metrics) or a host WAL file."""
        path = Path(path)
        if path.is_file() and path.name.lower().endswith(".mlp.jsonl"):
            return True
        if not _is_record_name(path) or not path.exists():
            return False
        try:
            open_record(path)
        except MolrecError:
            return False
        return True

    def read(self, path: Path, *, source: str = "", request: Any = None) -> Iterator[Dict[str, Any]]:
        """Yield the records ``request`` selects (see the module docstring).

        Raises a ``MolrecError`` naming the file and the rule for a record or a WAL this
        package refuses (a bad complete WAL line: README decision 9)."""
        path = Path(path)
        series = read_metrics(path)
        ordered = [series[key] for key in sorted(series)]
        return _select(ordered, source, request)


def _positions(s: Series) -> np.ndarray:
    """The ``s`` of each point: its step, or its ordinal for a step-less series."""
    if s.steps is not None:
        return s.steps.astype(np.float64)
    return np.arange(len(s), dtype=np.float64)


def _kept(s: Series, first: int, request: Any) -> np.ndarray:
    """Indices of ``s``'s points that survive ``since`` (points before ``first`` are skipped),
    the filters and the stride."""
    metric_type = getattr(request, "metric_type", None)
    keys: Tuple[str, ...] = tuple(getattr(request, "keys", ()) or ())
    if (metric_type is not None and s.type != metric_type) or (keys and s.key not in keys):
        return np.empty(0, dtype=np.int64)
    stride = max(1, int(getattr(request, "stride", 1) or 1))
    return np.arange(max(0, first), len(s), stride, dtype=np.int64)


def _select(ordered: List[Series], source: str, request: Any) -> Iterator[Dict[str, Any]]:
    progress = getattr(request, "progress", None) if request is not None else None
    since = max(0, int(getattr(request, "since", 0) or 0)) if request is not None else 0
    limit: Optional[int] = getattr(request, "limit", None) if request is not None else None
    if progress is not None:
        progress.position = since
    if limit is not None and limit <= 0:
        return
    total = sum(len(s) for s in ordered)
    kept = 0
    start = 0  # raw index of each series' first point
    for s in ordered:
        index = _kept(s, since - start, request) if request is not None else np.arange(len(s))
        if len(index):
            steps = _positions(s)[index].tolist()
            values = s.values[index].astype(np.float64).tolist()
            for i, step, value in zip(index.tolist(), steps, values):
                if progress is not None:
                    progress.position = start + i
                yield {"t": s.type, "k": s.key, "s": step, "v": value, "tags": {"source": source}}
                kept += 1
                if limit is not None and kept >= limit:
                    if progress is not None:
                        progress.position = max(since, start + i + 1)
                    return
        start += len(s)
    if progress is not None:
        progress.position = max(since, total)
