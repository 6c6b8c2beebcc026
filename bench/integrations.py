"""The tool integrations against MDAnalysis's own formats, one process, the same trajectory.

A synthetic 10,000-atom, 500-frame trajectory (a float32 random walk in a fixed 50 Å cubic
cell, fixed seed) is written once in each format by MDAnalysis's writers (DCD, XTC, H5MD) and
by the MREC writer (lossless, and ``precision=1e-3``).  Then, in interleaved rounds:

* **read**: ``u.load_new(file)`` and one sequential iteration ``for ts in u.trajectory: pass``,
  timed together, frames/s (median of ``--rounds``), and the ratio to DCD and to H5MD (targets: MREC >= H5MD,
  >= 0.8x DCD);
* **size**: bytes on disk per format; MREC at 1e-3 against XTC;
* **convert**: ``molrec_raw.integrations.convert.convert`` frames/s, DCD -> record, XTC ->
  record, record -> DCD;
* **memory**: peak RSS of ``molrec-raw convert`` (a subprocess each) for 1,000 and 10,000 frames
  of a 1,000-atom DCD.

    python bench/integrations.py                  # the full run (a few minutes on 2 cores)
    python bench/integrations.py --atoms 2000 --frames 100 --rounds 2 --skip-memory   # quick look

Needs MDAnalysis (and h5py for the H5MD row; the row is skipped without it).
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
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

warnings.filterwarnings("ignore")

import MDAnalysis as mda  # noqa: E402

import molrec_raw.integrations.mdanalysis  # noqa: E402,F401  (registers MREC)
from molrec_raw.integrations.conventions import MDANALYSIS_UNITS  # noqa: E402
from molrec_raw.integrations.convert import convert  # noqa: E402
from molrec_raw.integrations.trajectories import TrajectorySource  # noqa: E402

warnings.filterwarnings("ignore")  # MDAnalysis's DeprecationWarnings on every DCD open

try:
    import h5py  # noqa: F401
    HAVE_H5PY = True
except ImportError:
    HAVE_H5PY = False


def size_of(path: Path) -> int:
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size


def write_all(work: Path, n_atoms: int, n_frames: int, seed: int) -> Dict[str, Path]:
    rng = np.random.default_rng(seed)
    universe = mda.Universe.empty(n_atoms, trajectory=True)
    positions = rng.uniform(0, 50, size=(n_atoms, 3)).astype(np.float32)
    files = {"DCD": work / "t.dcd", "XTC": work / "t.xtc", "MREC": work / "t.mrec", "MREC 1e-3": work / "t3.mrec"}
    writers = {"DCD": mda.Writer(str(files["DCD"]), n_atoms), "XTC": mda.Writer(str(files["XTC"]), n_atoms),
               "MREC": mda.Writer(str(files["MREC"]), n_atoms),
               "MREC 1e-3": mda.Writer(str(files["MREC 1e-3"]), n_atoms, precision=1e-3)}
    if HAVE_H5PY:
        files["H5MD"] = work / "t.h5md"
        writers["H5MD"] = mda.Writer(str(files["H5MD"]), n_atoms, velocities=False, forces=False,
                                     lengthunit="Angstrom", timeunit="ps")
    for i in range(n_frames):
        positions += rng.normal(scale=0.05, size=positions.shape).astype(np.float32)
        universe.atoms.positions = positions
        universe.dimensions = [50.0, 50.0, 50.0, 90.0, 90.0, 90.0]
        universe.trajectory.ts.time = float(i)
        universe.trajectory.ts.data["step"] = i
        for w in writers.values():
            w.write(universe)
    for w in writers.values():
        w.close()
    return files


def iterate(path: Path, n_atoms: int) -> Tuple[float, float]:
    """Frames/s of opening the file and iterating it once (opening included: readers that
    read ahead at open, as the MREC reader does, get no head start), wall and CPU time."""
    universe = mda.Universe.empty(n_atoms)
    started, cpu = time.perf_counter(), time.process_time()
    universe.load_new(str(path))
    count = sum(1 for _ in universe.trajectory)
    elapsed, used = time.perf_counter() - started, time.process_time() - cpu
    universe.trajectory.close()
    return count / elapsed, count / max(used, 1e-9)


def record_layer_only(path: Path) -> float:
    """Frames/s of the same batched reads without MDAnalysis: ``TrajectorySource.read`` over
    every frame (``MrecReader.block_columns``), to show which share of the MREC row is the record
    layer's read path and which the integration's per-frame work."""
    started = time.perf_counter()
    source = TrajectorySource(path, MDANALYSIS_UNITS)
    step = source.batch_size()
    for start in range(0, source.n_frames, step):
        source.read(range(start, min(source.n_frames, start + step)))
    source.close()
    return source.n_frames / (time.perf_counter() - started)


def timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


_PEAK = """
import resource, sys
from molrec_raw.cli import main
assert main(["convert", sys.argv[1], sys.argv[2]]) == 0
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def peak_rss(work: Path, n_atoms: int, frames: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    universe = mda.Universe.empty(n_atoms, trajectory=True)
    dcd = work / f"rss{frames}.dcd"
    with mda.Writer(str(dcd), n_atoms) as w:
        for _ in range(frames):
            universe.atoms.positions = rng.uniform(0, 30, size=(n_atoms, 3))
            universe.dimensions = [30.0, 30.0, 30.0, 90.0, 90.0, 90.0]
            w.write(universe)
    run = subprocess.run([sys.executable, "-c", _PEAK, str(dcd), str(work / f"rss{frames}.mrec")],
                         capture_output=True, text=True, check=True)
    return int(run.stdout.split()[-1]) / 1024


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--atoms", type=int, default=10_000)
    parser.add_argument("--frames", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    parser.add_argument("--dir", default=None, help="where the scratch directory goes")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-integrations-", dir=args.dir))
    try:
        print(f"# {args.atoms} atoms x {args.frames} frames, {args.rounds} interleaved rounds, "
              f"MDAnalysis {mda.__version__}, Python {sys.version.split()[0]}", flush=True)
        files = write_all(work, args.atoms, args.frames, args.seed)
        rates: Dict[str, List[float]] = {name: [] for name in files}
        cpu_rates: Dict[str, List[float]] = {name: [] for name in files}
        layer: List[float] = []
        order = np.random.default_rng(args.seed)
        names = list(files)
        for _ in range(args.rounds):  # interleaved, in a fresh random order each round
            for k in order.permutation(len(names)):
                name = names[int(k)]
                wall, cpu = iterate(files[name], args.atoms)
                rates[name].append(wall)
                cpu_rates[name].append(cpu)
            layer.append(record_layer_only(files["MREC"]))
        read = {name: statistics.median(v) for name, v in rates.items()}
        read_cpu = {name: statistics.median(v) for name, v in cpu_rates.items()}
        sizes = {name: size_of(path) for name, path in files.items()}
        print("\n| reader | frames/s | vs DCD | vs XTC | vs H5MD | CPU: vs DCD | CPU: vs XTC | size (MB) | size vs XTC |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name in files:
            h5 = f"{read[name] / read['H5MD']:.2f}x" if "H5MD" in read else "-"
            print(f"| {name} | {read[name]:.0f} | {read[name] / read['DCD']:.2f}x | {read[name] / read['XTC']:.2f}x | "
                  f"{h5} | {read_cpu[name] / read_cpu['DCD']:.2f}x | {read_cpu[name] / read_cpu['XTC']:.2f}x | "
                  f"{sizes[name] / 1e6:.1f} | {sizes[name] / sizes['XTC']:.2f}x |")
        print("\ntargets (issue 21): MREC >= 0.8x DCD "
              f"{'met' if read['MREC'] >= 0.8 * read['DCD'] else 'MISSED'}; MREC 1e-3 >= XTC "
              f"{'met' if read['MREC 1e-3'] >= read['XTC'] else 'MISSED'}")
        print(f"\nMREC reads without MDAnalysis (block_columns batches of the same size): "
              f"{statistics.median(layer):.0f} frames/s")
        conversions = {"DCD -> MREC": (files["DCD"], work / "c1.mrec"),
                       "XTC -> MREC": (files["XTC"], work / "c2.mrec"),
                       "MREC -> DCD": (files["MREC"], work / "c3.dcd")}
        throughput: Dict[str, float] = {}
        for name, (source, target) in conversions.items():
            runs = []
            for _ in range(max(1, args.rounds // 2)):
                shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(missing_ok=True)
                runs.append(args.frames / timed(lambda: convert(source, target)))
            throughput[name] = statistics.median(runs)
        print("\n| convert | frames/s |\n|---|---:|")
        for name, value in throughput.items():
            print(f"| {name} | {value:.0f} |")
        rss: Dict[str, float] = {}
        if not args.skip_memory:
            for frames in (1_000, 10_000):
                rss[str(frames)] = peak_rss(work, 1_000, frames, args.seed)
            print("\n| convert DCD -> MREC, 1,000 atoms | peak RSS (MiB) |\n|---|---:|")
            for frames, value in rss.items():
                print(f"| {int(frames):,} frames | {value:.0f} |")
        if args.json:
            Path(args.json).write_text(json.dumps({"read_fps": read, "read_rounds": rates, "sizes": sizes,
                                                   "read_cpu_fps": read_cpu, "read_cpu_rounds": cpu_rates,
                                                   "record_layer_fps": statistics.median(layer),
                                                   "convert_fps": throughput, "peak_rss_mib": rss,
                                                   "atoms": args.atoms, "frames": args.frames}, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
