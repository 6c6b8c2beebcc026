"""Ranged reads for a read engine: many byte ranges of a value in as few reads as possible.

A :class:`RangeReader` answers ``read(key, ranges)`` — the bytes of each ``(start, length)``
range of one stored value, or None when the value is missing — for a reader that asks for
many ranges at a time (the inner chunks of a shard that a batch of frames needs):

- :class:`FileRanges` (a :class:`~molrec_raw.zarr.store.DirectoryStore`) keeps the files it
  reads open, at most ``max_open`` descriptors, least recently used closed first, and reads
  ranges that lie side by side (holes up to :data:`LOCAL_GAP` bytes) with one ``pread`` per
  run; each range is a view of its run's buffer, not a copy.  Descriptors pin the files the
  reader opened: a value replaced by rename is still read as it was when opened, so an
  owner drops the reader (:meth:`close`) whenever it adopts a newer state of the store.
- :class:`SnapshotRanges` (a :class:`~molrec_raw.zarr.snapshot.SnapshotView`) reads the base
  store's ranges through the base's own reader and lays the saved index page of a tail
  shard over them, cut at its saved size — what ``SnapshotView.get_range`` shows, in bulk.
- :class:`StoreRanges` (any other store: a zip, HTTP, fsspec) hands every range to
  ``Store.get_ranges`` once, where remote stores merge neighbours into one request and run
  the rest concurrently.

:func:`range_reader` picks the one a store serves.  Nothing here caches bytes.
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any, List, Optional, Sequence, Tuple

from molrec_raw.errors import StoreError
from molrec_raw.zarr.ranges import coalesce
from molrec_raw.zarr.store import DirectoryStore, Store, _slice_range

__all__ = ["RangeReader", "StoreRanges", "FileRanges", "SnapshotRanges", "range_reader",
           "DEFAULT_MAX_OPEN", "LOCAL_GAP"]

Ranges = Sequence[Tuple[int, int]]
DEFAULT_MAX_OPEN = 64  # descriptors one reader keeps open (a few columns' shards; the default ulimit is 1024)
LOCAL_GAP = 4096  # a hole of at most this many bytes is read through: one pread instead of two
_MAX_RUN = 64 << 20  # one pread never asks for more than this (unless one range does)
_IOV_BATCH = 512  # buffers per preadv (IOV_MAX is 1024 on Linux)


class RangeReader:
    """Reads many ranges of one stored value at a time (see the module docstring)."""

    def read(self, key: str, ranges: Ranges) -> Optional[List[Any]]:
        """The bytes of every ``(start, length)`` range of ``key`` (a buffer each, shorter
        where the value ends first), in order; None when the value is missing."""
        raise NotImplementedError

    def size(self, key: str) -> Optional[int]:
        """The size of the value in bytes, None when it is missing."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the reader holds (open descriptors)."""


