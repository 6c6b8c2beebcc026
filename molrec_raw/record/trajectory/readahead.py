"""Read-ahead for in-order reads (spec-notes/trajectory.md "Read-ahead"): the next piece of
an in-order read is read and decoded on a thread while the caller works on the current one
(zstandard, crc32c, ``preadv`` and numpy's copies release the GIL, so the two overlap).

One thread per piece, started when the piece is asked for and ended when it is read: an
iteration holds at most one piece ahead (memory: one batch more than without read-ahead), and
an iteration abandoned mid-way leaves no thread behind once that piece is done — its owner
waits for it (:meth:`ReadAhead.wait`) when the iteration is closed, garbage-collected or
fails, and before the reader changes its state (a refresh) or closes.  A piece that fails
keeps its error and raises it, the same exception, when the caller reaches that piece: a read
refused for damage is refused at the frame that needs it, not earlier.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Generic, Optional, Set, TypeVar, cast

__all__ = ["ReadAhead", "Pending"]

T = TypeVar("T")


class ReadAhead(Generic[T]):
    """``read()`` running on a thread of its own from now; :meth:`result` waits for it and
    returns its value or raises its error."""

    def __init__(self, read: Callable[[], T], pending: Optional["Pending"] = None) -> None:
        self._read: Optional[Callable[[], T]] = read
        self._value: Optional[T] = None
        self._error: Optional[BaseException] = None
        self._pending = pending
        if pending is not None:
            pending.add(self)
        self._thread = threading.Thread(target=self._run, name="molrec-read-ahead")
        self._thread.start()

    def _run(self) -> None:
        read, self._read = self._read, None
        try:
            assert read is not None
            self._value = read()
        except BaseException as exc:  # kept for the caller, raised where the piece is needed
            self._error = exc
        finally:
            if self._pending is not None:
                self._pending.discard(self)

    def result(self) -> T:
        """The piece read (waiting for it), or its error raised."""
        self.wait(keep=True)
        error, self._error = self._error, None
        value, self._value = self._value, None
        if error is not None:
            raise error
        return cast(T, value)  # None only when read() returned None

    def wait(self, keep: bool = False) -> None:
        """Wait until the thread is done (its piece dropped unless ``keep``)."""
        self._thread.join()
        if not keep:
            self._value = self._error = None


class Pending:
    """The read-aheads running over one reader state (each leaves when its thread ends):
    :meth:`wait` lets them finish before the state changes or closes (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._members: Set[ReadAhead[Any]] = set()

    def add(self, ahead: "ReadAhead[Any]") -> None:
        with self._lock:
            self._members.add(ahead)

    def discard(self, ahead: "ReadAhead[Any]") -> None:
        with self._lock:
            self._members.discard(ahead)

    def wait(self) -> None:
        """Wait for every read-ahead running (their pieces stay for their iterations)."""
        with self._lock:
            members = list(self._members)
        for ahead in members:
            ahead._thread.join()
