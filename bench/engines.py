#!/usr/bin/env python
"""Benchmark the engine integrations against the engines' own writers.

openmm — one OpenMM simulation (a TIP3P water box built with Modeller.addSolvent, PME, CPU
platform) carries every reporter at once, so all of them are handed the same states:
``MrecReporter`` (lossless; ``precision=1e-3`` nm; each also with ``energies=False``, i.e.
positions only like the others), ``DCDReporter`` and ``XTCReporter``.  Each reporter is wrapped
so the time spent in its ``report()`` is measured: the first report (MrecReporter writes
``system/`` and creates the record there, durably), the later ones (median, and mean with the
automatic commits they trigger), ``close()`` (the last durable commit) and the total.  Sizes: bytes on disk (a record: every file of its directory).  Ratios are
peer / MrecReporter: > 1 means MrecReporter is cheaper or smaller.  The state retrieval is the
simulation's (one ``getState`` for all reporters); its cost for positions alone and for
positions + energies is timed separately, since ``energies=True`` makes OpenMM evaluate them.

ase — FRAMES images of an ATOMS-atom Cu crystal with thermal displacements, momenta and
SinglePointCalculator results (energy, forces, stress), written through ``MrecTrajectory``
(lossless and precision 1e-3 Å), ASE's ``Trajectory`` (ULM, ``.traj``) and extxyz
(``ase.io.write`` of all images); write time (median of --repeats), size, read-all time.

    python bench/engines.py openmm [--edge 3.0] [--reports 100] [--interval 5]
    python bench/engines.py ase [--frames 1000] [--atoms 1000] [--repeats 3]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

warnings.simplefilter("ignore")


def size_of(path: Path) -> int:
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size


def table(headers: List[str], rows: List[List[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------------- OpenMM
class Timed:
    """An OpenMM reporter that times another one's report().  Each timed reporter is handed
    its own fresh State (fetched outside the timed region, with what it asked for), so none
    profits from conversions another one's calls cached in a shared State."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.times = inner, []

    def describeNextReport(self, simulation: Any) -> Any:
        return self.inner.describeNextReport(simulation)

    def report(self, simulation: Any, state: Any) -> None:
        wanted = self.inner.describeNextReport(simulation)
        include = wanted["include"] if isinstance(wanted, dict) else \
            [k for k, on in zip(("positions", "velocities", "forces", "energy"), wanted[1:5]) if on]
        flags = {"getPositions": "positions" in include, "getVelocities": "velocities" in include,
                 "getForces": "forces" in include, "getEnergy": "energy" in include}
        fresh = simulation.context.getState(enforcePeriodicBox=True, **flags)
        t0 = time.perf_counter()
        self.inner.report(simulation, fresh)
        self.times.append(time.perf_counter() - t0)


