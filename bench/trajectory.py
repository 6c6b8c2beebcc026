#!/usr/bin/env python
"""Benchmark the trajectory writer/reader: molrec_raw vs zarr-python vs tensorstore.

Append: ATOMS atoms × FRAMES frames, columns x, y, z f64 with precision 1e-3 (a smooth random
walk), appended one frame at a time through ``MrecWriter``. The peers store the same values
(quantized by the same precision rule) in arrays of the same shape and chunk/shard geometry,
taken from the record molrec_raw wrote, appended by resize + write per 50-frame batch.
zarr-python uses the same codecs (bytes, numcodecs.shuffle, zstd 3, crc32c); tensorstore has
no numcodecs.shuffle and runs bytes + zstd 3 + crc32c. Ratios are peer time / ours (> 1: ours
faster) and rates are MB/s of raw float bytes. Random access: RANDOM random frames read back.
Peak RSS of the molrec_raw writer is measured in a child process.

    python bench/trajectory.py [--atoms 10000] [--frames 500] [--random 200] [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

from molrec_raw.record.model import Block, Frame
from molrec_raw.record.precision import round_to_precision
from molrec_raw.record.trajectory import MrecReader, MrecWriter, SequenceSchema

warnings.simplefilter("ignore")
PRECISION = 1e-3
BATCH = 50


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


def ours_write(path: str, data: Any) -> None:
    schema = SequenceSchema().declare_block("atoms", rows=len(data[0]["x"]))
    for c in "xyz":
        schema.declare_column("atoms", c, "f64").declare_precision("atoms", c, PRECISION)
    with MrecWriter(path, schema) as writer:  # rounds to the precision grid itself
        for i, values in enumerate(data):
            writer.append(Frame(blocks={"atoms": Block(values)}), step=i)


def geometry(path: str) -> Dict[str, Any]:
    with open(os.path.join(path, "trajectory", "atoms", "x", "zarr.json")) as fh:
        doc = json.load(fh)
    sharding = doc["codecs"][0]["configuration"]
    return {"shard": doc["chunk_grid"]["configuration"]["chunk_shape"][0], "inner": sharding["chunk_shape"][0],
            "codecs": sharding["codecs"], "index_location": sharding.get("index_location", "end")}


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


def _vm(field: str) -> float:
    """A /proc/self/status figure in MiB (VmHWM is per address space, unlike ru_maxrss,
    which Linux carries across exec from the benchmark's own parent process)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_of_writer(atoms: int, frames: int) -> Tuple[float, float]:
    """(RSS before, peak RSS after) in MiB of a child process that only runs the writer."""
    code = (f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); "
            "import trajectory as t, tempfile, os; d = tempfile.mkdtemp(); "
            f"t.frame_values(0, {atoms}); base = t._vm('VmRSS'); "
            f"t.ours_write(os.path.join(d, 'r.mrec'), t.LazyFrames({atoms}, {frames})); "
            "print(base, t._vm('VmHWM'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    base, peak = (float(v) for v in out.stdout.split()[-2:])
    return base, peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--atoms", type=int, default=10_000)
    parser.add_argument("--frames", type=int, default=500)
    parser.add_argument("--random", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    peers = []
    for kind, module in (("zarr-python", "zarr"), ("tensorstore", "tensorstore")):
        try:
            __import__(module)
            peers.append(kind)
        except ImportError:
            print(f"note: {kind} not importable, skipped")
    raw_mb = args.atoms * args.frames * 3 * 8 / 1e6
    picks = np.random.default_rng(42).integers(0, args.frames, args.random)
    times: Dict[str, List[float]] = {}
    data = [frame_values(i, args.atoms) for i in range(args.frames)]  # generated once, outside the timings
    quantized = [{c: round_to_precision(v, PRECISION) for c, v in d.items()} for d in data]
    work = tempfile.mkdtemp(prefix="molrec-traj-bench-")
    try:
        for rep in range(args.repeats):
            ours = os.path.join(work, f"r{rep}.mrec")
            t0 = time.perf_counter()
            ours_write(ours, data)
            times.setdefault("append molrec_raw", []).append(time.perf_counter() - t0)
            geo = geometry(ours)
            with MrecReader(ours) as reader:
                t0 = time.perf_counter()
                for i in picks:
                    reader[int(i)]
                times.setdefault("random molrec_raw", []).append(time.perf_counter() - t0)
                expect = reader[int(picks[0])].blocks["atoms"].columns["x"]
            for kind in peers:
                path = os.path.join(work, f"{kind}{rep}")
                t0 = time.perf_counter()
                peer_write(kind, path, quantized, geo)
                times.setdefault(f"append {kind}", []).append(time.perf_counter() - t0)
                read = peer_reader(kind, path)
                t0 = time.perf_counter()
                for i in picks:
                    read(int(i), args.atoms)
                times.setdefault(f"random {kind}", []).append(time.perf_counter() - t0)
                assert np.array_equal(np.asarray(read(int(picks[0]), args.atoms)[0]), expect), kind
            print(f"rep {rep + 1}: " + "  ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items()), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\n{args.atoms} atoms x {args.frames} frames (x, y, z f64, precision {PRECISION}); {raw_mb:.0f} MB raw; "
          f"medians of {args.repeats}; warm cache")
    print("| measure | molrec_raw | " + " | ".join(peers) + " | " + " | ".join(f"ratio {p}/ours" for p in peers) + " |")
    print("|---|---:|" + "---:|" * (2 * len(peers)))
    ours_append = med["append molrec_raw"]
    row = f"| append (MB/s raw) | {raw_mb / ours_append:.0f} | " + " | ".join(f"{raw_mb / med[f'append {p}']:.0f}" for p in peers)
    print(row + " | " + " | ".join(f"{med[f'append {p}'] / ours_append:.2f}x" for p in peers) + " |")
    ours_random = med["random molrec_raw"]
    row = f"| random access (frames/s) | {args.random / ours_random:.0f} | " + " | ".join(
        f"{args.random / med[f'random {p}']:.0f}" for p in peers)
    print(row + " | " + " | ".join(f"{med[f'random {p}'] / ours_random:.2f}x" for p in peers) + " |")
    base, peak = peak_rss_of_writer(args.atoms, args.frames)
    print(f"\npeak RSS of a child process running only the molrec_raw writer: {peak:.0f} MiB, of which "
          f"{peak - base:.0f} MiB came during the {args.frames} appends (one frame of input is "
          f"{args.atoms * 3 * 8 / 2**20:.2f} MiB, each generated just before its append)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
