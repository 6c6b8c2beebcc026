"""Threads for codec work over many chunks (zarr-v3-subset §5): :class:`CodecThreads`.

zstd, crc32c and numpy's copies release the GIL, so the chunks of one read or write can be
coded on several threads at once.  The work is split into one contiguous run of chunks per
thread; the calling thread codes the first run itself and helper threads the others, and
the call returns when every run is done — so bytes and chunk order are those of one thread.

The helpers belong to an object the caller controls (an opened hierarchy's nodes share one
:class:`CodecThreads`; a reader may keep its own): started when work comes, stopped by
:meth:`CodecThreads.close` or after a second without work, so an owner never closed leaves
no thread behind.  No module state.  Handing work to a running helper costs tens of
microseconds; starting a ``ThreadPoolExecutor`` per call costs several times that, which a
read of a few MiB notices (spec-notes/zarr.md, "Threads for codec work").
"""
from __future__ import annotations

import os
import queue
import threading
from typing import Any, Callable, List, Optional, Sequence, Tuple, TypeVar

__all__ = ["CodecThreads", "HELPER_IDLE_SECONDS", "POOL_MIN_BYTES", "runs", "usable_threads"]

T = TypeVar("T")
R = TypeVar("R")

# Chunk bytes (decoded) from which a read or write is split over the threads of a
# :class:`CodecThreads`: below it the work of one run is smaller than what handing it over
# and waking a core costs (tens of microseconds, more on a busy machine).
POOL_MIN_BYTES = 1 << 20
# A helper thread given no work for this long exits (the next work starts one again: ~0.1 ms).
HELPER_IDLE_SECONDS = 1.0


def usable_threads(threads: int) -> int:
    """``threads`` capped by the machine's cores (``os.cpu_count()``), at least 1."""
    return max(1, min(int(threads), os.cpu_count() or 1))


def runs(count: int, parts: int) -> List[Tuple[int, int]]:
    """``count`` items as at most ``parts`` contiguous ``(start, stop)`` runs of near-equal size."""
    size = max(1, -(-count // max(1, parts)))
    return [(i, min(count, i + size)) for i in range(0, count, size)]


class CodecThreads:
    """Up to ``threads`` threads (capped by the machine's cores; 1 disables) for codec
    work: the caller's own and ``threads - 1`` helpers, started when work comes and gone
    after :data:`HELPER_IDLE_SECONDS` without any (so an owner never closed leaves no thread
    behind for long), or at :meth:`close`.  A caller whose run is done takes waiting runs
    itself rather than wait for a helper to wake (a busy machine).  Thread-safe."""

    def __init__(self, threads: int) -> None:
        self.threads = usable_threads(threads)
        self._tasks: "queue.SimpleQueue[Optional[_Task]]" = queue.SimpleQueue()
        self._helpers: List[threading.Thread] = []
        self._lock = threading.Lock()
        self.handed = 0  # runs handed to helpers so far (tests, benchmarks)

    @property
    def started(self) -> bool:
        """Are helper threads alive (tests: none after :meth:`close`)?"""
        with self._lock:
            return any(helper.is_alive() for helper in self._helpers)

    def _serve(self) -> None:
        """A helper: run tasks until told to stop, or idle for HELPER_IDLE_SECONDS."""
        me = threading.current_thread()
        while True:
            try:
                task = self._tasks.get(timeout=HELPER_IDLE_SECONDS)
            except queue.Empty:
                with self._lock:  # leave only if no task came meanwhile (map_runs checks under the lock)
                    if self._tasks.empty():
                        if me in self._helpers:
                            self._helpers.remove(me)
                        return
                continue
            if task is None:
                return
            task.run()

    def map_runs(self, work: Callable[[Sequence[T]], R], items: Sequence[T], threads: int) -> List[R]:
        """``work(run)`` of each of at most ``threads`` (and :attr:`threads`) contiguous runs
        of ``items``, the first on the calling thread, the others on the helpers (or on the
        caller, when it gets to them first); the results in order.  Returns only when every
        run has finished — so no run still writes when an error is raised — then raises the
        first run's error, in order."""
        spans = runs(len(items), min(threads, self.threads))
        if len(spans) < 2:
            return [work(items)] if len(items) else []
        tasks = [_Task(work, items[lo:hi]) for lo, hi in spans[1:]]
        for task in tasks:
            self._tasks.put(task)
        with self._lock:
            self.handed += len(tasks)
            self._helpers = [helper for helper in self._helpers if helper.is_alive()]
            while len(self._helpers) < min(len(tasks), self.threads - 1):
                helper = threading.Thread(target=self._serve, name="molrec-codec", daemon=True)
                helper.start()
                self._helpers.append(helper)
        head = _Task(work, items[spans[0][0]:spans[0][1]])
        head.run()
        for task in tasks:  # runs no helper has taken yet: the caller's
            if task.done.is_set():
                continue
            try:
                waiting = self._tasks.get_nowait()
            except queue.Empty:
                break
            if waiting is None:  # a stop meant for a helper: hand it back
                self._tasks.put(None)
                break
            waiting.run()
        results: List[R] = []
        first = head.error
        for task in tasks:
            task.done.wait()
            if first is None and task.error is not None:
                first = task.error
            results.append(task.result)
        if first is not None:
            raise first
        return [head.result] + results

    def close(self) -> None:
        """Stop the helper threads (each finishes the run in hand); work given later starts
        them anew."""
        with self._lock:
            helpers, self._helpers = self._helpers, []
            for _ in helpers:
                self._tasks.put(None)
        for helper in helpers:
            helper.join()

    def __enter__(self) -> "CodecThreads":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Task:
    """One run of :meth:`CodecThreads.map_runs`: its result or error, and whether it is done."""

    __slots__ = ("work", "items", "result", "error", "done")

    def __init__(self, work: Callable[[Any], Any], items: Any) -> None:
        self.work, self.items = work, items
        self.result: Any = None
        self.error: Optional[BaseException] = None
        self.done = threading.Event()

    def run(self) -> None:
        try:
            self.result = self.work(self.items)
        except BaseException as exc:  # noqa: B902 - handed to the caller of map_runs
            self.error = exc
        finally:
            self.done.set()
