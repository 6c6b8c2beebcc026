#!/usr/bin/env python
"""Threads for codec work (issue 37): two threads against one on reads of >= 1 MiB of chunks,
and W3 (bench/zarr_layer.py's bulk array) against zarr-python's FusedCodecPipeline — for this
checkout and, with ``--before DIR``, for another tree of ``molrec_raw`` in the same run.

Each round runs one child process per tree (in alternating order), so both trees meet the
same machine; a child opens each array once and times, per case, ``--repeats`` whole-array
reads alternating threads=1 and threads=2 (``Array[...]``, warm page cache; the best of the
repeats kept, as reads land in fresh pages at random), and the bulk write and read of
2**25 float64 (W3: shards of 2**21, inner chunks of 2**17, bytes + shuffle(8) + zstd(3) +
crc32c) by molrec_raw (threads=2, the default) and by zarr-python 3.4 with
``codec_pipeline.path`` = FusedCodecPipeline (its threads: os.cpu_count()).  Ratios
(> 1: the first faster) are formed inside each child; the report gives each round's and
their range, wall beside process CPU time.

The trajectory rows (``--frames``, issue 37's read engine): a record of 10,000-atom frames
(x, y, z f64 at precision 1e-3: bytes + shuffle + zstd + crc32c, one frame an inner chunk as
bench/trajectory.py's W1 writes them), read through ``MrecReader`` with threads=1 and threads=2
alternating: a ``read_frames`` range of 24 frames (5.5 MiB of chunks), ``block_array`` of every
frame, and ``for frame in reader`` (with its read-ahead) — each call on a reader opened for it
outside the clock ("reader per call": its helper starts with the read), and each call on one
reader per thread count kept for every call with ``cache_bytes=0`` ("reader kept": no chunk
kept between calls, the helper already running).  A tree whose ``MrecReader`` takes no
``threads`` (before the engine owned a ``CodecThreads``) is given them through the engine's
``READ_THREADS``, the number it passed to every read.

    python bench/codec_threads.py                                   # this checkout, 3 rounds
    git -C . archive 83f5c0f molrec_raw | tar -x -C /tmp/before     # main before issue 37
    python bench/codec_threads.py --before /tmp/before --json out.json
    python bench/codec_threads.py --before /tmp/before --no-reads --no-bulk --frames 32   # the engine rows
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
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
Q = 2.0 ** -10
BYTES_LE = {"name": "bytes", "configuration": {"endian": "little"}}
CHAINS = {
    "shuffle+zstd": [BYTES_LE, {"name": "numcodecs.shuffle", "configuration": {"elementsize": 8}},
                     {"name": "zstd", "configuration": {"level": 3, "checksum": False}}, {"name": "crc32c"}],
    "bytes+crc32c": [BYTES_LE, {"name": "crc32c"}],
}
READ_MIB = (1, 4, 16, 64)
INNER, SHARD = 2 ** 14, 2 ** 18  # the read cases: 128 KiB inner chunks, 2 MiB shards
BULK_INNER, BULK_SHARD = 2 ** 17, 2 ** 21  # W3 (bench/zarr_layer.py)
FUSED = {"codec_pipeline.path": "zarr.core.codec_pipeline.FusedCodecPipeline"}
ATOMS = 10_000  # the trajectory rows: atoms a frame
RANGE_FRAMES = 24  # frames of the read_frames row: 24 x 3 x 80 KB = 5.5 MiB of chunks


def walk(n: int, seed: int = 20240611) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.round(np.cumsum(rng.normal(scale=0.01, size=n)) / Q) * Q


def timed(fn: Callable[[], Any]) -> Tuple[float, float, Any]:
    """(wall seconds, process CPU seconds over all threads, result)."""
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return time.perf_counter() - w0, time.process_time() - c0, out


# ----------------------------------------------------------------------------- child
def child(args: argparse.Namespace) -> Dict[str, Any]:
    import molrec_raw.zarr as mz

    root = tempfile.mkdtemp(prefix="codec-threads-", dir=args.dir)
    out: Dict[str, Any] = {"molrec_raw": os.path.dirname(os.path.dirname(mz.__file__)), "cases": {}}
    try:
        for mib in args.sizes if args.reads else []:
            data = walk(mib * 2 ** 20 // 8)
            for name, chain in CHAINS.items():
                path = os.path.join(root, f"{name}-{mib}")
                mz.open_array(path, mode="w", shape=data.shape, dtype="float64", chunks=(INNER,),
                              shards=(SHARD,), codecs=chain, fill_value=0.0, threads=1)[...] = data
                arrays = {t: mz.open_array(path, mode="r", threads=t) for t in (1, 2)}
                times: Dict[int, List[Tuple[float, float]]] = {1: [], 2: []}
                for rep in range(args.repeats):
                    for t in ((1, 2) if rep % 2 == 0 else (2, 1)):
                        wall, cpu, back = timed(lambda: arrays[t][...])
                        times[t].append((wall, cpu))
                        if not np.array_equal(back, data):
                            raise AssertionError(f"read {name} {mib} MiB threads={t}: values differ")
                for arr in arrays.values():
                    getattr(arr, "close", lambda: None)()
                out["cases"][f"read {mib} MiB [{name}]"] = {str(t): v for t, v in times.items()}
        if args.frames:
            out["cases"].update(trajectory(root, args))
        if args.bulk:
            out["cases"].update(bulk(root, args))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def trajectory(root: str, args: argparse.Namespace) -> Dict[str, Any]:
    """The read engine's rows (module docstring): per case, threads=1 and threads=2
    alternating, on a reader opened per call (outside the clock) or on readers kept."""
    import inspect

    import molrec_raw as mr
    from molrec_raw.record.trajectory import engine

    path = os.path.join(root, "frames.mrec")
    schema = mr.SequenceSchema().declare_block("atoms", rows=ATOMS)
    for c in "xyz":
        schema.declare_column("atoms", c, "f64").declare_precision("atoms", c, 1e-3)
    rng = np.random.default_rng(20240611)
    positions = rng.uniform(0.0, 50.0, size=(ATOMS, 3))
    with mr.MrecWriter(path, schema) as writer:
        for i in range(args.frames):
            positions += rng.normal(scale=0.05, size=positions.shape)
            writer.append(mr.Frame(blocks={"atoms": mr.Block({c: positions[:, k].copy()
                                                              for k, c in enumerate("xyz")})}), step=i)
    takes_threads = "threads" in inspect.signature(mr.MrecReader).parameters

    def opened(threads: int, cache_bytes: Optional[int] = None) -> Any:
        sized = {} if cache_bytes is None else {"cache_bytes": cache_bytes}
        return mr.MrecReader(path, threads=threads, **sized) if takes_threads else mr.MrecReader(path, **sized)

    first = max(0, (args.frames - RANGE_FRAMES) // 2)
    span = slice(first, min(args.frames, first + RANGE_FRAMES))
    cases: Dict[str, Callable[[Any], Any]] = {
        f"read_frames {span.stop - span.start} x {ATOMS} atoms": lambda r: r.read_frames(span),
        f"block_array {args.frames} x {ATOMS} atoms": lambda r: r.block_array("atoms"),
        f"iterate {args.frames} x {ATOMS} atoms": lambda r: sum(1 for _ in r),
    }
    out: Dict[str, Any] = {}
    for kept in (False, True):
        # kept: one reader per thread count for every call, its chunk cache off (cache_bytes=0:
        # nothing kept between calls), so its helpers stay warm; else a reader opened per call
        readers = {t: opened(t, 0) for t in (1, 2)} if kept else {}
        for case, call in cases.items():
            name = f"frames {case} [{'reader kept' if kept else 'reader per call'}]"
            times: Dict[int, List[Tuple[float, float]]] = {1: [], 2: []}
            seen: Dict[int, bytes] = {}
            for rep in range(args.repeats + 1):  # the first pass: warm-up, not kept
                for t in ((1, 2) if rep % 2 == 0 else (2, 1)):
                    if not takes_threads:
                        engine.READ_THREADS = t  # read at each call there
                    reader = readers[t] if kept else opened(t)
                    try:
                        wall, cpu, back = timed(lambda: call(reader))
                    finally:
                        if not kept:
                            reader.close()
                    if rep:
                        times[t].append((wall, cpu))
                    if case.startswith("read_frames"):
                        back = b"".join(f.blocks["atoms"][c].tobytes() for f in back for c in "xyz")
                    elif case.startswith("block_array"):
                        back = back.tobytes()
                    seen.setdefault(t, back)
            if seen[1] != seen[2]:
                raise AssertionError(f"{name}: threads=1 and threads=2 read different values")
            out[name] = {str(t): v for t, v in times.items()}
        for reader in readers.values():
            reader.close()
    return out


def bulk(root: str, args: argparse.Namespace) -> Dict[str, Any]:
    import molrec_raw.zarr as mz

    data = walk(args.bulk_elements)
    chain = CHAINS["shuffle+zstd"]
    times: Dict[str, Dict[str, List[Tuple[float, float]]]] = {"W3 bulk write": {}, "W3 bulk read": {}}

    def ours_write(path: str) -> None:
        mz.open_array(path, mode="w", shape=data.shape, dtype="float64", chunks=(BULK_INNER,), shards=(BULK_SHARD,),
                      codecs=chain, fill_value=0.0)[...] = data

    def ours_read(path: str) -> np.ndarray:
        return mz.open_array(path, mode="r")[...]

    runs: List[Tuple[str, Callable[[str], None], Callable[[str], np.ndarray]]] = [("molrec_raw", ours_write, ours_read)]
    try:
        import zarr
        from zarr.codecs import BytesCodec, Crc32cCodec, ZstdCodec
        from zarr.codecs.numcodecs import Shuffle
    except ImportError:
        zarr = None
    if zarr is not None:
        import warnings
        warnings.simplefilter("ignore")

        def fused_write(path: str) -> None:
            with zarr.config.set(FUSED):
                arr = zarr.create_array(store=path, shape=data.shape, dtype=data.dtype, chunks=(BULK_INNER,),
                                        shards=(BULK_SHARD,), serializer=BytesCodec(endian="little"), filters=[],
                                        compressors=[Shuffle(elementsize=8), ZstdCodec(level=3, checksum=False),
                                                     Crc32cCodec()], fill_value=0.0)
                assert type(arr._async_array.codec_pipeline).__name__ == "FusedCodecPipeline"
                arr[...] = data

        def fused_read(path: str) -> np.ndarray:
            with zarr.config.set(FUSED):
                arr = zarr.open_array(store=path, mode="r")
                assert type(arr._async_array.codec_pipeline).__name__ == "FusedCodecPipeline"
                return arr[...]  # type: ignore[no-any-return]

        runs.append(("zp-fused", fused_write, fused_read))
    for lib, write, read in runs:  # warm-up: imports, first-use costs
        small = os.path.join(root, f"warm-{lib}")
        write(small)
        read(small)
    for rep in range(args.repeats):
        for lib, write, read in (runs if rep % 2 == 0 else runs[::-1]):
            path = os.path.join(root, f"bulk-{lib}-{rep}")
            os.sync()
            wall, cpu, _ = timed(lambda: write(path))
            times["W3 bulk write"].setdefault(lib, []).append((wall, cpu))
            wall, cpu, back = timed(lambda: read(path))
            times["W3 bulk read"].setdefault(lib, []).append((wall, cpu))
            if not np.array_equal(back, data):
                raise AssertionError(f"W3 {lib}: read-back differs")
            del back
            shutil.rmtree(path, ignore_errors=True)
    return times


# ----------------------------------------------------------------------------- parent
def run_child(tree: str, args: argparse.Namespace) -> Dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=tree + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--repeats", str(args.repeats),
           "--sizes", *map(str, args.sizes), "--bulk-elements", str(args.bulk_elements), "--frames", str(args.frames)]
    if not args.reads:
        cmd.append("--no-reads")
    if args.dir:
        cmd += ["--dir", args.dir]
    if not args.bulk:
        cmd.append("--no-bulk")
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"child for {tree} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def best(values: List[Tuple[float, float]], cpu: bool = False) -> float:
    """The least disturbed repetition: minimum wall (or CPU) time."""
    return min(v[1 if cpu else 0] for v in values)


def ratios(result: Dict[str, Any]) -> Dict[str, Tuple[float, float]]:
    """Per case (wall ratio, CPU ratio), > 1 when the first named is faster: reads threads=1
    time / threads=2 time; W3 zp-fused time / molrec_raw time."""
    out = {}
    for case, times in result["cases"].items():
        if case.startswith(("read", "frames")):
            out[f"{case}: 2 threads vs 1"] = (best(times["1"]) / best(times["2"]),
                                             best(times["1"], True) / best(times["2"], True))
        elif "zp-fused" in times:
            out[f"{case}: x zp-fused"] = (best(times["zp-fused"]) / best(times["molrec_raw"]),
                                         best(times["zp-fused"], True) / best(times["molrec_raw"], True))
    return out


def report(rounds: Dict[str, List[Dict[str, Any]]]) -> str:
    lines = []
    for label, results in rounds.items():
        per = [ratios(r) for r in results]
        lines.append(f"\n{label} ({results[0]['molrec_raw']}), {len(results)} round(s); wall ratio [CPU ratio] per round:")
        for case in per[0]:
            walls = [p[case][0] for p in per]
            cpus = [p[case][1] for p in per]
            cells = " ".join(f"{w:.2f}x [{c:.2f}x]" for w, c in zip(walls, cpus))
            lines.append(f"  {case:<48} {cells}   median {statistics.median(walls):.2f}x "
                         f"({min(walls):.2f}-{max(walls):.2f}), CPU {statistics.median(cpus):.2f}x")
        lines.append("  best times of the last round (ms, wall / CPU):")
        for case, times in results[-1]["cases"].items():
            cells = ", ".join(f"{who} {best(v) * 1e3:.1f} / {best(v, True) * 1e3:.1f}" for who, v in times.items())
            lines.append(f"    {case:<32} {cells}")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", metavar="DIR", help="a tree holding another molrec_raw package to run beside")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per case and child (best kept)")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(READ_MIB), help="read sizes in MiB")
    parser.add_argument("--bulk-elements", type=int, default=2 ** 25)
    parser.add_argument("--no-bulk", dest="bulk", action="store_false", help="leave W3 out")
    parser.add_argument("--no-reads", dest="reads", action="store_false", help="leave the whole-array reads out")
    parser.add_argument("--frames", type=int, default=32,
                        help=f"frames of {ATOMS:,} atoms of the trajectory rows (0: leave them out)")
    parser.add_argument("--dir", default=None, help="where the stores go (default: the temp dir)")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args)))
        return 0
    trees = {"after (this checkout)": REPO}
    if args.before:
        trees["before"] = os.path.abspath(args.before)
    load = [os.getloadavg()]
    rounds: Dict[str, List[Dict[str, Any]]] = {label: [] for label in trees}
    for k in range(args.rounds):
        order = list(trees.items()) if k % 2 == 0 else list(trees.items())[::-1]
        for label, tree in order:
            print(f"round {k + 1}/{args.rounds}: {label}", file=sys.stderr, flush=True)
            rounds[label].append(run_child(tree, args))
    load.append(os.getloadavg())
    text = report(rounds)
    text += ("\n\nload average (1, 5, 15 min) at start / end: "
             + " / ".join(", ".join(f"{v:.1f}" for v in x) for x in load) + f"; {os.cpu_count()} CPU(s)")
    print(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"rounds": rounds, "load": load, "args": vars(args)}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
