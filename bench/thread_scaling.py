#!/usr/bin/env python
"""Why two threads gain less on larger reads (issue 37: two threads >= 1.6x one on reads of
>= 1 MiB of chunks): the phases of one whole-array read, each on one thread and on two, and
the floors of the same bytes, measured in the same process and the same rounds.

The arrays are bench/codec_threads.py's (a quantised random walk, seed fixed; inner chunks of
128 KiB in shards of 2 MiB; ``bytes + shuffle(8) + zstd(3) + crc32c``).  Per read size:

  plan            ``Array._read_jobs``: the shard reads (index + one ranged read of the chunks)
                  and the decode jobs: on the caller's thread, before any decoding starts
  decode batch    ``decode_jobs(jobs, 1)``: what ``threads=1`` runs (zstd's batch call per
                  wave, then the unshuffle into the result)
  decode each     ``decode_each(jobs)``: what each thread of ``threads=2`` runs, chunk by chunk
  decode 2t       ``decode_jobs(jobs, CodecThreads(2))``: ``threads=2`` as the library runs it
  read 1t / 2t    ``a[...]`` with threads=1 / threads=2 (fresh result array, as the benchmark)
  floors, each on one thread and split over two plain threads (halves of the chunks; the
  threads started before the clock, released together by a barrier):
    copy          ``np.copyto`` of each decoded chunk into a result array (memory bandwidth)
    zstd          ``ZstdDecompressor.decompress`` of each chunk's frame (the crc32c cut off)
    unshuffle     ``ShuffleCodec.decode_into`` of each decompressed chunk into the result
    each          ``decode_each`` on each half (the library's per-thread run, without the pool)
    first touch   one write per 4 KiB page of a fresh result array (``np.empty``, as a read
                  makes): the page faults a read pays for its result
  2 threads: of the two threads' time in the call (2 x wall), the share on a core, runnable
  but waiting for one (other processes), and blocked (waiting for the GIL, or at the barrier
  between repetitions: they take no other lock) — from /proc/self/task/*/schedstat, so a
  loaded machine shows as waiting, not blocked

Page faults: minor faults per call (getrusage; load-independent).
Results in a fresh array unless the row says "warm" (a result array reused: no page faults).
Every figure: the best of ``--repeats`` per round, the median of ``--rounds``; wall and process
CPU (all threads); the decoded bytes are checked against the data once per size.

    python bench/thread_scaling.py                          # 1, 4, 16, 64 MiB, 3 rounds x 5
    python bench/thread_scaling.py --sizes 64 --rounds 5 --json out.json
    python bench/thread_scaling.py --sizes 1 64 --rounds 0 --threads-or-processes 1.5
"""
from __future__ import annotations

import argparse
import json
import resource
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from codec_threads import CHAINS, INNER, SHARD, walk  # noqa: E402  (the same arrays)

PAGE = 4096


def timed(fn: Callable[[], Any]) -> Tuple[float, float]:
    c0, w0 = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - w0, time.process_time() - c0


