"""Planning ranged reads over a latency-bound source: byte ranges that touch (or nearly
touch) are merged into one request, and the merged requests may run concurrently.

Used by every remote range source (``HttpFile``, ``HttpStore``, ``FsspecFile``,
``FsspecStore``) so that reading the inner chunks of a shard that lie side by side — the
trajectory writer lands them in order — costs one round trip, not one per chunk.
"""
from __future__ import annotations

from typing import Any, Callable, List, Sequence, Tuple

__all__ = ["coalesce", "read_coalesced", "split_spans", "DEFAULT_GAP", "DEFAULT_MAX_SPAN"]

DEFAULT_GAP = 16 * 1024  # bytes of a hole worth reading to save a round trip
DEFAULT_MAX_SPAN = 64 * 1024 * 1024  # one request never asks for more than this (unless one range does)


def coalesce(ranges: Sequence[Tuple[int, int]], gap: int = DEFAULT_GAP,
             max_span: int = DEFAULT_MAX_SPAN) -> List[Tuple[int, int, List[int]]]:
    """``(start, end, members)`` spans covering ``(offset, length)`` ranges: in offset order,
    a range joins the span before it when it starts at most ``gap`` bytes past the span's end
    and the span stays within ``max_span`` bytes.  ``members`` index into ``ranges``."""
    order = sorted(range(len(ranges)), key=lambda i: ranges[i][0])
    spans: List[Tuple[int, int, List[int]]] = []
    for i in order:
        offset, length = ranges[i]
        end = offset + length
        if spans:
            start, last_end, members = spans[-1]
            if offset <= last_end + gap and max(end, last_end) - start <= max_span:
                spans[-1] = (start, max(end, last_end), members + [i])
                continue
        spans.append((offset, end, [i]))
    return spans


def read_coalesced(ranges: Sequence[Tuple[int, int]], fetch: Callable[[int, int], bytes], *,
                   gap: int = DEFAULT_GAP, max_span: int = DEFAULT_MAX_SPAN,
                   each: Callable[..., Any] = map) -> List[bytes]:
    """The bytes of every ``(offset, length)`` range, in order, fetched as merged spans with
    ``fetch(offset, length)``; ``each`` maps over the spans (a thread pool's ``map`` runs
    them concurrently).  A span shorter than asked (the end of the object) leaves its later
    members short; callers check lengths."""
    spans = coalesce(ranges, gap, max_span)
    datas = list(each(lambda span: fetch(span[0], span[1] - span[0]), spans))
    return split_spans(ranges, spans, datas)


def split_spans(ranges: Sequence[Tuple[int, int]], spans: Sequence[Tuple[int, int, List[int]]],
                datas: Sequence[bytes]) -> List[bytes]:
    """Cut the fetched bytes of each span back into the ranges it covers (in range order)."""
    out: List[bytes] = [b""] * len(ranges)
    for (start, end, members), data in zip(spans, datas):
        if len(members) == 1 and ranges[members[0]] == (start, end - start):
            out[members[0]] = data
            continue
        view = memoryview(data)
        for i in members:
            offset, length = ranges[i]
            out[i] = bytes(view[offset - start:offset - start + length])
    return out
