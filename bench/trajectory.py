#!/usr/bin/env python
"""Benchmark the trajectory writer and reader against the limit and the peers (issue 11).

Workloads (10,000-atom coordinates on the precision grid: a smooth random walk around random
positions in a 50 Å box; x, y, z f64 with precision 1e-3):

  W1 append       ATOMS x FRAMES (10,000 x 500), one ``MrecWriter.append`` per frame, the
                  default cadence K; durable (the default) and ``durable=False``
  W2 random       RANDOM random frames of W1's record, ``reader[i]``
  W5 small        64 atoms x 20,000 frames, one append per frame, default cadence
  W6 sequential   every frame of W1's record in order, ``for frame in reader``
  W7 whole block  ``reader.block_array("atoms")``: one (frames, rows, 3) array

``--only write``: W1 alone (ours durable and ``durable=False``, the limit, "limit + fsync" and the
limits with the commit's metadata writes, "limit + metadata" and "limit + metadata + fsync").

Small frames (issue 21; ``--only small``): 64 atoms, x/y/z at precision 1e-3 and a per-step
``pe``, built once into ``--cache`` (the same bytes every time), h5py holding the same values
as H5MD would (positions in chunks of 32 frames, gzip 1 + shuffle; ``pe`` in chunks of 1,024):

  S1 random       ``reader[i]`` for 2,000 random frames of a 100,000-frame trajectory
  S2 in order     the first 20,000 frames in order (``iter_frames``)
  G  growth       S1 at 20,000 and at 200,000 frames, with uniform picks and with picks that
                  never share an inner chunk (every read a miss), both with the same small reader
                  cache (``--small-cache``, 256 KiB: the cost of a read, not the default cache's hit
                  rate on a file it mostly holds); ``validate`` per frame
  V  validate     ``reader.verify()`` of the 20,000-frame trajectory against iterating it
  O  open         ``MrecReader(path)`` of a 1,000,000-frame trajectory
  M  memory       RSS of a child iterating the 1,000,000 frames, at 100,000 and at the end

Every timed small call gets a reader opened just before it (nothing cached from a call
before); ours and h5py alternate in a fresh random order each round.

molrs 0.19 (``--only molrs``; bench/reference.py): streaming appends, random and in-order reads of
64-atom frames, ours and molrs each on its own store and on the other's (absent: the rows say so).

Peers, all in the same process and the same rounds (interleaved, so a slow phase of the
shared machine hits every one of them):

  limit          the same work as W1 with nothing else: the frames of each commit (K) gathered
                 into one buffer, rounded by the same formula (x * 1/q, rint, * q, one finiteness
                 check), the byte shuffle of every inner chunk in one vectorised step, zstd level
                 3 through zstandard's C-threaded batch API (multi_compress_to_buffer, 2 threads),
                 crc32c per inner chunk, one positional write per shard plus its index page
                 (files kept open); "limit + fsync" also fsyncs every shard file at the end;
                 "limit + metadata" (issue 37) adds what the commit protocol requires beside the
                 codec work: after each commit's data, every column's zarr.json with its new shape
                 and last the trajectory group's with the new nstep, each written whole to a
                 temporary file and renamed over the old one (documents as our record holds
                 them); "+ fsync" then fsyncs the shards, the documents (the marker last) and
                 the directories holding them at the end, as a durable close does
  decode limit   W6/W7's unavoidable work on W1's record: per shard one ranged read of its index
                 and one of its chunks, crc32c check per chunk, multi_decompress_to_buffer
                 (2 threads) of every chunk of the shard's three columns, the unshuffle into the
                 result (per-column arrays for W6; the interleaved (frames, rows, 3) array for W7)
  h5py           H5MD's layout: position (frames, atoms, 3) f64, chunks of one frame,
                 gzip level 1 + shuffle, resizable, plus step and time datasets; written one
                 frame at a time (resize + write of each dataset), read one frame at a time
  zarr-python    3.4.2, the same geometry and codecs as the record, resize + write per 50 frames
  tensorstore    the same geometry, bytes + zstd 3 + crc32c (no numcodecs.shuffle)

Times are medians of ``--repeats`` rounds; every ratio is formed inside the run.  The reads
(W2, W6, W7) take in each round the fastest of ``--best-of`` (3) back-to-back calls of each
case: a 120 MB result lands in huge pages or in 30,000 4 KiB page faults (0.05 vs 0.3 s of
system time here) and a two-thread zstd call waits for a core when the other job holds it —
either way at random, for ours and each peer alike; the fastest of three is the work.  Memory: the
writer's peak RSS for FRAMES and 10 x FRAMES frames (child processes), and during W6 the most
inner chunks the reader's cache held per column and the iteration's RSS growth.

    python bench/trajectory.py [--repeats 5] [--json run.json]
    python bench/trajectory.py --summarize run1.json run2.json run3.json   # the spread table
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import numpy as np

from molrec_raw.record.model import Block, Frame
from molrec_raw.record.precision import round_to_precision
from molrec_raw.record.trajectory import MrecReader, MrecWriter, SequenceSchema

warnings.simplefilter("ignore")
PRECISION = 1e-3
BATCH = 50  # frames per resize + write of the zarr-python and tensorstore peers
THREADS = 2  # the limit's zstd threads (the machine has 2 cores)


# ----------------------------------------------------------------------------- data
def frame_values(i: int, atoms: int) -> Dict[str, np.ndarray]:
    """A smooth random walk: frame i = frame 0 plus i small steps (deterministic)."""
    base = np.random.default_rng(0).uniform(0, 50, size=(3, atoms))
    drift = np.random.default_rng(i + 1).normal(scale=0.01, size=(3, atoms)) + 0.001 * i
    return {c: base[k] + drift[k] for k, c in enumerate("xyz")}


class LazyFrames:
    """Frames generated on demand (for the memory measurement: nothing held in advance)."""

    def __init__(self, atoms: int, frames: int) -> None:
        self.atoms, self.frames = atoms, frames

    def __len__(self) -> int:
        return self.frames

    def __getitem__(self, i: int) -> Dict[str, np.ndarray]:
        if not 0 <= i < self.frames:
            raise IndexError(i)
        return frame_values(i, self.atoms)


def schema_for(atoms: int) -> SequenceSchema:
    schema = SequenceSchema().declare_block("atoms", rows=atoms)
    for c in "xyz":
        schema.declare_column("atoms", c, "f64").declare_precision("atoms", c, PRECISION)
    return schema


def ours_write(path: str, data: Any, durable: bool = True) -> None:
    with MrecWriter(path, schema_for(len(data[0]["x"])), durable=durable) as writer:  # rounds itself
        for i, values in enumerate(data):
            writer.append(Frame(blocks={"atoms": Block(values)}), step=i)


def cadence(atoms: int) -> int:
    """The writer's default flush cadence K for this schema."""
    tmp = tempfile.mkdtemp()
    try:
        with MrecWriter(os.path.join(tmp, "k.mrec"), schema_for(atoms), durable=False) as w:
            return w.flush_every
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def geometry(path: str) -> Dict[str, Any]:
    with open(os.path.join(path, "trajectory", "atoms", "x", "zarr.json")) as fh:
        doc = json.load(fh)
    sharding = doc["codecs"][0]["configuration"]
    return {"shard": doc["chunk_grid"]["configuration"]["chunk_shape"][0], "inner": sharding["chunk_shape"][0],
            "codecs": sharding["codecs"], "index_location": sharding.get("index_location", "end")}


