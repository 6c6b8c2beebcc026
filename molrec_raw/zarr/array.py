"""Arrays: a selection becomes chunk keys, each chunk goes through the pipeline.

Reads fill a preallocated result in place, chunk by chunk; reads and writes of many
chunks code them on the node's codec threads (codecs/threads.py: zstd, crc32c and numpy's
copies release the GIL).
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
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from molrec_raw.errors import (
    CorruptDataError, InvalidValueError, MolrecError, ResourceLimitError,
)
from molrec_raw.zarr.codecs import ChunkSpec, CodecPipeline
from molrec_raw.zarr.codecs.base import Buffer
from molrec_raw.zarr.codecs.batch import DecodeJob, EncodeScratch, Item, Threads, decode_jobs, encode_groups, join_item
from molrec_raw.zarr.codecs.sharding import ShardWrite
from molrec_raw.zarr.chunkread import read_many
from molrec_raw.zarr.indexing import covers, finish, normalize_selection, project, selection_shape
from molrec_raw.zarr.metadata import ArrayMetadata
from molrec_raw.zarr.node import Node
from molrec_raw.zarr.store import Store

__all__ = ["Array", "EncodeScratch", "Landing", "ValueReader", "prepare_landings", "read_many"]

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


# Chunk data planned per write wave: a wave's encoded chunks are held until its values are
# written (encoding itself runs in smaller waves, codecs/batch.py).
PLAN_WAVE_BYTES = 64 * 1024 * 1024


def _waves(plans: List[Any]) -> List[List[Any]]:
    """Consecutive plans of at most ``PLAN_WAVE_BYTES`` of chunk data each (one at least)."""
    waves: List[List[Any]] = [[]]
    size = 0
    for plan in plans:
        if waves[-1] and size + plan.nbytes > PLAN_WAVE_BYTES:
            waves.append([])
            size = 0
        waves[-1].append(plan)
        size += plan.nbytes
    return waves


class _ChunkWrite:
    """One stored value (a chunk, or a shard) a write replaces: ``shard`` is the sharding
    codec's plan, else ``chunk`` the new chunk (None: all fill, the value is deleted)."""

    __slots__ = ("key", "pipeline", "shard", "chunk", "positional")

    def __init__(self, key: str, pipeline: CodecPipeline, shard: Optional[ShardWrite], chunk: Optional[np.ndarray],
                 positional: bool) -> None:
        self.key, self.pipeline, self.shard, self.chunk, self.positional = key, pipeline, shard, chunk, positional

    @property
    def group(self) -> Tuple[CodecPipeline, Any]:
        if self.shard is not None:
            return self.shard.group
        return self.pipeline, ([] if self.chunk is None else [self.chunk])

    @property
    def nbytes(self) -> int:
        if self.shard is not None:
            chunks = self.shard.chunks
            return int(chunks.nbytes) if isinstance(chunks, np.ndarray) else sum(int(c.nbytes) for c in chunks)
        return 0 if self.chunk is None else int(self.chunk.nbytes)


class Landing:
    """The chunk bytes of one array write, encoded and ready: :meth:`land` writes them
    (data only — zarr.json is the caller's, :meth:`Array.publish`) and returns the keys.
    Made by :func:`prepare_landings`, which encodes several arrays' writes in one batch."""

    def __init__(self, array: "Array", plans: List[_ChunkWrite], encoded: List[List[Item]]) -> None:
        self.array, self.plans, self.encoded = array, plans, encoded

    def land(self, durable: bool = False) -> List[str]:
        return [self.array._finish_write(plan, items, durable) for plan, items in zip(self.plans, self.encoded)]


