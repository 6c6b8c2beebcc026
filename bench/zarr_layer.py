#!/usr/bin/env python
"""Benchmark the Zarr layer: molrec_raw vs zarr-python vs tensorstore, one process, same data.

Two workloads (see bench/README.md for the full description and the last results):

1. bulk      one float64 array (2**25 elements; a smooth random walk quantized to the
             binary grid 2**-10), shards of 2**21 elements, inner chunks of 2**17, inner
             codecs bytes(little) + numcodecs.shuffle(8) + zstd(3) + crc32c.  Write it
             whole into a fresh directory, then read it whole (warm page cache).
             tensorstore has no numcodecs.shuffle, so it runs bytes + zstd(3) + crc32c
             and molrec_raw runs that same no-shuffle chain for a like-with-like row.
2. metadata  200 groups x 5 int32 arrays of 100 elements (one chunk each; bytes +
             gzip(1) + crc32c), small attributes on every node; "create" writes it all,
             "open+read" opens the root, walks groups and arrays, reads values and
             attributes.  tensorstore has no group API: it creates arrays only and
             opens each array by its path.

zarr-python runs twice: with its default BatchedCodecPipeline ("zarr-python") and with the
FusedCodecPipeline ("zp-fused", issue 37's peer: selected by ``codec_pipeline.path`` around
both the create and the open, as the pipeline is fixed when an array is made or opened).

Times are medians of ``--repeats`` repetitions (time.perf_counter; opening the store is
inside the timed region for every library).  Ratios are peer time / molrec_raw time, so
a ratio > 1 means molrec_raw is faster.  Reads are warm-cache: dropping OS caches is not
possible here.  Each repetition writes into a fresh directory; results are verified
against the input outside the timed region.

    python bench/zarr_layer.py                 # full run (a few minutes on 2 cores)
    python bench/zarr_layer.py --quick         # smoke test: 2**22 elements, 40 groups, 2 repeats
    python bench/zarr_layer.py --json out.json # also write all raw timings as JSON
"""
from __future__ import annotations

import argparse
import datetime as _dt
import gc
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

import molrec_raw.zarr as mz

warnings.simplefilter("ignore")  # zarr-python warns about numcodecs.* codecs being unstable

try:  # optional peers: skipped with a note when missing
    import zarr
    from zarr.codecs import BytesCodec as _ZBytes, Crc32cCodec as _ZCrc32c
    from zarr.codecs import GzipCodec as _ZGzip, ZstdCodec as _ZZstd
    from zarr.codecs.numcodecs import Shuffle as _ZShuffle
    ZARR_ERROR: Optional[str] = None
except Exception as exc:  # pragma: no cover - depends on the environment
    zarr = None
    ZARR_ERROR = f"{type(exc).__name__}: {exc}"

try:
    import tensorstore as ts
    TS_ERROR: Optional[str] = None
except Exception as exc:  # pragma: no cover - depends on the environment
    ts = None
    TS_ERROR = f"{type(exc).__name__}: {exc}"

OURS, ZP, ZPF, TS, LIMIT = "molrec_raw", "zarr-python", "zp-fused", "tensorstore", "limit"
LIBS = (OURS, ZP, ZPF, TS, LIMIT)
# zarr-python 3.4's opt-in synchronous pipeline (codec work on a thread pool sized to the
# CPU count): chosen when an array is created or opened, so both run inside this config
ZP_FUSED = {"codec_pipeline.path": "zarr.core.codec_pipeline.FusedCodecPipeline"}
LIMIT_THREADS = 2  # the limit's zstd threads (the machine has 2 cores)
LIMIT_BATCH = 2  # inner chunks (1 MiB each) per zstd batch call of the limit: the fastest measured (1-16 tried)

Q = 2.0 ** -10
SEED = 20240611
SHARD = 2 ** 21
INNER = 2 ** 17
ARRAYS_PER_GROUP = 5
META_LEN = 100

BYTES_LE = {"name": "bytes", "configuration": {"endian": "little"}}
SHUFFLE8 = {"name": "numcodecs.shuffle", "configuration": {"elementsize": 8}}
ZSTD3 = {"name": "zstd", "configuration": {"level": 3, "checksum": False}}
GZIP1 = {"name": "gzip", "configuration": {"level": 1}}
CRC = {"name": "crc32c"}
CHAIN_SHUFFLE = [BYTES_LE, SHUFFLE8, ZSTD3, CRC]
CHAIN_PLAIN = [BYTES_LE, ZSTD3, CRC]
CHAIN_META = [BYTES_LE, GZIP1, CRC]

# tensorstore's file kvstore fsyncs every write by default; molrec_raw and zarr-python
# do not, so the default here turns that off (``--ts-fsync`` restores it).
TS_NOSYNC = {"file_io_sync": False}


# --------------------------------------------------------------------------- helpers
class Workspace:
    """Fresh directories under one temporary root; removed at the end unless kept.

    Nothing is deleted while timing runs: removing the previous store right before a
    timed step slowed that step 3-5x on the reference machine (ext4 mounted with
    ``discard``, so deletions likely cost TRIM/journal work in the background; metadata
    create went from ~0.5 s to 2-3 s).  A full run keeps about 1 GB until the end.
    """

    def __init__(self, parent: Optional[str], keep: bool) -> None:
        if parent:
            os.makedirs(parent, exist_ok=True)
        self.root = tempfile.mkdtemp(prefix="molrec-bench-", dir=parent)
        self.keep = keep
        self._n = 0

    def fresh(self, label: str) -> str:
        self._n += 1
        return os.path.join(self.root, f"{self._n:04d}-{label}")

    def close(self) -> None:
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)


