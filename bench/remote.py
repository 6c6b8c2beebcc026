#!/usr/bin/env python
"""Reading a packed trajectory over HTTP: molrec_raw's HttpStore vs zarr-python 3.4.2 with
fsspec's HTTP file system, on one loopback server that adds LATENCY seconds to every request.

The record: ATOMS atoms x FRAMES frames, columns x, y, z f64 with precision 1e-3 (a smooth
random walk; inner chunk = one frame per column, shuffle + zstd 3 + crc32c), packed into
``*.mrec.zip`` and served by ``molrec_raw.zarr.rangeserver`` (HTTP/1.1, byte ranges).

- random: RANDOM distinct random frames (fixed seed), after a warm-up that reads frame 0 (so
  each reader has opened the archive and met every shard index), each frame = x, y and z of
  that frame.  molrec_raw reads ``MrecReader(url)[i]``; zarr-python opens the same zip
  through fsspec's zip file system over its HTTP file system
  (``fsspec.filesystem("zip", fo=url, target_protocol="http")``, wrapped for zarr's async
  store) and reads ``x[i*N:(i+1)*N]``, then y, then z — once with fsspec's default HTTP file
  (5 MB read-ahead blocks) and once with ``cache_type="none"`` (exact ranges); and on the
  served *directory* through ``zarr.storage.FsspecStore.from_url`` (fsspec HTTP).  Requests
  per frame are counted on the server.
- sequential: every frame in order with ``MrecReader`` over HTTP vs from the local disk (the
  same zip, opened by path).

Every figure is the median of REPEATS runs (fresh readers each time).

    python bench/remote.py [--atoms 10000] [--frames 200] [--random 100] [--latency 0.005]
                           [--repeats 3] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import numpy as np

import molrec_raw as mr
from molrec_raw import MrecReader, MrecWriter, SequenceSchema
from molrec_raw.zarr.rangeserver import RangeServer, serve_directory

warnings.simplefilter("ignore")
PRECISION = 1e-3


def write_record(path: Path, atoms: int, frames: int) -> Path:
    schema = SequenceSchema().declare_block("atoms", rows=atoms)
    for c in "xyz":
        schema.declare_column("atoms", c, "f64").declare_precision("atoms", c, PRECISION)
    base = np.random.default_rng(0).uniform(0, 50, size=(3, atoms))
    with MrecWriter(path, schema, durable=False) as w:
        for i in range(frames):
            drift = np.random.default_rng(i + 1).normal(scale=0.01, size=(3, atoms)) + 0.001 * i
            values = base + drift
            w.append(mr.Frame({}, {"atoms": mr.Block({c: values[k] for k, c in enumerate("xyz")})},
                              mr.Box(np.eye(3) * 50.0)), step=i)
    return mr.pack_mrec_zip(path)


def timed(server: Optional[RangeServer], run: Callable[[], int]) -> Dict[str, float]:
    before = server.requests if server is not None else 0
    started = time.perf_counter()
    frames = run()
    elapsed = time.perf_counter() - started
    requests = (server.requests - before) if server is not None else 0
    return {"frames_per_s": frames / elapsed, "requests_per_frame": requests / frames, "seconds": elapsed}


def molrec_random(url: str, frames: List[int], server: RangeServer, check: Dict[int, np.ndarray]) -> Dict[str, float]:
    with MrecReader(url) as reader:
        reader[0]  # warm-up: archive, shard indexes, local headers

        def run() -> int:
            for i in frames:
                frame = reader[i]
                if i in check:
                    assert np.array_equal(frame.blocks["atoms"].columns["x"], check[i])
            return len(frames)

        return timed(server, run)


def zarr_arrays(kind: str, url_zip: str, url_dir: str) -> List[Any]:
    import fsspec
    import zarr
    from fsspec.implementations.asyn_wrapper import AsyncFileSystemWrapper

    if kind == "dir":
        store = zarr.storage.FsspecStore.from_url(url_dir, read_only=True)
    else:
        options = {"cache_type": "none"} if kind == "zip-exact" else {}
        fs = fsspec.filesystem("zip", fo=url_zip, target_protocol="http", target_options=options,
                               skip_instance_cache=True)
        store = zarr.storage.FsspecStore(AsyncFileSystemWrapper(fs), read_only=True, path="")
    group = zarr.open_group(store, mode="r")
    return [group[f"trajectory/atoms/{c}"] for c in "xyz"]


def zarr_random(kind: str, url_zip: str, url_dir: str, atoms: int, frames: List[int], server: RangeServer,
                check: Dict[int, np.ndarray]) -> Dict[str, float]:
    arrays = zarr_arrays(kind, url_zip, url_dir)
    for a in arrays:
        a[0:atoms]  # warm-up

    def run() -> int:
        for i in frames:
            got = [a[i * atoms:(i + 1) * atoms] for a in arrays]
            if i in check:
                assert np.array_equal(got[0], check[i])
        return len(frames)

    return timed(server, run)


def molrec_sequential(location: str, server: Optional[RangeServer]) -> Dict[str, float]:
    with MrecReader(location) as reader:
        def run() -> int:
            n = 0
            for frame in reader:
                n += frame.blocks["atoms"].count or 0
            return len(reader)

        return timed(server, run)


def median(runs: List[Dict[str, float]]) -> Dict[str, float]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--atoms", type=int, default=10000)
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--random", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.005)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        packed = write_record(root / "bench.mrec", args.atoms, args.frames)
        print(f"wrote {packed.name}: {args.frames} frames x {args.atoms} atoms, {packed.stat().st_size / 1e6:.1f} MB "
              f"packed, in {time.perf_counter() - started:.1f} s; latency {args.latency * 1000:g} ms per request")
        rng = np.random.default_rng(15)
        frames = [int(i) for i in rng.choice(np.arange(1, args.frames), size=min(args.random, args.frames - 1),
                                              replace=False)]
        with MrecReader(packed) as local:
            check = {i: local[i].blocks["atoms"].columns["x"] for i in frames[:5]}
        results: Dict[str, Dict[str, float]] = {}
        with serve_directory(root, latency=args.latency) as server:
            url_zip, url_dir = server.url_of(packed.name), server.url_of("bench.mrec")
            rows: Dict[str, Callable[[], Dict[str, float]]] = {
                "molrec_raw HttpStore, random": lambda: molrec_random(url_zip, frames, server, check),
            }
            try:
                import zarr  # noqa: F401
                import fsspec  # noqa: F401
                rows["zarr-python + fsspec zip over HTTP (default 5 MB blocks), random"] = (
                    lambda: zarr_random("zip", url_zip, url_dir, args.atoms, frames, server, check))
                rows["zarr-python + fsspec zip over HTTP (cache_type=none), random"] = (
                    lambda: zarr_random("zip-exact", url_zip, url_dir, args.atoms, frames, server, check))
                rows["zarr-python + fsspec HTTP, served directory, random"] = (
                    lambda: zarr_random("dir", url_zip, url_dir, args.atoms, frames, server, check))
            except ImportError as exc:
                print(f"zarr-python/fsspec not importable ({exc}): peers skipped")
            rows["molrec_raw HttpStore, sequential"] = lambda: molrec_sequential(url_zip, server)
            rows["molrec_raw local zip, sequential"] = lambda: molrec_sequential(str(packed), None)
            for name, run in rows.items():
                results[name] = median([run() for _ in range(args.repeats)])
        ours = results["molrec_raw HttpStore, random"]["frames_per_s"]
        print(f"\n| reader | frames/s | requests/frame | vs molrec_raw |\n|---|---:|---:|---:|")
        for name, r in results.items():
            if name.endswith("random"):
                print(f"| {name} | {r['frames_per_s']:.1f} | {r['requests_per_frame']:.2f} | "
                      f"{ours / r['frames_per_s']:.2f}x |")
        seq_http = results["molrec_raw HttpStore, sequential"]["frames_per_s"]
        seq_local = results["molrec_raw local zip, sequential"]["frames_per_s"]
        print(f"\n| sequential iteration | frames/s | requests/frame |\n|---|---:|---:|")
        for name in ("molrec_raw HttpStore, sequential", "molrec_raw local zip, sequential"):
            r = results[name]
            print(f"| {name} | {r['frames_per_s']:.1f} | {r['requests_per_frame']:.3f} |")
        print(f"\nsequential over HTTP / local disk: {seq_http / seq_local:.2f}x (target >= 0.5x)")
        peers = [r["frames_per_s"] for n, r in results.items() if n.startswith("zarr-python") and "zip" in n]
        if peers:
            print(f"random frames vs zarr-python on the zip (best peer configuration): {ours / max(peers):.2f}x "
                  f"(target >= 3x); requests/frame {results['molrec_raw HttpStore, random']['requests_per_frame']:.2f} "
                  "(target <= 3, the columns touched)")
        if args.json:
            Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=2))


if __name__ == "__main__":
    main()
