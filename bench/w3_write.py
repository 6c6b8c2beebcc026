#!/usr/bin/env python
"""W3's bulk write (bench/zarr_layer.py: 2**25 float64, shards of 2**21, inner chunks of 2**17,
``bytes + shuffle(8) + zstd(3) + crc32c``) against zarr-python 3.4's FusedCodecPipeline: where
each side's wall time goes, and what runs while what (issue 37: W3 write >= 1.2x, 2 cores).

molrec_raw: the write is cut into phases by wrapping the functions that do them —
``encode_groups`` (shuffle + zstd + crc32c, split over the node's codec threads), the shard's
assembly (``ShardingCodec.finish_write``: its chunks and index joined into one value) and the
store's write of it (``DirectoryStore.set``: a temporary file written, renamed over) — each
with its wall and the caller's CPU; and each encode run's span on its thread, so the
timeline shows what the caller does while the helper encodes (nothing: the writes wait for
the wave's encode, the next wave's encode waits for the writes).

zarr-python (FusedCodecPipeline, ``codec_pipeline.max_workers`` = os.cpu_count()): one task
per shard on its thread pool — encode the shard's chunks, then write it — so one shard's
write overlaps the other's encode.

Both: wall, process CPU (every thread), and the share of 2 x wall the process spent on a
core (CPU / (2 x wall): 100 % = both cores busy all along).  The data: bench/zarr_layer.py's
``bulk_data`` (seed fixed).

    python bench/w3_write.py --rounds 3
    python bench/w3_write.py --stages      # each encode stage of the 256 MiB alone, one thread, both sides
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import zarr_layer as Z  # noqa: E402  (the same data, chain and geometry as W3)


class Timeline:
    """(phase, thread name, start, end, caller CPU) of each wrapped call."""

    def __init__(self) -> None:
        self.spans: List[Tuple[str, str, float, float, float]] = []
        self.lock = threading.Lock()

    def wrap(self, owner: Any, name: str, phase: str) -> Callable[[], None]:
        original = getattr(owner, name)
        spans, lock = self.spans, self.lock

        def timed(*args: Any, **kwargs: Any) -> Any:
            c0, w0 = time.thread_time(), time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                with lock:
                    spans.append((phase, threading.current_thread().name, w0, time.perf_counter(),
                                  time.thread_time() - c0))

        setattr(owner, name, timed)
        return lambda: setattr(owner, name, original)


def ours(path: str, data: Any, timeline: Optional[Timeline]) -> None:
    undo: List[Callable[[], None]] = []
    if timeline is not None:
        from molrec_raw.zarr import array, store
        from molrec_raw.zarr.codecs import batch, sharding

        undo = [timeline.wrap(array, "encode_groups", "encode wave (caller waits for every run)"),
                timeline.wrap(batch, "encode_batch", "encode run"),
                timeline.wrap(sharding.ShardingCodec, "finish_write", "shard assembly (join)"),
                timeline.wrap(store.DirectoryStore, "set", "shard file write")]
    try:
        Z.ours_bulk_write(path, data, Z.CHAIN_SHUFFLE)
    finally:
        for u in undo:
            u()


def fused(path: str, data: Any) -> None:
    Z.zpf_bulk_write(path, data)


def stages(data: Any, repeats: int = 3) -> None:
    """Each encode stage of the whole array on one thread (CPU ms, best of ``repeats``): ours
    (the library's shuffle into a fresh and into a reused buffer, zstandard's batch call as
    the library makes it, crc32c) and zarr-python's (numcodecs' Shuffle and Zstd, per chunk),
    with a plain copy of the same bytes as the floor of a byte transpose."""
    import crc32c
    import numpy as np
    import zstandard
    from numcodecs import Shuffle, Zstd

    from molrec_raw.zarr.codecs.shuffle import ShuffleCodec

    chunks = np.ascontiguousarray(data).reshape(-1, Z.INNER).view(np.uint8)
    reused = np.empty_like(chunks)

    def best(fn: Callable[[], Any]) -> Tuple[float, Any]:
        times, out = [], None
        for _ in range(repeats):
            c0 = time.process_time()
            out = fn()
            times.append(time.process_time() - c0)
        return min(times) * 1e3, out

    codec = ShuffleCodec(8)
    fresh_ms, shuffled = best(lambda: codec.encode_many(chunks))
    reused_ms, _ = best(lambda: codec.encode_many(chunks, reused))
    rows = list(np.asarray(shuffled).reshape(len(chunks), -1))
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=False, write_content_size=True)
    zstd_ms, frames = best(lambda: compressor.multi_compress_to_buffer(rows, threads=1))
    blobs = [bytes(f) for f in frames]
    crc_ms, _ = best(lambda: [crc32c.crc32c(b) for b in blobs])
    copy_ms, _ = best(lambda: np.copyto(reused, chunks))
    nc_shuffle_ms, _ = best(lambda: [Shuffle(elementsize=8).encode(c) for c in chunks])
    nc_zstd_ms, nc_frames = best(lambda: [Zstd(level=3).encode(r) for r in rows])
    mib = chunks.nbytes / 2 ** 20
    print(f"encode stages of {mib:.0f} MiB ({len(chunks)} chunks), one thread, CPU ms (best of {repeats}):")
    print(f"| stage | molrec_raw | zarr-python (numcodecs) |\n|---|---:|---:|")
    print(f"| byte shuffle | {fresh_ms:.0f} (into a reused buffer: {reused_ms:.0f}) | {nc_shuffle_ms:.0f} |")
    print(f"| zstd level 3 | {zstd_ms:.0f} ({sum(len(b) for b in blobs) / 2 ** 20:.1f} MiB out) | {nc_zstd_ms:.0f} "
          f"({sum(len(f) for f in nc_frames) / 2 ** 20:.1f} MiB out) |")
    print(f"| crc32c of the frames | {crc_ms:.1f} | |")
    print(f"| floor: a plain copy of the same bytes | {copy_ms:.0f} | |")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--elements", type=int, default=2 ** 25)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--stages", action="store_true", help="only time each encode stage on one thread")
    args = parser.parse_args(argv)
    data = Z.bulk_data(args.elements)
    if args.stages:
        stages(data)
        return 0
    root = tempfile.mkdtemp(prefix="w3-write-", dir=args.dir)
    cases: Dict[str, Callable[[str], None]] = {"molrec_raw": lambda p: ours(p, data, None),
                                                "zp-fused": lambda p: fused(p, data)}
    results: Dict[str, List[Tuple[float, float]]] = {name: [] for name in cases}
    phases: List[Dict[str, Tuple[float, float, int]]] = []
    last: List[Tuple[str, str, float, float, float]] = []
    load = [os.getloadavg()[0]]
    try:
        for name, fn in cases.items():  # warm-up
            fn(os.path.join(root, f"warm-{name}"))
        for r in range(args.rounds):
            for name, fn in (list(cases.items()) if r % 2 == 0 else list(cases.items())[::-1]):
                path = os.path.join(root, f"{name}-{r}")
                os.sync()
                c0, w0 = time.process_time(), time.perf_counter()
                fn(path)
                results[name].append((time.perf_counter() - w0, time.process_time() - c0))
                shutil.rmtree(path, ignore_errors=True)
            timeline = Timeline()  # the phases, in a call of their own (wrapping costs a little)
            path = os.path.join(root, f"phases-{r}")
            os.sync()
            t0 = time.perf_counter()
            ours(path, data, timeline)
            total = time.perf_counter() - t0
            shutil.rmtree(path, ignore_errors=True)
            summary: Dict[str, Tuple[float, float, int]] = {"(the whole write)": (total, 0.0, 1)}
            for phase, _, start, end, cpu in timeline.spans:
                wall0, cpu0, n0 = summary.get(phase, (0.0, 0.0, 0))
                summary[phase] = (wall0 + end - start, cpu0 + cpu, n0 + 1)
            phases.append(summary)
            last = [(p, who, s - t0, e - t0, c) for p, who, s, e, c in timeline.spans]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load.append(os.getloadavg()[0])
    print(f"W3 bulk write, {args.elements} float64, medians of {args.rounds} rounds; load average "
          f"{load[0]:.1f} -> {load[1]:.1f}; {os.cpu_count()} CPU(s)\n")
    print("| | wall ms | CPU ms (all threads) | CPU / (2 x wall) |")
    print("|---|---:|---:|---:|")
    for name, runs in results.items():
        wall, cpu = (statistics.median(r[i] for r in runs) for i in range(2))
        print(f"| {name} | {wall * 1e3:.0f} | {cpu * 1e3:.0f} | {cpu / (2 * wall):.0%} |")
    ratios = [f / o for (o, _), (f, _) in zip(results["molrec_raw"], results["zp-fused"])]
    print(f"\nzp-fused wall / molrec_raw wall per round: {' '.join(f'{x:.2f}' for x in ratios)}")
    print("\nmolrec_raw phases (summed over the write; spans on the caller's thread unless 'encode run'):")
    print("| phase | calls | wall ms | CPU ms of the thread |")
    print("|---|---:|---:|---:|")
    for phase in phases[0]:
        wall, cpu = (statistics.median(p.get(phase, (0.0, 0.0, 0))[i] for p in phases) for i in range(2))
        print(f"| {phase} | {phases[0][phase][2]} | {wall * 1e3:.0f} | {cpu * 1e3:.0f} |")
    print("\ntimeline of the last phased write (ms from its start; thread):")
    for phase, who, start, end, cpu in sorted(last, key=lambda s: s[2]):
        if phase != "encode run" or who != "MainThread":
            print(f"  {start * 1e3:7.1f} - {end * 1e3:7.1f}  {who:<14} {phase}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
