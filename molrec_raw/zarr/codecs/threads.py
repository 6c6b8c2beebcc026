"""Threads for codec work over many chunks (zarr-v3-subset §5): :class:`CodecThreads`.

zstd, crc32c and numpy's copies release the GIL, so the chunks of one read or write can be
coded on several threads at once.  The work is split into one contiguous run of chunks per
thread; the calling thread codes the first run itself and helper threads the others, and
the call returns when every run is done — so bytes and chunk order are those of one thread.

The helpers belong to an object the caller controls (an opened hierarchy's nodes share one
:class:`CodecThreads`; a reader may keep its own): started when first needed, stopped by
:meth:`CodecThreads.close` (or when the owner is garbage collected: an executor's idle
threads exit when it is).  No module state.  Handing work to a running helper costs tens of
microseconds; starting a ``ThreadPoolExecutor`` per call costs several times that, which a
read of a few MiB notices (spec-notes/zarr.md, "Threads for codec work").
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, List, Optional, Sequence, Tuple, TypeVar

__all__ = ["CodecThreads", "POOL_MIN_BYTES", "runs", "usable_threads"]

T = TypeVar("T")
R = TypeVar("R")

# Chunk bytes (decoded) from which a read or write is split over the threads of a
# :class:`CodecThreads`: below it the work of one run is smaller than what handing it over
# and waking a core costs (tens of microseconds, more on a busy machine).
POOL_MIN_BYTES = 1 << 20


def usable_threads(threads: int) -> int:
    """``threads`` capped by the machine's cores (``os.cpu_count()``), at least 1."""
    return max(1, min(int(threads), os.cpu_count() or 1))


def runs(count: int, parts: int) -> List[Tuple[int, int]]:
    """``count`` items as at most ``parts`` contiguous ``(start, stop)`` runs of near-equal size."""
    size = max(1, -(-count // max(1, parts)))
    return [(i, min(count, i + size)) for i in range(0, count, size)]


class CodecThreads:
    """Up to ``threads`` threads (capped by the machine's cores; 1 disables) for codec
    work: the caller's own and ``threads - 1`` helpers, started on first use.  Thread-safe;
    usable again after :meth:`close` (helpers start anew)."""

    def __init__(self, threads: int) -> None:
        self.threads = usable_threads(threads)
        self._pool: Optional[ThreadPoolExecutor] = None
        self._lock = threading.Lock()

    def _helpers(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.threads - 1, thread_name_prefix="molrec-codec")
            return self._pool

    @property
    def started(self) -> bool:
        """Are helper threads running (tests: none after :meth:`close`)?"""
        return self._pool is not None

    def map_runs(self, work: Callable[[Sequence[T]], R], items: Sequence[T], threads: int) -> List[R]:
        """``work(run)`` of each of at most ``threads`` (and :attr:`threads`) contiguous runs
        of ``items``, the first on the calling thread, the others on the helpers; the
        results in order.  Returns only when every run has finished — so no run is still
        writing when an error is raised — then raises the first run's error, in order."""
        spans = runs(len(items), min(threads, self.threads))
        if len(spans) < 2:
            return [work(items)] if len(items) else []
        pool = self._helpers()
        futures: List[Future[R]] = [pool.submit(work, items[lo:hi]) for lo, hi in spans[1:]]
        first: Optional[BaseException] = None
        try:
            head = work(items[spans[0][0]:spans[0][1]])
        except BaseException as exc:  # noqa: B902 - kept until the helpers are done
            first = exc
        results: List[R] = []
        for future in futures:
            try:
                results.append(future.result())
            except BaseException as exc:  # noqa: B902 - the first error in order wins
                first = exc if first is None else first
        if first is not None:
            raise first
        return [head] + results

    def close(self) -> None:
        """Stop the helper threads (waiting for work in hand); a later call starts them anew."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def __enter__(self) -> "CodecThreads":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