def prepare_landings(requests: Sequence[Tuple["Array", Any, Any, Optional[Tuple[int, ...]]]],
                     threads: Threads = 1, scratch: Optional[EncodeScratch] = None) -> List[Landing]:
    """Positional writes ``(array, selection, value, shape)`` of several arrays (each at most
    once), planned and encoded together — one zstd batch for every inner chunk of all of
    them — in waves of bounded size; nothing is written until each ``Landing.land()``, so
    the caller keeps its order of data and metadata writes.  ``shape`` lets the data land
    beyond the published shape (see :meth:`Array.land`).  ``threads``: a number, or the
    caller's :class:`~molrec_raw.zarr.codecs.threads.CodecThreads` (codecs/batch.py
    :func:`encode_groups`).  ``scratch``: a caller's reused encoding buffer
    (:class:`EncodeScratch`; the same bytes)."""
    plans = [arr._plan_writes(sel, value, arr.metadata if shape is None else arr.metadata.with_shape(tuple(shape)), True)
             for arr, sel, value, shape in requests]
    flat = [plan for arr_plans in plans for plan in arr_plans]
    encoded: List[List[Item]] = []
    for wave in _waves(flat):
        encoded.extend(encode_groups([plan.group for plan in wave], threads, scratch))
    out, at = [], 0
    for (arr, _, _, _), arr_plans in zip(requests, plans):
        out.append(Landing(arr, arr_plans, encoded[at:at + len(arr_plans)]))
        at += len(arr_plans)
    return out