class StoreRanges(RangeReader):
    """Every range through ``store.get_ranges`` (one call per value: a remote store merges
    neighbouring ranges into one request and fetches the rest concurrently); a single
    range through ``store.get_range``."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def read(self, key: str, ranges: Ranges) -> Optional[List[Any]]:
        if not ranges:
            return [] if self.store.size(key) is not None else None
        if len(ranges) == 1:
            one = self.store.get_range(key, ranges[0][0], ranges[0][1])
            return None if one is None else [one]
        found = self.store.get_ranges(key, list(ranges))
        if any(part is None for part in found):
            return None
        return list(found)

    def size(self, key: str) -> Optional[int]:
        return self.store.size(key)


class FileRanges(RangeReader):
    """The files of a directory store read by ``pread`` through kept-open descriptors (at
    most ``max_open``; see the module docstring).  Thread-safe: a descriptor is used and
    closed under one lock, so no read ever meets a descriptor number closed and reused."""

    def __init__(self, store: DirectoryStore, max_open: int = DEFAULT_MAX_OPEN, gap: int = LOCAL_GAP) -> None:
        self.store, self.max_open, self.gap = store, max(1, int(max_open)), gap
        self._open: "OrderedDict[str, int]" = OrderedDict()  # key -> descriptor
        self._lock = threading.Lock()
        self.preads = 0  # reads issued (tests, benchmarks)

    def _descriptor(self, key: str) -> Optional[int]:
        """The descriptor of ``key``, opened when not held (the least recently used closed
        beyond ``max_open``); None when the file is missing.  Called under the lock."""
        held = self._open.get(key)
        if held is not None:
            self._open.move_to_end(key)
            return held
        fd = self.store.open_for_read(key)
        if fd is None:
            return None
        self._open[key] = fd
        while len(self._open) > self.max_open:
            _, old = self._open.popitem(last=False)
            os.close(old)
        return fd

    def read(self, key: str, ranges: Ranges) -> Optional[List[Any]]:
        with self._lock:
            try:
                fd = self._descriptor(key)
                if fd is None:
                    return None
                if len(ranges) == 1 and 0 <= ranges[0][0] and 0 <= ranges[0][1] <= _MAX_RUN:
                    self.preads += 1  # one range: a read past the end comes back short, as asked
                    return [os.pread(fd, ranges[0][1], ranges[0][0])]
                size = os.fstat(fd).st_size  # the file grows while a writer appends: its size now
                bounds = [_slice_range(size, start, length) for start, length in ranges]
                out: List[Any] = [b""] * len(bounds)
                for start, end, members in coalesce([(lo, hi - lo) for lo, hi in bounds], self.gap, _MAX_RUN):
                    if end <= start:
                        continue
                    data = os.pread(fd, end - start, start)
                    self.preads += 1
                    if len(members) == 1 and bounds[members[0]] == (start, end):
                        out[members[0]] = data
                        continue
                    view = memoryview(data)
                    for i in members:
                        lo, hi = bounds[i]
                        out[i] = view[lo - start:hi - start]
                return out
            except OSError as exc:
                raise StoreError(f"cannot read: {exc.strerror or exc}", store=self.store.describe(), key=key) from None

    def read_into(self, key: str, runs: Sequence[Tuple[int, List[Any]]]) -> Optional[List[int]]:
        """Each run ``(offset, buffers)`` read straight into its writable buffers, in order,
        with one ``preadv`` (no copy: the inner chunks of a plain-bytes chain land in the
        arrays they belong to); the bytes read per run (short at the end of the file).  None
        when the file is missing."""
        with self._lock:
            try:
                fd = self._descriptor(key)
                if fd is None:
                    return None
                out = []
                for offset, buffers in runs:
                    done = 0
                    for first in range(0, len(buffers), _IOV_BATCH):
                        part = buffers[first:first + _IOV_BATCH]
                        want = sum(memoryview(b).nbytes for b in part)
                        got = os.preadv(fd, part, offset + done)
                        self.preads += 1
                        done += got
                        if got < want:
                            break
                    out.append(done)
                return out
            except OSError as exc:
                raise StoreError(f"cannot read: {exc.strerror or exc}", store=self.store.describe(), key=key) from None

    def size(self, key: str) -> Optional[int]:
        with self._lock:
            fd = self._descriptor(key)
            return None if fd is None else os.fstat(fd).st_size

    def close(self) -> None:
        with self._lock:
            held, self._open = list(self._open.values()), OrderedDict()
        for fd in held:
            os.close(fd)


class SnapshotRanges(RangeReader):
    """A :class:`~molrec_raw.zarr.snapshot.SnapshotView`'s values in bulk: the base store's
    bytes through ``base`` (its own range reader), saved zarr.json files from the snapshot,
    a tail shard cut to its saved size with its saved index page laid over it."""

    def __init__(self, view: Any, base: RangeReader) -> None:
        self.view, self.base = view, base

    def read(self, key: str, ranges: Ranges) -> Optional[List[Any]]:
        snapshot = self.view.snapshot
        if key in snapshot.metadata or self.view._hidden(key):
            found = [self.view.get_range(key, start, length) for start, length in ranges]
            return None if any(part is None for part in found) else found
        shard = snapshot.shards.get(key)
        if shard is None:
            return self.base.read(key, ranges)
        size, page = shard
        bounds = [_slice_range(size, start, length) for start, length in ranges]
        got = self.base.read(key, [(lo, hi - lo) for lo, hi in bounds])
        if got is None:
            return None
        out: List[Any] = []
        for (lo, hi), data in zip(bounds, got):
            if lo < len(page):  # the saved page over whatever the live page holds now
                data = bytearray(data)
                overlap = page[lo:min(hi, len(page))]
                data[0:len(overlap)] = overlap
            out.append(data)
        return out

    def size(self, key: str) -> Optional[int]:
        found: Optional[int] = self.view.size(key)
        return found

    def close(self) -> None:
        self.base.close()


def _reads_files(kind: type) -> bool:
    """Does a directory store class read values as the files they are (no subclass changes
    how a value is read: such a store is read through its own methods)?"""
    return all(getattr(kind, name) is getattr(DirectoryStore, name)
               for name in ("get", "get_range", "get_ranges", "size", "open_for_read"))


if not hasattr(os, "preadv"):  # pragma: no cover - Windows, macOS before Python 3.x: read and copy
    del FileRanges.read_into


def range_reader(store: Store, max_open: int = DEFAULT_MAX_OPEN) -> RangeReader:
    """The range reader ``store`` serves: :class:`FileRanges` for a directory store whose
    reads are its files', :class:`SnapshotRanges` over a snapshot view, else
    :class:`StoreRanges`."""
    if isinstance(store, DirectoryStore) and _reads_files(type(store)):
        return FileRanges(store, max_open)
    snapshot = getattr(store, "snapshot", None)
    base = getattr(store, "base", None)
    if snapshot is not None and isinstance(base, Store):
        return SnapshotRanges(store, range_reader(base, max_open))
    return StoreRanges(store)
