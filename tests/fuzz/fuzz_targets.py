"""Fuzz targets: every parser a record passes through, fed mutated copies of files this
package writes (issue 12 §3).  Shared by the suite's fixed-seed run (tests/fuzz/test_fuzz.py)
and the campaign (bench/fuzz.py); pure Python, so it runs wherever the suite runs.

An input is bytes.  A target whose parser needs a context (a codec chain; the stored values
beside a ``zarr.json``; how the range source behaves) reads its first byte as the number of
one of its *slots* and the rest as the payload.  Running an input calls the parser the way
the library does, and the outcome is either

- fine: it returned, or raised a ``MolrecError`` that names its cause; or
- an escape: it raised anything else (IndexError, MemoryError, RecursionError, zstd or numpy
  errors, UnicodeDecodeError, ...), or a ``MolrecError`` that only wraps a stray exception in
  a caller's safety net (``Array``'s "cannot decode chunk: ...", ``ZipStore``'s "unreadable zip
  archive (...)": the parser itself should have named the rule), or a read-back that
  disagrees with what was read (``RoundTripError``), or a numpy ``RuntimeWarning`` (an
  overflow or invalid cast done silently); or
- a missed refusal: an input known to be invalid — marked by the edit that made it
  (:class:`fuzz_mutators.Invalid`: a shard index entry past the end of its shard, a
  fixed-size chunk cut short), or run in a slot whose every input must be refused (a range
  source cutting every read short) — that was read without an error, or refused under
  another rule than the one it breaks.

Seeds come from one small record written here (the demo record with deterministic metrics),
its packed ``*.mrec.zip``, zips written by ``write_zip`` (also ZIP64), synthetic arrays for
every codec chain, WAL files, documents, and the checkpoints of a live trajectory.  Built
once per process.
"""
from __future__ import annotations

import contextlib
import functools
import json
import math
import shutil
import signal
import tempfile
import threading
import time
import traceback
import warnings
from dataclasses import dataclass, field
from math import prod
from pathlib import Path
from random import Random
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import orjson

from fuzz_mutators import (
    Bombs, Invalid, MAX_INPUT, edit_checkpoint, edit_frame_bytes, edit_json, edit_value, edit_wal_lines, edit_zarr_json,
    edit_zip, mutate_bytes,
)
from fuzz_whole import Disagreement, Unnamed, whole_targets
from molrec_raw import Block, Box, Frame, MetaValue, MetricsWriter, MrecWriter, pack_mrec_zip
from molrec_raw.demo import write_demo
from molrec_raw.errors import MolrecError, StoreError
from molrec_raw.record import typed_json
from molrec_raw.record.metrics.series import fold, merge
from molrec_raw.record.metrics.wal import complete_part, parse_wal
from molrec_raw.record.trajectory.meta import meta_value
from molrec_raw.record.trajectory.recovery import CHECKPOINT
from molrec_raw.record.trajectory.schema import SequenceSchema
from molrec_raw.zarr import Array, Limits, MemoryStore, ZipStore, open_array
from molrec_raw.zarr.array import ValueReader
from molrec_raw.zarr.codecs import CodecPipeline
from molrec_raw.zarr.group import open_node
from molrec_raw.zarr.snapshot import Snapshot, SnapshotView
from molrec_raw.zarr import jsonio
from molrec_raw.zarr.zipstore import write_zip

__all__ = ["targets", "Target", "Slot", "Outcome", "outcome", "make_input", "mutate_input", "check_seeds", "run_campaign",
           "CampaignReport", "FUZZ_LIMITS"]

# Small limits: a hostile document may declare any chunk up to the limit, and the reader then
# allocates it (by design: a valid array may have such chunks); the campaign's memory rule is
# about what the parsers do with lying bytes, so the limits are set low for it.
FUZZ_LIMITS = Limits(max_chunk_bytes=32 << 20, max_read_bytes=16 << 20)
NETTED = ("cannot decode chunk:", "unreadable zip archive (")
_READ_ALL_CHUNKS = 4096  # read a whole array only when it has at most this many chunks ...
_READ_ALL_ITEMS = 1 << 16  # ... and elements (a million tiny chunks is a million lookups, by design)


def _after_path(exc: MolrecError) -> str:
    """An error's message without the store's name it starts with (a zip archive's refusals
    name it first)."""
    lead = f"{exc.store}: "
    return exc.message[len(lead):] if exc.store and exc.message.startswith(lead) else exc.message


class RoundTripError(Exception):
    """A parsed value that does not survive writing it out and reading it back."""


@dataclass
class Slot:
    """One context of a target: a label, what its run needs, and its seed payloads."""

    label: str
    context: Any
    seeds: List[bytes]
    valid: bool = True  # False: the context itself is faulty (a lying source), seeds may be refused
    refused: bool = False  # every input of this slot must be refused with a MolrecError naming a rule


@dataclass
class Target:
    """A parser under fuzz: its slots, how an input is run, its structure-aware mutators."""

    name: str
    slots: List[Slot]
    run: Callable[[Any, bytes], None]
    edits: Sequence[Callable[[Random, bytes, Slot, Sequence[bytes]], bytes]] = ()  # (rng, payload, slot, donors)
    slotted: bool = True
    structured: float = 0.8  # the share of mutations done by ``edits`` (the rest: byte mutations)
    donors: List[bytes] = field(default_factory=list)  # seeds of every slot, for splicing

    def __post_init__(self) -> None:
        assert len(self.slots) <= 256 and (self.slotted or len(self.slots) == 1)
        self.donors = [seed for slot in self.slots for seed in slot.seeds]

    def join(self, slot: int, payload: bytes) -> bytes:
        if not self.slotted:
            return payload  # as made (an edit's mark and kind kept)
        joined = bytes([slot]) + payload
        return Invalid(joined, payload.rule, payload.why) if isinstance(payload, Invalid) else joined

    def split(self, data: bytes) -> Tuple[Slot, bytes]:
        if not self.slotted:
            return self.slots[0], data
        if not data:
            return self.slots[0], b""
        return self.slots[data[0] % len(self.slots)], data[1:]

    def execute(self, data: bytes) -> None:
        slot, payload = self.split(data)
        self.run(slot.context, payload)

    def seed_inputs(self, *, valid: bool = True) -> List[bytes]:
        """Every seed as an input (of the valid slots, or of the faulty ones)."""
        return [self.join(i, seed) for i, slot in enumerate(self.slots) if slot.valid == valid for seed in slot.seeds]