class Array(Node):
    """A Zarr V3 array in a store; numpy basic indexing for reads and writes."""

    def __init__(self, store: Store, path: str, metadata: ArrayMetadata, *,
                 pipeline: Optional[CodecPipeline] = None, **options: Any) -> None:
        super().__init__(store, path, **options)
        self._prefix = f"{path}/" if path else ""
        self._pipeline = pipeline  # reused when the creator already built it
        self._metadata = metadata
        self._memos: Dict[str, Dict[str, Any]] = {}  # per stored value, immutable stores only
        # positional shard key -> the end of the index this object last landed in it
        self.landed_ends: Dict[str, int] = {}
        if pipeline is None:
            self.metadata = metadata

    # -- description ------------------------------------------------------
    @property
    def metadata(self) -> ArrayMetadata:
        """The parsed ``zarr.json`` (zarr-v3-subset#2.2); assigning a new one rebuilds the codec
        pipeline when the codecs or chunk shape change."""
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
        """The codec pipeline of one chunk (zarr-v3-subset#5)."""
        assert self._pipeline is not None
        return self._pipeline

    @property
    def shape(self) -> Tuple[int, ...]:
        """The array's extent, one integer per dimension."""
        return self.metadata.shape

    @property
    def ndim(self) -> int:
        """The number of dimensions (0 for a 0-d array)."""
        return len(self.metadata.shape)

    @property
    def size(self) -> int:
        """The number of elements (the product of the shape)."""
        return prod(self.metadata.shape)

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype values come back as (zarr-v3-subset#8)."""
        return self.metadata.dtype.numpy

    @property
    def fill_value(self) -> Any:
        """The value of every element no stored chunk holds (zarr-v3-subset#3, #6)."""
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

    # -- reading ------------------------------------------------------------
    def __getitem__(self, selection: Any) -> Any:
        result, jobs = self._read_jobs(selection, None)
        self._decode(jobs)
        return result[()] if result.ndim == 0 else result

    def read_into(self, selection: Any, out: np.ndarray, *, threads: Optional[Threads] = None) -> np.ndarray:
        """Read ``selection`` into ``out`` (a writable array of its shape and dtype, any
        strides, e.g. one column of an interleaved result); returns ``out``.  ``threads``:
        what decodes it (default: the node's, :meth:`Node.codec_work`)."""
        _, jobs = self._read_jobs(selection, out)
        self._decode(jobs, threads)
        return out

    def _read_jobs(self, selection: Any, out: Optional[np.ndarray]) -> Tuple[np.ndarray, List[DecodeJob]]:
        """Fetch the stored values ``selection`` needs (chunks, or the inner chunks of each
        shard) and return the result array and its decode jobs; fill values are written at
        once.  A latency-bound store fetches several shards at a time."""
        metadata = self.metadata
        dims = normalize_selection(selection, metadata.shape)
        out_shape = selection_shape(dims)
        item = metadata.dtype.itemsize or _STRING_ITEM_BYTES
        if prod(out_shape) * item > self.limits.max_read_bytes:
            raise self._context(ResourceLimitError(
                f"selection of shape {out_shape} exceeds the read limit of {self.limits.max_read_bytes} bytes"
            ))
        self._check_chunk_size(metadata)
        if out is None:
            result = np.empty(out_shape, dtype=metadata.dtype.numpy)
        else:
            if out.shape != out_shape or out.dtype != metadata.dtype.numpy:
                raise self._context(InvalidValueError(
                    f"read_into needs an array of shape {out_shape} and dtype {metadata.dtype.numpy}, "
                    f"got {out.shape} {out.dtype}"))
            result = out
        target = finish(result, dims)  # chunks are read ascending; a flipped view puts them in place
        pipeline = self.pipeline
        spec = pipeline.spec

        def plan(task: Tuple[Tuple[int, ...], Tuple[Any, ...], Tuple[slice, ...]]) -> List[DecodeJob]:
            coords, local, out_sel = task
            key = self.chunk_key(coords)
            part = target[out_sel + (Ellipsis,)]
            try:
                if pipeline.sharding is not None:
                    jobs = pipeline.sharding.plan_read(self._value_reader(key), local, part)
                else:
                    data = self.store.get(key)
                    if data is None:
                        part[...] = spec.fill_value
                        return []
                    whole = part.shape == spec.shape and covers(local, spec.shape)
                    jobs = [DecodeJob(pipeline, data, part, None if whole else local)]
            except MolrecError as exc:
                raise self._context(exc, key) from None
            except (ValueError, TypeError, IndexError, OverflowError, struct.error) as exc:
                raise self._context(CorruptDataError(f"cannot decode chunk: {exc}"), key) from None
            for job in jobs:
                job.key, job.owner = key, self
            return jobs

        tasks = list(project(dims, metadata.chunk_shape))
        if self.store.concurrency > 1 and self.threads > 1 and len(tasks) > 1:
            with ThreadPoolExecutor(max_workers=min(self.threads, len(tasks))) as pool:
                planned = list(pool.map(plan, tasks))
        else:
            planned = [plan(task) for task in tasks]
        return result, [job for jobs in planned for job in jobs]

    def _decode(self, jobs: List[DecodeJob], threads: Optional[Threads] = None) -> None:
        """Decode the jobs of one read (codecs/batch.py :func:`decode_jobs`): on the node's
        codec threads unless ``threads`` says otherwise."""
        decode_jobs(jobs, self.codec_work() if threads is None else threads)

    def check_landed(self, ends: Mapping[str, Optional[int]]) -> None:
        """Refuse a positional shard whose index is older than a landing in it: ``ends``
        maps shard keys to the end of the index that landing wrote (:attr:`landed_ends`), or
        None (the index only checked when stored); each shard with an end must be stored,
        its index valid and ending at least there — a positional
        landing only appends, so a later index ends at or past an earlier one
        (zarr-v3-subset#7, sharding.py).  An older index would serve the fill value, or a
        superseded chunk, for rows that landing wrote."""
        from molrec_raw.zarr.chunkread import check_landed
        from molrec_raw.zarr.handles import StoreRanges

        check_landed(self, ends, StoreRanges(self.store))

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
        in place instead of rewriting the shard; the end of each index it writes is kept in
        :attr:`landed_ends` (what :meth:`check_landed` checks).  ``durable`` replaces whole chunks with
        ``Store.replace_durable`` (the new bytes are durable before the name moves: a power
        cut leaves the old chunk or the new one).  Returns the store keys written."""
        self._check_writable()
        metadata = self.metadata if shape is None else self.metadata.with_shape(tuple(shape))
        if positional and self.pipeline.sharding is None:
            raise self._context(InvalidValueError("positional writes need a sharded array"))
        if positional:
            return prepare_landings([(self, selection, value, shape)], self.codec_work())[0].land(durable)
        return self._write(selection, value, metadata, durable=durable)

    def publish(self, shape: Optional[Tuple[int, ...]] = None, *, durable: bool = False) -> str:
        """Replace ``zarr.json`` atomically (with a new ``shape``; ``durable`` as in
        :meth:`land`); returns its key for a sync."""
        self._check_writable()
        self._publish(self.metadata if shape is None else self.metadata.with_shape(tuple(shape)), durable)
        return self._metadata_key

    def _write(self, selection: Any, value: Any, metadata: ArrayMetadata, positional: bool = False,
               durable: bool = False) -> List[str]:
        """Land chunk bytes for ``selection`` under ``metadata``'s shape; return keys touched.
        Chunks are encoded in batches (codecs/batch.py), in waves of bounded size."""
        plans = self._plan_writes(selection, value, metadata, positional)
        touched: List[str] = []
        for wave in _waves(plans):
            encoded = encode_groups([plan.group for plan in wave], self.codec_work())
            touched.extend(self._finish_write(plan, items, durable) for plan, items in zip(wave, encoded))
        return touched

    def _plan_writes(self, selection: Any, value: Any, metadata: ArrayMetadata, positional: bool) -> List[_ChunkWrite]:
        """What a write of ``value`` at ``selection`` replaces, chunk by chunk (or shard by
        shard), with the chunk contents to encode; partial chunks are read here."""
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
        if positional and pipeline.sharding is None:
            raise self._context(InvalidValueError("positional writes need a sharded array"))
        shape, chunk_shape = metadata.shape, metadata.chunk_shape
        plans: List[_ChunkWrite] = []
        for coords, local, out_sel in project(dims, chunk_shape):
            key = self.chunk_key(coords)
            extent = tuple(min(c, s - k * c) for c, s, k in zip(chunk_shape, shape, coords))
            part = data[out_sel + (Ellipsis,)]
            try:
                if pipeline.sharding is not None:
                    shard = (pipeline.sharding.plan_positional(self.store, key, local, part, extent) if positional
                             else pipeline.sharding.plan_write(self._reader(key), local, part, extent))
                    plans.append(_ChunkWrite(key, pipeline.sharding.inner, shard, None, positional))
                else:
                    chunk = pipeline.updated_chunk(self._reader(key), local, part, extent)
                    plans.append(_ChunkWrite(key, pipeline, None, chunk, False))
            except MolrecError as exc:
                raise self._context(exc, key) from None
        return plans

    def _finish_write(self, plan: _ChunkWrite, encoded: List[Item], durable: bool) -> str:
        """Store one planned value from its encoded chunks; returns its key."""
        key = plan.key
        try:
            if plan.positional:
                assert plan.shard is not None and self.pipeline.sharding is not None, "positional writes are sharded"
                self.landed_ends[key] = self.pipeline.sharding.finish_positional(self.store, plan.shard, encoded)
                return key
            if plan.shard is not None:
                assert self.pipeline.sharding is not None, "a shard plan comes from the sharding codec"
                value: Optional[Buffer] = self.pipeline.sharding.finish_write(plan.shard, encoded)
            else:
                value = None if plan.chunk is None else join_item(encoded[0])
            if value is None:
                self.store.delete(key)
            elif durable:
                self.store.replace_durable(key, value)
            else:
                self.store.set(key, value)
        except MolrecError as exc:
            raise self._context(exc, key) from None
        return key

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
        for coords, key in self.stored_chunks():
            if any(c >= g for c, g in zip(coords, new_grid)):
                self.store.delete(key)
            elif any((c + 1) * k > n for c, k, n in zip(coords, new.chunk_shape, new_shape)):
                region = tuple(slice(c * k, min((c + 1) * k, n)) for c, k, n in zip(coords, new.chunk_shape, new_shape))
                self._write(region, self[region], new)

    def stored_chunks(self) -> Iterator[Tuple[Tuple[int, ...], str]]:
        """(grid coords, key) of every chunk value present in the store (a shard when the
        array is sharded): one listing of the store, whatever the array's shape."""
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