def quiesce() -> None:
    """Outside the timed region: flush dirty pages of earlier runs and collect garbage."""
    if hasattr(os, "sync"):
        os.sync()
    gc.collect()


def timed(fn: Callable[[], Any]) -> Tuple[float, float, Any]:
    """(wall seconds, process CPU seconds over all threads, result) of one call."""
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    t1, c1 = time.perf_counter(), time.process_time()
    return t1 - t0, c1 - c0, out


def tree_bytes(path: str) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            total += os.path.getsize(os.path.join(dirpath, name))
    return total


def load_json(path: str) -> Any:
    with open(path, "rb") as fh:
        return json.loads(fh.read())


def version_of(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def molrec_revision() -> str:
    """The git commit of the package under test, and whether molrec_raw/ differs from it."""
    import subprocess

    repo = os.path.dirname(os.path.dirname(os.path.abspath(mz.__file__)))
    try:
        head = subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", repo, "status", "--porcelain", "--", "molrec_raw"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head}{' + uncommitted changes' if dirty else ''}"


def bulk_data(n: int) -> np.ndarray:
    rng = np.random.default_rng(SEED)
    return np.round(np.cumsum(rng.normal(scale=0.01, size=n)) / Q) * Q


# --------------------------------------------------------------------------- bulk
def ours_bulk_write(path: str, data: np.ndarray, chain: List[Dict[str, Any]]) -> None:
    arr = mz.open_array(path, mode="w", shape=data.shape, dtype=data.dtype, chunks=(INNER,),
                        shards=(SHARD,), codecs=chain, fill_value=0.0)
    arr[...] = data


def ours_bulk_read(path: str) -> np.ndarray:
    return mz.open_array(path, mode="r")[...]


def zp_bulk_write(path: str, data: np.ndarray) -> None:
    arr = zarr.create_array(
        store=path, shape=data.shape, dtype=data.dtype, chunks=(INNER,), shards=(SHARD,),
        serializer=_ZBytes(endian="little"), filters=[],
        compressors=[_ZShuffle(elementsize=8), _ZZstd(level=3, checksum=False), _ZCrc32c()],
        fill_value=0.0,
    )
    arr[...] = data


def zp_bulk_read(path: str) -> np.ndarray:
    return zarr.open_array(store=path, mode="r")[...]


def zpf_bulk_write(path: str, data: np.ndarray) -> None:
    with zarr.config.set(ZP_FUSED):
        zp_bulk_write(path, data)


def zpf_bulk_read(path: str) -> np.ndarray:
    with zarr.config.set(ZP_FUSED):
        arr = zarr.open_array(store=path, mode="r")
        assert type(arr._async_array.codec_pipeline).__name__ == "FusedCodecPipeline"
        return arr[...]


def ts_bulk_spec(path: str, n: int, fsync: bool) -> Dict[str, Any]:
    spec: Dict[str, Any] = {
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": path},
        "metadata": {
            "shape": [n],
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [SHARD]}},
            "chunk_key_encoding": {"name": "default"},
            "data_type": "float64",
            "codecs": [{
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": [INNER],
                    "codecs": CHAIN_PLAIN,
                    "index_codecs": [BYTES_LE, CRC],
                    "index_location": "end",
                },
            }],
        },
        "create": True,
        "delete_existing": True,
    }
    if not fsync:
        spec["context"] = dict(TS_NOSYNC)
    return spec


def ts_bulk_write(path: str, data: np.ndarray, fsync: bool) -> None:
    store = ts.open(ts_bulk_spec(path, data.size, fsync)).result()
    store.write(data).result()


def ts_bulk_read(path: str) -> np.ndarray:
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}
    return ts.open(spec).result().read().result()


