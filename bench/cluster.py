#!/usr/bin/env python
"""A per-record analysis over many records on a Dask cluster: 1 worker vs 2 workers.

RECORDS trajectories (FRAMES frames x ATOMS atoms, x/y/z f64 with precision 1e-3, so reading
decodes shuffle + zstd), a third each as directories, packed zips and zips served over
loopback HTTP.  The analysis is the mean-square displacement over every time origin,
``msd[lag] = mean_{t, atom} |r(t + lag) - r(t)|^2`` for lags 1..FRAMES/2, computed from
``molrec_raw.integrations.dask.block_array(location)`` (the graph carries only locations and
names; each worker opens its records).  Every process runs one numpy/BLAS thread (as Dask's
workers do), so the serial run and the ceiling are not helped by hidden threads.  Timed: ``client.compute`` of all records until the
results are gathered, on a ``LocalCluster(processes=True, threads_per_worker=1)`` started
beforehand (startup not timed, a fresh cluster per run); 1 and 2 workers are timed in
alternation and the speed-up is the median of the paired ratios (a neighbour's load on a
shared machine hits both alike).
The "ceiling" rows time the analysis alone on in-memory arrays with 1 and 2 plain processes,
in the same run: what two processes can gain on the machine at that moment.  The result is checked against a serial
run without Dask.

    python bench/cluster.py [--records 64] [--frames 100] [--atoms 3000] [--repeats 3]
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Dict, List

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")  # one thread per process everywhere, as Dask sets in its workers
import numpy as np  # noqa: E402

import molrec_raw as mr  # noqa: E402
from molrec_raw import MrecReader, MrecWriter, SequenceSchema
from molrec_raw.zarr.rangeserver import serve_directory  # noqa: E402

warnings.simplefilter("ignore")


def write_record(path: Path, frames: int, atoms: int, seed: int) -> Path:
    schema = SequenceSchema().declare_block("atoms", rows=atoms)
    for c in "xyz":
        schema.declare_column("atoms", c, "f64").declare_precision("atoms", c, 1e-3)
    rng = np.random.default_rng(seed)
    positions = rng.uniform(0, 30, size=(atoms, 3))
    with MrecWriter(path, schema, durable=False) as w:
        for i in range(frames):
            positions = positions + rng.normal(scale=0.05, size=positions.shape)
            w.append(mr.Frame({}, {"atoms": mr.Block({c: positions[:, k] for k, c in enumerate("xyz")})}), step=i)
    return path


def msd_all_origins(positions: np.ndarray) -> np.ndarray:
    """MSD over every time origin, lags 1..F/2 (positions: frames x atoms x 3), computed in
    blocks of 256 atoms into one reused buffer: the temporaries stay in cache, and nothing is
    allocated per lag (Dask's workers set ``MALLOC_TRIM_THRESHOLD_``, which turns every large
    temporary into an mmap/munmap pair — 4-5x slower numpy on fresh arrays)."""
    frames, atoms = positions.shape[:2]
    lags = list(range(1, max(2, frames // 2 + 1)))
    total = np.zeros(len(lags))
    buffer = np.empty((frames, min(256, atoms), 3))
    for first in range(0, atoms, 256):
        part = np.ascontiguousarray(positions[:, first:first + 256])
        for k, lag in enumerate(lags):
            step = buffer[:frames - lag, :part.shape[1]]
            np.subtract(part[lag:], part[:-lag], out=step)
            np.multiply(step, step, out=step)
            total[k] += float(step.sum())
    return total / np.array([(frames - lag) * atoms for lag in lags], dtype=np.float64)


_IN_MEMORY: List[np.ndarray] = []  # the ceiling run's inputs, inherited by forked processes


def _msd_of(index: int) -> np.ndarray:
    return msd_all_origins(_IN_MEMORY[index])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=64)
    parser.add_argument("--frames", type=int, default=100)
    parser.add_argument("--atoms", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import dask
    from distributed import Client, LocalCluster

    from molrec_raw.integrations.dask import block_array

    with tempfile.TemporaryDirectory() as tmp, serve_directory(tmp) as server:
        root = Path(tmp)
        started = time.perf_counter()
        locations: List[str] = []
        for k in range(args.records):
            path = write_record(root / f"r{k:03d}.mrec", args.frames, args.atoms, k)
            if k % 3 == 0:
                locations.append(str(path))
            else:
                packed = mr.pack_mrec_zip(path)
                locations.append(str(packed) if k % 3 == 1 else server.url_of(packed.name))
        print(f"wrote {args.records} records ({args.frames} frames x {args.atoms} atoms) in "
              f"{time.perf_counter() - started:.1f} s: {len(locations[0::3])} directories, "
              f"{len(locations[1::3])} zips, {len(locations[2::3])} zips over HTTP")
        started = time.perf_counter()
        serial = []
        for location in locations:
            with MrecReader(location) as reader:
                positions = reader.block_array("atoms", ["x", "y", "z"])
                _IN_MEMORY.append(positions)
                serial.append(msd_all_origins(positions))
        serial_time = time.perf_counter() - started
        # The configurations are timed in alternation (1, 2, 1, 2, ...), so a neighbour's load on
        # the shared machine hits both alike; ratios are taken per pair.
        ceiling: Dict[int, List[float]] = {1: [], 2: []}  # the analysis alone on in-memory arrays
        with multiprocessing.get_context("fork").Pool(1) as one, multiprocessing.get_context("fork").Pool(2) as two:
            for pool in (one, two):
                pool.map(_msd_of, range(len(_IN_MEMORY)))  # warm-up: the children touch the inherited arrays
            for _ in range(args.repeats):
                for workers, pool in ((1, one), (2, two)):
                    started = time.perf_counter()
                    pool.map(_msd_of, range(len(_IN_MEMORY)))
                    ceiling[workers].append(time.perf_counter() - started)
        times: Dict[int, List[float]] = {1: [], 2: []}
        for _ in range(args.repeats):
            for workers in (1, 2):  # one cluster at a time: a second one idling beside it costs the first
                with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, Client(cluster) as client:
                    client.run(lambda: None)
                    lazy = [dask.delayed(msd_all_origins)(block_array(location)) for location in locations]
                    started = time.perf_counter()
                    results = client.gather(client.compute(lazy))
                    times[workers].append(time.perf_counter() - started)
                for got, expected in zip(results, serial):
                    np.testing.assert_allclose(got, expected, rtol=1e-12)
        speedup = statistics.median(a / b for a, b in zip(times[1], times[2]))
        limit = statistics.median(a / b for a, b in zip(ceiling[1], ceiling[2]))
        med = {k: statistics.median(v) for k, v in times.items()}
        cap = {k: statistics.median(v) for k, v in ceiling.items()}
        print(f"\n| run | wall time (s), median of {args.repeats} | speed-up (median of paired runs) |\n|---|---:|---:|")
        print(f"| serial, no Dask (read + analysis) | {serial_time:.2f} | |")
        print(f"| LocalCluster, 1 worker | {med[1]:.2f} | 1.00x |")
        print(f"| LocalCluster, 2 workers | {med[2]:.2f} | {speedup:.2f}x |")
        print(f"| ceiling: the analysis alone on in-memory arrays, 1 process | {cap[1]:.2f} | 1.00x |")
        print(f"| ceiling: the analysis alone on in-memory arrays, 2 processes | {cap[2]:.2f} | {limit:.2f}x |")
        print(f"\n2 workers vs 1: {speedup:.2f}x (target >= 1.6x; two plain processes reach {limit:.2f}x on this "
              "machine in the same run); results equal the serial run")


if __name__ == "__main__":
    main()