# -- outcomes -------------------------------------------------------------------------------

class _Hang(BaseException):
    """Raised by the alarm when one input runs far beyond the per-input budget."""


@dataclass
class Outcome:
    """``kind`` is None when the input was handled; else what escaped and where."""

    kind: Optional[str]
    seconds: float
    detail: str = ""


def _where(exc: BaseException) -> str:
    """The innermost frame of molrec_raw in the traceback: ``module.py:line`` (or where the
    exception says it was raised, for one carried over from another process)."""
    if isinstance(getattr(exc, "where", None), str):
        return exc.where  # type: ignore[attr-defined]
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "molrec_raw" in f.filename]
    if not frames:
        return "outside molrec_raw"
    last = frames[-1]
    return f"{Path(last.filename).name}:{last.lineno}"


def due_refusal(target: Target, data: bytes) -> Optional[Tuple[str, str]]:
    """``(rule, why)`` when ``data`` is known to be invalid: marked by the edit that made it
    (the rule it breaks: that rule or a sub-rule of it must be named), or an input of a slot
    whose every input must be refused (any rule: ``""``); None when it may be valid."""
    if isinstance(data, Invalid):
        return data.rule, data.why
    if target.split(data)[0].refused:
        return "", f"every input of slot {target.split(data)[0].label!r} must be refused"
    return None


def outcome(target: Target, data: bytes) -> Outcome:
    """Run one input and classify what happened (see the module docstring)."""
    start = time.perf_counter()
    kind: Optional[str] = None
    detail = ""
    due = due_refusal(target, data)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RuntimeWarning)
            target.execute(data)
        numeric = [w for w in caught if issubclass(w.category, RuntimeWarning)]
        if numeric:
            kind = f"RuntimeWarning at {Path(numeric[0].filename).name}:{numeric[0].lineno}"
            detail = str(numeric[0].message)
        elif due is not None:
            kind, detail = f"accepted, {due[0] or 'a rule'} due", due[1]
    except MolrecError as exc:
        said = _after_path(exc)
        if said.startswith(NETTED):
            kind, detail = f"netted {said.split(':')[0]} at {_where(exc)}", str(exc)
        elif due is not None and not (exc.rule and (not due[0] or exc.rule == due[0] or exc.rule.startswith(f"{due[0]}."))):
            kind = f"refused under {exc.rule or 'no rule'}, {due[0] or 'a rule'} due, at {_where(exc)}"
            detail = f"{due[1]}: {exc}"[:500]
    except _Hang:
        kind = "hang"
    except RoundTripError as exc:
        kind, detail = f"round trip at {_where(exc)}", str(exc)
    except Disagreement as exc:
        kind, detail = "validate calls valid what a read refuses", str(exc)[:500]
    except Unnamed as exc:
        kind, detail = f"an error not naming the collection's file ({type(exc.__cause__).__name__})", str(exc)[:500]
    except Exception as exc:  # MemoryError and RecursionError are Exceptions too
        kind, detail = f"{type(exc).__name__} at {_where(exc)}", f"{type(exc).__name__}: {exc}"[:500]
    return Outcome(kind, time.perf_counter() - start, detail)


# -- inputs ---------------------------------------------------------------------------------

def mutate_input(target: Target, rng: Random, data: bytes) -> bytes:
    """``data`` (an input of ``target``) with 1 to 5 stacked mutations of its payload: the
    structure-aware ``edits`` in the share ``target.structured``, byte mutations otherwise."""
    number = data[0] % len(target.slots) if target.slotted and data else 0
    slot, payload = target.split(data)
    stacked = rng.choice((1, 1, 1, 2, 2, 3, 5))
    for _ in range(stacked):
        if target.edits and rng.random() < target.structured:
            payload = rng.choice(target.edits)(rng, payload, slot, target.donors)
        else:
            payload = mutate_bytes(rng, payload, target.donors)
    if stacked > 1 or len(payload) > MAX_INPUT:  # an earlier edit may break something the reader meets first
        payload = bytes(payload[:MAX_INPUT])
    return target.join(number, payload)


def make_input(target: Target, seed: int, index: int) -> bytes:
    """Input number ``index`` of the campaign ``seed``: a seed of a random slot, mutated.  The
    same ``(seed, index)`` always gives the same input, so a campaign runs in chunks."""
    rng = Random(f"{seed}:{target.name}:{index}")
    number = rng.randrange(len(target.slots))
    return mutate_input(target, rng, target.join(number, rng.choice(target.slots[number].seeds)))


# -- the seed record --------------------------------------------------------------------------

@dataclass
class Corpus:
    record: Dict[str, bytes]  # store key -> bytes of the seed record directory
    zips: List[bytes]
    host_wal: bytes


def _log_metrics(writer: MetricsWriter) -> None:
    """Deterministic events (explicit wall times): stepped and step-less keys, tags, non-finite
    values, a re-logged step."""
    for i in range(6):
        wall = f"2026-01-02T03:04:{i:02d}.{i * 111:03d}Z"
        writer.log("energy/total", -10.0 + 0.25 * i, step=10 * i, wall_time=wall)
        writer.log("lr", 1e-3 / (i + 1), wall_time=wall)
        writer.log("grad/norm", [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e300][i], step=i,
                   tags={"phase": "train", "epoch": i}, wall_time=wall)
    writer.log("energy/total", -99.5, step=20, wall_time="2026-01-02T03:05:00+01:00")