def limit_bulk_write(path: str, data: np.ndarray) -> None:
    """The unavoidable work of the bulk write [shuffle chain] (issue 11): per shard, the byte
    shuffle of LIMIT_BATCH inner chunks at a time in one vectorised step, zstd 3 through
    zstandard's C-threaded batch API (multi_compress_to_buffer, LIMIT_THREADS threads), crc32c
    per inner chunk, then one write of the shard with its index (bytes + crc32c, at the end);
    the array's zarr.json as ours writes it.  Nothing else: no chunk objects, no planning."""
    import crc32c
    import zstandard

    compressor = zstandard.ZstdCompressor(level=3, write_checksum=False, write_content_size=True)
    os.makedirs(os.path.join(path, "c"))
    per_shard = SHARD // INNER
    for shard in range(data.size // SHARD):
        chunks = data[shard * SHARD:(shard + 1) * SHARD].reshape(per_shard, INNER).view(np.uint8)
        parts: List[Any] = []
        index = np.empty((per_shard, 2), np.uint64)
        offset = 0
        for first in range(0, per_shard, LIMIT_BATCH):
            rows = chunks[first:first + LIMIT_BATCH]
            shuffled = np.ascontiguousarray(rows.reshape(len(rows), INNER, 8).transpose(0, 2, 1)).reshape(len(rows), -1)
            encoded = compressor.multi_compress_to_buffer([row for row in shuffled], threads=LIMIT_THREADS)
            for k in range(len(rows)):
                segment = encoded[k]
                parts += [segment, crc32c.crc32c(segment).to_bytes(4, "little")]
                index[first + k] = (offset, len(segment) + 4)
                offset += len(segment) + 4
        page = index.tobytes()
        parts += [page, crc32c.crc32c(page).to_bytes(4, "little")]
        fd = os.open(os.path.join(path, "c", str(shard)), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, b"".join(parts))
        finally:
            os.close(fd)
    meta = mz.open_array(os.path.join(path, "meta-probe"), mode="w", shape=data.shape, dtype=data.dtype,
                         chunks=(INNER,), shards=(SHARD,), codecs=CHAIN_SHUFFLE, fill_value=0.0)
    with open(os.path.join(path, "zarr.json"), "wb") as fh:
        fh.write(meta.metadata.to_json())
    shutil.rmtree(os.path.join(path, "meta-probe"))


def limit_bulk_read(path: str) -> np.ndarray:
    """The matching decode limit: per shard one ranged read of the index and one of the inner
    chunks, the crc32c check of each, multi_decompress_to_buffer (LIMIT_BATCH chunks per call,
    LIMIT_THREADS threads) and the unshuffle straight into the result."""
    import crc32c
    import zstandard

    meta = load_json(os.path.join(path, "zarr.json"))
    n = meta["shape"][0]
    out = np.empty(n, np.float64)
    per_shard = SHARD // INNER
    index_size = per_shard * 16 + 4
    decompressor = zstandard.ZstdDecompressor()
    for shard in range(n // SHARD):
        with open(os.path.join(path, "c", str(shard)), "rb") as fh:
            fd = fh.fileno()
            size = os.fstat(fd).st_size
            page = os.pread(fd, index_size, size - index_size)
            index = np.frombuffer(page[:-4], np.uint64).reshape(per_shard, 2).tolist()
            data = memoryview(os.pread(fd, size - index_size, 0))
        for first in range(0, per_shard, LIMIT_BATCH):
            frames = []
            for offset, length in index[first:first + LIMIT_BATCH]:
                body = data[offset:offset + length - 4]
                if crc32c.crc32c(body) != int.from_bytes(data[offset + length - 4:offset + length], "little"):
                    raise AssertionError("limit read: checksum")
                frames.append(body)
            decoded = decompressor.multi_decompress_to_buffer(frames, threads=LIMIT_THREADS)
            for k in range(len(frames)):
                target = out[(shard * per_shard + first + k) * INNER:(shard * per_shard + first + k + 1) * INNER].view(np.uint8)
                for j, plane in enumerate(np.frombuffer(decoded[k], np.uint8).reshape(8, INNER)):
                    target[j::8] = plane
    return out


# --------------------------------------------------------------------------- metadata
def meta_plan(n_groups: int) -> List[Tuple[str, Dict[str, Any], List[Tuple[str, Dict[str, Any], np.ndarray]]]]:
    """(group name, group attrs, [(array name, array attrs, values)]) for every group."""
    rng = np.random.default_rng(SEED + 1)
    plan = []
    for g in range(n_groups):
        gattrs = {"index": g, "title": f"group {g}", "tags": ["bench", "meta"], "weight": g * 0.5}
        arrays = []
        for a in range(ARRAYS_PER_GROUP):
            aattrs = {"units": "nm", "scale": 0.25, "index": a, "description": f"array {a} of group {g}"}
            values = rng.integers(1, 1 << 20, size=META_LEN, dtype=np.int32)
            arrays.append((f"a{a}", aattrs, values))
        plan.append((f"g{g:03d}", gattrs, arrays))
    return plan


ROOT_ATTRS = {"bench": "metadata", "version": 1}

Readback = Dict[Tuple[str, str], Tuple[np.ndarray, Optional[Dict[str, Any]]]]


def ours_meta_create(path: str, plan: Any) -> None:
    root = mz.open_group(path, mode="w", attributes=ROOT_ATTRS)
    for gname, gattrs, arrays in plan:
        group = root.create_group(gname, attributes=gattrs)
        for aname, aattrs, values in arrays:
            arr = group.create_array(aname, shape=(META_LEN,), dtype="int32", chunks=(META_LEN,),
                                     codecs=CHAIN_META, fill_value=0, attributes=aattrs)
            arr[...] = values


def walk_members(root: Any) -> Tuple[Readback, Dict[str, Any]]:
    """Read every array and attribute map by walking ``members()`` — the same calls on a
    molrec_raw and a zarr-python group (whose members() reads each zarr.json once; names via
    keys() followed by group[name] would read every zarr.json twice)."""
    out: Readback = {}
    gattrs: Dict[str, Any] = {"": dict(root.attrs)}
    for gname, group in root.members():
        gattrs[gname] = dict(group.attrs)
        for aname, arr in group.members():
            out[(gname, aname)] = (arr[...], dict(arr.attrs))
    return out, gattrs


def walk_by_name(root: Any, names: List[Tuple[str, List[str]]]) -> Tuple[Readback, Dict[str, Any]]:
    """The same read through ``group[name]`` with known names (either library)."""
    out: Readback = {}
    gattrs: Dict[str, Any] = {"": dict(root.attrs)}
    for gname, anames in names:
        group = root[gname]
        gattrs[gname] = dict(group.attrs)
        for aname in anames:
            arr = group[aname]
            out[(gname, aname)] = (arr[...], dict(arr.attrs))
    return out, gattrs


def ours_meta_members(path: str) -> Tuple[Readback, Dict[str, Any]]:
    return walk_members(mz.open_group(path, mode="r"))


def ours_meta_by_name(path: str, names: List[Tuple[str, List[str]]]) -> Tuple[Readback, Dict[str, Any]]:
    return walk_by_name(mz.open_group(path, mode="r"), names)


def zp_meta_create(path: str, plan: Any) -> None:
    root = zarr.open_group(store=path, mode="w", attributes=ROOT_ATTRS)
    for gname, gattrs, arrays in plan:
        group = root.create_group(gname, attributes=gattrs)
        for aname, aattrs, values in arrays:
            arr = group.create_array(
                aname, shape=(META_LEN,), dtype="int32", chunks=(META_LEN,),
                serializer=_ZBytes(endian="little"), filters=[],
                compressors=[_ZGzip(level=1), _ZCrc32c()], fill_value=0, attributes=aattrs,
            )
            arr[...] = values


def zp_meta_members(path: str) -> Tuple[Readback, Dict[str, Any]]:
    return walk_members(zarr.open_group(store=path, mode="r"))


def zp_meta_by_name(path: str, names: List[Tuple[str, List[str]]]) -> Tuple[Readback, Dict[str, Any]]:
    return walk_by_name(zarr.open_group(store=path, mode="r"), names)


def ts_meta_spec(path: str, aattrs: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": path},
        "metadata": {
            "shape": [META_LEN],
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [META_LEN]}},
            "chunk_key_encoding": {"name": "default"},
            "data_type": "int32",
            "fill_value": 0,
            "codecs": CHAIN_META,
            "attributes": aattrs,
        },
        "create": True,
        "delete_existing": True,
    }


