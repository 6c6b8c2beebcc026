"""Following a metrics WAL while a run logs to it (documents §5.4): ``follow_metrics``.

The WAL only grows by whole lines (§5.3), so a follower keeps a byte offset at a line
boundary and, at each poll, reads the complete lines past it — an unterminated last
fragment waits for its newline; a zero-filled tail (a power cut) is not a line
(``complete_part``).  Lines are checked by the one WAL parser (``parse_wal``: a complete
line that is not a well-formed event is refused, naming its line and byte offset, as
``read_metrics`` does) and handed out one event at a time, in log order.  A file found
shorter than the offset, or whose byte before the offset no longer ends a line, was
truncated or rewritten outside its writer: it is followed from its new end.

Sources: a record (``*.mrec`` directory; its ``metrics/metrics.jsonl``, which a record
writer keeps whole when it densifies) or a host WAL file (``*.mlp.jsonl``, which may not
exist yet).  A record stops being followed when its status says the run is over
(record/live.py); a host keeps its lifecycle outside the WAL (documents §1.4), so only
``timeout`` / ``stop_after`` end that.  An archive or a URL cannot change: nothing new.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import orjson

from molrec_raw.errors import StoreError, UnsupportedFeatureError
from molrec_raw.record import live
from molrec_raw.record.doors import RecordSource, open_record
from molrec_raw.record.metrics.dense import WAL_NAME
from molrec_raw.record.metrics.wal import NONFINITE_TEXT, complete_part, parse_wal
from molrec_raw.zarr import Store
from molrec_raw.zarr.remote import is_url, url_name

__all__ = ["MetricEvent", "follow_metrics"]

_PIECE = 1 << 24  # bytes read at once when looking for line boundaries


@dataclass(frozen=True)
class MetricEvent:
    """One logged event (documents §4.1): ``value`` as float64 (non-finite strings as IEEE
    values), ``step`` None when the event has none, ``offset`` the byte offset of its line."""

    key: str
    value: float
    step: Optional[int]
    wall_time: str
    type: str
    tags: Optional[Dict[str, Any]]
    offset: int


class _Wal:
    """Size and ranged reads of a WAL: a local file (read by name at every call, so a
    replaced or newly created file is seen) or a key of a record's store."""

    def __init__(self, label: str, size: Callable[[], int], read: Callable[[int, int], bytes]) -> None:
        self.label, self.size, self.read = label, size, read

    @classmethod
    def of_file(cls, path: Path) -> "_Wal":
        def size() -> int:
            try:
                return os.stat(path).st_size
            except FileNotFoundError:
                return 0
            except OSError as exc:
                raise StoreError(f"{path}: cannot read the metrics WAL: {exc.strerror or exc}", store=str(path)) from None

        def read(start: int, end: int) -> bytes:
            try:
                with open(path, "rb") as fh:
                    return os.pread(fh.fileno(), end - start, start)
            except FileNotFoundError:
                return b""
            except OSError as exc:
                raise StoreError(f"{path}: cannot read the metrics WAL: {exc.strerror or exc}", store=str(path)) from None
        return cls(str(path), size, read)

    @classmethod
    def of_store(cls, store: Store, key: str) -> "_Wal":
        return cls(f"{store.describe()}/{key}", lambda: store.size(key) or 0,
                   lambda start, end: store.get_range(key, start, end - start) or b"")

    def line_start(self, size: int) -> int:
        """The offset just past the last newline before ``size`` (0 when there is none)."""
        end = size
        while end > 0:
            start = max(0, end - _PIECE)
            found = self.read(start, end).rfind(b"\n")
            if found >= 0:
                return start + found + 1
            end = start
        return 0

    def lines_before(self, offset: int) -> int:
        count, start = 0, 0
        while start < offset:
            piece = self.read(start, min(offset, start + _PIECE))
            if not piece:
                break
            count += piece.count(b"\n")
            start += len(piece)
        return count


def _events(data: bytes, offset: int) -> List[MetricEvent]:
    """The events of complete, already checked lines starting at byte ``offset``."""
    out: List[MetricEvent] = []
    for line in data.split(b"\n")[:-1]:
        here, offset = offset, offset + len(line) + 1
        if not line.strip():
            continue
        obj = orjson.loads(line)
        value = obj["v"]
        out.append(MetricEvent(obj["k"], float(NONFINITE_TEXT[value] if isinstance(value, str) else value),
                               obj.get("s"), obj["w"], obj["t"], obj.get("tags"), here))
    return out


def follow_metrics(path: RecordSource, poll: float = 0.5, timeout: Optional[float] = None, *,
                   from_start: bool = False, stop_after: Optional[float] = None) -> Iterator[MetricEvent]:
    """Each event as it is logged to ``path``'s WAL (a record or a host ``*.mlp.jsonl``;
    see the module docstring), polling every ``poll`` seconds; ``from_start``: the events
    already logged first.  Stops when the record's run is over, after ``timeout`` seconds
    without a new event, or ``stop_after`` seconds in all."""
    live.check_follow_args(poll, timeout, stop_after)
    finished: Callable[[], bool] = lambda: False  # noqa: E731
    can_change = True
    if is_url(path) and url_name(str(path)).lower().endswith(".jsonl"):
        raise UnsupportedFeatureError("a host metrics WAL is followed from a local path; a URL must name a record")
    local = None if isinstance(path, Store) or is_url(path) else Path(path)
    if local is not None and (local.name.lower().endswith(".jsonl") or
                              (local.is_file() and not local.name.lower().endswith(".zip"))):
        wal = _Wal.of_file(local)
    else:
        root = open_record(path)
        wal = _Wal.of_store(root.store, f"metrics/{WAL_NAME}")
        finished, can_change = live.finished_or_unreadable(root), not root.store.immutable
    offset = 0 if from_start else wal.line_start(wal.size())
    line = 1 + (0 if from_start else wal.lines_before(offset))

    def news() -> List[MetricEvent]:
        nonlocal offset, line
        size = wal.size()
        if size < offset or (offset and size > offset and wal.read(offset - 1, offset) != b"\n"):
            offset = wal.line_start(size)  # truncated or rewritten outside its writer: from the new end
            line = 1 + wal.lines_before(offset)
        if size == offset:
            return []
        data = complete_part(wal.read(offset, size))
        if not data:
            return []
        parse_wal(data, source=wal.label, first_line=line, first_offset=offset)  # refuses a bad line
        events = _events(data, offset)
        offset += len(data)
        line += data.count(b"\n")
        return events
    return live.follow_loop(news, finished, poll=poll, timeout=timeout, stop_after=stop_after,
                            can_change=can_change)