@functools.lru_cache(maxsize=1)
def corpus() -> Corpus:
    """The seed files, written once into a temporary directory and kept as bytes."""
    with tempfile.TemporaryDirectory(prefix="molrec-fuzz-") as tmp:
        root = Path(tmp)
        record = write_demo(root / "seed.mrec", frames=12, molecules=2)
        shutil.rmtree(record / "metrics")  # the demo logs with the clock: replaced by fixed times
        with MetricsWriter(record) as writer:
            _log_metrics(writer)
        files = {p.relative_to(record).as_posix(): p.read_bytes() for p in sorted(record.rglob("*")) if p.is_file()}
        zips = [pack_mrec_zip(record).read_bytes()]
        small = [("zarr.json", files["zarr.json"]), ("meta/zarr.json", files["meta/zarr.json"]),
                 ("trajectory/meta/pe/c/0", files["trajectory/meta/pe/c/0"])]
        paths = []
        for name, data in small:
            path = root / "small" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            paths.append((name, path))
        for number, zip64 in enumerate((False, True)):
            target = root / f"small{number}.zip"
            write_zip(target, paths, force_zip64=zip64)
            zips.append(target.read_bytes())
        (root / "host").mkdir()
        with MetricsWriter.for_host(root / "host") as writer:
            _log_metrics(writer)
        host_wal = (root / "host" / "artifacts" / "metrics.mlp.jsonl").read_bytes()
    return Corpus(files, zips, host_wal)


# -- zip: ZipStore over a range source ------------------------------------------------------