def bench_openmm(edge: float, reports: int, interval: int, workdir: Path) -> str:
    import openmm as mm
    import openmm.app as app
    import openmm.unit as u

    from molrec_raw.integrations.openmm import MrecReporter

    ff = app.ForceField("amber14-all.xml", "amber14/tip3p.xml")
    model = app.Modeller(app.Topology(), [])
    model.addSolvent(ff, boxSize=mm.Vec3(edge, edge, edge) * u.nanometer)
    system = ff.createSystem(model.topology, nonbondedMethod=app.PME, nonbondedCutoff=0.9 * u.nanometer,
                             constraints=app.HBonds)
    integrator = mm.LangevinMiddleIntegrator(300 * u.kelvin, 1 / u.picosecond, 0.002 * u.picoseconds)
    integrator.setRandomNumberSeed(1)
    sim = app.Simulation(model.topology, system, integrator, mm.Platform.getPlatformByName("CPU"))
    sim.context.setPositions(model.positions)
    sim.minimizeEnergy(maxIterations=200)
    sim.context.setVelocitiesToTemperature(300 * u.kelvin, 1)
    n = system.getNumParticles()

    paths = {
        "MrecReporter": workdir / "lossless.mrec",
        "MrecReporter precision=1e-3": workdir / "p1e-3.mrec",
        "MrecReporter energies=False": workdir / "pos.mrec",
        "MrecReporter precision=1e-3 energies=False": workdir / "pos-p1e-3.mrec",
        "DCDReporter": workdir / "run.dcd",
        "XTCReporter": workdir / "run.xtc",
    }
    made: Dict[str, Any] = {
        "MrecReporter": MrecReporter(paths["MrecReporter"], interval),
        "MrecReporter precision=1e-3": MrecReporter(paths["MrecReporter precision=1e-3"], interval, precision=1e-3),
        "MrecReporter energies=False": MrecReporter(paths["MrecReporter energies=False"], interval, energies=False),
        "MrecReporter precision=1e-3 energies=False": MrecReporter(
            paths["MrecReporter precision=1e-3 energies=False"], interval, precision=1e-3, energies=False),
        "DCDReporter": app.DCDReporter(str(paths["DCDReporter"]), interval),
        "XTCReporter": app.XTCReporter(str(paths["XTCReporter"]), interval),
    }
    timed = {name: Timed(r) for name, r in made.items()}
    sim.reporters.extend(timed.values())
    sim.step(reports * interval)
    closing: Dict[str, float] = {}
    for name, reporter in made.items():
        t0 = time.perf_counter()
        if hasattr(reporter, "close"):
            reporter.close()
        else:  # DCDReporter / XTCReporter close their file when collected
            reporter._out.close() if hasattr(reporter, "_out") else None
        closing[name] = time.perf_counter() - t0
    sim.reporters.clear()

    def state_cost(**kw: bool) -> float:
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            sim.context.getState(getPositions=True, enforcePeriodicBox=True, **kw)
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    steady = {k: t.times[1:] for k, t in timed.items()}          # after the first report, before close
    median = {k: statistics.median(v) for k, v in steady.items()}
    mean = {k: statistics.fmean(v) for k, v in steady.items()}    # automatic commits included
    total = {k: sum(t.times) + closing[k] for k, t in timed.items()}
    sizes = {k: size_of(p) for k, p in paths.items()}
    rows = []
    for name in made:
        rows.append([name, len(timed[name].times), f"{timed[name].times[0] * 1e3:.1f}", f"{median[name] * 1e6:.0f}",
                     f"{mean[name] * 1e6:.0f}", f"{closing[name] * 1e3:.1f}", f"{total[name] * 1e3:.0f}",
                     f"{sizes[name] / 1e6:.2f}", f"{sizes[name] / (reports * n):.2f}"])
    out = [f"OpenMM {mm.version.version}: {n} atoms (water box {edge} nm), {reports} reports every {interval} steps",
           table(["reporter", "reports", "first report ms", "later reports: median µs", "mean µs (commits incl.)",
                  "close ms", "total ms", "size MB", "bytes/atom/frame"], rows)]
    ratio_rows = []
    for ours in ("MrecReporter energies=False", "MrecReporter precision=1e-3 energies=False", "MrecReporter",
                 "MrecReporter precision=1e-3"):
        ratio_rows.append([ours, f"{median['DCDReporter'] / median[ours]:.2f}", f"{mean['DCDReporter'] / mean[ours]:.2f}",
                           f"{total['DCDReporter'] / total[ours]:.2f}", f"{mean['XTCReporter'] / mean[ours]:.2f}",
                           f"{sizes['DCDReporter'] / sizes[ours]:.2f}", f"{sizes['XTCReporter'] / sizes[ours]:.2f}"])
    out.append(table(["ours", "DCD/ours median", "DCD/ours mean", "DCD/ours total", "XTC/ours mean",
                      "DCD/ours size", "XTC/ours size"], ratio_rows))
    pos, energy = state_cost(), state_cost(getEnergy=True)
    out.append(f"getState (the simulation's, shared): positions {pos * 1e6:.0f} µs, positions + energy "
               f"{energy * 1e6:.0f} µs (the energies MrecReporter asks for by default)")
    return "\n\n".join(out)