# ----------------------------------------------------------------------------- the limit
def _metadata_docs(record: str) -> List[Tuple[str, Dict[str, Any]]]:
    """The documents a W1 commit replaces, as ``record`` (ours, written once) holds them:
    (relative path, document) of the three columns' zarr.json and, last, the trajectory
    group's (the commit marker)."""
    names = [os.path.join("trajectory", "atoms", c, "zarr.json") for c in "xyz"] + [os.path.join("trajectory", "zarr.json")]
    docs = []
    for name in names:
        with open(os.path.join(record, name)) as fh:
            docs.append((name, json.load(fh)))
    return docs


def _replace_metadata(directory: str, docs: List[Tuple[str, Dict[str, Any]]], rows: int, nstep: int,
                      written: Set[str]) -> None:
    """One commit's metadata (trajectory §10): every column's zarr.json with its new shape,
    then the group's with the new ``nstep`` — each written whole to a temporary file and
    renamed over the old one (what a reader may see at any instant is a whole document)."""
    for name, doc in docs:
        if "shape" in doc:
            doc["shape"] = [rows] + doc["shape"][1:]
        else:
            doc.setdefault("attributes", {})["nstep"] = nstep
        target = os.path.join(directory, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target + ".tmp", "wb") as fh:
            fh.write(json.dumps(doc, indent=2).encode())
        os.replace(target + ".tmp", target)
        written.add(target)