def ts_meta_create(path: str, plan: Any, fsync: bool) -> None:
    # Arrays only: tensorstore has no group API, so no root/group zarr.json is written.
    ctx = ts.Context({} if fsync else TS_NOSYNC)
    for gname, _, arrays in plan:
        for aname, aattrs, values in arrays:
            store = ts.open(ts_meta_spec(f"{path}/{gname}/{aname}", aattrs), context=ctx).result()
            store.write(values).result()


def ts_meta_by_name(path: str, names: List[Tuple[str, List[str]]]) -> Tuple[Readback, Dict[str, Any]]:
    out: Readback = {}
    ctx = ts.Context()
    for gname, anames in names:
        for aname in anames:
            store = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": f"{path}/{gname}/{aname}"}},
                            context=ctx).result()
            attrs = store.spec().to_json()["metadata"].get("attributes", {})
            out[(gname, aname)] = (store.read().result(), attrs)
    return out, {}


def check_meta(result: Tuple[Readback, Dict[str, Any]], plan: Any, with_groups: bool, label: str) -> None:
    got, gattrs = result
    expected = {(g, a): (v, aa) for g, _, arrays in plan for a, aa, v in arrays}
    if set(got) != set(expected):
        raise AssertionError(f"{label}: read {len(got)} arrays, expected {len(expected)}")
    for key, (values, attrs) in expected.items():
        gv, ga = got[key]
        if not np.array_equal(np.asarray(gv), values):
            raise AssertionError(f"{label}: values of {key} differ")
        if ga != attrs:
            raise AssertionError(f"{label}: attributes of {key} differ: {ga!r} != {attrs!r}")
    if with_groups:
        want = {"": ROOT_ATTRS, **{g: ga for g, ga, _ in plan}}
        if gattrs != want:
            raise AssertionError(f"{label}: group attributes differ")


# --------------------------------------------------------------------------- driver
class Results:
    def __init__(self) -> None:
        self.times: Dict[str, Dict[str, List[float]]] = {}
        self.cpu: Dict[str, Dict[str, List[float]]] = {}
        self.notes: List[str] = []
        self.info: Dict[str, Any] = {}

    def add(self, case: str, lib: str, seconds: float, cpu: float) -> None:
        self.times.setdefault(case, {}).setdefault(lib, []).append(seconds)
        self.cpu.setdefault(case, {}).setdefault(lib, []).append(cpu)

    def median(self, case: str, lib: str, cpu: bool = False, best: bool = False) -> Optional[float]:
        """Median (or, with ``best``, minimum) of the wall (or CPU) times."""
        values = (self.cpu if cpu else self.times).get(case, {}).get(lib)
        return (min(values) if best else statistics.median(values)) if values else None

    def ratio(self, case: str, peer: str, cpu: bool = False, best: bool = False) -> Optional[float]:
        ours, theirs = self.median(case, OURS, cpu, best), self.median(case, peer, cpu, best)
        return None if ours is None or theirs is None or ours == 0 else theirs / ours


BULK_W, BULK_R = "bulk write [shuffle chain]", "bulk read [shuffle chain]"
BULK_W0, BULK_R0 = "bulk write [no-shuffle chain]", "bulk read [no-shuffle chain]"
META_C, META_M, META_N = "meta create", "meta open+read [members]", "meta open+read [by name]"
CASES = (BULK_W, BULK_R, BULK_W0, BULK_R0, META_C, META_M, META_N)


