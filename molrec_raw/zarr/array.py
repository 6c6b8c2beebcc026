"""Arrays: a selection becomes chunk keys, each chunk goes through the pipeline.

Reads fill a preallocated result in place, chunk by chunk (in a small thread
pool when there are several: zstd, crc32c and numpy copies release the GIL).
Writes encode whole chunks (read-modify-write for partial ones); a chunk that
is all fill value is deleted rather than stored (zarr-v3-subset#6).  Data
precede metadata: ``append`` lands every chunk before the new shape is
published in zarr.json by atomic replace.
"""
from __future__ import annotations

import itertools
import struct
from concurrent.futures import ThreadPoolExecutor
from math import prod
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

import numpy as np

from molrec_raw.errors import (
    CorruptDataError, InvalidValueError, MolrecError, ResourceLimitError,
)
from molrec_raw.zarr.codecs import ChunkSpec, CodecPipeline
from molrec_raw.zarr.indexing import finish, normalize_selection, project, selection_shape
from molrec_raw.zarr.metadata import ArrayMetadata
from molrec_raw.zarr.node import Node
from molrec_raw.zarr.store import Store

__all__ = ["Array", "ValueReader"]

_STRING_ITEM_BYTES = 16  # memory estimate per element of an object array of str
_MAX_MEMOS = 4096  # values whose derived facts (shard indexes) an array remembers


class ValueReader:
    """One stored value as the codecs read it: ``reader(start, length)`` (``(0, None)`` is
    the whole value), ``many(ranges)`` for several ranges in one store call (merged into one
    request by remote stores), ``size()``, and ``memo`` — a dict that outlives the read when
    the store is immutable (None otherwise), where the sharding codec keeps the shard's
    checked index."""

    __slots__ = ("store", "key", "memo")

    def __init__(self, store: Store, key: str, memo: Optional[Dict[str, Any]]) -> None:
        self.store, self.key, self.memo = store, key, memo

    def __call__(self, start: int, length: Optional[int]) -> Optional[bytes]:
        if start == 0 and length is None:
            return self.store.get(self.key)
        return self.store.get_range(self.key, start, length)

    def many(self, ranges: List[Tuple[int, int]]) -> List[Optional[bytes]]:
        return self.store.get_ranges(self.key, ranges)

    def size(self) -> Optional[int]:
        return self.store.size(self.key)