# ---------------------------------------------------------------------- ASE
def ase_images(frames: int, atoms: int, seed: int = 0) -> List[Any]:
    from ase.build import bulk
    from ase.calculators.singlepoint import SinglePointCalculator

    rng = np.random.default_rng(seed)
    k = max(1, round(atoms ** (1 / 3)))
    base = bulk("Cu", "fcc", a=3.61).repeat((k, k, max(1, atoms // (k * k))))  # one atom per primitive cell
    images = []
    displacement = np.zeros((len(base), 3))
    for i in range(frames):
        displacement = 0.9 * displacement + rng.normal(scale=0.03, size=displacement.shape)
        image = base.copy()
        image.positions += displacement
        image.set_momenta(rng.normal(scale=0.5, size=displacement.shape))
        image.calc = SinglePointCalculator(image, energy=float(rng.normal()), forces=rng.normal(size=displacement.shape),
                                           stress=rng.normal(size=6))
        images.append(image)
    return images


def bench_ase(frames: int, atoms: int, repeats: int, workdir: Path) -> str:
    import ase
    import ase.io
    from ase.io.trajectory import Trajectory

    from molrec_raw.integrations.ase import MrecTrajectory

    images = ase_images(frames, atoms)
    n = len(images[0])

    def mrec(precision: Any) -> Callable[[Path], None]:
        def write(path: Path) -> None:
            with MrecTrajectory(path, "w", precision=precision) as traj:
                for image in images:
                    traj.write(image)
        return write

    def ulm(path: Path) -> None:
        with Trajectory(str(path), "w") as traj:
            for image in images:
                traj.write(image)

    def extxyz(path: Path) -> None:
        ase.io.write(str(path), images, format="extxyz")

    writers: List[Tuple[str, str, Callable[[Path], None], Dict[str, Any]]] = [
        ("MrecTrajectory", "w.mrec", mrec(None), {"format": "mrec"}),
        ("MrecTrajectory precision=1e-3", "p.mrec", mrec(1e-3), {"format": "mrec"}),
        ("ase Trajectory (ULM)", "w.traj", ulm, {}),
        ("extxyz", "w.extxyz", extxyz, {"format": "extxyz"}),
    ]
    results: Dict[str, Tuple[float, int, float]] = {}
    for name, filename, write, read_kw in writers:
        path = workdir / filename
        times = []
        for _ in range(repeats):
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
            t0 = time.perf_counter()
            write(path)
            times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        back = ase.io.read(str(path), index=":", **read_kw)
        read = time.perf_counter() - t0
        assert len(back) == frames and np.allclose(back[-1].positions, images[-1].positions, atol=1e-3)
        results[name] = (statistics.median(times), size_of(path), read)
    ours = results["MrecTrajectory"]
    rows = [[name, f"{t:.2f}", f"{t / frames * 1e3:.2f}", f"{s / 1e6:.1f}", f"{r:.2f}",
             f"{t / ours[0]:.2f}", f"{s / ours[1]:.2f}"] for name, (t, s, r) in results.items()]
    return (f"ASE {ase.__version__}: {frames} frames × {n} atoms (positions, momenta, energy, forces, stress), "
            f"write median of {repeats}\n\n"
            + table(["writer", "write s", "ms/frame", "size MB", "read all s", "time / MrecTrajectory",
                     "size / MrecTrajectory"], rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="engine", required=True)
    o = sub.add_parser("openmm")
    o.add_argument("--edge", type=float, default=3.0, help="water box edge, nm")
    o.add_argument("--reports", type=int, default=100)
    o.add_argument("--interval", type=int, default=5)
    a = sub.add_parser("ase")
    a.add_argument("--frames", type=int, default=1000)
    a.add_argument("--atoms", type=int, default=1000)
    a.add_argument("--repeats", type=int, default=3)
    for p in (o, a):
        p.add_argument("--dir", default=None, help="parent of the scratch directory")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="engines-", dir=args.dir))
    try:
        if args.engine == "openmm":
            print(bench_openmm(args.edge, args.reports, args.interval, workdir))
        else:
            print(bench_ase(args.frames, args.atoms, args.repeats, workdir))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    os.sync()


if __name__ == "__main__":
    main()