def chain_of(zarr_json: Dict[str, Any]) -> Any:
    return zarr_json["codecs"]


def normalize_chain(chain: Any) -> Any:
    """Spell out spec defaults a writer may omit (sharding's index_location "end")."""
    out = []
    for codec in chain:
        codec = dict(codec)
        if codec.get("name") == "sharding_indexed":
            config = dict(codec.get("configuration", {}))
            config.setdefault("index_location", "end")
            config["codecs"] = normalize_chain(config.get("codecs", []))
            codec["configuration"] = config
        out.append(codec)
    return out


def compare_chains(res: Results, label: str, ours_json: str, peer_json: str) -> None:
    mine, theirs = chain_of(load_json(ours_json)), chain_of(load_json(peer_json))
    same = normalize_chain(mine) == normalize_chain(theirs)
    res.info.setdefault("codec_chain_checks", {})[label] = {
        "equal": same, "identical_json": mine == theirs, "molrec_raw": mine, "peer": theirs,
    }
    if same:
        how = "identical" if mine == theirs else "equivalent (peer omits the default index_location \"end\")"
        res.notes.append(f"codec chain check {label}: {how} 'codecs' in zarr.json")
    else:
        res.notes.append(f"codec chain check {label}: DIFFERENT 'codecs' in zarr.json -> "
                         f"ours {json.dumps(mine)} vs peer {json.dumps(theirs)}")


def warm_up(ws: Workspace, libs: List[str], fsync: bool) -> None:
    """Untimed: first-use costs (imports, event loops, thread pools) out of the way."""
    small = bulk_data(SHARD)
    for lib in libs:
        path = ws.fresh(f"warmup-{lib}")
        if lib == OURS:
            ours_bulk_write(path, small, CHAIN_SHUFFLE)
            ours_bulk_read(path)
        elif lib == ZP:
            zp_bulk_write(path, small)
            zp_bulk_read(path)
            zpf_bulk_write(path + "-fused", small)
            zpf_bulk_read(path + "-fused")
        elif lib == LIMIT:
            limit_bulk_write(path, small)
            limit_bulk_read(path)
        else:
            ts_bulk_write(path, small, fsync)
            ts_bulk_read(path)