def limit_append(directory: str, frames: List[Dict[str, np.ndarray]], geo: Dict[str, Any], k: int,
                 durable: bool = False, metadata: Optional[List[Tuple[str, Dict[str, Any]]]] = None) -> None:
    """W1's unavoidable work (module docstring): per commit of ``k`` frames, gather, round,
    shuffle, zstd batch, crc32c, one positional write per shard plus its index page.
    ``metadata`` (``_metadata_docs``): also the metadata writes the commit protocol requires
    (``_replace_metadata`` after each commit's data; durable: at the end every file and the
    directories holding them fsynced, the marker last)."""
    import crc32c
    import zstandard

    inner, per_shard = geo["inner"], geo["shard"] // geo["inner"]
    atoms = frames[0]["x"].shape[0]
    q = math.ldexp(1.0, math.frexp(PRECISION)[1] - 1)
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=False, write_content_size=True)
    raw = np.empty((3, k * atoms))
    rounded = np.empty_like(raw)
    index_bytes = per_shard * 16 + 4
    shards: Dict[Tuple[int, int], List[Any]] = {}  # (column, shard) -> [fd, tail, index]
    os.makedirs(directory, exist_ok=True)
    written: Set[str] = set()
    for first in range(0, len(frames), k):
        batch = frames[first:first + k]
        rows = len(batch) * atoms
        start = first * atoms
        assert start % inner == 0, "commits start on an inner-chunk boundary"
        for c, name in enumerate("xyz"):
            for j, values in enumerate(batch):
                raw[c, j * atoms:(j + 1) * atoms] = values[name]
        n_chunks = -(-rows // inner)
        x, r = raw[:, :rows], rounded[:, :n_chunks * inner]
        np.multiply(x, 1.0 / q, out=r[:, :rows])
        np.rint(r[:, :rows], out=r[:, :rows])
        r[:, :rows] *= q
        if not math.isfinite(float(r[:, :rows].sum())):
            raise AssertionError("the limit assumes finite coordinates")
        r[:, rows:] = 0.0  # a partial last chunk is stored whole, with fill values
        stack = r.reshape(3 * n_chunks, inner).view(np.uint8)
        shuffled = np.ascontiguousarray(stack.reshape(3 * n_chunks, inner, 8).transpose(0, 2, 1)).reshape(3 * n_chunks, -1)
        encoded = compressor.multi_compress_to_buffer([row for row in shuffled], threads=THREADS)
        for c in range(3):
            chunk0 = start // inner
            j = 0
            while j < n_chunks:
                shard = (chunk0 + j) // per_shard
                take = min(n_chunks - j, (shard + 1) * per_shard - (chunk0 + j))
                state = shards.get((c, shard))
                if state is None:
                    fd = os.open(os.path.join(directory, f"{c}.{shard}"), os.O_RDWR | os.O_CREAT, 0o644)
                    state = shards[(c, shard)] = [fd, index_bytes + 12, np.full((per_shard, 2), 2**64 - 1, np.uint64)]
                fd, tail, index = state
                parts = []
                for m in range(j, j + take):
                    segment = encoded[c * n_chunks + m]
                    parts.append(segment)
                    parts.append(crc32c.crc32c(segment).to_bytes(4, "little"))
                    size = len(segment) + 4
                    index[(chunk0 + m) % per_shard] = (tail, size)
                    tail += size
                os.pwrite(fd, b"".join(parts), state[1])
                page = index.tobytes()
                os.pwrite(fd, page + crc32c.crc32c(page).to_bytes(4, "little"), 0)
                state[1] = tail
                j += take
        if metadata is not None:
            _replace_metadata(directory, metadata, start + rows, first + len(batch), written)
    for fd, _, _ in shards.values():
        if durable:
            os.fsync(fd)
        os.close(fd)
    if durable and metadata is not None:
        marker = os.path.join(directory, metadata[-1][0])
        for name in sorted(written - {marker}) + [marker]:
            _fsync_path(name)
        for folder in sorted({os.path.dirname(name) for name in written} | {directory}):
            _fsync_path(folder)


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _shard_files(record: str, column: str) -> List[str]:
    folder = os.path.join(record, "trajectory", "atoms", column, "c")
    return [os.path.join(folder, name) for name in sorted(os.listdir(folder), key=int)]


def decode_limit(record: str, geo: Dict[str, Any], rows: int, out: Optional[np.ndarray] = None,
                 batch: int = 8) -> List[np.ndarray]:
    """W6/W7's unavoidable work (module docstring): every chunk of ``rows`` rows of x, y, z
    decoded — into one reused buffer per batch (W6: a pass over the frames keeps none of
    them), or into the columns of ``out`` (rows, 3) when given (W7).  Chunks are decompressed
    ``batch`` per column per call (about 2 MB: the fastest size measured, 1 to 255 tried —
    larger batches leave the CPU's caches before the unshuffle reads them)."""
    import crc32c
    import zstandard

    inner, per_shard = geo["inner"], geo["shard"] // geo["inner"]
    index_bytes = per_shard * 16 + 4
    decompressor = zstandard.ZstdDecompressor()
    targets = None if out is None else [out[:, c] for c in range(3)]
    scratch = np.empty((3, batch, inner))
    files = [_shard_files(record, c) for c in "xyz"]
    for shard in range(len(files[0])):
        count = min(per_shard, -(-(rows - shard * per_shard * inner) // inner))
        stored = []
        for c in range(3):  # one ranged read of the index and one of the chunks, per shard
            with open(files[c][shard], "rb") as fh:
                fd = fh.fileno()
                page = os.pread(fd, index_bytes, 0)
                index = np.frombuffer(page[:-4], np.uint64).reshape(per_shard, 2)
                lo = int(index[0, 0])
                hi = int(index[count - 1, 0] + index[count - 1, 1])
                stored.append((memoryview(os.pread(fd, hi - lo, lo)), index.tolist(), lo))
        for first_chunk in range(0, count, batch):
            frames, views = [], []
            for c, (data, index, lo) in enumerate(stored):
                for m in range(first_chunk, min(count, first_chunk + batch)):
                    offset, size = index[m][0] - lo, index[m][1]
                    body = data[offset:offset + size - 4]
                    if crc32c.crc32c(body) != int.from_bytes(data[offset + size - 4:offset + size], "little"):
                        raise AssertionError("checksum")
                    frames.append(body)
                    first = (shard * per_shard + m) * inner
                    views.append(scratch[c, m - first_chunk, :min(inner, rows - first)] if targets is None
                                 else targets[c][first:min(first + inner, rows)])
            decoded = decompressor.multi_decompress_to_buffer(frames, threads=THREADS)
            for m, target in enumerate(views):
                planes = np.frombuffer(decoded[m], np.uint8).reshape(8, inner)[:, :target.shape[0]]
                if target.flags.c_contiguous:
                    dest = target.view(np.uint8)
                    for j in range(8):
                        dest[j::8] = planes[j]
                else:
                    strided = target[..., None].view(np.uint8)
                    for j in range(8):
                        strided[..., j] = planes[j]
    return [scratch[c] for c in range(3)] if targets is None else targets


# ----------------------------------------------------------------------------- peers
def h5_write(path: str, positions: List[np.ndarray]) -> None:
    """H5MD's way (MDAnalysis's H5MDWriter): one frame per chunk, gzip 1 + shuffle,
    resizable datasets, one resize + write of position, step and time per frame."""
    import h5py

    atoms = positions[0].shape[0]
    with h5py.File(path, "w") as fh:
        group = fh.create_group("particles/trajectory/position")
        value = group.create_dataset("value", shape=(0, atoms, 3), maxshape=(None, atoms, 3), dtype="f8",
                                     chunks=(1, atoms, 3), compression="gzip", compression_opts=1, shuffle=True)
        step = group.create_dataset("step", shape=(0,), maxshape=(None,), dtype="i8", chunks=(1,))
        stamp = group.create_dataset("time", shape=(0,), maxshape=(None,), dtype="f8", chunks=(1,))
        for i, xyz in enumerate(positions):
            value.resize(i + 1, axis=0)
            value[i] = xyz
            step.resize(i + 1, axis=0)
            step[i] = i
            stamp.resize(i + 1, axis=0)
            stamp[i] = float(i)


def h5_open(path: str) -> Any:
    import h5py

    fh = h5py.File(path, "r")
    return fh, fh["particles/trajectory/position/value"]


def peer_write(kind: str, path: str, quantized: List[Dict[str, np.ndarray]], geo: Dict[str, Any]) -> None:
    """The peers get values already on the precision grid (they have no precision feature)."""
    atoms, frames = len(quantized[0]["x"]), len(quantized)
    arrays: Dict[str, Any] = {}
    if kind == "zarr-python":
        import zarr
        from zarr.codecs import BytesCodec, Crc32cCodec, ZstdCodec
        from zarr.codecs.numcodecs import Shuffle
        root = zarr.open_group(path, mode="w")
        for c in "xyz":
            arrays[c] = root.create_array(c, shape=(0,), dtype="float64", chunks=(geo["inner"],), shards=(geo["shard"],),
                                          serializer=BytesCodec(), filters=[], fill_value=0.0,
                                          compressors=[Shuffle(elementsize=8), ZstdCodec(level=3, checksum=False), Crc32cCodec()])
    else:
        import tensorstore as ts
        for c in "xyz":
            spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": os.path.join(path, c)},
                    "context": {"file_io_sync": False},
                    "metadata": {"shape": [0], "data_type": "float64",
                                 "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [geo["shard"]]}},
                                 "chunk_key_encoding": {"name": "default"},
                                 "codecs": [{"name": "sharding_indexed", "configuration": {
                                     "chunk_shape": [geo["inner"]],
                                     "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                                {"name": "zstd", "configuration": {"level": 3, "checksum": False}},
                                                {"name": "crc32c"}],
                                     "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
                                     "index_location": geo["index_location"]}}]},
                    "create": True, "delete_existing": True}
            arrays[c] = ts.open(spec).result()
    rows = 0
    for first in range(0, frames, BATCH):
        batch = quantized[first:first + BATCH]
        n = len(batch) * atoms
        for c in "xyz":
            values = np.concatenate([b[c] for b in batch])
            if kind == "zarr-python":
                arrays[c].resize((rows + n,))
                arrays[c][rows:rows + n] = values
            else:
                arrays[c] = arrays[c].resize(exclusive_max=[rows + n]).result()
                arrays[c][rows:rows + n].write(values).result()
        rows += n


def peer_reader(kind: str, path: str) -> Callable[[int, int], Any]:
    if kind == "zarr-python":
        import zarr
        arrays = {c: zarr.open_array(os.path.join(path, c), mode="r") for c in "xyz"}
        return lambda i, atoms: [arrays[c][i * atoms:(i + 1) * atoms] for c in "xyz"]
    import tensorstore as ts
    arrays = {c: ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": os.path.join(path, c)}}).result()
              for c in "xyz"}
    return lambda i, atoms: [arrays[c][i * atoms:(i + 1) * atoms].read().result() for c in "xyz"]


# ----------------------------------------------------------------------------- memory
def _vm(field: str) -> float:
    """A /proc/self/status figure in MiB (VmHWM is per address space, unlike ru_maxrss,
    which Linux carries across exec from the benchmark's own parent process)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _child(code: str) -> List[float]:
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {here!r}); import trajectory as t; "
                          + code], capture_output=True, text=True, check=True)
    return [float(v) for v in out.stdout.split()[-3:]]


def peak_rss_of_writer(atoms: int, frames: int) -> Tuple[float, float]:
    """(RSS before, peak RSS) in MiB of a child process that only runs the writer."""
    base, peak, _ = _child(
        "import tempfile, os; d = tempfile.mkdtemp(); "
        f"t.frame_values(0, {atoms}); t.cadence({atoms}); base = t._vm('VmRSS'); "
        f"t.ours_write(os.path.join(d, 'r.mrec'), t.LazyFrames({atoms}, {frames})); "
        "print(base, t._vm('VmHWM'), 0)")
    return base, peak


def _cached_keys(reader: Any) -> List[Tuple[str, int]]:
    """(path, chunk) of every decoded chunk the reader's cache holds (the read engine's, or
    main's ChunkCache before issue 21)."""
    engine = getattr(reader, "_engine", None)
    if engine is not None:
        return list(engine.cache.keys())
    return list(reader._chunks._chunks)


def iteration_probe(record: str) -> None:
    """In a child: iterate ``record`` and print RSS before, peak RSS, and the most inner chunks
    of one array the reader's cache held at any frame."""
    reader = MrecReader(record)
    base, most = _vm("VmRSS"), 0
    for _ in reader:
        held: Dict[str, int] = {}
        for path, _chunk in _cached_keys(reader):
            held[path] = held.get(path, 0) + 1
        most = max([most, *held.values()])
    reader.close()
    print(base, _vm("VmHWM"), most)


def iteration_memory(record: str) -> Tuple[float, float, float]:
    """(RSS before, peak RSS, most inner chunks held per column) of a child iterating W1's record."""
    base, peak, most = _child(f"t.iteration_probe({record!r})")
    return base, peak, most


# ----------------------------------------------------------------------------- small frames (issue 21)
SMALL_ATOMS = 64


def small_schema() -> SequenceSchema:
    """64 atoms, x/y/z f64 at precision 1e-3, and a per-step ``pe``."""
    schema = schema_for(SMALL_ATOMS)
    return schema.declare_meta("pe", "f64")


def small_positions(first: int, count: int) -> np.ndarray:
    """Frames ``first:first+count`` of the small trajectory, (count, 64, 3), on the precision
    grid already (what the writer stores; h5py gets the same values)."""
    base = np.random.default_rng(0).uniform(0, 20, size=(SMALL_ATOMS, 3))
    k = np.arange(first, first + count, dtype=np.float64)
    walk = base[None] + 0.001 * k[:, None, None] + 0.01 * np.sin(k[:, None, None] * 0.37 + base[None])
    return round_to_precision(walk, PRECISION)


def small_pe(first: int, count: int) -> np.ndarray:
    return -np.arange(first, first + count, dtype=np.float64) * 0.5


def build_small(path: str, frames: int) -> None:
    """The small trajectory of ``frames`` frames (one append each, the default cadence;
    ``durable=False``: a build, not a measurement)."""
    tmp = path + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    with MrecWriter(tmp, small_schema(), durable=False) as writer:
        for first in range(0, frames, 4096):
            block = small_positions(first, min(4096, frames - first))
            pe = small_pe(first, block.shape[0])
            for j in range(block.shape[0]):
                writer.append(Frame(meta={"pe": float(pe[j])},
                                    blocks={"atoms": Block({c: block[j, :, k] for k, c in enumerate("xyz")})}),
                              step=first + j)
    os.replace(tmp, path)


def build_small_h5(path: str, frames: int) -> None:
    """The same values as H5MD would hold them: positions (frames, 64, 3) in chunks of 32
    frames, gzip level 1 + shuffle; ``pe`` in chunks of 1,024."""
    import h5py

    tmp = path + ".tmp"
    with h5py.File(tmp, "w") as fh:
        pos = fh.create_dataset("position", shape=(frames, SMALL_ATOMS, 3), dtype="f8", chunks=(32, SMALL_ATOMS, 3),
                                compression="gzip", compression_opts=1, shuffle=True)
        pe = fh.create_dataset("pe", shape=(frames,), dtype="f8", chunks=(1024,), compression="gzip",
                               compression_opts=1, shuffle=True)
        for first in range(0, frames, 8192):
            count = min(8192, frames - first)
            pos[first:first + count] = small_positions(first, count)
            pe[first:first + count] = small_pe(first, count)
    os.replace(tmp, path)


def cached(cache: str, name: str, build: Callable[[str], None]) -> str:
    """``cache/name``, built once (records are deterministic: the same bytes every time)."""
    path = os.path.join(cache, name)
    if not os.path.exists(path):
        os.makedirs(cache, exist_ok=True)
        started = time.perf_counter()
        build(path)
        print(f"built {name} in {time.perf_counter() - started:.0f} s", flush=True)
    return path


def _iterate(reader: Any, stop: int) -> int:
    """Frames ``0:stop`` in order: ``iter_frames`` (the read engine), else the iterator."""
    if hasattr(reader, "iter_frames"):
        return sum(1 for _ in reader.iter_frames(0, stop))
    count = 0
    for _ in reader:
        count += 1
        if count == stop:
            break
    return count


def small_rss_probe(record: str, marks: str) -> None:
    """In a child: iterate ``record`` and print RSS (MiB) before and when each of the
    comma-separated frame counts in ``marks`` has been read."""
    at = [int(m) for m in marks.split(",")]
    reader = MrecReader(record)
    seen = [_vm("VmRSS")]
    for count, _ in enumerate(reader, 1):
        if count in at:
            seen.append(_vm("VmRSS"))
    reader.close()
    print(*seen)


def run_small(args: argparse.Namespace) -> Dict[str, Any]:
    """The small-frame workloads of issue 21 (the module docstring), ours against h5py where
    h5py has a counterpart; fresh readers for every timed call (no cache carried over)."""
    import h5py

    cache = args.cache or os.path.join(tempfile.gettempdir(), "molrec-bench-small")
    n, grow = args.small_records, [int(g) for g in args.growth.split(",")]
    record = cached(cache, f"s{n}.mrec", lambda p: build_small(p, n))
    h5 = cached(cache, f"s{n}.h5", lambda p: build_small_h5(p, n))
    growth = {g: cached(cache, f"s{g}.mrec", lambda p, g=g: build_small(p, g)) for g in grow}
    growth_h5 = {g: cached(cache, f"s{g}.h5", lambda p, g=g: build_small_h5(p, g)) for g in grow}
    big = cached(cache, f"s{args.open_frames}.mrec", lambda p: build_small(p, args.open_frames))
    picks = np.random.default_rng(42).integers(0, n, args.small_picks).tolist()
    times: Dict[str, List[float]] = {}
    cpu: Dict[str, List[float]] = {}
    order = np.random.default_rng(11)
    with MrecReader(record) as reader, h5py.File(h5, "r") as fh:  # the same values
        one = reader[picks[0]]
        want = np.stack([one.blocks["atoms"].columns[c] for c in "xyz"], axis=1)
        assert np.array_equal(fh["position"][picks[0]], want), "h5py holds the same values"
        assert fh["pe"][picks[0]] == one.meta["pe"]

    def h5_random(path: str = h5, chosen: Optional[List[int]] = None) -> Callable[[], Any]:
        fh = h5py.File(path, "r")
        pos, pe = fh["position"], fh["pe"]
        wanted = picks if chosen is None else chosen
        return lambda: [(pos[i], pe[i]) for i in wanted]

    def h5_sequential() -> Callable[[], Any]:
        fh = h5py.File(h5, "r")
        pos, pe = fh["position"], fh["pe"]
        return lambda: sum(1 for i in range(args.small_sequential) if pos[i] is not None and pe[i] is not None)

    def ours_random(path: str, chosen: List[int], cache_bytes: Optional[int] = None) -> Callable[[], Any]:
        reader = MrecReader(path) if cache_bytes is None else MrecReader(path, cache_bytes=cache_bytes)
        return lambda: [reader[i] for i in chosen]

    def ours_sequential() -> Callable[[], Any]:
        reader = MrecReader(record)
        return lambda: _iterate(reader, args.small_sequential)

    def ours_verify(path: str) -> Callable[[], Any]:
        reader = MrecReader(path)
        return lambda: reader.verify()

    def ours_iterate_all(path: str) -> Callable[[], Any]:
        reader = MrecReader(path)
        return lambda: sum(1 for _ in reader)

    def distinct(frames: int) -> List[int]:
        """Picks that never share an inner chunk (32 frames a chunk): every read a miss."""
        rng = np.random.default_rng(5)
        chunks = rng.choice(frames // 32, size=min(args.small_picks, frames // 32), replace=False)
        return (chunks * 32 + rng.integers(0, 32, chunks.size)).tolist()

    small_validate = grow[0]
    cases: List[Tuple[str, Callable[[], Callable[[], Any]]]] = [
        ("S1 ours", lambda: ours_random(record, picks)), ("S1 h5py", h5_random),
        ("S2 ours", ours_sequential), ("S2 h5py", h5_sequential),
        ("V validate", lambda: ours_verify(growth[small_validate])),
        ("V iterate", lambda: ours_iterate_all(growth[small_validate])),
    ]
    for g, path in growth.items():
        chosen = np.random.default_rng(43).integers(0, g, args.small_picks).tolist()
        small = args.small_cache  # the same small cache at both lengths: the cost of a read, not a hit rate
        cases.append((f"G random {g}", lambda path=path, chosen=chosen: ours_random(path, chosen, small)))
        cases.append((f"G miss {g}", lambda path=path, g=g: ours_random(path, distinct(g), small)))
        cases.append((f"G validate {g}", lambda path=path: ours_verify(path)))
        cases.append((f"G h5py random {g}", lambda g=g, chosen=chosen: h5_random(growth_h5[g], chosen)))
        cases.append((f"G h5py miss {g}", lambda g=g: h5_random(growth_h5[g], distinct(g))))
    for rep in range(args.repeats):
        for j in order.permutation(len(cases)):
            name, make = cases[int(j)]
            fn = make()  # opened outside the timing: a fresh reader, nothing cached
            quiesce()
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            times.setdefault(name, []).append(time.perf_counter() - t0)
            cpu.setdefault(name, []).append(time.process_time() - c0)
        print(f"small round {rep + 1}: " + "  ".join(f"{k} {v[-1]:.3f}" for k, v in times.items()), flush=True)
    opens: List[float] = []
    for _ in range(args.repeats * 2):  # opening the 10^6-frame trajectory
        quiesce()
        t0 = time.perf_counter()
        reader = MrecReader(big)
        opens.append(time.perf_counter() - t0)
        assert len(reader) == args.open_frames
        reader.close()
    rss = _child(f"t.small_rss_probe({big!r}, '{args.open_frames // 10},{args.open_frames}')") \
        if not args.skip_memory else []
    frames_of = {"S1 ours": len(picks), "S1 h5py": len(picks), "S2 ours": args.small_sequential,
                 "S2 h5py": args.small_sequential, "V validate": small_validate, "V iterate": small_validate}
    for g in grow:
        frames_of[f"G random {g}"] = args.small_picks
        frames_of[f"G miss {g}"] = len(distinct(g))
        frames_of[f"G validate {g}"] = g
        frames_of[f"G h5py random {g}"] = args.small_picks
        frames_of[f"G h5py miss {g}"] = len(distinct(g))
    return {"times": times, "cpu": cpu, "opens": opens, "rss": rss, "frames": frames_of,
            "args": {k: v for k, v in vars(args).items() if k in ("small_records", "small_picks", "small_sequential",
                                                                    "growth", "open_frames", "repeats", "small_cache")}}


SMALL_TARGETS = [  # (row, ours, peer, how the ratio reads, target): peer time / ours
    ("S1 64-atom frames at random, r[i]", "S1 ours", "S1 h5py", "x h5py", 1.0),
    ("S2 64-atom frames in order", "S2 ours", "S2 h5py", "x h5py", 2.0),
]


def small_report(result: Dict[str, Any]) -> str:
    """The small-frame table: per-frame costs and the ratios against their targets."""
    times, cpu, frames = result["times"], result["cpu"], result["frames"]
    med = {k: statistics.median(v) / frames[k] for k, v in times.items()}
    cmed = {k: statistics.median(v) / frames[k] for k, v in cpu.items()}
    lines = ["| measure | wall per frame | CPU per frame |", "|---|---:|---:|"]
    lines += [f"| {k} | {med[k] * 1e6:.1f} µs | {cmed[k] * 1e6:.1f} µs |" for k in sorted(med)]
    lines += ["", "| workload | ratio | wall | CPU time | target |", "|---|---|---:|---:|---:|"]
    for row, ours, peer, how, target in SMALL_TARGETS:
        if ours in med and peer in med:
            value, cvalue = med[peer] / med[ours], cmed[peer] / cmed[ours]
            lines.append(f"| {row} | {how} | {value:.2f}x | {cvalue:.2f}x | >= {target}x {'met' if cvalue >= target else 'MISSED'} (CPU) |")
    grow = sorted(int(k.split()[-1]) for k in med if k.startswith("G random"))
    if len(grow) == 2:
        lo, hi = grow
        for what, target in (("random", 1.3), ("miss", 1.3), ("validate", 1.3), ("h5py random", None),
                             ("h5py miss", None)):
            if f"G {what} {hi}" not in med:
                continue
            a, b = med[f"G {what} {hi}"], med[f"G {what} {lo}"]
            ca, cb = cmed[f"G {what} {hi}"], cmed[f"G {what} {lo}"]
            cache = result["args"].get("small_cache")
            held = "" if cache is None else f", reader cache {cache / 2**20:g} MiB"
            label = {"random": f"a random frame (uniform picks{held})",
                     "miss": f"a random frame, every pick another inner chunk{held}",
                     "validate": "validate, per frame", "h5py random": "h5py: a random frame (the same picks)",
                     "h5py miss": "h5py: every pick another chunk (the same picks)"}[what]
            verdict = "—" if target is None else f"<= {target}x {'met' if ca / cb <= target else 'MISSED'} (CPU)"
            lines.append(f"| growth: {label} | {hi} vs {lo} frames | {a / b:.2f}x | {ca / cb:.2f}x | {verdict} |")
    if "V validate" in med:
        value, cvalue = med["V iterate"] / med["V validate"], cmed["V iterate"] / cmed["V validate"]
        lines.append(f"| validate | x the rate of iterating every frame | {value:.2f}x | {cvalue:.2f}x | >= 0.5x "
                     f"{'met' if value >= 0.5 else 'MISSED'} |")
    opens = result["opens"]
    lines.append(f"| open a {result['args']['open_frames']:,}-frame trajectory | median | {statistics.median(opens) * 1e3:.1f} ms "
                 f"| (min {min(opens) * 1e3:.1f} ms) | <= 50 ms {'met' if statistics.median(opens) <= 0.05 else 'MISSED'} |")
    rss = result.get("rss") or []
    if len(rss) == 3:
        lines.append(f"| RSS iterating {result['args']['open_frames']:,} frames | before / at 10% / at the end | "
                     f"{rss[0]:.0f} / {rss[1]:.0f} / {rss[2]:.0f} MiB | | flat: {rss[2] - rss[1]:+.1f} MiB |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- driver
def quiesce() -> None:
    if hasattr(os, "sync"):
        os.sync()
    gc.collect()


def run(args: argparse.Namespace) -> Dict[str, Any]:
    peers = []
    writes_only = args.only == "write"  # W1 ours (durable and not) against the limit (and + fsync) only
    for kind, module in () if writes_only else (("zarr-python", "zarr"), ("tensorstore", "tensorstore"),
                                                 ("h5py", "h5py")):
        try:
            __import__(module)
            peers.append(kind)
        except ImportError:
            print(f"note: {kind} not importable, skipped")
    atoms, frames = args.atoms, args.frames
    data = [frame_values(i, atoms) for i in range(frames)]  # generated once, outside the timings
    quantized = [{c: round_to_precision(v, PRECISION) for c, v in d.items()} for d in data]
    positions = [np.stack([q["x"], q["y"], q["z"]], axis=1) for q in quantized]
    small = [] if writes_only else [frame_values(i, args.small_atoms) for i in range(args.small_frames)]
    small_positions = [np.stack([round_to_precision(v[c], PRECISION) for c in "xyz"], axis=1) for v in small]
    picks = np.random.default_rng(42).integers(0, frames, args.random)
    k = cadence(atoms)
    times: Dict[str, List[float]] = {}
    cpu: Dict[str, List[float]] = {}
    load = [os.getloadavg()]
    cpu0 = time.process_time()
    work = tempfile.mkdtemp(prefix="molrec-traj-bench-", dir=args.dir)
    order = np.random.default_rng(7)

    def timed(name: str, fn: Callable[[], Any], best_of: int = 1) -> None:
        """One round's figure of a case: the fastest of ``best_of`` back-to-back calls (its
        CPU time beside it)."""
        runs = []
        for _ in range(best_of):
            quiesce()
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            runs.append((time.perf_counter() - t0, time.process_time() - c0))
        wall, used = min(runs)
        times.setdefault(name, []).append(wall)
        cpu.setdefault(name, []).append(used)

    def group(cases: List[Tuple[str, Callable[[], Any]]], best_of: int = 1) -> None:
        """The cases of one workload back to back, in a fresh random order each round, so
        ours and each peer meet the same phase of the shared machine."""
        for j in order.permutation(len(cases)):
            timed(*cases[int(j)], best_of=best_of)

    record = os.path.join(work, "w1.mrec")
    ours_write(record, data)
    geo = geometry(record)
    docs = _metadata_docs(record)
    if "h5py" in peers:
        h5_write(os.path.join(work, "w1.h5"), positions)
    for kind in peers:
        if kind != "h5py":
            peer_write(kind, os.path.join(work, f"w1-{kind}"), quantized, geo)
    expect = None
    try:
        for rep in range(args.repeats):
            r = os.path.join(work, f"r{rep}")
            w1 = [("W1 ours", lambda: ours_write(r + "d.mrec", data)),
                  ("W1 ours durable=False", lambda: ours_write(r + "n.mrec", data, durable=False)),
                  ("W1 limit", lambda: limit_append(r + "-limit", data, geo, k)),
                  ("W1 limit + fsync", lambda: limit_append(r + "-limitsync", data, geo, k, durable=True)),
                  ("W1 limit + metadata", lambda: limit_append(r + "-limitmeta", data, geo, k, metadata=docs)),
                  ("W1 limit + metadata + fsync",
                   lambda: limit_append(r + "-limitmetasync", data, geo, k, durable=True, metadata=docs))]
            if "h5py" in peers:
                w1.append(("W1 h5py", lambda: h5_write(r + ".h5", positions)))
            for kind in peers:
                if kind != "h5py":
                    w1.append((f"W1 {kind}", lambda kind=kind: peer_write(kind, r + kind, quantized, geo)))
            group(w1)
            if writes_only:
                load.append(os.getloadavg())
                print(f"round {rep + 1}: " + "  ".join(f"{name} {v[-1]:.3f}" for name, v in times.items()), flush=True)
                continue
            w5 = [("W5 ours", lambda: ours_write(r + "small.mrec", small))]
            if "h5py" in peers:
                w5.append(("W5 h5py", lambda: h5_write(r + "small.h5", small_positions)))
            group(w5)
            with MrecReader(record) as reader:  # W2 random frames, W6 sequential, W7 whole block
                expect = reader[int(picks[0])].blocks["atoms"].columns["x"]

            readers = [MrecReader(record) for _ in range(3)]  # opened outside the timings, as the peers'
            ours_random = lambda: [readers[0][int(i)] for i in picks]  # noqa: E731
            ours_sequential = lambda: sum(1 for _ in readers[1])  # noqa: E731
            ours_block = lambda: readers[2].block_array("atoms")  # noqa: E731
            w2 = [("W2 ours", ours_random)]
            w6 = [("W6 ours", ours_sequential), ("W6 decode limit", lambda: decode_limit(record, geo, frames * atoms))]
            w7 = [("W7 ours", ours_block),
                  ("W7 decode limit", lambda: decode_limit(record, geo, frames * atoms, np.empty((frames * atoms, 3))))]
            handles = []
            if "h5py" in peers:
                fh, ds = h5_open(os.path.join(work, "w1.h5"))
                handles.append(fh)
                assert np.array_equal(ds[int(picks[0])][:, 0], expect), "h5py holds the same values"
                w2.append(("W2 h5py", lambda: [ds[int(i)] for i in picks]))
                w6.append(("W6 h5py", lambda: sum(1 for i in range(frames) if ds[i] is not None)))
                w7.append(("W7 h5py", lambda: ds[...]))
            for kind in peers:
                if kind != "h5py":
                    read = peer_reader(kind, os.path.join(work, f"w1-{kind}"))
                    assert np.array_equal(np.asarray(read(int(picks[0]), atoms)[0]), expect), kind
                    w2.append((f"W2 {kind}", lambda read=read: [read(int(i), atoms) for i in picks]))
            group(w2, args.best_of)
            group(w6, args.best_of)
            group(w7, args.best_of)
            for fh in handles:
                fh.close()
            for reader in readers:
                reader.close()
            load.append(os.getloadavg())
            print(f"round {rep + 1}: " + "  ".join(f"{name} {v[-1]:.3f}" for name, v in times.items()), flush=True)
        with MrecReader(record) as reader:  # the results agree (outside the timings)
            whole = reader.block_array("atoms")
        limit_out = decode_limit(record, geo, frames * atoms, np.empty((frames * atoms, 3)))
        assert np.array_equal(whole.reshape(-1, 3), np.stack(limit_out, axis=1)), "W7: ours and the limit agree"
        del whole, limit_out
        memory: Dict[str, Any] = {}
        if not args.skip_memory and not writes_only:
            memory["writer"] = {n: peak_rss_of_writer(atoms, n) for n in (frames, 10 * frames)}
            memory["iteration"] = iteration_memory(record)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"times": times, "cpu": cpu, "medians": {name: statistics.median(v) for name, v in times.items()},
            "memory": memory, "load": load, "cpu_seconds": time.process_time() - cpu0,
            "args": vars(args), "python": platform.python_version(), "numpy": np.__version__,
            "sizes": {"w1_mb": atoms * frames * 24 / 1e6, "w5_frames": args.small_frames, "random": args.random,
                      "frames": frames, "cadence": k}}


TARGETS = [  # (row, ours, peer, how the ratio reads, target)
    ("W1 append", "W1 ours durable=False", "W1 limit", "x limit", 0.8),  # issue 29's target
    ("W1 append (durable)", "W1 ours", "W1 limit + fsync", "x limit + fsync", 0.8),
    ("W1 append", "W1 ours durable=False", "W1 limit + metadata", "x limit + metadata", 0.9),  # issue 37
    ("W1 append (durable)", "W1 ours", "W1 limit + metadata + fsync", "x limit + metadata + fsync", 0.9),
    ("W1 append", "W1 ours", "W1 tensorstore", "x tensorstore", 2.0),
    ("W1 append", "W1 ours", "W1 zarr-python", "x zarr-python", None),
    ("W1 append", "W1 ours", "W1 h5py", "x h5py", None),
    ("W5 small frames", "W5 ours", "W5 h5py", "x h5py", 8.0),
    ("W6 sequential read", "W6 ours", "W6 decode limit", "x decode limit", 0.9),
    ("W6 sequential read", "W6 ours", "W6 h5py", "x h5py", 2.0),
    ("W7 whole block read", "W7 ours", "W7 decode limit", "x decode limit", 0.9),
    ("W7 whole block read", "W7 ours", "W7 h5py", "x h5py (ds[...])", None),
    ("W2 random frames", "W2 ours", "W2 tensorstore", "x tensorstore", 2.0),
    ("W2 random frames", "W2 ours", "W2 zarr-python", "x zarr-python", None),
    ("W2 random frames", "W2 ours", "W2 h5py", "x h5py", None),
]


def ratios(result: Dict[str, Any], which: str = "times") -> List[Tuple[str, str, float, Optional[float], float, float]]:
    """(row, how, ratio, target, lowest, highest): the ratio peer / ours of the medians of the
    run, and the range of the per-round ratios (ours and the peer ran back to back)."""
    values = result[which]
    out = []
    for row, ours, peer, how, target in TARGETS:
        if ours in values and peer in values:
            per_round = [p / o for p, o in zip(values[peer], values[ours])]
            out.append((row, how, statistics.median(values[peer]) / statistics.median(values[ours]), target,
                        min(per_round), max(per_round)))
    return out


def report(result: Dict[str, Any]) -> str:
    med, sizes = result["medians"], result["sizes"]
    lines = [f"python {result['python']}, numpy {result['numpy']}; medians of {result['args']['repeats']} "
             f"rounds (each workload's cases back to back, in a random order per round; reads: the fastest of "
             f"{result['args'].get('best_of', 1)} per round); load average "
             f"(1 min) during the run {min(l[0] for l in result['load']):.1f}-{max(l[0] for l in result['load']):.1f}; "
             f"K = {sizes['cadence']}", "", "| measure | time (median) | CPU time (median) | rate |", "|---|---:|---:|---:|"]
    for name, seconds in med.items():
        w = name.split()[0]
        rate = {"W1": f"{sizes['w1_mb'] / seconds:.0f} MB/s raw", "W5": f"{seconds / sizes['w5_frames'] * 1e6:.1f} µs/frame",
                "W2": f"{sizes['random'] / seconds:.0f} frames/s", "W6": f"{sizes['frames'] / seconds:.0f} frames/s",
                "W7": f"{sizes['w1_mb'] / seconds:.0f} MB/s"}.get(w, "")
        lines.append(f"| {name} | {seconds * 1000:.1f} ms | {statistics.median(result['cpu'][name]) * 1000:.1f} ms | {rate} |")
    lines += ["", "| workload | ratio | wall (per-round range) | CPU time | target |", "|---|---|---:|---:|---:|"]
    for (row, how, value, target, low, high), (_, _, cpu_value, _, _, _) in zip(ratios(result), ratios(result, "cpu")):
        mark = "" if target is None else (" met (CPU)" if cpu_value >= target else " MISSED (CPU)")  # (wall swings with the load)
        lines.append(f"| {row} | {how} | {value:.2f}x ({low:.2f}-{high:.2f}) | {cpu_value:.2f}x |"
                     f"{'' if target is None else f' >= {target}x{mark}'} |")
    memory = result.get("memory") or {}
    if "writer" in memory:
        (f1, (b1, p1)), (f2, (b2, p2)) = sorted((int(k), v) for k, v in memory["writer"].items())
        lines.append(f"\nwriter peak RSS: {p1:.0f} MiB for {f1} frames, {p2:.0f} MiB for {f2} frames "
                     f"({abs(p2 - p1) / p1 * 100:.1f} % apart; RSS before the appends {b1:.0f} / {b2:.0f} MiB)")
    if "iteration" in memory:
        base, peak, most = memory["iteration"]
        lines.append(f"sequential iteration: at most {most:.0f} inner chunks per column held by the reader's cache; "
                     f"RSS {base:.0f} MiB before, peak {peak:.0f} MiB ({peak - base:.0f} MiB during the iteration)")
    return "\n".join(lines)


def _small_rows(result: Dict[str, Any]) -> Dict[str, Tuple[float, float]]:
    """Row label -> (wall ratio, CPU ratio) of the small-frame targets (small_report's rows)."""
    lines = small_report(result).splitlines()
    out: Dict[str, Tuple[float, float]] = {}
    for line in lines:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 5 and cells[2].endswith("x") and cells[3].endswith("x"):
            out[f"{cells[0]} ({cells[1]})"] = (float(cells[2][:-1]), float(cells[3][:-1]))
    return out


def compare(before_path: str, after_path: str) -> str:
    """The before/after table of two runs' JSON (main, then the branch): per-frame costs of the
    small workloads, and every ratio of both runs beside each other."""
    before, after = json.load(open(before_path)), json.load(open(after_path))
    lines: List[str] = []
    if "small" in before and "small" in after:
        b, a = before["small"], after["small"]
        lines += ["| measure (per frame) | before: wall | before: CPU | after: wall | after: CPU | speed-up (wall / CPU) |",
                  "|---|---:|---:|---:|---:|---:|"]
        for name in sorted(a["times"]):
            if name not in b["times"]:
                continue
            bw, bc = (statistics.median(b[k][name]) / b["frames"][name] for k in ("times", "cpu"))
            aw, ac = (statistics.median(a[k][name]) / a["frames"][name] for k in ("times", "cpu"))
            lines.append(f"| {name} | {bw * 1e6:.1f} µs | {bc * 1e6:.1f} µs | {aw * 1e6:.1f} µs | {ac * 1e6:.1f} µs | "
                         f"{bw / aw:.2f}x / {bc / ac:.2f}x |")
        lines.append(f"| open the {a['args']['open_frames']:,}-frame trajectory (median) | "
                     f"{statistics.median(b['opens']) * 1e3:.1f} ms | | {statistics.median(a['opens']) * 1e3:.1f} ms | | "
                     f"{statistics.median(b['opens']) / statistics.median(a['opens']):.1f}x |")
        if len(b.get("rss") or []) == 3 and len(a.get("rss") or []) == 3:
            lines.append(f"| RSS iterating them: at 10% / at the end | {b['rss'][1]:.0f} / {b['rss'][2]:.0f} MiB | | "
                         f"{a['rss'][1]:.0f} / {a['rss'][2]:.0f} MiB | | |")
        lines += ["", "| target | before: wall / CPU | after: wall / CPU |", "|---|---:|---:|"]
        rb, ra = _small_rows(b), _small_rows(a)
        for row, (w, c) in ra.items():
            old = rb.get(row)
            lines.append(f"| {row} | {'—' if old is None else f'{old[0]:.2f}x / {old[1]:.2f}x'} | {w:.2f}x / {c:.2f}x |")
    if "times" in before and "times" in after:
        lines += ["", "| workload | ratio | before: wall / CPU | after: wall / CPU | target |", "|---|---|---:|---:|---:|"]
        old = {(row, how): (v, t) for row, how, v, t, _, _ in ratios(before)}
        old_cpu = {(row, how): v for row, how, v, _, _, _ in ratios(before, "cpu")}
        new_cpu = {(row, how): v for row, how, v, _, _, _ in ratios(after, "cpu")}
        for row, how, value, target, _, _ in ratios(after):
            if not row.startswith(("W2", "W6", "W7")):
                continue
            was = old.get((row, how))
            lines.append(f"| {row} | {how} | {'—' if was is None else f'{was[0]:.2f}x / {old_cpu[(row, how)]:.2f}x'} | "
                         f"{value:.2f}x / {new_cpu[(row, how)]:.2f}x | {'—' if target is None else f'>= {target}x'} |")
    return "\n".join(lines)


def summarize(paths: List[str]) -> str:
    results = [json.load(open(p)) for p in paths]
    rows: Dict[Tuple[str, str], List[float]] = {}
    targets: Dict[Tuple[str, str], Optional[float]] = {}
    cpu: Dict[Tuple[str, str], List[float]] = {}
    for result in results:
        for row, how, value, target, _, _ in ratios(result):
            rows.setdefault((row, how), []).append(value)
            targets[(row, how)] = target
        for row, how, value, _, _, _ in ratios(result, "cpu"):
            cpu.setdefault((row, how), []).append(value)
    lines = ["| workload | ratio | " + " | ".join(f"run {i + 1}" for i in range(len(results)))
             + " | median (spread) | CPU time (median) | target |",
             "|---|---|" + "---:|" * (len(results) + 3)]
    for (row, how), values in rows.items():
        target = targets[(row, how)]
        middle = statistics.median(values)
        mark = "" if target is None else (" met" if middle >= target else " missed")
        lines.append(f"| {row} | {how} | " + " | ".join(f"{v:.2f}x" for v in values)
                     + f" | {middle:.2f}x ({min(values):.2f}-{max(values):.2f}) | {statistics.median(cpu[(row, how)]):.2f}x | "
                     + ("—" if target is None else f">= {target}x{mark}") + " |")
    lines.append("")
    lines.append("load averages (1 min) during the runs: " + "; ".join(
        f"run {i + 1}: {min(l[0] for l in r['load']):.1f}-{max(l[0] for l in r['load']):.1f}" for i, r in enumerate(results)))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--atoms", type=int, default=10_000)
    parser.add_argument("--frames", type=int, default=500)
    parser.add_argument("--random", type=int, default=200)
    parser.add_argument("--small-atoms", type=int, default=64)
    parser.add_argument("--small-frames", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--best-of", type=int, default=3,
                        help="W2/W6/W7: each case's figure in a round is the fastest of this many back-to-back reads")
    parser.add_argument("--dir", default=None, help="parent of the scratch directory")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--json", default=None, help="write the results (times, medians, memory, load) here")
    parser.add_argument("--summarize", nargs="+", default=None, metavar="JSON",
                        help="print the spread of the ratios over earlier runs' JSON files and exit")
    parser.add_argument("--compare", nargs=2, default=None, metavar=("BEFORE", "AFTER"),
                        help="print the before/after table of two runs' JSON files and exit")
    parser.add_argument("--only", choices=("all", "big", "write", "small", "molrs"), default="all",
                        help="big: W1-W7 (10,000 atoms); write: W1 ours (durable and not) and the limit (and + "
                             "fsync) only; small: the 64-atom workloads of issue 21; molrs: the "
                             "reference's rows (bench/reference.py: appends, random and in-order reads, each side on "
                             "both stores)")
    parser.add_argument("--cache", default=None, help="where the small workloads' records are built once and kept")
    parser.add_argument("--small-records", type=int, default=100_000, help="frames of the S1/S2 trajectory")
    parser.add_argument("--small-picks", type=int, default=2_000, help="random frames read per S1/G call")
    parser.add_argument("--small-sequential", type=int, default=20_000, help="frames read in order per S2 call")
    parser.add_argument("--growth", default="20000,200000", help="the two trajectory lengths of the G rows")
    parser.add_argument("--small-cache", type=int, default=256 << 10,
                        help="G rows: the reader's cache_bytes at both lengths (default 256 KiB: 16 inner chunks of "
                             "16 KiB, the chunks of the last few reads; at 1 MiB the 8 KiB `pe` chunks, 1,024 frames "
                             "each, still hit at 20,000 frames (20 chunks) and not at 200,000 (196): a hit rate again)")
    parser.add_argument("--open-frames", type=int, default=1_000_000, help="frames of the trajectory opened (O)")
    args = parser.parse_args()
    if args.summarize:
        print(summarize(args.summarize))
        return 0
    if args.compare:
        print(compare(*args.compare))
        return 0
    result: Dict[str, Any] = {}
    if args.only in ("all", "big", "write"):
        result = run(args)
        print()
        print(report(result))
    if args.only in ("all", "small"):
        result["small"] = run_small(args)
        print()
        print(small_report(result["small"]))
    if args.only in ("all", "molrs"):  # molrs 0.19 as a peer (every row says so where it is not installed)
        import reference
        result["molrs"] = reference.run(argparse.Namespace(frames=args.small_frames, picks=args.small_picks,
                                                           sequential=args.small_sequential, rounds=args.repeats,
                                                           dir=args.dir))
        print()
        print(reference.report(result["molrs"]))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
