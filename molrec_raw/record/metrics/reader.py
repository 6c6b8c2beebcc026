"""Reading metrics: a record's dense series merged with its WAL tail, or a host WAL.

documents §5.4, §5.5; checklist #9.15, #9.16; README decisions 9 and 16.

1. Dense series (when any) are authoritative up to the watermark: each is read up to the
   catalog's ``count``.
2. Catalog with ``wal = {lines: L, bytes: B}``: the complete lines after byte ``B`` are
   folded in under the duplicate-step rule (lines before it are never re-applied).
3. Catalog without ``wal`` and dense series present: they are the whole record (a stray
   ``metrics.jsonl`` is tolerated, not read).
4. No dense series: the WAL alone is authoritative.

The WAL is read through the record's store, so a packed ``*.mrec.zip`` works the same.  A
WAL shorter than ``B`` (truncated outside the writer): the dense series are returned with
no tail and ``check_metrics_group`` (``validate``) reports it (decision 16).
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Dict, List, Optional

from molrec_raw.errors import CorruptDataError, InvalidValueError, MolrecError, StoreError, UnsupportedFeatureError
from molrec_raw.record.doors import RecordSource, open_record
from molrec_raw.record.metrics import dense
from molrec_raw.record.metrics.series import Series, fold, merge
from molrec_raw.record.metrics.wal import complete_part, parse_wal
from molrec_raw.record.violations import Violation
from molrec_raw.zarr import Group, Store
from molrec_raw.zarr.remote import is_url, url_name
from molrec_raw.zarr.store import PathLike

__all__ = ["read_metrics", "read_metrics_group", "read_wal_file", "check_metrics_group", "is_host_wal"]

_WATERMARK_RULE = "README#decision-16"


def read_metrics(path: RecordSource, *, lenient: bool = False) -> Dict[str, Series]:
    """Series key → ``Series`` for a record (``*.mrec`` directory or ``*.mrec.zip``, a URL of
    one, or an open store) or a local host WAL file (``*.mlp.jsonl``, any other ``*.jsonl``
    too).  ``lenient`` (host WAL files only) skips complete lines that are not well-formed
    events, with a warning, instead of refusing."""
    if is_url(path) and url_name(str(path)).lower().endswith(".jsonl"):
        raise UnsupportedFeatureError("a host metrics WAL is read from a local path; a URL must name a record")
    if is_host_wal(path):
        return read_wal_file(Path(path), lenient=lenient)  # type: ignore[arg-type]  # a local path
    if lenient:
        raise InvalidValueError("lenient reading is for host WAL files only; a record's WAL is never "
                                "read past a bad line (README decision 9)")
    root = open_record(path)  # kept open: wall times are read lazily
    group = root.get("metrics")
    if not isinstance(group, Group):
        return {}
    return read_metrics_group(group)


def is_host_wal(path: RecordSource) -> bool:
    """Whether ``path`` names a local host WAL file (``*.jsonl``, e.g. ``*.mlp.jsonl``) rather
    than a record: the one test of every reader that takes both."""
    return not isinstance(path, Store) and not is_url(path) and Path(path).name.lower().endswith(".jsonl")


def read_wal_file(path: PathLike, *, lenient: bool = False) -> Dict[str, Series]:
    """Fold every complete line of a WAL file (host surface: the WAL is always authoritative)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise StoreError(f"{path}: cannot read the metrics WAL: {exc.strerror or exc}", store=str(path)) from None
    parsed = parse_wal(complete_part(data), source=str(path), lenient=lenient)
    if parsed.skipped:
        line, offset, reason = parsed.skipped[0]
        warnings.warn(f"{path}: skipped {len(parsed.skipped)} bad line(s); first at line {line} "
                      f"(byte offset {offset}): {reason}", stacklevel=3)
    return {key: fold(series) for key, series in parsed.series.items()}


def _wal_label(group: Group) -> str:
    return f"{group.store.describe()}/{group.path}/{dense.WAL_NAME}"


def read_metrics_group(group: Group, *, problems: Optional[List[Violation]] = None) -> Dict[str, Series]:
    """The series of a record's ``metrics/`` group (see the module docstring).

    ``problems``, when given, collects what a reader tolerates but ``validate`` reports
    (a WAL shorter than the watermark)."""
    catalog = dense.read_catalog(group.attrs.asdict(), node=group.name)
    series = dense.read_dense(group, catalog)
    store = group.store
    key = f"{group.path}/{dense.WAL_NAME}"
    source = _wal_label(group)
    if catalog.wal is None or not series:
        if series:
            return series  # no watermark: the dense series are the whole record
        lines, start = 0, 0  # no dense series: the WAL alone
    else:
        lines, start = catalog.wal
    size = store.size(key)
    if size is None or size < start:
        if problems is not None:
            problems.append(Violation(
                _WATERMARK_RULE, f"/{key}",
                f"metrics.jsonl holds {size or 0} bytes, fewer than the watermark's {start}: the WAL was "
                "truncated outside the writer; the dense series are returned without a tail"))
        return series
    if start:
        data = store.get_range(key, start - 1) or b""
        if data[:1] != b"\n":
            raise CorruptDataError(f"{source}: the watermark byte offset {start} does not end a line; the "
                                   "WAL was changed outside the writer", store=store.describe(), key=key,
                                   rule=_WATERMARK_RULE)
        data = data[1:]
    else:
        data = store.get(key) or b""
    parsed = parse_wal(complete_part(data), source=source, first_line=lines + 1, first_offset=start)
    for name, tail in parsed.series.items():
        series[name] = merge(series.get(name), tail, where=source)
    return series


def check_metrics_group(group: Group) -> List[Violation]:
    """Every problem of a ``metrics/`` group, for ``validate``: what the reader refuses (the
    first such error) and what it tolerates (a WAL shorter than the watermark, a watermark
    whose line count disagrees with the file)."""
    problems: List[Violation] = []
    try:
        for series in read_metrics_group(group, problems=problems).values():
            series.wall_time  # decode the lazy wall times too: validate reads every byte
        catalog = dense.read_catalog(group.attrs.asdict(), node=group.name)
        if catalog.wal is not None:
            lines, start = catalog.wal
            key = f"{group.path}/{dense.WAL_NAME}"
            size = group.store.size(key)
            if size is not None and size >= start:
                found = (group.store.get_range(key, 0, start) or b"").count(b"\n")
                if found != lines:
                    problems.append(Violation(_WATERMARK_RULE, f"/{key}",
                                              f"the watermark says {lines} lines in the first {start} bytes, "
                                              f"the WAL has {found}"))
    except MolrecError as exc:
        problems.append(Violation(exc.rule or type(exc).__name__, exc.node or group.name, exc.message))
    return problems