def run_bulk(res: Results, ws: Workspace, n: int, repeats: int, libs: List[str], fsync: bool) -> None:
    data = bulk_data(n)
    res.info["bulk"] = {"elements": n, "raw_bytes": data.nbytes, "shard": SHARD, "inner_chunk": INNER,
                        "stored_bytes": {}}
    # (label for the row pair, library, writer, reader)
    runs: List[Tuple[str, str, Callable[[str], None], Callable[[str], np.ndarray]]] = []
    runs.append(("shuffle", OURS, lambda p: ours_bulk_write(p, data, CHAIN_SHUFFLE), ours_bulk_read))
    if LIMIT in libs:
        runs.append(("shuffle", LIMIT, lambda p: limit_bulk_write(p, data), limit_bulk_read))
    if ZP in libs:
        runs.append(("shuffle", ZP, lambda p: zp_bulk_write(p, data), zp_bulk_read))
        runs.append(("shuffle", ZPF, lambda p: zpf_bulk_write(p, data), zpf_bulk_read))
    if TS in libs:
        runs.append(("plain", OURS, lambda p: ours_bulk_write(p, data, CHAIN_PLAIN), ours_bulk_read))
        runs.append(("plain", TS, lambda p: ts_bulk_write(p, data, fsync), ts_bulk_read))
    first_paths: Dict[Tuple[str, str], str] = {}
    for rep in range(repeats):
        for chain, lib, write, read in runs:  # round-robin so drift hits every library alike
            path = ws.fresh(f"bulk-{chain}-{lib}")
            wcase, rcase = (BULK_W, BULK_R) if chain == "shuffle" else (BULK_W0, BULK_R0)
            quiesce()
            seconds, cpu, _ = timed(lambda: write(path))
            res.add(wcase, lib, seconds, cpu)
            quiesce()
            seconds, cpu, back = timed(lambda: read(path))
            res.add(rcase, lib, seconds, cpu)
            if back.shape != data.shape or not np.array_equal(back, data):
                raise AssertionError(f"bulk {chain} {lib}: read-back differs from the input")
            del back
            res.info["bulk"]["stored_bytes"][f"{lib} [{chain}]"] = tree_bytes(path)
            if rep == 0:
                first_paths[(chain, lib)] = path
            print(f"  bulk rep {rep + 1}/{repeats} {lib:<11} [{chain:<7}] "
                  f"write {res.times[wcase][lib][-1]:.3f} s  read {res.times[rcase][lib][-1]:.3f} s", flush=True)
        if rep == 0:
            if ("shuffle", LIMIT) in first_paths:  # the limit did the same work: the same bytes
                ours_dir, limit_dir = first_paths[("shuffle", OURS)], first_paths[("shuffle", LIMIT)]
                same = all(open(os.path.join(ours_dir, *rel), "rb").read() == open(os.path.join(limit_dir, *rel), "rb").read()
                           for rel in [("zarr.json",)] + [("c", str(k)) for k in range(n // SHARD)])
                res.notes.append("limit check: the limit's store is byte-identical to molrec_raw's" if same else
                                 "limit check: the limit's store DIFFERS from molrec_raw's")
                if not same:
                    raise AssertionError("the limit writes other bytes than molrec_raw: not the same work")
            if ("shuffle", ZP) in first_paths:
                compare_chains(res, "bulk ours vs zarr-python",
                               os.path.join(first_paths[("shuffle", OURS)], "zarr.json"),
                               os.path.join(first_paths[("shuffle", ZP)], "zarr.json"))
                # interop, untimed: each reads the other's output
                if not np.array_equal(ours_bulk_read(first_paths[("shuffle", ZP)]), data):
                    raise AssertionError("molrec_raw cannot read zarr-python's bulk array")
                if not np.array_equal(zp_bulk_read(first_paths[("shuffle", OURS)]), data):
                    raise AssertionError("zarr-python cannot read molrec_raw's bulk array")
            if ("plain", TS) in first_paths:
                compare_chains(res, "bulk ours(no shuffle) vs tensorstore",
                               os.path.join(first_paths[("plain", OURS)], "zarr.json"),
                               os.path.join(first_paths[("plain", TS)], "zarr.json"))
                if not np.array_equal(ours_bulk_read(first_paths[("plain", TS)]), data):
                    raise AssertionError("molrec_raw cannot read tensorstore's bulk array")
                if not np.array_equal(ts_bulk_read(first_paths[("plain", OURS)]), data):
                    raise AssertionError("tensorstore cannot read molrec_raw's bulk array")


def run_meta(res: Results, ws: Workspace, n_groups: int, repeats: int, libs: List[str], fsync: bool) -> None:
    plan = meta_plan(n_groups)
    names = [(g, [a for a, _, _ in arrays]) for g, _, arrays in plan]
    res.info["metadata"] = {"groups": n_groups, "arrays": n_groups * ARRAYS_PER_GROUP,
                            "array_elements": META_LEN, "stored_bytes": {}}
    creators: Dict[str, Callable[[str], None]] = {OURS: lambda p: ours_meta_create(p, plan)}
    members: Dict[str, Callable[[str], Any]] = {OURS: ours_meta_members}
    by_name: Dict[str, Callable[[str], Any]] = {OURS: lambda p: ours_meta_by_name(p, names)}
    if ZP in libs:
        creators[ZP] = lambda p: zp_meta_create(p, plan)
        members[ZP] = zp_meta_members
        by_name[ZP] = lambda p: zp_meta_by_name(p, names)
    if TS in libs:
        creators[TS] = lambda p: ts_meta_create(p, plan, fsync)
        by_name[TS] = lambda p: ts_meta_by_name(p, names)
    for rep in range(repeats):
        for lib in creators:
            path = ws.fresh(f"meta-{lib}")
            quiesce()
            seconds, cpu, _ = timed(lambda: creators[lib](path))
            res.add(META_C, lib, seconds, cpu)
            line = f"  meta rep {rep + 1}/{repeats} {lib:<11} create {seconds:.3f} s"
            if lib in members:
                quiesce()
                seconds, cpu, back = timed(lambda: members[lib](path))
                res.add(META_M, lib, seconds, cpu)
                check_meta(back, plan, True, f"{lib} members")
                line += f"  members {seconds:.3f} s"
            quiesce()
            seconds, cpu, back = timed(lambda: by_name[lib](path))
            res.add(META_N, lib, seconds, cpu)
            check_meta(back, plan, lib != TS, f"{lib} by name")
            line += f"  by-name {seconds:.3f} s"
            res.info["metadata"]["stored_bytes"][lib] = tree_bytes(path)
            if rep == 0:  # record each library's codec chain; interop, untimed
                first = os.path.join(path, "g000", "a0")
                res.info["metadata"].setdefault("codecs", {})[lib] = chain_of(load_json(os.path.join(first, "zarr.json")))
                if lib != OURS and not np.array_equal(mz.open_array(first, mode="r")[...], plan[0][2][0][2]):
                    raise AssertionError(f"molrec_raw cannot read {lib}'s metadata-case array")
            print(line, flush=True)
    chains = res.info["metadata"].get("codecs", {})
    for lib, chain in chains.items():
        if lib != OURS:
            same = chain == chains.get(OURS)
            res.info.setdefault("codec_chain_checks", {})[f"meta ours vs {lib}"] = {
                "equal": same, "molrec_raw": chains.get(OURS), "peer": chain}
            res.notes.append(f"codec chain check meta ours vs {lib}: " + (
                "identical 'codecs' in zarr.json" if same else
                f"DIFFERENT 'codecs' -> ours {json.dumps(chains.get(OURS))} vs peer {json.dumps(chain)}"))


# --------------------------------------------------------------------------- report
def fmt_time(seconds: Optional[float]) -> str:
    return "—" if seconds is None else f"{seconds * 1000:.1f} ms"


def fmt_ratio(r: Optional[float]) -> str:
    return "—" if r is None else f"{r:.2f}×"


TARGETS = [  # (description, case, peer, minimum ratio)
    ("bulk write ≥ 0.85× the limit (issue 11)", BULK_W, LIMIT, 0.85),
    ("bulk read ≥ 0.85× the decode limit (issue 11)", BULK_R, LIMIT, 0.85),
    ("bulk write ≥ 2× zarr-python", BULK_W, ZP, 2.0),
    ("bulk read ≥ 2× zarr-python", BULK_R, ZP, 2.0),
    ("bulk write ≥ 1.2× zarr-python's FusedCodecPipeline (issue 37)", BULK_W, ZPF, 1.2),
    ("bulk read ≥ 1.2× zarr-python's FusedCodecPipeline (issue 37)", BULK_R, ZPF, 1.2),
    ("bulk write ≥ tensorstore (like chain, no shuffle)", BULK_W0, TS, 1.0),
    ("metadata create ≥ 5× zarr-python", META_C, ZP, 5.0),
    ("metadata open+read [members] ≥ 5× zarr-python", META_M, ZP, 5.0),
    ("metadata open+read [by name] ≥ 5× zarr-python", META_N, ZP, 5.0),
    ("metadata create ≥ tensorstore", META_C, TS, 1.0),
    ("metadata open+read [by name] ≥ tensorstore", META_N, TS, 1.0),
]


def table(res: Results, cpu: bool = False, best: bool = False) -> str:
    header = ["case", OURS, ZP, ZPF, TS, LIMIT, "ratio zp/ours", "ratio zp-fused/ours", "ratio ts/ours",
              "ratio limit/ours"]
    rows = []
    for case in CASES:
        if case not in res.times:
            continue
        label = case + (" *" if case == META_C and TS in res.times[case] else "")
        rows.append([label, *(fmt_time(res.median(case, lib, cpu, best)) for lib in LIBS),
                     fmt_ratio(res.ratio(case, ZP, cpu, best)), fmt_ratio(res.ratio(case, ZPF, cpu, best)),
                     fmt_ratio(res.ratio(case, TS, cpu, best)),
                     fmt_ratio(res.ratio(case, LIMIT, cpu, best))])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda cells: "| " + " | ".join(  # noqa: E731
        c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))) + " |"
    sep = "|" + "|".join(("-" * (w + 1)) + (":" if i else "-") for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), sep, *(line(r) for r in rows)])