def machine_busy() -> Tuple[float, float]:
    """(CPU seconds every process of the machine has used, this process's), from /proc/stat
    and process_time: their difference over an interval is the other processes' work."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = [int(v) for v in fh.readline().split()[1:]]
    except OSError:
        return 0.0, time.process_time()
    busy = sum(fields) - fields[3] - (fields[4] if len(fields) > 4 else 0)  # all but idle and iowait
    return busy / os.sysconf("SC_CLK_TCK"), time.process_time()


class Pair:
    """Two plain threads that each run a given function on their half of the work, released
    together by a barrier; the caller waits for both.  Started once, reused per call."""

    def __init__(self) -> None:
        self.go = threading.Barrier(3)
        self.done = threading.Barrier(3)
        self.work: List[Optional[Callable[[], Any]]] = [None, None]
        self.cpu = [0.0, 0.0]  # each thread's CPU seconds in the last run
        self.stop = False
        self.threads = [threading.Thread(target=self._serve, args=(k,), daemon=True) for k in range(2)]
        for t in self.threads:
            t.start()

    def _serve(self, k: int) -> None:
        while True:
            self.go.wait()
            if self.stop:
                return
            fn = self.work[k]
            assert fn is not None
            c0 = time.thread_time()
            fn()
            self.cpu[k] = time.thread_time() - c0
            self.done.wait()

    def sched(self) -> Tuple[float, float]:
        """Both threads' (seconds on a core, seconds waiting for one) so far, read while they
        wait at the barrier (the kernel brings a thread's figures up to date when it stops)."""
        on = queued = 0.0
        for t in self.threads:
            try:
                with open(f"/proc/self/task/{t.native_id}/schedstat", encoding="ascii") as fh:
                    run, wait = fh.read().split()[:2]
            except (OSError, ValueError):
                return 0.0, 0.0
            on, queued = on + int(run) / 1e9, queued + int(wait) / 1e9
        return on, queued

    def run(self, first: Callable[[], Any], second: Callable[[], Any]) -> None:
        self.work = [first, second]
        self.go.wait()
        self.done.wait()

    def close(self) -> None:
        self.stop = True
        self.go.wait()
        for t in self.threads:
            t.join()


def one_size(mib: int, args: argparse.Namespace, root: str, pair: Pair) -> Dict[str, Any]:
    import zstandard

    import molrec_raw.zarr as mz
    from molrec_raw.zarr.codecs.batch import decode_each, decode_jobs
    from molrec_raw.zarr.codecs.threads import CodecThreads

    data = walk(mib * 2 ** 20 // 8)
    path = os.path.join(root, f"a{mib}")
    mz.open_array(path, mode="w", shape=data.shape, dtype="float64", chunks=(INNER,), shards=(SHARD,),
                  codecs=CHAINS["shuffle+zstd"], fill_value=0.0, threads=1)[...] = data
    a1 = mz.open_array(path, mode="r", threads=1)
    a2 = mz.open_array(path, mode="r", threads=2)
    pool = CodecThreads(2)
    warm = np.empty_like(data)
    warm.fill(0.0)

    def jobs_into(out: Optional[np.ndarray]) -> List[Any]:
        return a1._read_jobs(Ellipsis, out)[1]

    jobs = jobs_into(warm)
    if not np.array_equal(a2[...], data) or not np.array_equal(a1[...], data):
        raise AssertionError(f"{mib} MiB: read-back differs")
    shuffle = jobs[0].pipeline.bytes_codecs[0]
    frames = [bytes(memoryview(job.data)[:-4]) for job in jobs]  # the crc32c cut off
    dec = zstandard.ZstdDecompressor()
    decoded = [dec.decompress(f) for f in frames]
    targets = [memoryview(job.target.reshape(-1).view(np.uint8)) for job in jobs]
    half = len(jobs) // 2
    copy_sources = [np.frombuffer(d, np.uint8) for d in decoded]
    copy_targets = [np.frombuffer(t, np.uint8) for t in targets]

    def copy(lo: int, hi: int) -> None:
        for k in range(lo, hi):
            np.copyto(copy_targets[k], copy_sources[k])

    def zstd(lo: int, hi: int) -> None:
        d = zstandard.ZstdDecompressor()
        for k in range(lo, hi):
            d.decompress(frames[k])

    def unshuffle(lo: int, hi: int) -> None:
        for k in range(lo, hi):
            shuffle.decode_into(decoded[k], targets[k])

    def each(lo: int, hi: int) -> None:
        decode_each(jobs[lo:hi])

    def touch(out: List[np.ndarray], lo: int, hi: int) -> None:
        flat = out[0].reshape(-1).view(np.uint8)
        flat[lo * PAGE:hi * PAGE:PAGE] = 1

    n = len(jobs)
    pages = data.nbytes // PAGE
    fresh: List[np.ndarray] = []
    floors = {"copy": copy, "zstd": zstd, "unshuffle": unshuffle, "each": each}
    cases: Dict[str, Callable[[], Any]] = {
        "plan (shard reads + jobs)": lambda: jobs_into(None),
        "decode batch, 1 thread (threads=1's path), warm": lambda: decode_jobs(jobs, 1),
        "decode each, 1 thread (threads=2's path), warm": lambda: decode_each(jobs),
        "decode on CodecThreads(2), warm": lambda: decode_jobs(jobs, pool),
        "read threads=1": lambda: a1[...],
        "read threads=2": lambda: a2[...],
    }
    for name, fn in floors.items():
        cases[f"floor {name}, 1 thread, warm"] = (lambda fn=fn: fn(0, n))
        cases[f"floor {name}, 2 threads, warm"] = (lambda fn=fn: pair.run(lambda: fn(0, half), lambda: fn(half, n)))
    busy: Dict[str, List[Any]] = {}
    faults: Dict[str, List[float]] = {}
    cases["floor first touch, 1 thread"] = lambda: touch(fresh, 0, pages)
    cases["floor first touch, 2 threads"] = lambda: pair.run(lambda: touch(fresh, 0, pages // 2),
                                                             lambda: touch(fresh, pages // 2, pages))
    out: Dict[str, Any] = {"chunks": n, "stored bytes": sum(len(memoryview(j.data)) for j in jobs), "cases": {},
                           "busy": {}}
    reps = max(1, -(-args.span_ms // (mib * 0.6)))  # ~0.6 ms a MiB: each timed call lasts ~span_ms
    reps = int(reps)
    m0 = machine_busy()
    w0 = time.perf_counter()
    for name, fn in cases.items():
        runs = []
        for _ in range(args.repeats):
            if "first touch" in name:
                fresh[:] = [np.empty_like(data)]
            times = 1 if "first touch" in name else reps
            sched0 = pair.sched()
            faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            wall, cpu = timed(lambda: [fn() for _ in range(times)])
            faults.setdefault(name, []).append((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0) / times)
            sched1 = pair.sched()
            runs.append((wall / times, cpu / times))
            fresh[:] = []
            if "2 threads" in name:  # of both threads' time in the call: on a core, waiting for one, blocked
                span = 2 * max(1e-9, runs[-1][0] * times)
                on, queued = sched1[0] - sched0[0], sched1[1] - sched0[1]
                busy.setdefault(name, []).append((on / span, queued / span, max(0.0, 1 - (on + queued) / span)))
        out["cases"][name] = (min(w for w, _ in runs), min(c for _, c in runs), statistics.median(faults[name]))
        if name in busy:
            out["busy"][name] = [statistics.median(b[i] for b in busy[name]) for i in range(3)]
    m1 = machine_busy()
    # the other processes' CPU while the cases ran, as a share of every core
    out["others"] = max(0.0, (m1[0] - m0[0]) - (m1[1] - m0[1])) / ((time.perf_counter() - w0) * (os.cpu_count() or 1))
    for arr in (a1, a2):
        arr.close()
    pool.close()
    return out


# ----------------------------------------------------------------------------- threads vs processes
def _steady(kind: str, mib: int, seconds: float, seed: int, queue: Any = None) -> int:
    """Chunks of 128 KiB handled in ``seconds`` by one worker (its own result array of ``mib``
    MiB, pre-faulted, filled chunk after chunk; 64 source chunks of random bytes, seeded): ``planes``: the library's
    unshuffle (shuffle.py: one strided copy per byte plane); ``zstd``: one decompression of a
    128 KiB frame."""
    import zstandard

    n = 128 * 1024
    count = mib * 8
    rng = np.random.default_rng(seed)
    sources = [rng.integers(0, 256, n, dtype=np.uint8) for _ in range(64)]
    out = np.ones(mib * 2 ** 20, np.uint8)
    frame = zstandard.ZstdCompressor(level=3).compress(walk(n // 8).tobytes())
    decompressor = zstandard.ZstdDecompressor()
    done, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        for c in range(count):  # every chunk of the result in turn
            if kind == "planes":
                target, source = out[c * n:(c + 1) * n], sources[c % 64]
                for j, plane in enumerate(source.reshape(8, -1)):
                    target[j::8] = plane
            else:
                decompressor.decompress(frame)
        done += count
    if queue is not None:
        queue.put(done)
    return done


def threads_or_processes(mib: int, seconds: float) -> Dict[str, Dict[str, int]]:
    """Work done by 1 thread, 2 threads and 2 processes in the same time (``_steady``): a step
    that scales over processes but not over threads is held back by the GIL, not the machine."""
    import multiprocessing

    out: Dict[str, Dict[str, int]] = {}
    for kind in ("planes", "zstd"):
        res: Dict[str, int] = {"1 thread": _steady(kind, mib, seconds, 1)}
        counts = [0, 0]

        def run(k: int) -> None:
            counts[k] = _steady(kind, mib, seconds, 1 + k)

        workers = [threading.Thread(target=run, args=(k,)) for k in range(2)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        res["2 threads"] = sum(counts)
        queue: Any = multiprocessing.Queue()
        procs = [multiprocessing.Process(target=_steady, args=(kind, mib, seconds, 1 + k, queue)) for k in range(2)]
        for p in procs:
            p.start()
        res["2 processes"] = sum(queue.get() for _ in procs)
        for p in procs:
            p.join()
        out[kind] = res
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16, 64], help="read sizes in MiB")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5, help="calls per case and round (the best kept)")
    parser.add_argument("--span-ms", type=float, default=40.0,
                        help="each timed call repeats its case to last about this long (the figures are per "
                             "repetition): thread run times are read at the scheduler's tick")
    parser.add_argument("--dir", default=None, help="where the arrays go (default: the temp dir)")
    parser.add_argument("--json", default=None)
    parser.add_argument("--threads-or-processes", type=float, default=0.0, metavar="SECONDS",
                        help="also run the library's unshuffle and a zstd decompression in a steady loop for "
                             "SECONDS on 1 thread, 2 threads and 2 processes, into a result of each size")
    args = parser.parse_args(argv)
    root = tempfile.mkdtemp(prefix="thread-scaling-", dir=args.dir)
    pair = Pair()
    load = [os.getloadavg()]
    rounds: Dict[int, List[Dict[str, Any]]] = {mib: [] for mib in args.sizes}
    try:
        for r in range(args.rounds):
            for mib in (args.sizes if r % 2 == 0 else args.sizes[::-1]):
                print(f"round {r + 1}/{args.rounds}: {mib} MiB", file=sys.stderr, flush=True)
                rounds[mib].append(one_size(mib, args, root, pair))
    finally:
        pair.close()
        shutil.rmtree(root, ignore_errors=True)
    steady = {mib: threads_or_processes(mib, args.threads_or_processes) for mib in args.sizes} \
        if args.threads_or_processes else {}
    load.append(os.getloadavg())
    for mib, res in steady.items():
        for kind, counts in res.items():
            base = counts["1 thread"]
            print(f"{mib} MiB result, {'unshuffle (planes)' if kind == 'planes' else 'zstd decompress'}: chunks in "
                  f"{args.threads_or_processes:g} s: " + ", ".join(f"{k} {v} ({v / base:.2f}x)" for k, v in counts.items()))
    for mib, results in rounds.items():
        if not results:
            continue
        first = results[0]
        print(f"\n{mib} MiB ({first['chunks']} chunks of 128 KiB, {first['stored bytes'] / 2 ** 20:.2f} MiB stored), "
              f"median of {len(results)} rounds of the best of {args.repeats}:")
        print("| case | wall ms | CPU ms | page faults |")
        print("|---|---:|---:|---:|")
        for case in first["cases"]:
            wall = statistics.median(res["cases"][case][0] for res in results) * 1e3
            cpu = statistics.median(res["cases"][case][1] for res in results) * 1e3
            share = ""
            if case in first["busy"]:
                on, queued, blocked = (statistics.median(res["busy"][case][i] for res in results) for i in range(3))
                share = f" (threads on a core {on:.0%}, waiting for a core {queued:.0%}, blocked {blocked:.0%})"
            flt = statistics.median(res["cases"][case][2] for res in results)
            print(f"| {case}{share} | {wall:.2f} | {cpu:.2f} | {flt:.0f} |")
        others = ", ".join(f"{res['others']:.0%}" for res in results)
        print(f"other processes' CPU meanwhile: {others} of the {os.cpu_count()} cores, per round")
    print("\nload average (1, 5, 15 min) at start / end: "
          + " / ".join(", ".join(f"{v:.1f}" for v in x) for x in load) + f"; {os.cpu_count()} CPU(s)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"rounds": {str(k): v for k, v in rounds.items()}, "steady": {str(k): v for k, v in steady.items()},
                       "load": load, "args": vars(args)}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
