"""The read engine's cache of decoded inner chunks (trajectory §9, spec-notes/trajectory.md
"Read engine").

Entries are whole inner chunks along the first axis, keyed by (array path, chunk), least
recently used first out within one byte budget per reader.  Each entry knows how many of
its leading rows are proven (``valid``): a chunk decoded while rows ``[0, n)`` of its array
were committed serves those rows only — a chunk cut by the committed length holds fill
values or an uncommitted tail past it — and a read that needs more reads the chunk again.
Cached arrays are read-only (the engine hands out views of them).  A chunk larger than a
quarter of the budget is not kept.  :meth:`retain` is what a refresh does to it: the read
engine keeps only rows no recovery can roll back (``engine.py``).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

__all__ = ["ChunkCache", "DEFAULT_CACHE_BYTES"]

# The default budget of decoded chunks per reader.  Memory stays flat on records of any
# size: iteration holds a run of chunks per column outside the cache (engine.py), random
# reads keep at most this much.  64 MiB holds 4,000 inner chunks of 16 KiB (a 64-atom
# trajectory's x, y, z over ~40,000 frames) or 800 frames of 10,000 atoms.
DEFAULT_CACHE_BYTES = 64 * 1024 * 1024
Key = Tuple[str, int]


class ChunkCache:
    """Decoded inner chunks within ``budget`` bytes (see the module docstring).  Thread-safe."""

    def __init__(self, budget: int = DEFAULT_CACHE_BYTES) -> None:
        self.budget = max(0, int(budget))
        self._chunks: "OrderedDict[Key, Tuple[Any, int]]" = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def fits(self, nbytes: int) -> bool:
        """Would a chunk of ``nbytes`` be kept (at most a quarter of the budget)?"""
        return 0 < nbytes <= self.budget // 4

    def get(self, path: str, chunk: int, rows: int) -> Optional[np.ndarray]:
        """Chunk ``chunk`` of array ``path`` when its first ``rows`` rows are proven (a
        chunk kept as byte planes is unshuffled here, once, and kept so)."""
        key = (path, chunk)
        with self._lock:
            found = self._chunks.get(key)
            if found is None or found[1] < rows:
                return None
            self._chunks.move_to_end(key)
            data = found[0]
            if not isinstance(data, np.ndarray):
                data = data.chunk()
                data.flags.writeable = False
                self._chunks[key] = (data, found[1])
            return data  # type: ignore[no-any-return]

    def get_many(self, wanted: List[Tuple[str, int, int]]) -> List[Any]:
        """:meth:`get` of each ``(path, chunk, rows)``, under one lock (a frame's chunks),
        each as it is kept: a read-only array or ``zarr.codecs.quick.Planes``."""
        out: List[Any] = []
        chunks = self._chunks
        with self._lock:
            for path, chunk, rows in wanted:
                key = (path, chunk)
                found = chunks.get(key)
                if found is None or found[1] < rows:
                    out.append(None)
                else:
                    chunks.move_to_end(key)
                    out.append(found[0])
        return out

    def put(self, path: str, chunk: int, data: Any, valid: int) -> Any:
        """Keep ``data`` (made read-only; or ``zarr.codecs.quick.Planes``, unshuffled when
        :meth:`get` first asks for it) as chunk ``chunk`` of ``path`` with its first ``valid``
        rows proven; evicts the least recently used beyond the budget.  Returns ``data``."""
        if isinstance(data, np.ndarray):
            data.flags.writeable = False
        if not self.fits(data.nbytes):
            return data
        key = (path, chunk)
        with self._lock:
            old = self._chunks.pop(key, None)
            if old is not None:
                self._bytes -= old[0].nbytes
            self._chunks[key] = (data, valid)
            self._bytes += data.nbytes
            while self._bytes > self.budget and self._chunks:
                _, (evicted, _) = self._chunks.popitem(last=False)
                self._bytes -= evicted.nbytes
        return data

    def contains(self, path: str, chunk: int) -> bool:
        """Is chunk ``chunk`` of ``path`` held (whatever its proven rows)?"""
        return (path, chunk) in self._chunks

    def retain(self, trusted: Dict[str, Tuple[int, int]]) -> None:
        """Keep the chunks of the arrays named — path -> (rows per inner chunk, leading rows
        still trusted) — each cut to the rows it still proves; drop every other chunk."""
        with self._lock:
            for key, (data, valid) in list(self._chunks.items()):
                found = trusted.get(key[0])
                keep = 0 if found is None else min(valid, found[1] - key[1] * found[0])
                if keep <= 0:
                    del self._chunks[key]
                    self._bytes -= data.nbytes
                elif keep != valid:
                    self._chunks[key] = (data, keep)

    def keys(self) -> Iterator[Key]:
        """The (path, chunk) keys held, least recently used first."""
        with self._lock:
            return iter(list(self._chunks))

    def __len__(self) -> int:
        return len(self._chunks)

    @property
    def nbytes(self) -> int:
        """Bytes of the chunks held."""
        return self._bytes