def _batched(pool: ThreadPoolExecutor, threads: int) -> Callable[[Callable[[Any], Any], Iterable[Any]], Iterator[Any]]:
    """A ``map`` over a shard's inner chunks that hands each thread one contiguous run of
    them: one task per thread instead of one per inner chunk keeps the GIL hand-offs (and
    the executor's per-task cost) out of the encode loop — per-chunk tasks measured no
    faster than one thread on 2 cores, runs 1.4-1.6x faster."""
    def each(fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Any]:
        work = list(items)
        if len(work) < 2:
            return map(fn, work)
        size = -(-len(work) // threads)
        runs = [work[i:i + size] for i in range(0, len(work), size)]
        return (result for run in pool.map(lambda part: [fn(item) for item in part], runs) for result in run)
    return each


class Array(Node):
    """A Zarr V3 array in a store; numpy basic indexing for reads and writes."""

    def __init__(self, store: Store, path: str, metadata: ArrayMetadata, *,
                 pipeline: Optional[CodecPipeline] = None, **options: Any) -> None:
        super().__init__(store, path, **options)
        self._prefix = f"{path}/" if path else ""
        self._pipeline = pipeline  # reused when the creator already built it
        self._metadata = metadata
        self._memos: Dict[str, Dict[str, Any]] = {}  # per stored value, immutable stores only
        if pipeline is None:
            self.metadata = metadata

    # -- description ------------------------------------------------------
    @property
    def metadata(self) -> ArrayMetadata:
        return self._metadata

    @metadata.setter
    def metadata(self, metadata: ArrayMetadata) -> None:
        old = self._metadata
        if self._pipeline is None or old.codecs != metadata.codecs or old.chunk_shape != metadata.chunk_shape:
            spec = ChunkSpec(metadata.chunk_shape, metadata.dtype, metadata.fill_value, self.limits)
            self._pipeline = CodecPipeline(metadata.codecs, spec)
        self._metadata = metadata
        self._memos.clear()

    @property
    def pipeline(self) -> CodecPipeline:
        assert self._pipeline is not None
        return self._pipeline

    @property
    def shape(self) -> Tuple[int, ...]:
        return self.metadata.shape

    @property
    def ndim(self) -> int:
        return len(self.metadata.shape)

    @property
    def size(self) -> int:
        return prod(self.metadata.shape)

    @property
    def dtype(self) -> np.dtype:
        return self.metadata.dtype.numpy

    @property
    def fill_value(self) -> Any:
        return self.metadata.fill_value

    @property
    def shards(self) -> Optional[Tuple[int, ...]]:
        """The shard shape when the array is sharded, else None (as zarr-python)."""
        return self.metadata.chunk_shape if self.pipeline.sharding is not None else None

    @property
    def chunks(self) -> Tuple[int, ...]:
        """The (inner) chunk shape: the unit of reading."""
        sharding = self.pipeline.sharding
        return sharding.chunk_shape if sharding is not None else self.metadata.chunk_shape

    def __repr__(self) -> str:
        return f"<Array {self.name} shape={self.shape} dtype={self.metadata.dtype.name}>"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    # -- helpers ------------------------------------------------------------
    def chunk_key(self, coords: Tuple[int, ...]) -> str:
        """The store key of the chunk (or shard) at grid ``coords``."""
        return self._prefix + self.metadata.chunk_key_encoding.encode(coords)

    def _check_chunk_size(self, metadata: ArrayMetadata) -> None:
        item = metadata.dtype.itemsize or _STRING_ITEM_BYTES
        size = prod(metadata.chunk_shape) * item
        if size > self.limits.max_chunk_bytes:
            raise self._context(ResourceLimitError(
                f"chunk of {size} bytes exceeds the limit of {self.limits.max_chunk_bytes} bytes"
            ))

    def _reader(self, key: str) -> Callable[[int, Optional[int]], Optional[bytes]]:
        store = self.store

        def read(start: int, length: Optional[int]) -> Optional[bytes]:
            if start == 0 and length is None:
                return store.get(key)
            return store.get_range(key, start, length)

        return read

    def _value_reader(self, key: str) -> "ValueReader":
        """The reader a read hands the codecs for one stored value.  On an immutable store
        (a zip, a remote record) it carries a memo kept for the array's lifetime, so a
        shard's index is fetched and checked once, not on every read."""
        memo = None
        if self.store.immutable:
            memo = self._memos.get(key)
            if memo is None:
                if len(self._memos) >= _MAX_MEMOS:
                    self._memos.clear()
                memo = self._memos[key] = {}
        return ValueReader(self.store, key, memo)

    def _run(self, work: Callable[[Any, Any], None], tasks: List[Any]) -> None:
        """Run ``work(task, each)`` for every chunk: several chunks share the thread pool;
        a single sharded chunk hands the pool down to its inner chunks instead."""
        parallel = self.threads > 1 and (len(tasks) > 1 or (tasks and self.pipeline.sharding is not None))
        if not parallel:
            for task in tasks:
                work(task, map)
            return
        with ThreadPoolExecutor(max_workers=self.threads) as pool:
            if len(tasks) == 1:
                work(tasks[0], _batched(pool, self.threads))
            else:
                for _ in pool.map(lambda task: work(task, map), tasks):
                    pass

    # -- reading ------------------------------------------------------------
    def __getitem__(self, selection: Any) -> Any:
        metadata = self.metadata
        dims = normalize_selection(selection, metadata.shape)
        out_shape = selection_shape(dims)
        item = metadata.dtype.itemsize or _STRING_ITEM_BYTES
        if prod(out_shape) * item > self.limits.max_read_bytes:
            raise self._context(ResourceLimitError(
                f"selection of shape {out_shape} exceeds the read limit of {self.limits.max_read_bytes} bytes"
            ))
        self._check_chunk_size(metadata)
        out = np.empty(out_shape, dtype=metadata.dtype.numpy)
        pipeline = self.pipeline

        def work(task: Tuple[Tuple[int, ...], Tuple[Any, ...], Tuple[slice, ...]], each: Any) -> None:
            coords, local, out_sel = task
            key = self.chunk_key(coords)
            try:
                pipeline.read_into(self._value_reader(key), local, out[out_sel + (Ellipsis,)], each)
            except MolrecError as exc:
                raise self._context(exc, key) from None
            except (ValueError, TypeError, IndexError, OverflowError, struct.error) as exc:
                raise self._context(CorruptDataError(f"cannot decode chunk: {exc}"), key) from None

        self._run(work, list(project(dims, metadata.chunk_shape)))
        result = finish(out, dims)
        return result[()] if result.ndim == 0 else result

    def check_written(self, length: int, *, strict: bool = False) -> None:
        """Refuse when rows ``[0, length)`` (leading axis) were not all landed in the
        positional shards holding them: a shard whose written-rows stamp is smaller than
        the rows asked of it has an index older than those rows, and reading them would
        return the fill value as if it were data (zarr-v3-subset#7, sharding.py).  A shard
        without a stamp is taken as written; ``strict`` refuses a missing shard too (a
        writer that stamps stores every shard it lands in, even an all-fill one)."""
        sharding = self.pipeline.sharding
        if sharding is None or sharding.index_location != "start" or self.ndim == 0 or length <= 0:
            return
        shard_rows = self.metadata.chunk_shape[0]
        start, size = sharding.stamp_range()
        rest = [range(g) for g in self.metadata.grid_shape[1:]]
        for k in range(-(-min(length, self.shape[0]) // shard_rows)):
            need = min(shard_rows, length - k * shard_rows)
            for coords in itertools.product([k], *rest):
                key = self.chunk_key(coords)
                page = self.store.get_range(key, start, size)
                if page is None:
                    if strict:
                        raise self._context(CorruptDataError(
                            f"rows up to {length} are claimed but shard {list(coords)} is missing: "
                            "they were never written", rule="zarr-v3-subset#7"), key)
                    continue
                try:
                    rows = sharding.written_rows(page)
                except MolrecError as exc:
                    raise self._context(exc, key) from None
                if rows is not None and rows < need:
                    raise self._context(CorruptDataError(
                        f"rows up to {length} are claimed but the index of shard {list(coords)} was written "
                        f"for {rows} of its rows, not {need}: the rest were never written (the index is "
                        "older than the data it is asked for)", rule="zarr-v3-subset#7"), key)

    # -- writing ------------------------------------------------------------
    def __setitem__(self, selection: Any, value: Any) -> None:
        self._check_writable()
        self._write(selection, value, self.metadata)

    def land(self, selection: Any, value: Any, *, shape: Optional[Tuple[int, ...]] = None,
             positional: bool = False, durable: bool = False) -> List[str]:
        """Write chunk bytes only — ``zarr.json`` is not touched (root-layout invariant 7:
        data precede metadata; call :meth:`publish` afterwards).  ``shape`` lets the data
        land beyond the published shape.  ``positional`` (sharded arrays with the index at
        the start) appends re-encoded inner chunks at the shard's end and rewrites the index
        in place instead of rewriting the shard.  ``durable`` replaces whole chunks with
        ``Store.replace_durable`` (the new bytes are durable before the name moves: a power
        cut leaves the old chunk or the new one).  Returns the store keys written."""
        self._check_writable()
        metadata = self.metadata if shape is None else self.metadata.with_shape(tuple(shape))
        if positional and self.pipeline.sharding is None:
            raise self._context(InvalidValueError("positional writes need a sharded array"))
        return self._write(selection, value, metadata, positional=positional, durable=durable)

    def publish(self, shape: Optional[Tuple[int, ...]] = None, *, durable: bool = False) -> str:
        """Replace ``zarr.json`` atomically (with a new ``shape``; ``durable`` as in
        :meth:`land`); returns its key for a sync."""
        self._check_writable()
        self._publish(self.metadata if shape is None else self.metadata.with_shape(tuple(shape)), durable)
        return self._metadata_key

    def _write(self, selection: Any, value: Any, metadata: ArrayMetadata, positional: bool = False,
               durable: bool = False) -> List[str]:
        """Land chunk bytes for ``selection`` under ``metadata``'s shape; return keys touched."""
        self._check_chunk_size(metadata)
        dims = normalize_selection(selection, metadata.shape)
        target = selection_shape(dims)
        try:
            data = np.asarray(value, dtype=metadata.dtype.numpy)
            data = np.broadcast_to(data, target)
        except (ValueError, TypeError, OverflowError) as exc:
            raise self._context(InvalidValueError(f"cannot store value of this shape/type: {exc}")) from None
        data = finish(data, dims)  # undo negative steps so chunks see ascending order
        pipeline = self.pipeline
        shape, chunk_shape = metadata.shape, metadata.chunk_shape
        touched: List[str] = []

        def work(task: Tuple[Tuple[int, ...], Tuple[Any, ...], Tuple[slice, ...]], each: Any) -> None:
            coords, local, out_sel = task
            key = self.chunk_key(coords)
            extent = tuple(min(c, s - k * c) for c, s, k in zip(chunk_shape, shape, coords))
            try:
                if positional:
                    assert pipeline.sharding is not None  # land() refuses positional writes otherwise
                    pipeline.sharding.write_positional(
                        self.store, key, local, data[out_sel + (Ellipsis,)], extent, each)
                    touched.append(key)
                    return
                encoded = pipeline.write(self._reader(key), local, data[out_sel + (Ellipsis,)], extent, each)
                if encoded is None:
                    self.store.delete(key)
                elif durable:
                    self.store.replace_durable(key, encoded)
                else:
                    self.store.set(key, encoded)
            except MolrecError as exc:
                raise self._context(exc, key) from None
            touched.append(key)

        self._run(work, list(project(dims, chunk_shape)))
        return touched

    def _publish(self, metadata: ArrayMetadata, durable: bool = False) -> None:
        """Write zarr.json by atomic replace, then adopt it in memory."""
        if durable:
            self.store.replace_durable(self._metadata_key, metadata.to_json())
        else:
            self.store.replace_atomic(self._metadata_key, metadata.to_json())
        self.metadata = metadata

    def _save_attributes(self, attributes: Dict[str, Any], durable: bool = False) -> None:
        self._check_writable()
        self._publish(self.metadata.with_attributes(attributes), durable)

    def append(self, data: Any, axis: int = 0) -> Tuple[int, ...]:
        """Grow ``axis`` by ``data``'s extent and write it there; chunks land before zarr.json."""
        self._check_writable()
        shape = self.shape
        if not shape:
            raise self._context(InvalidValueError("cannot append to a 0-d array"))
        axis = axis % len(shape)
        values = np.asarray(data, dtype=self.dtype)
        if values.ndim != len(shape) or any(
            v != s for i, (v, s) in enumerate(zip(values.shape, shape)) if i != axis
        ):
            raise self._context(InvalidValueError(
                f"appended data of shape {values.shape} does not fit array shape {shape} on axis {axis}"
            ))
        grown = self.metadata.with_shape(shape[:axis] + (shape[axis] + values.shape[axis],) + shape[axis + 1:])
        region = tuple(slice(shape[axis], None) if i == axis else slice(None) for i in range(len(shape)))
        self._write(region, values, grown)
        self._publish(grown)
        return grown.shape

    def resize(self, new_shape: Iterable[int], *, reset_stale: bool = True) -> None:
        """Change the shape.  Shrinking publishes the new shape first, then drops chunks
        wholly outside it and resets the cut-off part of edge chunks to the fill value,
        so growing again never resurrects stale data.  ``reset_stale=False`` changes the
        metadata only (a reopening trajectory writer: its appends overwrite the tail)."""
        self._check_writable()
        new_shape = tuple(int(s) for s in new_shape)
        old = self.metadata
        if len(new_shape) != len(old.shape) or any(s < 0 for s in new_shape):
            raise self._context(InvalidValueError(f"cannot resize {old.shape} to {new_shape}"))
        new = old.with_shape(new_shape)
        self._publish(new)
        if not reset_stale or all(n >= o for n, o in zip(new_shape, old.shape)):
            return
        new_grid = new.grid_shape
        for coords, key in self._stored_chunks():
            if any(c >= g for c, g in zip(coords, new_grid)):
                self.store.delete(key)
            elif any((c + 1) * k > n for c, k, n in zip(coords, new.chunk_shape, new_shape)):
                region = tuple(slice(c * k, min((c + 1) * k, n)) for c, k, n in zip(coords, new.chunk_shape, new_shape))
                self._write(region, self[region], new)

    def _stored_chunks(self) -> Iterator[Tuple[Tuple[int, ...], str]]:
        """(grid coords, key) of every chunk value present in the store."""
        encoding = self.metadata.chunk_key_encoding
        ndim = self.ndim
        for key in list(self.store.list(self._prefix)):
            rel = key[len(self._prefix):]
            if rel == "zarr.json":
                continue
            parts = rel.split(encoding.separator)
            if encoding.name == "default":
                if parts[0] != "c":
                    continue
                parts = parts[1:]
            elif ndim == 0 and parts == ["0"]:
                parts = []
            if len(parts) == ndim and all(p.isdigit() for p in parts):
                yield tuple(int(p) for p in parts), key