class BytesSource:
    """An archive in memory as a :class:`~molrec_raw.zarr.zipstore.RangeSource`, with the
    contract ``FileSource`` keeps (exact reads, short only at the end) or a remote one's
    faults: ``short`` reads (a proxy cutting answers), ``long`` reads (more than asked), a
    ``lying`` size (the total a server states)."""

    immutable = True
    concurrency = 1

    def __init__(self, data: bytes, behaviour: str) -> None:
        self.data, self.behaviour = data, behaviour

    def describe(self) -> str:
        return f"<fuzz zip, {self.behaviour} source>"

    def tail(self, length: int) -> Tuple[int, bytes]:
        size = len(self.data)
        take = min(size, length)
        return size + (13 if self.behaviour == "lying" else 0), self.read(size - take, take)

    def read(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0:
            raise StoreError(f"cannot read {length} bytes at {offset}", store=self.describe())
        if self.behaviour == "short" and length > 16:
            length -= 1 + offset % 3
        elif self.behaviour == "long":
            length += 7
        return self.data[offset:offset + length]

    def read_many(self, ranges: Sequence[Tuple[int, int]]) -> List[bytes]:
        return [self.read(offset, length) for offset, length in ranges]

    def close(self) -> None:
        pass


def _run_zip(behaviour: str, payload: bytes) -> None:
    """Open the archive (end records, ZIP64, central directory), then use every entry: size,
    ranges, several ranges at once, the whole entry (CRC-32 checked)."""
    with ZipStore(BytesSource(payload, behaviour)) as store:
        store.list_dir("")
        for number, key in enumerate(list(store.list())[:256]):
            size = store.size(key) or 0
            if number % 2:  # the first read of an entry locates its data: by a range, or by several
                store.get_range(key, 0, 16)
            store.get_ranges(key, [(0, 8), (size // 2, 9), (-4, None)])
            if size <= 1 << 16:
                store.get(key)


def _zip_target(c: Corpus) -> Target:
    slots = [Slot(b, b, c.zips, valid=b == "file", refused=b == "short") for b in ("file", "short", "long", "lying")]
    return Target("zip", slots, _run_zip, edits=(lambda rng, data, slot, donors: edit_zip(rng, data, donors),))


# -- zarr.json: metadata, fill values, codec configurations, through the Array ----------------

def _read_some(array: Array) -> None:
    """Read what a user would: the whole array when small, its first element, a strided
    reversed selection."""
    metadata = array.metadata
    if prod(metadata.grid_shape) <= _READ_ALL_CHUNKS and array.size <= _READ_ALL_ITEMS:
        array[...]
        if array.ndim:
            array[tuple(slice(None, None, -2) for _ in array.shape)]
    if array.ndim == 0:
        array[()]
    elif all(array.shape):
        array[(0,) * array.ndim]


def _run_zarr_json(values: Dict[str, bytes], payload: bytes) -> None:
    store = MemoryStore(values)
    store.set("a/zarr.json", payload)
    node = open_node(store, "a", read_only=True, limits=FUZZ_LIMITS, threads=1)
    node.attrs.asdict()
    if isinstance(node, Array):
        _read_some(node)
        node.metadata.to_json()  # what a writer would write back


def _node_slots(files: Dict[str, bytes]) -> List[Slot]:
    """One slot per node of the seed record: its zarr.json, its stored values re-rooted at
    ``a/`` (values above 256 KiB left out)."""
    slots = []
    for key in sorted(files):
        if not key.endswith("zarr.json"):
            continue
        prefix = key[: -len("zarr.json")]
        values = {}
        if orjson.loads(files[key]).get("node_type") == "array":  # an array's keys are its chunks
            values = {f"a/{k[len(prefix):]}": v for k, v in files.items()
                      if k.startswith(prefix) and k != key and len(v) <= 256 << 10}
        slots.append(Slot(prefix or "/", values, [files[key]]))
    return slots


def _zarr_json_target(c: Corpus) -> Target:
    slots = _node_slots(c.record) + _node_slots(_synthetic_store_files())
    return Target("zarr_json", slots[:256], _run_zarr_json,
                  edits=(lambda rng, data, slot, donors: edit_zarr_json(rng, data, donors),), structured=0.9)


# -- chunks, shards and vlen-utf8 through the codec pipeline ---------------------------------

@dataclass
class ChunkContext:
    """One stored chunk (or shard) value: the pipeline that reads it, the chunk's in-bounds
    extent, and the selections read from it."""

    pipeline: CodecPipeline
    key: str
    extent: Tuple[int, ...]

    def selections(self) -> List[Tuple[Any, ...]]:
        full = tuple(slice(0, e, 1) for e in self.extent)
        middle = tuple(slice(e // 3, max(e // 3 + 1, 2 * e // 3), 1) for e in self.extent)
        strided = tuple(slice(0, e, 2) for e in self.extent)
        last = tuple(e - 1 for e in self.extent)
        return [full, middle, strided, last]


def _shape_of(local: Tuple[Any, ...]) -> Tuple[int, ...]:
    return tuple(len(range(s.start, s.stop, s.step)) for s in local if isinstance(s, slice))


def _run_chunk(context: ChunkContext, payload: bytes) -> None:
    """Read the value as ``Array`` does, chunk by chunk (without its safety net): every
    selection through ``read_into`` (with and without a memo, i.e. as an immutable store
    reads a shard), then the general ``decode`` of the whole value when it is small, and a
    positional shard's index end as the recovery reader's landed-index check computes it."""
    store = MemoryStore()
    store.set(context.key, payload)
    pipeline = context.pipeline
    for number, local in enumerate(context.selections()):
        out = np.empty(_shape_of(local), dtype=pipeline.spec.dtype.numpy)
        memo: Optional[Dict[str, Any]] = {} if number % 2 else None
        pipeline.read_into(ValueReader(store, context.key, memo), local, out)
    nbytes = prod(pipeline.spec.shape) * (pipeline.spec.dtype.itemsize or 16)
    if nbytes <= 1 << 20:
        pipeline.decode(payload)
    sharding = pipeline.sharding
    if sharding is not None and sharding.index_location == "start":  # the recovery reader's check
        sharding.index_end(sharding.decode_index(payload[:sharding.index_size], len(payload)))


def _chunk_slots(store: MemoryStore, names: Sequence[str], label: str) -> List[Slot]:
    """One slot per stored value of the arrays ``names`` in ``store`` (edge chunks included)."""
    slots = []
    for name in names:
        array = open_array(store, name, mode="r", limits=FUZZ_LIMITS, threads=1)
        metadata = array.metadata
        for key in sorted(store.list(f"{name}/")):
            rel = key[len(name) + 1:]
            if rel == "zarr.json":
                continue
            coords = tuple(int(part) for part in rel.split("/")[1:])
            extent = tuple(min(c, s - k * c) for c, s, k in zip(metadata.chunk_shape, metadata.shape, coords))
            value = store.get(key)
            assert value is not None
            slots.append(Slot(f"{label}:{key}", ChunkContext(array.pipeline, key, extent), [value]))
    return slots


LE = {"name": "bytes", "configuration": {"endian": "little"}}
BE = {"name": "bytes", "configuration": {"endian": "big"}}
CRC = {"name": "crc32c"}
VLEN = {"name": "vlen-utf8", "configuration": {}}


def _gzip(level: int = 5) -> Dict[str, Any]:
    return {"name": "gzip", "configuration": {"level": level}}


def _zstd(checksum: bool = False) -> Dict[str, Any]:
    return {"name": "zstd", "configuration": {"level": 3, "checksum": checksum}}


def _shuffle(size: int) -> Dict[str, Any]:
    return {"name": "numcodecs.shuffle", "configuration": {"elementsize": size}}


def _transpose(*order: int) -> Dict[str, Any]:
    return {"name": "transpose", "configuration": {"order": list(order)}}


def _sharding(chunks: Sequence[int], codecs: List[Any], location: str = "end",
              index_codecs: Optional[List[Any]] = None) -> Dict[str, Any]:
    return {"name": "sharding_indexed", "configuration": {
        "chunk_shape": list(chunks), "codecs": codecs, "index_codecs": index_codecs or [LE, CRC],
        "index_location": location}}


_WORDS = ["H", "O", "OW", "HW", "abc", "", "\u03b1\u03b2", "\u6c34", "a\x00", "long string " * 3, "x"]

# (name, shape, chunks, dtype, codecs); sharded ones give the grid shape as chunks and the
# inner chunk shape in the sharding codec.
_CHUNK_ARRAYS: List[Tuple[str, Tuple[int, ...], Tuple[int, ...], Any, List[Any]]] = [
    ("u16", (70,), (64,), "uint16", [LE]),
    ("f64be", (32,), (32,), "float64", [BE]),
    ("f64t", (4, 8), (4, 8), "float64", [_transpose(1, 0), LE, CRC]),
    ("i32gz", (100,), (100,), "int32", [LE, _gzip()]),
    ("f32zs", (100,), (100,), "float32", [LE, _zstd(checksum=True)]),
    ("f64shz", (64,), (64,), "float64", [LE, _shuffle(8), _zstd(), CRC]),
    ("c128", (8,), (8,), "complex128", [LE, _gzip(1), CRC]),
    ("bool", (50,), (50,), "bool", [LE, _zstd()]),
    ("f16", (3, 5, 2), (3, 5, 2), "float16", [_transpose(2, 0, 1), BE, _shuffle(2), _gzip(1)]),
]
_SHARD_ARRAYS: List[Tuple[str, Tuple[int, ...], Tuple[int, ...], Any, List[Any]]] = [
    ("s_crc", (16,), (16,), "float64", [_sharding((4,), [LE, CRC])]),
    ("s_zs", (30,), (32,), "int64", [_sharding((8,), [LE, _zstd(), CRC], "start")]),
    ("s_gz2d", (6, 8), (6, 8), "uint8", [_sharding((3, 4), [LE, _gzip()])]),
    ("s_t", (8, 8), (8, 8), "float32", [_sharding((4, 4), [_transpose(1, 0), LE, _shuffle(4), _zstd(), CRC], "start")]),
    ("s_plain", (12,), (12,), "uint32", [_sharding((3,), [LE], "end", [LE])]),
    ("s_nested", (16,), (16,), "float64", [_sharding((8,), [_sharding((2,), [LE, CRC], "start")])]),
]
_VLEN_ARRAYS: List[Tuple[str, Tuple[int, ...], Tuple[int, ...], Any, List[Any]]] = [
    ("v_plain", (11,), (11,), str, [VLEN]),
    ("v_crc", (3, 4), (3, 4), str, [VLEN, CRC]),
    ("v_gz", (6,), (6,), str, [VLEN, _gzip(1), CRC]),
    ("v_zs", (8,), (8,), str, [VLEN, _zstd()]),
    ("v_uniform", (9,), (9,), str, [VLEN, CRC]),
    ("v_codes", (10,), (10,), str, [VLEN]),
    ("v_shard", (12,), (12,), str, [_sharding((4,), [VLEN, _zstd(), CRC])]),
]


def _values(name: str, shape: Tuple[int, ...], dtype: Any) -> np.ndarray:
    n = prod(shape)
    if dtype is str:
        words = {"v_uniform": ["abc"], "v_codes": ["H", "O", "HW"]}.get(name, _WORDS)
        return np.array([words[i % len(words)] for i in range(n)], dtype=object).reshape(shape)
    values = (np.arange(n) % 7 - 2).astype(dtype).reshape(shape)
    if np.dtype(dtype).kind == "f":
        values.flat[-1] = np.nan
    if name in ("s_zs", "s_crc", "s_nested"):
        values.reshape(-1)[: n // 3] = 0  # whole inner chunks of fill: empty index entries
    return values


@functools.lru_cache(maxsize=1)
def _synthetic_store() -> MemoryStore:
    """Arrays of every codec chain, written by this package."""
    store = MemoryStore()
    for name, shape, chunks, dtype, codecs in _CHUNK_ARRAYS + _SHARD_ARRAYS + _VLEN_ARRAYS:
        array = open_array(store, name, mode="w", shape=shape, dtype=dtype, chunks=chunks, codecs=codecs,
                           fill_value=None, attributes={"made_for": "fuzz", "nan": "NaN"})
        array[...] = _values(name, shape, dtype)
    open_array(store, "fills", mode="w", shape=(3,), dtype="float32", chunks=(2,), codecs=[LE],
               fill_value=float("nan"))
    open_array(store, "v2keys", mode="w", shape=(4, 4), dtype="int8", chunks=(2, 2), codecs=[LE],
               chunk_key_encoding={"name": "v2", "configuration": {"separator": "."}},
               dimension_names=["row", None])[...] = 1
    return store


def _synthetic_store_files() -> Dict[str, bytes]:
    store = _synthetic_store()
    return {key: store.get(key) or b"" for key in store.list("")}


def _record_store(c: Corpus) -> MemoryStore:
    return MemoryStore(c.record, read_only=True)


def _record_arrays(c: Corpus, *, strings: bool, sharded: bool) -> List[str]:
    names = []
    for key, data in sorted(c.record.items()):
        if not key.endswith("/zarr.json"):
            continue
        doc = orjson.loads(data)
        if doc.get("node_type") != "array":
            continue
        is_sharded = doc["codecs"][0]["name"] == "sharding_indexed"
        if (doc["data_type"] == "string") == strings and is_sharded == sharded:
            names.append(key[: -len("/zarr.json")])
    return names


def _codec_target(name: str, synthetic: Sequence[Tuple[str, Any, Any, Any, Any]], c: Corpus,
                  record_names: List[str]) -> Target:
    slots = _chunk_slots(_synthetic_store(), [entry[0] for entry in synthetic], "synthetic")
    slots += _chunk_slots(_record_store(c), record_names[:48], "record")
    bombs = _bombs()
    return Target(name, slots[:256], _run_chunk,
                  edits=(lambda rng, data, slot, donors: edit_value(rng, slot.context.pipeline, data, bombs),))


@functools.lru_cache(maxsize=1)
def _bombs() -> Bombs:
    return Bombs()


# -- the metrics WAL --------------------------------------------------------------------------

def _run_wal(_: Any, payload: bytes) -> None:
    """What ``read_metrics`` does with a WAL: the complete lines, strictly and leniently,
    folded (duplicate-step rule), merged as a record's tail, wall times decoded."""
    lines = complete_part(payload)
    for lenient in (False, True):
        parsed = parse_wal(lines, source="fuzz.mlp.jsonl", lenient=lenient)
        for series in parsed.series.values():
            folded = fold(series)
            merge(folded, series, where="fuzz.mlp.jsonl").wall_time


def _wal_target(c: Corpus) -> Target:
    record_wal = c.record["metrics/metrics.jsonl"]
    seeds = [record_wal, c.host_wal, record_wal + c.host_wal, b"", b"\n\n"]
    return Target("wal", [Slot("wal", None, seeds)], _run_wal, slotted=False,
                  edits=(lambda rng, data, slot, donors: edit_wal_lines(rng, data, donors),))


# -- typed meta JSON --------------------------------------------------------------------------

def _typed_meta_seed() -> bytes:
    """A meta document with every one of the 16 tags (and untagged keys)."""
    meta = {
        "flag": True, "count": MetaValue("i32", -7), "big": MetaValue("i64", -(2**63)),
        "small": MetaValue("u32", 2**32 - 1), "huge": MetaValue("u64", 2**64 - 1), "energy": -1.5,
        "nan": MetaValue("f64", math.nan), "inf": MetaValue("f64", -math.inf), "name": "water \u03b1",
        "doc": {"a": [1, 2.5, None, "x"], "b": {"c": False}}, "pbc": MetaValue("bool3", [True, False, True]),
        "grid": MetaValue("i32x3", [1, -2, 3]), "wide": MetaValue("i64x3", [2**62, 0, -1]),
        "dims": MetaValue("u32x3", [1, 2, 3]), "ids": MetaValue("u64x3", [2**64 - 1, 2**53 + 1, 0]),
        "origin": MetaValue("f64x3", [0.0, -0.0, math.nan]), "stress": MetaValue("f64x6", [1, 2, 3, 4, 5, 6.5]),
        "cell": MetaValue("f64x9", np.eye(3).reshape(9)), "untagged_int": 2**63 + 5,
    }
    attrs, types = typed_json.encode_document(meta, "/frame")
    attrs[typed_json.META_TYPES_KEY] = {k: t for k, t in types.items() if not k.startswith("untagged")}
    return orjson.dumps(attrs)


def _encoded_again(tag: str, value: Any, where: str) -> bytes:
    """The typed JSON text a writer stores for ``value`` (as attributes: ``jsonio.dumps``)."""
    return jsonio.dumps(typed_json.encode_value(tag, value, where))


def _run_typed_meta(_: Any, payload: bytes) -> None:
    """A meta document as a group's attributes: checked and decoded (``_meta_types``, the
    16 tags, inference); every value read under every tag, and a per-step ``json`` cell;
    a decoded value re-encoded must read back the same."""
    doc = jsonio.loads(payload)
    if type(doc) is not dict:
        return
    list(typed_json.check_document(doc, "/frame"))
    try:
        typed_json.decode_document(doc, "/frame")
    except MolrecError:
        pass
    for key, raw in list(doc.items())[:32]:
        where = f"/frame/meta:{key}"
        for tag in typed_json.TAGS:
            try:
                value = typed_json.decode_value(tag, raw, where)
                first = _encoded_again(tag, value, where)
            except MolrecError:
                continue
            again = _encoded_again(tag, typed_json.decode_value(tag, jsonio.loads(first), where), where)
            if again != first:
                raise RoundTripError(f"{tag} {raw!r}: encodes as {first!r}, then as {again!r}")
        if type(raw) is str:
            try:
                meta_value("json", raw, where)
            except MolrecError:
                pass


def _typed_meta_target(c: Corpus) -> Target:
    seeds = [_typed_meta_seed()]
    for key, data in sorted(c.record.items()):
        if key.endswith("zarr.json"):
            attrs = orjson.loads(data).get("attributes", {})
            if typed_json.META_TYPES_KEY in attrs:
                seeds.append(orjson.dumps(attrs))
    return Target("typed_meta", [Slot("meta", None, seeds)], _run_typed_meta, slotted=False,
                  edits=(lambda rng, data, slot, donors: edit_json(rng, data, donors),), structured=0.9)


# -- sequence_schema ----------------------------------------------------------------------------

def _schema_seeds(c: Corpus) -> List[bytes]:
    demo = orjson.loads(c.record["trajectory/zarr.json"])["attributes"]["sequence_schema"]
    rich = (SequenceSchema()
            .declare_column("atoms", "x", "f64").declare_precision("atoms", "x", 2.0**-10)
            .declare_column("atoms", "v", "i16", [3]).declare_nullable("atoms", "v")
            .declare_column("atoms", "id", "u64")
            .declare_column("bonds", "i", "u64").declare_target("bonds", "i", "atoms")
            .declare_column("bonds", "j", "u64").declare_target("bonds", "j", "/system/atoms")
            .declare_column("grid", "rho", "f64").declare_structural_shape("grid", [2, 3, 0])
            .declare_column("extra", "q", "i32").declare_aligned("extra", "atoms")
            .declare_meta("pe", "f64").declare_meta_with_fill("n", 0, "u64")
            .declare_meta_with_fill("box", [1.0, 2.0, 3.0], "f64x3")
            .declare_meta_with_fill("note", "none", "string").declare_meta_with_fill("cfg", {"a": [1]}, "json")
            .declare_meta_with_fill("flags", [True, False, True], "bool3"))
    legacy = json.loads(json.dumps(rich.to_json()).replace('"f64"', '"float"', 1).replace('"u64"', '"uint"', 1))
    return [orjson.dumps(demo), orjson.dumps(rich.to_json()), orjson.dumps(legacy)]


def _run_schema(_: Any, payload: bytes) -> None:
    """The pin as stored: read strictly, written out and read again (must be equal)."""
    schema = SequenceSchema.from_json(jsonio.loads(payload))
    again = SequenceSchema.from_json(jsonio.loads(jsonio.dumps(schema.to_json())))  # as a writer stores it
    if again != schema:
        raise RoundTripError(f"sequence_schema read back differs: {schema!r} != {again!r}")
    repr(schema.copy())
    for block in schema.block_names():
        schema.columns(block)
        schema.rows(block)
    for key, _tag in schema.meta_keys():
        tuple(schema.meta_spec(key))


def _schema_target(c: Corpus) -> Target:
    return Target("sequence_schema", [Slot("pin", None, _schema_seeds(c))], _run_schema, slotted=False,
                  edits=(lambda rng, data, slot, donors: edit_json(rng, data, donors),), structured=0.9)


# -- trajectory checkpoints ------------------------------------------------------------------

def _checkpoint_states() -> List[Tuple[Dict[str, bytes], bytes]]:
    """(record files, checkpoint) of a live trajectory after its first and its second durable
    flush: atoms with precision and a nullable column, bonds with targets, a changing box,
    per-step meta."""
    with tempfile.TemporaryDirectory(prefix="molrec-fuzz-ckpt-") as tmp:
        path = Path(tmp) / "live.mrec"
        schema = (SequenceSchema().declare_column("atoms", "x", "f64").declare_precision("atoms", "x", 1e-3)
                  .declare_column("atoms", "q", "f64").declare_nullable("atoms", "q")
                  .declare_column("bonds", "i", "u64").declare_target("bonds", "i", "atoms")
                  .declare_meta("pe", "f64").declare_meta_with_fill("note", "", "string"))
        states = []
        with MrecWriter(path, schema) as writer:
            for i in range(12):
                blocks = {"atoms": Block({"x": np.arange(4.0) + i, "q": np.full(4, 0.5 * i)},
                                         masks={"q": np.arange(4) % 2 == 0})}
                if i % 5 == 0:
                    blocks["bonds"] = Block({"i": np.arange(i % 3 + 1, dtype=np.uint64)})
                meta = {"pe": -1.0 * i, **({"note": f"frame {i}"} if i % 4 == 0 else {})}
                writer.append(Frame(meta, blocks, Box(np.eye(3) * (10.0 + i // 4))), step=10 * i)
                if i in (4, 10):
                    writer.flush()
                    files = {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*"))
                             if p.is_file()}
                    states.append((files, files.pop(CHECKPOINT)))
    return states


def _run_checkpoint(record: MemoryStore, payload: bytes) -> None:
    """What a reader falling back to a trajectory's checkpoint does: parse it, then read the
    trajectory through its view (the saved zarr.json files; tail shards cut to their saved
    size under their saved index pages)."""
    snapshot = Snapshot.from_bytes(payload, CHECKPOINT)
    view = SnapshotView(record, snapshot, "trajectory/")
    for key in list(view.list("trajectory/"))[:512]:
        view.size(key)
        view.get_range(key, 0, 64)
        view.get_range(key, -16)
    for path in snapshot.nodes()[:64]:
        node = open_node(view, path, read_only=True, limits=FUZZ_LIMITS, threads=1)
        if isinstance(node, Array):
            _read_some(node)


def _checkpoint_target() -> Target:
    bombs = _bombs()
    slots = [Slot(f"after flush {number + 1}", MemoryStore(files, read_only=True), [checkpoint])
             for number, (files, checkpoint) in enumerate(_checkpoint_states())]
    return Target("checkpoint", slots, _run_checkpoint,
                  edits=(lambda rng, data, slot, donors: edit_checkpoint(rng, data, bombs),))


# -- a collection's frame bytes ------------------------------------------------------------------

def _frame_bytes_seeds() -> List[bytes]:
    """Every value of a small collection written here that is frame bytes (the index, the force
    field, systems with typed meta and strings, trajectory updates with a cell, masks,
    integer and string columns), and a few encoded directly (a complex, a trailing shape, an
    empty frame)."""
    try:
        import lmdb  # noqa: F401  (the [lmdb] extra, installed by the test extra)
    except ImportError:
        return []
    from molrec_raw.collection import binding
    from molrec_raw.collection.frame_bytes import encode_frame
    with tempfile.TemporaryDirectory(prefix="molrec-fuzz-mrf1-") as tmp:
        path = write_seed_collection(Path(tmp) / "seed.mrec.lmdb")
        handle = binding.acquire(path)
        try:
            with handle.env.begin() as txn:
                seeds = [bytes(v) for k, v in txn.cursor() if bytes(k) not in (b"meta",) and bytes(k)[:1] != b"r"]
        finally:
            handle.release()
    seeds.append(encode_frame({"grid": Block({"rho": np.arange(24, dtype=np.complex64).reshape(4, 6),
                                              "flag": np.array([1, 0, 1, 1], bool)}, structural_shape=(2, 2))},
                              meta={"k": [1, {"a": None}]}, step=2**60, time=-0.0))
    seeds.append(encode_frame({}))
    return seeds


def write_seed_collection(path: Path) -> Path:
    """A small collection (3 records of 3 frames): typed system meta, strings, a nullable
    column, bonds with targets, cells, an index with a null, a force field."""
    from molrec_raw import CollectionWriter, ForceFieldSection
    schema = (SequenceSchema().declare_column("atoms", "x", "f64").declare_column("atoms", "q", "f64")
              .declare_nullable("atoms", "q").declare_column("atoms", "label", "string")
              .declare_column("bonds", "atomi", "u64").declare_target("bonds", "atomi", "atoms")
              .declare_meta("pe", "f64").declare_meta_with_fill("n", 0, "u32"))
    ff = ForceFieldSection({"name": "ff", "units": {"length": "nm", "energy": "kJ/mol"},
                            "styles": [{"category": "atom", "style": "full"}]},
                           {"atom.full": Block({"name": np.array(["a", "b"], dtype=object), "mass": np.array([1.0, 2.0])})})
    with CollectionWriter(path, units={"length": "nm"}, schema=schema, forcefield=ff,
                          index_schema={"code": {"dtype": "string", "nullable": True}, "e": {"dtype": "f64", "precision": 0.01}}) as w:
        for r in range(3):
            system = Frame({"smiles": "CCO", "total_charge": MetaValue("i32", -1)},
                           {"atoms": Block({"element": np.array(["C", "C", "O"], dtype=object),
                                            "id": np.arange(3, dtype=np.uint64)})})
            frames = [Frame({"pe": -1.0 * k, **({"n": k} if k else {})},
                            {"atoms": Block({"x": np.arange(3.0) + k, "q": np.full(3, 0.5),
                                             "label": np.array(["a", "b", "c"], dtype=object)},
                                            masks={"q": np.array([True, k % 2 == 0, True])}),
                             **({"bonds": Block({"atomi": np.array([0, 1], np.uint64)})} if k != 1 else {})},
                            Box(np.eye(3) * (5.0 + k)))
                      for k in range(3)]
            w.add_record(system=system, frames=frames, times=[0.5 * k for k in range(3)],
                         index={"code": None if r == 1 else f"c{r}", "e": 0.123 * r})
    return path


def _run_frame_bytes(cache: Any, payload: bytes) -> None:
    """A value as a collection reader decodes it (frame_bytes.decode_frame, fresh and through
    a layout cache shared by the campaign); what it reads must survive encoding it again."""
    from molrec_raw.collection.frame_bytes import decode_frame, encode_frame
    decoded = decode_frame(payload, "/fuzz")
    again = decode_frame(payload, "/fuzz", cache)
    for frame in (decoded, again):
        for name, block in frame.blocks.items():
            block.masks = {c: np.asarray(m) for c, m in block.masks.items()}
    encoded = encode_frame(decoded.blocks, meta=decoded.meta, meta_types=decoded.meta_types,
                           step=decoded.step, time=decoded.time, box=decoded.box)
    back = decode_frame(encoded, "/fuzz")
    for name, block in decoded.blocks.items():
        other, other_cached = back.blocks[name], again.blocks[name]
        for column, values in block.columns.items():
            for got in (other.columns[column], other_cached.columns[column]):
                same = got.tolist() == values.tolist() if values.dtype == object else (
                    got.shape == values.shape and got.tobytes() == values.tobytes())
                if not same:
                    raise RoundTripError(f"frame bytes: {name}/{column} reads back differently")


def _frame_bytes_target() -> Target:
    from molrec_raw.collection.layout_cache import LayoutCache
    return Target("frame_bytes", [Slot("mrf1", LayoutCache(64), _frame_bytes_seeds())], _run_frame_bytes,
                  slotted=False, edits=(lambda rng, data, slot, donors: edit_frame_bytes(rng, data, donors),),
                  structured=0.85)


# -- all of them ----------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def targets() -> Dict[str, Target]:
    """Every target by name (built on first use)."""
    c = corpus()
    targets = [
        _zip_target(c),
        _zarr_json_target(c),
        _codec_target("chunk", _CHUNK_ARRAYS, c, _record_arrays(c, strings=False, sharded=False)),
        _codec_target("shard", _SHARD_ARRAYS, c, _record_arrays(c, strings=False, sharded=True)),
        _codec_target("vlen_utf8", _VLEN_ARRAYS, c, _record_arrays(c, strings=True, sharded=False)
                      + _record_arrays(c, strings=True, sharded=True)),
        _wal_target(c),
        _typed_meta_target(c),
        _schema_target(c),
        _checkpoint_target(),
        _frame_bytes_target(),
        *whole_targets(c.record),
    ]
    return {t.name: t for t in targets}


# -- a campaign -------------------------------------------------------------------------------

def memory_kib() -> Tuple[int, int]:
    """(current, peak) resident set size in KiB (Linux ``/proc/self/status``; 0 elsewhere)."""
    found = {"VmRSS": 0, "VmHWM": 0}
    try:
        with open("/proc/self/status") as status:
            for line in status:
                name, _, rest = line.partition(":")
                if name in found:
                    found[name] = int(rest.split()[0])
    except OSError:
        pass
    return found["VmRSS"], found["VmHWM"]


ADDRESS_SPACE_MARGIN = 4 << 30  # a campaign may map this much beyond what the process had


@contextlib.contextmanager
def address_space_cap(margin: int = ADDRESS_SPACE_MARGIN) -> Iterator[None]:
    """Cap the process's address space (``RLIMIT_AS``, Linux) at its current size plus
    ``margin`` while a campaign runs: an input whose few bytes make a reader allocate gigabytes
    raises ``MemoryError`` (an escape, with its input number) instead of calling the machine's
    OOM killer; the limit is restored afterwards."""
    try:
        import resource
    except ImportError:
        yield
        return
    size = 0
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    size = int(line.split()[1]) << 10
    except OSError:
        pass
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = size + margin
    if not size or (soft != resource.RLIM_INFINITY and soft <= cap):
        yield
        return
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (Linux ≥ 4.0) so the peak measured is this campaign's."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


def check_seeds(target: Target) -> None:
    """Run every seed: valid files read without any error; under a faulty context (a lying
    range source) they may be refused, but only with a MolrecError."""
    for data in target.seed_inputs():
        target.execute(data)
    for data in target.seed_inputs(valid=False):
        result = outcome(target, data)
        assert result.kind is None, (target.name, result.kind, result.detail)


@dataclass
class CampaignReport:
    target: str
    seed: int
    start: int
    count: int
    escapes: Dict[str, List[int]] = field(default_factory=dict)  # kind -> input numbers
    details: Dict[str, str] = field(default_factory=dict)  # kind -> the first message
    slowest_seconds: float = 0.0
    slowest_input: int = -1
    rss_before_kib: int = 0
    rss_peak_kib: int = 0
    peak_reset: bool = False
    seconds: float = 0.0
    _began: float = 0.0

    @property
    def escape_count(self) -> int:
        return sum(len(v) for v in self.escapes.values())

    @property
    def rss_growth_kib(self) -> int:
        return max(0, self.rss_peak_kib - self.rss_before_kib)

    def begin(self) -> None:
        """Start the clock and the RSS measurement (the peak mark reset where the kernel can)."""
        self.peak_reset = reset_peak_rss()
        current, peak = memory_kib()
        self.rss_before_kib = current if self.peak_reset else peak
        self._began = time.perf_counter()

    def add(self, index: int, result: Outcome, data: bytes, save: Optional[Path], name: str) -> None:
        """Count input ``index``; keep the slowest; record an escape (the first three inputs
        of each kind written to ``save``/<target>/``name``)."""
        self.count += 1
        if result.seconds > self.slowest_seconds:
            self.slowest_seconds, self.slowest_input = result.seconds, index
        if result.kind is None:
            return
        numbers = self.escapes.setdefault(result.kind, [])
        self.details.setdefault(result.kind, result.detail)
        if save is not None and len(numbers) < 3:
            folder = save / self.target
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
        numbers.append(index)

    def end(self) -> None:
        self.seconds = time.perf_counter() - self._began
        self.rss_peak_kib = memory_kib()[1]


def run_campaign(target: Target, seed: int, start: int, count: int, *, save: Optional[Path] = None,
                 hang_seconds: float = 20.0, deadline: Optional[float] = None) -> CampaignReport:
    """Run inputs ``start .. start+count-1`` of campaign ``seed`` against ``target``; record
    each escape's kind, the slowest input, and the peak RSS growth over the RSS at the start
    (after the seeds ran once: imports and caches warm).  ``save``: directory receiving the
    first three inputs of each escape kind.  ``deadline`` (a ``time.monotonic`` value) stops
    early; ``count`` then reports what ran."""
    check_seeds(target)
    report = CampaignReport(target.name, seed, start, 0)
    alarm = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGALRM, _raise_hang) if alarm else None
    report.begin()
    try:
        with address_space_cap():
            _run_inputs(target, seed, start, count, report, save, hang_seconds, deadline, alarm)
    finally:
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    report.end()
    return report


def _run_inputs(target: Target, seed: int, start: int, count: int, report: "CampaignReport", save: Optional[Path],
                hang_seconds: float, deadline: Optional[float], alarm: bool) -> None:
    """The inputs of :func:`run_campaign`, one by one, into ``report``."""
    for index in range(start, start + count):
        if deadline is not None and time.monotonic() > deadline:
            break
        data = make_input(target, seed, index)
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, hang_seconds)
        result = outcome(target, data)
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
        report.add(index, result, data, save, f"{seed}-{index}.bin")


def _raise_hang(signum: int, frame: Any) -> None:
    raise _Hang()
