"""``sharding_indexed``: many inner chunks in one stored value (zarr-v3-subset#7).

The index is a ``uint64`` array ``chunks_per_shard + (2,)`` of (offset, nbytes)
pairs in C order, encoded with ``index_codecs`` (fixed size) at the start or
the end of the shard; an empty inner chunk is ``(2**64-1, 2**64-1)``.
Reading a selection fetches the index with one ranged read and then only the
byte ranges of the inner chunks it needs — never the whole shard, unless every
inner chunk is needed anyway.  Inner chunks are written in C order.

Positional shards (index at the start, grown in place) only ever append: a landing writes
its new inner chunks past the shard's end, then rewrites the index in place.  So the bytes an
index covers end further with every landing that changes it (:meth:`ShardingCodec.index_end`;
a landing never turns a stored inner chunk into an empty entry, it stores the fill chunk
instead), and "this index is at least as new as landing L" is ``index_end >= end of L`` — what
a writer's commit record can state and a reader check without any byte other writers do not
write (spec-notes/zarr.md, "Positional landings").

The index page of a positional shard owns whole sectors: its first inner chunk starts at
the next multiple of ``SECTOR_ALIGN`` (4096) bytes after the index, zero bytes between —
outside every indexed range, so other readers never see them.  Rewriting the index in place
then never touches a sector that holds chunk data: on a device without *powersafe
overwrite* a torn sector loses every byte of it, not only those the write covered (issue
23).  Writers that make a shard durable end it at such a boundary too (:func:`align_up`),
so that the next append starts in a sector of its own.
"""
from __future__ import annotations

import itertools
from dataclasses import replace
from math import prod
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from molrec_raw.errors import CorruptDataError, InvalidMetadataError, InvalidValueError, UnsupportedFeatureError
from molrec_raw.zarr.codecs.base import (
    ArrayBytesCodec, Buffer, ChunkSpec, Reader, check_config, is_int, register,
)
from molrec_raw.zarr.codecs.batch import DecodeJob, Item, decode_batch, encode_batch, item_size
from molrec_raw.zarr.codecs.pipeline import CodecPipeline, fill_rows, is_all_fill
from molrec_raw.zarr.dtypes import data_type
from molrec_raw.zarr.indexing import DimSelection, Local, covers, project
from molrec_raw.zarr.store import Store

EMPTY = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
# an entry a reader found past the end of its shard (:meth:`ShardingCodec.mark_past_end`): its
# offset carries this bit (no shard is 8 EiB long), so that one test of ``offset >= PAST_END``
# tells both it and an empty entry from a stored inner chunk
PAST_END = np.uint64(1 << 63)
_PAST_END, _EMPTY = int(PAST_END), int(EMPTY)
SECTOR_ALIGN = 4096  # a 4Kn sector (and a 4 KiB page): the unit a power cut may tear whole
MAX_NESTING = 8  # sharding_indexed inside sharding_indexed, at most this many levels in all
DEFAULT_INDEX_CODECS = [
    {"name": "bytes", "configuration": {"endian": "little"}},
    {"name": "crc32c"},
]


