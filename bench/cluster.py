#!/usr/bin/env python
"""A per-record analysis over many records on a Dask cluster: 1 worker vs 2 workers.

RECORDS trajectories (FRAMES frames x ATOMS atoms, x/y/z f64 with precision 1e-3, so reading
decodes shuffle + zstd), a third each as directories, packed zips and zips served over
loopback HTTP.  The analysis is the mean-square displacement over every time origin,
``msd[lag] = mean_{t, atom} |r(t + lag) - r(t)|^2`` for lags 1..FRAMES/2, computed from
``molrec_raw.integrations.dask.block_array(location)`` (the graph carries only locations and
names; each worker opens its records).  Timed: ``client.compute`` of all records until the
results are gathered, on a ``LocalCluster(processes=True, threads_per_worker=1)`` started
beforehand (startup not timed); median of REPEATS.  The result is checked against a serial
run without Dask.

    python bench/cluster.py [--records 64] [--frames 100] [--atoms 3000] [--repeats 3]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import List

import numpy as np

import molrec_raw as mr
from molrec_raw import MrecReader, MrecWriter, SequenceSchema
from molrec_raw.zarr.rangeserver import serve_directory

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
    """MSD over every time origin, lags 1..F/2 (positions: frames x atoms x 3)."""
    lags = range(1, max(2, positions.shape[0] // 2 + 1))
    return np.array([np.mean(np.sum((positions[lag:] - positions[:-lag]) ** 2, axis=2)) for lag in lags])


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
                serial.append(msd_all_origins(reader.block_array("atoms", ["x", "y", "z"])))
        serial_time = time.perf_counter() - started
        times = {}
        for workers in (1, 2):
            with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                              dashboard_address=None) as cluster, Client(cluster) as client:
                client.run(lambda: None)
                runs = []
                for _ in range(args.repeats):
                    lazy = [dask.delayed(msd_all_origins)(block_array(location)) for location in locations]
                    started = time.perf_counter()
                    results = client.gather(client.compute(lazy))
                    runs.append(time.perf_counter() - started)
                    for got, expected in zip(results, serial):
                        np.testing.assert_allclose(got, expected, rtol=1e-12)
                times[workers] = statistics.median(runs)
        print(f"\n| run | wall time (s) | speed-up |\n|---|---:|---:|")
        print(f"| serial, no Dask | {serial_time:.2f} | |")
        print(f"| LocalCluster, 1 worker | {times[1]:.2f} | 1.00x |")
        print(f"| LocalCluster, 2 workers | {times[2]:.2f} | {times[1] / times[2]:.2f}x |")
        print(f"\n2 workers vs 1: {times[1] / times[2]:.2f}x (target >= 1.6x); results equal the serial run")


if __name__ == "__main__":
    main()
