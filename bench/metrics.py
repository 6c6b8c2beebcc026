#!/usr/bin/env python
"""Benchmark the metrics writer and reader (issue 5): one process, medians, ratios.

    python bench/metrics.py [--events N] [--keys K] [--tail T] [--repeats R] [--dir PARENT]

1. Logging N scalar events round-robin over K keys (value, step, default wall time) to a
   host WAL, closed with one fsync at the end — against a naive baseline that builds each
   line with ``json.dumps`` (wall time from ``datetime.now(timezone.utc)``) and writes it
   with one ``write`` per line, same fsync policy (one fsync at the end).  Target: >= 3x.
   (Also shown: a record writer, whose timing includes its densify on close.)
2. Densify N events: a record writer that logged them closes — the densify proper (dense
   arrays landed and fsynced, catalog last) and the whole ``close()`` (last WAL write, WAL
   fsync, densify) — against parsing the resulting WAL line by line with ``orjson.loads``.
   Target: <= 2x the parse.  Also shown: the recovery path, a writer opening a record
   whose N lines are all past the watermark (parsed with orjson, then densified).
3. Reading a record of N dense points (K series) plus a T-line WAL tail with
   ``read_metrics``.  Target: <= 0.2 s.  Ratio to reading the dense arrays alone (series
   and steps of every key through the Zarr layer).  Wall times are decoded on first
   access; that cost is shown on its own line.

Warm page cache; every timing is the median of --repeats runs in fresh files.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Callable, Dict, List

import numpy as np
import orjson

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from molrec_raw import Block, Frame, write_mrec_frame  # noqa: E402
from molrec_raw.record.metrics import MetricsWriter, read_metrics  # noqa: E402
from molrec_raw.zarr import open_group  # noqa: E402


def new_record(path: str) -> str:
    write_mrec_frame(path, Frame(blocks={"atoms": Block({"x": np.zeros(1)})}), durable=False)
    return path


def log_host(run_dir: str, n: int, keys: List[str]) -> float:
    os.makedirs(run_dir)
    k = len(keys)
    start = time.perf_counter()
    writer = MetricsWriter.for_host(run_dir)
    log = writer.log
    for i in range(n):
        log(keys[i % k], i * 0.001, i // k)
    writer.close()
    return time.perf_counter() - start


def log_naive(path: str, n: int, keys: List[str]) -> float:
    k = len(keys)
    utc = dt.timezone.utc
    start = time.perf_counter()
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            line = json.dumps({"t": "scalar", "k": keys[i % k], "s": i // k,
                               "w": dt.datetime.now(utc).isoformat(), "v": i * 0.001})
            fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    return time.perf_counter() - start


def log_record(path: str, n: int, keys: List[str]) -> Dict[str, float]:
    new_record(path)
    k = len(keys)
    start = time.perf_counter()
    writer = MetricsWriter(path)
    log = writer.log
    for i in range(n):
        log(keys[i % k], i * 0.001, i // k)
    logged = time.perf_counter()
    writer._write_buffer()  # what flush() does first: the WAL's last lines and their fsync ...
    writer._wal.sync()
    synced = time.perf_counter()
    writer.close()  # ... then the densify proper: dense arrays (fsynced), catalog last
    end = time.perf_counter()
    return {"log": logged - start, "wal": synced - logged, "densify": end - synced, "close": end - logged,
            "total": end - start}


def parse_lines(path: str) -> float:
    loads = orjson.loads
    start = time.perf_counter()
    with open(path, "rb") as fh:
        for line in fh:
            loads(line)
    return time.perf_counter() - start


def recover(path: str, wal_source: str) -> float:
    new_record(path)
    open_group(path, "r+").create_group("metrics")
    shutil.copyfile(wal_source, os.path.join(path, "metrics", "metrics.jsonl"))
    start = time.perf_counter()
    MetricsWriter(path).close()
    return time.perf_counter() - start


def build_read_record(path: str, n: int, keys: List[str], tail: int) -> None:
    new_record(path)
    k = len(keys)
    with MetricsWriter(path) as writer:
        for i in range(n):
            writer.log(keys[i % k], i * 0.001, i // k)
        writer.flush()
        for i in range(n, n + tail):
            writer.log(keys[i % k], i * 0.001, i // k)
        writer._write_buffer()  # the tail stays past the watermark
        writer._wal.close()  # leave without densifying it (as a crashed or live writer would)
        writer.closed = True


def read_dense_alone(path: str) -> float:
    start = time.perf_counter()
    group = open_group(path, "r")["metrics"]
    for sub in ("series", "steps"):
        for _, array in group[sub].arrays():
            array.threads = 1
            array[:]
    return time.perf_counter() - start


def timed(fn: Callable[[], float], repeats: int) -> float:
    return statistics.median(fn() for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=20)
    parser.add_argument("--tail", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", default=None, help="parent of the scratch directory")
    args = parser.parse_args()
    n, keys = args.events, [f"train/metric{j}" for j in range(args.keys)]
    scratch = tempfile.mkdtemp(prefix="molrec-metrics-bench-", dir=args.dir)
    counter = iter(range(10 ** 6))

    def fresh(name: str) -> str:
        return os.path.join(scratch, f"{next(counter)}-{name}")

    try:
        rows = []
        # 1. logging
        ours = timed(lambda: log_host(fresh("host"), n, keys), args.repeats)
        naive = timed(lambda: log_naive(fresh("naive.jsonl"), n, keys), args.repeats)
        rows.append(("1 log, host WAL (molrec_raw)", f"{ours:.3f} s", f"{n / ours:,.0f} ev/s", ""))
        rows.append(("1 log, naive json.dumps + write", f"{naive:.3f} s", f"{n / naive:,.0f} ev/s", ""))
        rows.append(("1 logging speed-up (target >= 3x)", "", "", f"{naive / ours:.2f}x"))
        # 2. densify
        runs = []
        parses = []
        for _ in range(args.repeats):
            path = fresh("dense.mrec")
            runs.append(log_record(path, n, keys))
            parses.append(parse_lines(os.path.join(path, "metrics", "metrics.jsonl")))
        close, wal, densify, record_total = (statistics.median(r[k] for r in runs)
                                             for k in ("close", "wal", "densify", "total"))
        parse = statistics.median(parses)
        rows.append(("1 log + close, record writer (densify included)", f"{record_total:.3f} s",
                     f"{n / record_total:,.0f} ev/s", f"{naive / record_total:.2f}x naive"))
        rows.append(("2 densify: dense arrays landed + fsynced, catalog", f"{densify:.3f} s", "",
                     f"{densify / parse:.2f}x parse"))
        rows.append(("2 close(): last WAL write + WAL fsync + densify", f"{close:.3f} s", "",
                     f"{close / parse:.2f}x parse"))
        rows.append(("2 parse the same WAL line by line with orjson", f"{parse:.3f} s", "", ""))
        wal_source = os.path.join(path, "metrics", "metrics.jsonl")
        recovery = timed(lambda: recover(fresh("recover.mrec"), wal_source), args.repeats)
        rows.append(("2 recovery: open with N lines past the watermark + close", f"{recovery:.3f} s", "",
                     f"{recovery / parse:.2f}x parse"))
        # 3. reading
        read_path = fresh("read.mrec")
        build_read_record(read_path, n, keys, args.tail)
        got = read_metrics(read_path)
        assert sum(len(s) for s in got.values()) == n + args.tail
        reads = [], [], []
        for _ in range(max(args.repeats, 5)):
            start = time.perf_counter()
            series = read_metrics(read_path)
            reads[0].append(time.perf_counter() - start)
            start = time.perf_counter()
            for s in series.values():
                s.wall_time
            reads[1].append(time.perf_counter() - start)
            reads[2].append(read_dense_alone(read_path))
        read, walls, alone = (statistics.median(r) for r in reads)
        rows.append((f"3 read_metrics: {n:,} dense points + {args.tail:,}-line tail (target <= 0.2 s)",
                     f"{read:.3f} s", "", f"{read / alone:.2f}x dense alone"))
        rows.append(("3 read the dense series + steps arrays alone", f"{alone:.3f} s", "", ""))
        rows.append(("3 then decode every wall time (lazy, on first access)", f"{walls:.3f} s", "", ""))
        print(f"molrec_raw metrics benchmark: {n:,} events, {args.keys} keys, tail {args.tail:,}, "
              f"median of {args.repeats}; Python {sys.version.split()[0]}, numpy {np.__version__}")
        print()
        print("| measure | time | rate | ratio |")
        print("|---|---|---|---|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