def align_up(offset: int, unit: Optional[int] = None) -> int:
    """The first multiple of ``unit`` (default ``SECTOR_ALIGN``) at or after ``offset``."""
    step = SECTOR_ALIGN if unit is None else unit
    return -(-offset // step) * step


def _local_dims(local: Tuple[Local, ...]) -> List[DimSelection]:
    """A chunk-local selection (ints, positive-step slices) as DimSelections."""
    dims = []
    for sel in local:
        if isinstance(sel, int):
            dims.append(DimSelection(sel, 1, 1, drop=True))
        else:
            dims.append(DimSelection(sel.start, sel.step, len(range(sel.start, sel.stop, sel.step))))
    return dims


@register
class ShardingCodec(ArrayBytesCodec):
    name = "sharding_indexed"

    def __init__(self, spec: ChunkSpec, chunk_shape: Tuple[int, ...], codecs: Any,
                 index_codecs: Any, index_location: str) -> None:
        self.spec = spec
        self.chunk_shape = chunk_shape
        self.index_location = index_location
        self.chunks_per_shard = tuple(s // c for s, c in zip(spec.shape, chunk_shape))
        self.n_chunks = prod(self.chunks_per_shard)
        self.inner = CodecPipeline(codecs, replace(spec, shape=chunk_shape))
        index_spec = ChunkSpec(self.chunks_per_shard + (2,), data_type("uint64"), EMPTY, spec.limits)
        self.index_pipeline = CodecPipeline(index_codecs, index_spec)
        size = self.index_pipeline.encoded_size()
        if size is None:
            raise InvalidMetadataError(
                "sharding index_codecs must produce a fixed-size encoding (no compressors)",
                rule="zarr-v3-subset#7",
            )
        self.index_size = size

    @classmethod
    def from_config(cls, config: Mapping[str, Any], spec: ChunkSpec) -> "ShardingCodec":
        check_config(
            cls.name,
            config,
            {
                "chunk_shape": lambda v: isinstance(v, list) and all(is_int(i) and i >= 1 for i in v),
                "codecs": lambda v: isinstance(v, list) and len(v) > 0,
                "index_codecs": lambda v: isinstance(v, list) and len(v) > 0,
                "index_location": lambda v: v in ("start", "end"),
            },
            ("chunk_shape", "codecs"),
        )
        if 1 + _nesting([config["codecs"], config.get("index_codecs")]) > MAX_NESTING:
            raise UnsupportedFeatureError(
                f"sharding_indexed nested more than {MAX_NESTING} levels deep is not read", rule="zarr-v3-subset#7")
        inner = tuple(config["chunk_shape"])
        if len(inner) != len(spec.shape) or any(s % c for s, c in zip(spec.shape, inner)):
            raise InvalidMetadataError(
                f"sharding: inner chunk_shape {list(inner)} must have the shard's rank and divide "
                f"the shard shape {list(spec.shape)}",
                rule="zarr-v3-subset#7",
            )
        return cls(spec, inner, config["codecs"], config.get("index_codecs", DEFAULT_INDEX_CODECS),
                   config.get("index_location", "end"))

    def to_json(self) -> Dict[str, Any]:
        return {
            "name": self.name,
            "configuration": {
                "chunk_shape": list(self.chunk_shape),
                "codecs": self.inner.to_json(),
                "index_codecs": self.index_pipeline.to_json(),
                "index_location": self.index_location,
            },
        }

    # -- the index --------------------------------------------------------
    def _index_range(self) -> Tuple[int, int]:
        return (0, self.index_size) if self.index_location == "start" else (-self.index_size, self.index_size)

    def _decode_index(self, raw: Buffer, shard_size: Optional[int], lenient: bool = False) -> np.ndarray:
        """Decode and sanity-check the index; returns (n_chunks, 2) uint64."""
        if raw is None or len(raw) != self.index_size:
            raise CorruptDataError(
                f"shard shorter than its {self.index_size}-byte index", rule="zarr-v3-subset#7"
            )
        index = self.index_pipeline.decode(raw).reshape(self.n_chunks, 2)
        if shard_size is not None:
            if lenient:
                return self.mark_past_end(index, shard_size)
            self.check_index(index, shard_size)
        return index

    def decode_index(self, raw: Buffer, shard_size: Optional[int], lenient: bool = False) -> np.ndarray:
        """The index decoded from its ``index_size`` bytes, ``(n_chunks, 2)`` uint64 pairs
        (offset, nbytes) in C order of the inner chunks; checked against ``shard_size`` when
        known (what the reader does; ``molrec-raw explain`` uses it too): an entry past the
        end refuses the whole index, or with ``lenient`` (readers) only its inner chunk
        (:meth:`mark_past_end`)."""
        return self._decode_index(raw, shard_size, lenient)

    def index_start(self, shard_size: int) -> int:
        """Where the index lies inside a shard of ``shard_size`` bytes."""
        return 0 if self.index_location == "start" else shard_size - self.index_size

    @staticmethod
    def _past_end(index: np.ndarray, shard_size: int) -> np.ndarray:
        """Which entries are stored chunks whose byte range is not inside the shard."""
        present = index[:, 0] != EMPTY
        ends = index[:, 0] + index[:, 1]
        return present & ((ends > shard_size) | (ends < index[:, 0]))  # type: ignore[no-any-return]

    def check_index(self, index: np.ndarray, shard_size: int) -> None:
        """Refuse an entry whose byte range is not inside the shard, naming the offset of
        that entry in the shard (zarr-v3-subset#7)."""
        bad = self._past_end(index, shard_size)
        if np.any(bad):
            i = int(np.argmax(bad))
            raise self._entry_error(i, int(index[i, 0]), int(index[i, 1]), shard_size)

    def _entry_error(self, i: int, offset: int, nbytes: int, shard_size: Optional[int]) -> CorruptDataError:
        size = "" if shard_size is None else f", shard of {shard_size} bytes"
        return CorruptDataError(
            f"shard index points past the end of the shard (entry {i}: {nbytes} bytes at {offset}{size})",
            rule="zarr-v3-subset#7", offset=None if shard_size is None else self.index_start(shard_size) + 16 * i)

    def mark_past_end(self, index: np.ndarray, shard_size: int) -> np.ndarray:
        """``index`` (itself when every entry lies inside the shard), each entry past the end
        marked with :data:`PAST_END` in a copy: a read of its inner chunk refuses
        (:meth:`entry_error`), the other inner chunks read — a shard cut short loses only
        the chunks past the cut (zarr-v3-subset#7; spec-notes/safety.md)."""
        bad = self._past_end(index, shard_size)
        if not bad.any():
            return index
        marked = index.copy()
        offsets = marked[bad, 0]
        flagged = offsets | PAST_END
        flagged[flagged == EMPTY] = PAST_END  # never an empty entry: that would read as fill values
        marked[bad, 0] = flagged
        return marked

    def entry_error(self, index: np.ndarray, slot: int, shard_size: Optional[int] = None) -> CorruptDataError:
        """The refusal of a read of inner chunk ``slot`` whose entry :meth:`mark_past_end`
        marked (its offset as stored, but for the mark bit)."""
        offset, nbytes = (int(v) for v in index[slot])
        return self._entry_error(slot, offset & ~int(PAST_END), nbytes, shard_size)

    @staticmethod
    def marked_slots(index: np.ndarray) -> List[int]:
        """The entries :meth:`mark_past_end` marked, in C order."""
        offsets = index[:, 0]
        return [int(i) for i in np.flatnonzero((offsets >= PAST_END) & (offsets != EMPTY))]

    def _flat(self, coords: Tuple[int, ...]) -> int:
        if len(coords) == 1:
            return coords[0]
        return int(np.ravel_multi_index(coords, self.chunks_per_shard)) if coords else 0

    # -- encode / decode whole shards ---------------------------------------
    def _inner_blocks(self, shard: np.ndarray) -> np.ndarray:
        """View of a shard as (chunks_per_shard..., inner chunk shape...)."""
        split = [d for pair in zip(self.chunks_per_shard, self.chunk_shape) for d in pair]
        order = list(range(0, 2 * len(self.chunk_shape), 2)) + list(range(1, 2 * len(self.chunk_shape), 2))
        return shard.reshape(split).transpose(order)

    def _assemble(self, encoded: Sequence[Optional[Item]], positional: bool = False) -> Optional[bytes]:
        """Lay out encoded inner chunks (C order) with the index; None when all empty.
        ``positional`` (index at the start only): the first chunk at
        :meth:`first_chunk_offset`, and the shard kept even when every inner chunk is empty
        (every shard a positional landing touched exists: a commit record can name it)."""
        if not positional and all(e is None for e in encoded):
            return None
        index = np.full((self.n_chunks, 2), EMPTY, dtype=np.uint64)
        offset = self.index_size if self.index_location == "start" else 0
        if positional:
            offset = self.first_chunk_offset()
        parts: List[Buffer] = []
        for i, data in enumerate(encoded):
            if data is not None:
                size = item_size(data)
                index[i] = (offset, size)
                offset += size
                parts.extend(data if isinstance(data, tuple) else (data,))
        index_bytes = self._encode_index(index)
        if positional and parts:  # zeros up to the first chunk: the index page's own sectors
            index_bytes += bytes(self.first_chunk_offset() - len(index_bytes))
        parts = [index_bytes, *parts] if self.index_location == "start" else [*parts, index_bytes]
        return b"".join(parts)

    def first_chunk_offset(self) -> int:
        """Where a positional shard's chunk data begins: after the index, at the next
        ``SECTOR_ALIGN`` boundary (see the module docstring)."""
        return align_up(self.index_size)

    def _encode_index(self, index: np.ndarray) -> bytes:
        return bytes(self.index_pipeline.encode(index.reshape(self.chunks_per_shard + (2,))))

    def index_range(self) -> Tuple[int, int]:
        """(offset, length) of the index in a shard: a negative offset counts from the end."""
        return self._index_range()

    def relaid(self, data: Buffer) -> Optional[bytes]:
        """A positional shard whose chunk data starts inside its index page's sectors (another
        writer's layout: molrs writes its first chunk right after the index) laid out again as
        this codec lays one out — first chunk at :meth:`first_chunk_offset`, stored chunks in
        C order, the same bytes, superseded ones dropped; None when it already is (or the
        index is at the end)."""
        if self.index_location != "start":
            return None
        view = memoryview(data).cast("B")
        index = self._decode_index(view[:self.index_size], len(view))
        present = index[:, 0] != EMPTY
        if not present.any() or int(index[present, 0].min()) >= self.first_chunk_offset():
            return None
        chunks = [None if o == int(EMPTY) else bytes(view[o:o + n]) for o, n in index.tolist()]
        return self._assemble(chunks, positional=True)

    @staticmethod
    def index_end(index: np.ndarray) -> int:
        """Where the bytes a decoded index covers end: the largest ``offset + nbytes`` of its
        stored inner chunks, 0 when none is stored.  A positional landing that changes an
        index makes it end further than before (see the module docstring)."""
        present = index[:, 0] != EMPTY
        if not present.any():
            return 0
        return int((index[present, 0] + index[present, 1]).max())

    def encode(self, chunk: np.ndarray, threads: int = 1) -> Buffer:
        blocks = self._inner_blocks(chunk)
        slots, inners = [], []
        for i, coords in enumerate(itertools.product(*(range(n) for n in self.chunks_per_shard))):
            inner = np.ascontiguousarray(blocks[coords])
            if not is_all_fill(inner, self.inner.spec):
                slots.append(i)
                inners.append(inner)
        encoded: List[Optional[Item]] = [None] * self.n_chunks
        if inners:
            for i, item in zip(slots, encode_batch([(self.inner, inners)], threads)[0]):
                encoded[i] = item
        shard = self._assemble(encoded)
        if shard is None:  # all fill, but an outer codec still needs a valid value
            index = np.full(self.chunks_per_shard + (2,), EMPTY, dtype=np.uint64)
            shard = bytes(self.index_pipeline.encode(index))
        return shard

    def decode(self, data: Buffer) -> np.ndarray:
        out = self.spec.fill_chunk()
        self.read_into(lambda s, n: _slice(data, s, n), tuple(slice(0, n, 1) for n in self.spec.shape), out)
        return out

    # -- partial reads and writes --------------------------------------------
    def _read_index(self, reader: Reader) -> Optional[np.ndarray]:
        """The shard's decoded index (None: no shard).  A reader with a ``memo`` (an
        immutable store) keeps it, checked once against the shard's size, so later reads
        of the same shard fetch only inner chunks."""
        memo = getattr(reader, "memo", None)
        if memo is not None and "index" in memo:
            cached: Optional[np.ndarray] = memo["index"]
            return cached
        start, length = self._index_range()
        raw = reader(start, length)
        index = None
        if raw is not None:
            size = reader.size() if memo is not None else None  # type: ignore[attr-defined]
            index = self._decode_index(raw, size, lenient=True)
        if memo is not None:
            memo["index"] = index
        return index

    def plan_read(self, reader: Reader, local: Tuple[Local, ...], out: np.ndarray) -> List[DecodeJob]:
        """Fetch what ``out = shard[local]`` needs and return one decode job per stored
        inner chunk (empty ones are filled in place).  A reader that reads several ranges at
        once (``many``) gets every needed inner chunk in one call — one request for chunks
        that lie side by side in a remote shard; the whole shard is read when every inner
        chunk is needed anyway."""
        touched = list(project(_local_dims(local), self.chunk_shape))
        if len(touched) == self.n_chunks:  # everything is needed: one read of the whole shard
            whole = reader(0, None)
            if whole is None:
                out[...] = self.spec.fill_value
                return []
            start, length = self._index_range()
            size: Optional[int] = len(whole)
            index = self._decode_index(_slice(whole, start, length), size, lenient=True)
            fetch: Reader = lambda s, n: _slice(whole, s, n)  # noqa: E731
        else:
            found = self._read_index(reader)
            if found is None:
                out[...] = self.spec.fill_value
                return []
            index, size = found, None
            fetch = reader
            many = getattr(reader, "many", None)
            if many is not None and len(touched) > 1:
                pairs = index.tolist()
                wanted = sorted({(o, n) for o, n in (pairs[self._flat(c)] for c, _, _ in touched) if o < _PAST_END})
                got = dict(zip(wanted, many(wanted)))
                fetch = lambda s, n: got[(s, n or 0)]  # noqa: E731
        pairs = index.tolist()
        jobs = []
        for coords, inner_local, out_sel in touched:
            slot = self._flat(coords)
            offset, nbytes = pairs[slot]
            target = out[out_sel + (Ellipsis,)]
            if offset >= _PAST_END:
                if offset != _EMPTY:  # an entry past the end of the shard: this chunk alone is lost
                    raise self.entry_error(index, slot, size)
                target[...] = self.spec.fill_value
                continue
            data = fetch(offset, nbytes)
            if data is None or len(data) != nbytes:
                raise CorruptDataError(
                    f"inner chunk {list(coords)} ({nbytes} bytes at {offset}) runs past the end of the shard",
                    rule="zarr-v3-subset#7",
                )
            whole_chunk = target.shape == self.chunk_shape and covers(inner_local, self.chunk_shape)
            jobs.append(DecodeJob(self.inner, data, target, None if whole_chunk else inner_local))
        return jobs

    def read_into(self, reader: Reader, local: Tuple[Local, ...], out: np.ndarray, each: Any = map,
                  threads: int = 1) -> None:
        """Decode the selected inner chunks into ``out`` (one batch, codecs/batch.py)."""
        decode_batch(self.plan_read(reader, local, out), threads)

    def _prepared(self, touched: List[Tuple[Tuple[int, ...], Tuple[Local, ...], Tuple[slice, ...]]],
                  value: np.ndarray, extent: Tuple[int, ...],
                  stored: Callable[[int], Optional[Reader]]) -> Tuple[List[int], Any, List[int]]:
        """The touched inner chunks as they will be: ``(slots, chunks, empties)`` — the flat
        index and whole new content of each chunk to encode (stacked without a copy when the
        chunks are whole and lie side by side along the first axis), and the slots that
        become all fill.  ``stored(slot)`` reads a chunk's stored bytes (partial updates)."""
        slots = [self._flat(coords) for coords, _, _ in touched]
        shape = self.chunk_shape
        count = len(touched)
        stackable = (
            count > 0 and len(shape) > 0 and self.chunks_per_shard[1:] == (1,) * (len(shape) - 1)
            and slots == list(range(slots[0], slots[0] + count))
            and all(covers(local, shape) and not any(isinstance(sel, int) for sel in local) for _, local, _ in touched)
        )
        if stackable:
            stacked = self._stacked(slots, value)
            if stacked is not None:
                return stacked
        kept, chunks, empties = [], [], []
        for slot, (coords, inner_local, value_sel) in zip(slots, touched):
            inner_extent = tuple(max(0, min(c, e - k * c)) for c, e, k in zip(shape, extent, coords))
            reader = stored(slot)
            chunk = self.inner.updated_chunk(
                (lambda s, n: None) if reader is None else reader, inner_local, value[value_sel + (Ellipsis,)], inner_extent)
            if chunk is None:
                empties.append(slot)
            else:
                kept.append(slot)
                chunks.append(chunk)
        return kept, chunks, empties

    def _stacked(self, slots: List[int], value: np.ndarray) -> Optional[Tuple[List[int], Any, List[int]]]:
        """``_prepared`` of whole inner chunks at consecutive ``slots`` along the first axis
        (``value`` holding them in order): the chunks as one stacked view, without a copy —
        None when ``value`` is not their C-contiguous stack in the inner dtype."""
        count, shape = len(slots), self.chunk_shape
        if not (value.flags.c_contiguous and value.shape == (count * shape[0],) + shape[1:]
                and value.dtype == self.inner.spec.dtype.numpy):
            return None
        stack = value.reshape((count,) + shape)
        fills = fill_rows(stack, self.inner.spec)
        if not fills.any():
            return slots, stack, []
        keep = ~fills
        return ([s for s, k in zip(slots, keep) if k], stack[keep], [s for s, f in zip(slots, fills) if f])

    def _run_slots(self, local: Tuple[Local, ...]) -> Optional[List[int]]:
        """The slots of the inner chunks that ``local`` covers whole when they are one run
        along the first axis (the shard one inner chunk wide on every other axis), else
        None: what ``project`` and ``covers`` find for it, by arithmetic."""
        shape = self.chunk_shape
        if not shape or len(local) != len(shape) or self.chunks_per_shard[1:] != (1,) * (len(shape) - 1):
            return None
        first, rows = local[0], shape[0]
        if not isinstance(first, slice) or first.step != 1 or first.start % rows or first.stop % rows \
                or first.stop <= first.start:
            return None
        for sel, size in zip(local[1:], shape[1:]):
            if not (isinstance(sel, slice) and sel.start == 0 and sel.step == 1 and sel.stop >= size):
                return None
        return list(range(first.start // rows, first.stop // rows))

    def plan_write(self, reader: Reader, local: Tuple[Local, ...], value: np.ndarray,
                   extent: Tuple[int, ...], positional: bool = False) -> "ShardWrite":
        """The new value of the shard after ``shard[local] = value``, planned: the touched
        inner chunks to encode; untouched ones keep their stored bytes.  ``positional``: lay
        the shard out as a positional one (a new shard of a positional landing)."""
        existing: Optional[Buffer] = None
        kept: List[Optional[Item]] = [None] * self.n_chunks
        if not covers(local, extent):
            existing = reader(0, None)
            if existing is not None:
                start, length = self._index_range()
                index = self._decode_index(_slice(existing, start, length), len(existing))
                for i, (offset, nbytes) in enumerate(index.tolist()):
                    if offset != int(EMPTY):
                        kept[i] = _slice(existing, offset, nbytes)

        def stored(slot: int) -> Optional[Reader]:
            old = kept[slot]
            return None if old is None else (lambda s, n: _slice(old, s, n))

        touched = list(project(_local_dims(local), self.chunk_shape))
        slots, chunks, empties = self._prepared(touched, value, extent, stored)
        plan = ShardWrite(self.inner, slots, chunks, empties)
        plan.kept, plan.positional = kept, positional
        return plan

    def finish_write(self, plan: "ShardWrite", encoded: Sequence[Item]) -> Optional[bytes]:
        """The shard value of a planned write, given its encoded chunks."""
        assert plan.kept is not None, "plan_write sets it"
        chunks = list(plan.kept)
        for slot, item in zip(plan.slots, encoded):
            chunks[slot] = item
        for slot in plan.empties:
            chunks[slot] = None
        return self._assemble(chunks, plan.positional)

    def write(self, reader: Reader, local: Tuple[Local, ...], value: np.ndarray,
              extent: Tuple[int, ...], each: Any = map, threads: int = 1) -> Optional[Buffer]:
        """Re-encode the touched inner chunks; untouched ones keep their stored bytes."""
        plan = self.plan_write(reader, local, value, extent)
        return self.finish_write(plan, plan.encode(threads))

    def plan_positional(self, store: Store, key: str, local: Tuple[Local, ...], value: np.ndarray,
                        extent: Tuple[int, ...]) -> "ShardWrite":
        """Plan ``shard[local] = value`` landed without rewriting the shard (see
        :meth:`finish_positional`): reads the shard's size and index page, and the stored
        bytes of inner chunks the selection only partly covers."""
        if self.index_location != "start":
            raise InvalidValueError("positional shard writes need index_location 'start'")
        size = store.size(key)
        if size is None:  # a new shard, stored even when all fill (every touched shard exists)
            plan = self.plan_write(lambda s, n: None, local, value, extent, positional=True)
            plan.key, plan.size = key, None
            return plan
        page = store.get_range(key, 0, self.index_size)
        index = self._decode_index(page, size).copy()
        present = index[:, 0] != EMPTY
        # a shard laid out by this codec keeps its index page's sectors; one whose chunks
        # start right after the index (another writer's) is appended to as it is
        aligned = not present.any() or int(index[present, 0].min()) >= self.first_chunk_offset()
        pairs = index.tolist()

        def stored(slot: int) -> Optional[Reader]:
            offset, nbytes = pairs[slot]
            if offset == int(EMPTY):
                return None
            return lambda s, n: _slice(store.get_range(key, offset, nbytes), s, n)

        run = self._run_slots(local)  # a streaming landing: whole chunks, one run (no projection)
        stacked = None if run is None else self._stacked(run, value)
        if stacked is None:
            touched = list(project(_local_dims(local), self.chunk_shape))
            stacked = self._prepared(touched, value, extent, stored)
        slots, chunks, empties = stacked
        emptied = [slot for slot in empties if pairs[slot][0] != int(EMPTY)]
        if emptied:  # a stored chunk becomes all fill: store the fill chunk (the index's end only grows)
            fill = self.inner.spec.fill_chunk()
            slots, chunks = [*slots, *emptied], [*list(chunks), *(fill for _ in emptied)]
            empties = [slot for slot in empties if pairs[slot][0] == int(EMPTY)]
        plan = ShardWrite(self.inner, slots, chunks, empties)
        plan.key, plan.size, plan.index, plan.positional = key, size, index, True
        plan.first = max(size, self.first_chunk_offset()) if aligned else size
        return plan

    def finish_positional(self, store: Store, plan: "ShardWrite", encoded: Sequence[Item]) -> int:
        """Land a planned positional write: every new inner chunk appended at the end of the
        shard value in one write, then the index (which must be at the start) rewritten in
        place — data before the index that points at it.  A superseded inner chunk stays as
        dead bytes (trajectory §10).  A new shard is written whole.  Returns the end of the
        index written (:meth:`index_end`)."""
        assert plan.key is not None, "plan_positional sets it"
        if plan.size is None:
            shard = self.finish_write(plan, encoded)
            assert shard is not None, "a positional shard is always laid out"
            store.set(plan.key, shard)
            return self.index_end(self._decode_index(shard[:self.index_size], None))
        index = plan.index
        assert index is not None, "plan_positional reads it"
        parts: List[Buffer] = []
        if plan.slots:  # each new chunk after the one before it, from ``first`` on
            sizes = np.fromiter((item_size(item) for item in encoded), np.uint64, len(plan.slots))
            ends = np.cumsum(sizes) + np.uint64(plan.first)
            index[plan.slots, 0] = ends - sizes
            index[plan.slots, 1] = sizes
            for _, item in zip(plan.slots, encoded):
                parts.extend(item if isinstance(item, tuple) else (item,))
        for slot in plan.empties:
            index[slot] = (EMPTY, EMPTY)
        if parts:  # one write for every new inner chunk, then the index
            store.write_parts_at(plan.key, plan.first, parts)
        store.write_at(plan.key, 0, self._encode_index(index))
        return self.index_end(index)

    def write_positional(self, store: Store, key: str, local: Tuple[Local, ...], value: np.ndarray,
                         extent: Tuple[int, ...], each: Any = map, threads: int = 1) -> int:
        """Land ``shard[local] = value`` without rewriting the shard (plan, encode, finish);
        returns the end of the index written."""
        plan = self.plan_positional(store, key, local, value, extent)
        return self.finish_positional(store, plan, plan.encode(threads))


class ShardWrite:
    """One shard's planned write: the inner chunks to encode (``chunks``, for ``slots``),
    the slots that become empty, and what the layout needs — the stored chunks kept
    (``kept``, a rewrite), or the shard's size, index and append offset (positional)."""

    def __init__(self, inner: Any, slots: List[int], chunks: Any, empties: List[int]) -> None:
        self.inner, self.slots, self.chunks, self.empties = inner, slots, chunks, empties
        self.kept: Optional[List[Optional[Item]]] = None
        self.positional = False
        self.key: Optional[str] = None
        self.size: Optional[int] = None
        self.index: Optional[np.ndarray] = None
        self.first = 0

    @property
    def group(self) -> Tuple[Any, Any]:
        """``(pipeline, chunks)`` for :func:`~molrec_raw.zarr.codecs.batch.encode_batch`."""
        return self.inner, self.chunks

    def encode(self, threads: int = 1) -> List[Item]:
        return encode_batch([self.group], threads)[0] if len(self.slots) else []


def _nesting(lists: List[Any]) -> int:
    """How many levels of ``sharding_indexed`` the codec lists hold (0: none), counted level
    by level without recursion and stopping past ``MAX_NESTING``, so that a hostile document
    nested hundreds deep is refused before any pipeline is built for it."""
    depth = 0
    while depth <= MAX_NESTING:
        lists = [
            entry["configuration"].get(member)
            for codecs in lists if isinstance(codecs, list)
            for entry in codecs
            if isinstance(entry, dict) and entry.get("name") == ShardingCodec.name
            and isinstance(entry.get("configuration"), dict)
            for member in ("codecs", "index_codecs")
        ]
        if not lists:
            break
        depth += 1
    return depth


def _slice(data: Buffer, start: int, length: Optional[int]) -> memoryview:
    view = memoryview(data).cast("B") if not isinstance(data, memoryview) or data.format != "B" else data
    size = len(view)
    if start < 0:
        start = max(0, size + start)
    end = size if length is None else min(size, start + length)
    return view[start:end]