def targets(res: Results) -> List[Dict[str, Any]]:
    out = []
    for text, case, peer, minimum in TARGETS:
        r = res.ratio(case, peer)
        out.append({"target": text, "case": case, "peer": peer, "minimum": minimum, "ratio": r,
                    "met": None if r is None else r >= minimum})
    return out


def report(res: Results, args: argparse.Namespace) -> str:
    lines = [f"Zarr layer benchmark — {res.info['date']}",
             f"python {platform.python_version()} on {platform.platform()}, {os.cpu_count()} CPU(s); "
             + ", ".join(f"{k} {v}" for k, v in res.info["versions"].items()),
             f"median of {args.repeats} repetitions; ratio = peer time / molrec_raw time (> 1: molrec_raw faster); "
             "on a noisy machine compare ratios over several runs, not single times",
             "", table(res), ""]
    if META_C in res.times and TS in res.times[META_C]:
        lines.append("* tensorstore creates arrays only (it has no group API: no root/group zarr.json, "
                     "no group attributes); it opens each array by path and has no [members] walk.")
    lines.append("Bulk [shuffle chain] = bytes + numcodecs.shuffle(8) + zstd(3) + crc32c (molrec_raw vs zarr-python); "
                 "[no-shuffle chain] = bytes + zstd(3) + crc32c (molrec_raw vs tensorstore, which lacks shuffle).")
    lines.append("Reads are warm-cache (OS caches cannot be dropped here); os.sync() runs before every timed "
                 "step, outside the timed region; stores are deleted only after the last timing.")
    lines.append("")
    lines.append("Targets:")
    for t in targets(res):
        state = "n/a (peer skipped)" if t["met"] is None else ("MET" if t["met"] else "MISSED")
        lines.append(f"  [{state:>6}] {t['target']}: {fmt_ratio(t['ratio'])}")
    if res.notes:
        lines.append("")
        lines.append("Notes:")
        lines.extend(f"  - {n}" for n in res.notes)
    bulk = res.info.get("bulk")
    if bulk:
        lines.append("")
        lines.append(f"Bulk: {bulk['elements']} float64 = {bulk['raw_bytes'] / 2**20:.0f} MiB raw; stored: "
                     + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in bulk["stored_bytes"].items()))
    lines.append("")
    lines.append("Secondary: process CPU time (all threads; medians) — less sensitive to I/O stalls and")
    lines.append("neighbours on a noisy machine, but it counts work, not latency (parallelism hides in it):")
    lines.append("")
    lines.append(table(res, cpu=True))
    lines.append("")
    lines.append("Secondary: best (minimum) wall time of the repetitions — the least disturbed run of each:")
    lines.append("")
    lines.append(table(res, best=True))
    lines.append("")
    lines.append("All repetitions, wall (ms):")
    for case in CASES:
        for lib in LIBS:
            values = res.times.get(case, {}).get(lib)
            if values:
                lines.append(f"  {case:<32} {lib:<11} " + " ".join(f"{v * 1000:.1f}" for v in values))
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=None, help="repetitions per case (default 5; 2 with --quick)")
    parser.add_argument("--quick", action="store_true", help="smoke test: 2**22 elements, 40 groups, 2 repeats")
    parser.add_argument("--elements", type=int, default=None, help="bulk array size (default 2**25)")
    parser.add_argument("--groups", type=int, default=None, help="metadata groups (default 200)")
    parser.add_argument("--dir", default=None, help="parent directory for the temporary stores "
                        "(default: the system temp dir, same disk as /tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary root directory")
    parser.add_argument("--json", metavar="PATH", default=None, help="also write results as JSON")
    parser.add_argument("--only", choices=("bulk", "metadata"), default=None, help="run one workload")
    parser.add_argument("--skip", action="append", default=[], choices=(ZP, TS, LIMIT),
                        help="leave a peer out (repeatable)")
    parser.add_argument("--ts-fsync", action="store_true",
                        help="keep tensorstore's default file_io_sync=true (fsync per write)")
    args = parser.parse_args(argv)
    if args.repeats is None:
        args.repeats = 2 if args.quick else 5
    n = args.elements or (2 ** 22 if args.quick else 2 ** 25)
    n_groups = args.groups or (40 if args.quick else 200)
    if n % SHARD:
        parser.error(f"--elements must be a multiple of the shard size {SHARD}")

    res = Results()
    res.info["date"] = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    res.info["load_average"] = [list(os.getloadavg())]
    res.info["versions"] = {"molrec_raw": f"{version_of('molrec-raw')} (git {molrec_revision()})",
                            "numpy": np.__version__}
    libs = [OURS]
    if ZP in args.skip:
        res.notes.append("zarr-python skipped (--skip)")
    elif zarr is None:
        res.notes.append(f"zarr-python not importable, skipped ({ZARR_ERROR})")
    else:
        libs.append(ZP)
        res.info["versions"]["zarr"] = zarr.__version__
        res.info["zarr_config"] = {k: zarr.config.get(k) for k in ("async.concurrency", "threading.max_workers")}
        if zarr.__version__ != "3.4.2":
            res.notes.append(f"zarr-python is {zarr.__version__}, the targets were set against 3.4.2")
    if TS in args.skip:
        res.notes.append("tensorstore skipped (--skip)")
    elif ts is None:
        res.notes.append(f"tensorstore not importable, skipped ({TS_ERROR})")
    else:
        libs.append(TS)
        res.info["versions"]["tensorstore"] = version_of("tensorstore")
        if not args.ts_fsync:
            res.notes.append("tensorstore runs with context file_io_sync=false (molrec_raw and zarr-python "
                             "do not fsync either); --ts-fsync restores its default")
    if LIMIT in args.skip:
        res.notes.append("limit skipped (--skip)")
    else:
        libs.append(LIMIT)
        res.notes.append(f"limit: zstd batch API on {LIMIT_THREADS} threads, {LIMIT_BATCH} inner chunks per call")
    threads = ["molrec_raw default threads=2"]
    if ZP in libs:
        threads.append(f"zarr-python default config {json.dumps(res.info['zarr_config'])}; zp-fused: the same "
                       f"with {json.dumps(ZP_FUSED)} (codec work on a pool of os.cpu_count() threads)")
    if TS in libs:
        threads.append("tensorstore default context (thread pools sized to the CPU count)")
    res.notes.append("concurrency: " + "; ".join(threads))
    res.info["args"] = {"repeats": args.repeats, "elements": n, "groups": n_groups, "quick": args.quick,
                        "ts_fsync": args.ts_fsync, "libs": libs}

    ws = Workspace(args.dir, args.keep)
    res.info["workdir"] = ws.root
    print(f"workdir {ws.root}; libraries {', '.join(libs)}; repeats {args.repeats}", flush=True)
    try:
        warm_up(ws, libs, args.ts_fsync)
        if args.only in (None, "bulk"):
            print(f"bulk: {n} float64 elements", flush=True)
            run_bulk(res, ws, n, args.repeats, libs, args.ts_fsync)
        if args.only in (None, "metadata"):
            print(f"metadata: {n_groups} groups x {ARRAYS_PER_GROUP} arrays", flush=True)
            run_meta(res, ws, n_groups, args.repeats, libs, args.ts_fsync)
    finally:
        ws.close()
    res.info["load_average"].append(list(os.getloadavg()))
    res.notes.append("load average (1, 5, 15 min) at start / end: " + " / ".join(
        ", ".join(f"{v:.1f}" for v in load) for load in res.info["load_average"]))

    text = report(res, args)
    print()
    print(text)
    if args.json:
        doc = {
            "info": res.info,
            "notes": res.notes,
            "times_seconds": res.times,
            "medians_seconds": {c: {lib: res.median(c, lib) for lib in v} for c, v in res.times.items()},
            "ratios": {c: {p: res.ratio(c, p) for p in (ZP, ZPF, TS, LIMIT)} for c in res.times},
            "cpu_seconds": res.cpu,
            "cpu_medians_seconds": {c: {lib: res.median(c, lib, True) for lib in v} for c, v in res.cpu.items()},
            "cpu_ratios": {c: {p: res.ratio(c, p, True) for p in (ZP, ZPF, TS, LIMIT)} for c in res.cpu},
            "best_ratios": {c: {p: res.ratio(c, p, best=True) for p in (ZP, ZPF, TS, LIMIT)} for c in res.times},
            "targets": targets(res),
        }
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2, ensure_ascii=False)
        print(f"\nJSON written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
