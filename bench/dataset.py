#!/usr/bin/env python
"""Benchmark datasets of shards (issue 35): the build on Dask, reads across shards, opening
many shards.

The data set is bench/collection.py's in shape: ``--records`` records of ``--atoms`` atoms (a
system with ``element``; one frame with ``x y z fx fy fz`` and ``pe``), the declaration given;
record ``r`` is made from ``(seed, r)`` alone, so Dask workers can make it too.

* build   ``write_dataset`` into ``--shards`` shards: without Dask, and on a ``LocalCluster``
          of 1 and of 2 single-threaded worker processes (the cluster started outside the
          clock), the records sent from the bench process (an iterable: the client makes and
          pickles every record) and made on the workers (a bag, one partition per shard);
          ``--rounds`` builds each, the fastest kept.  Ratio: 1 worker / 2 workers,
          wall (target >= 1.7x on 2 cores; the work is in the worker processes, so the
          client's CPU says nothing).
          The ceiling rows: the same shards written by 1 and by 2 forked processes without
          Dask (what two processes gain on the machine at that moment).
* reads   the same records read from one collection file and from the dataset of
          ``--shards`` shards, shuffled: one record at a time (``x[g].system``,
          ``x[g].trajectory[0]``) and in batches of ``--batch`` (``x.batch(ids)``); one warm-up
          epoch, then ``--rounds`` rounds interleaved, the fastest kept.  The batches again in
          ShardSampler's order (shards shuffled, records shuffled inside each shard), where a
          batch mostly falls in one shard.  Ratio: one file /
          the dataset (target >= 0.95x, CPU).  atompack-db beside them when installed: its one
          file (``Database``) and its shard set (``atompack.hub.open_path``), the same reads.
* open    ``open_dataset`` of a directory of ``--open-shards`` one-record shards (target
          under 1 s, wall), ``--rounds`` times, the range.

Wall and CPU (process) time; the machine is shared and noisy — ratios are formed in one run.

    python bench/dataset.py [--records 16000] [--atoms 32] [--shards 8] [--reads 4000] [--rounds 3]
    python bench/dataset.py --records 200 --reads 200 --open-shards 20 --rounds 1 --skip dask   # the smoke run
    python bench/dataset.py --tree before=/tmp/before --tree after=. --tree-runs 3 --rounds 3   # two trees' reads and open

No timing is asserted anywhere (tests/dataset/test_dataset_bench_smoke.py runs the small version).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

SYMBOLS = np.array(["H", "C", "N", "O"], dtype=object)
NUMBERS = {"H": 1, "C": 6, "N": 7, "O": 8}
FIELDS = ("x", "y", "z", "fx", "fy", "fz")
UNITS = {"length": "angstrom", "energy": "eV", "force": "eV/angstrom"}


class Data:
    """The data set's size and seed: record ``r`` is made by :func:`arrays` from ``(seed, r)``
    alone, so a Dask worker makes the same records the bench process does."""

    def __init__(self, records: int, atoms: int, seed: int) -> None:
        self.records, self.atoms, self.seed = records, atoms, seed


def arrays(r: int, atoms: int, seed: int) -> Tuple[np.ndarray, Dict[str, np.ndarray], float]:
    """Record ``r``: its elements, its six fields, its ``pe``."""
    rng = np.random.default_rng([seed, r])
    return SYMBOLS[rng.integers(0, 4, atoms)], {f: rng.normal(size=atoms) for f in FIELDS}, float(rng.normal())


def record(r: int, atoms: int, seed: int) -> Dict[str, Any]:
    """Record ``r`` as ``write_dataset`` takes it."""
    import molrec_raw as mr
    elements, fields, pe = arrays(r, atoms, seed)
    return {"system": mr.Frame({}, {"atoms": mr.Block({"element": elements})}),
            "frames": [mr.Frame({"pe": pe}, {"atoms": mr.Block(fields)})]}


TARGETS = {"build": 1.7, "read": 0.95, "batch": 0.95, "open_seconds": 1.0}
Clock = Tuple[float, float]


def _clock() -> Clock:
    return time.perf_counter(), time.process_time()


def _since(start: Clock) -> Clock:
    return time.perf_counter() - start[0], time.process_time() - start[1]


def schema() -> Any:
    import molrec_raw as mr
    declared = mr.SequenceSchema()
    for name in FIELDS:
        declared.declare_column("atoms", name, "f64")
    declared.declare_meta("pe", "f64")
    return declared


def items(data: Any) -> Iterator[Dict[str, Any]]:
    """The records, in order."""
    for r in range(data.records):
        yield record(r, data.atoms, data.seed)


def bag_of(data: Any, shards: int) -> Any:
    """The records as a Dask bag made on the workers, one partition per shard."""
    import functools
    import dask.bag as db
    return db.from_sequence(range(data.records), npartitions=shards).map(
        functools.partial(record, atoms=data.atoms, seed=data.seed))


def build(data: Any, directory: Path, per_shard: int, client: Any = None, bag: bool = False) -> Clock:
    import molrec_raw as mr
    shutil.rmtree(directory, ignore_errors=True)
    source = bag_of(data, -(-data.records // per_shard)) if bag else items(data)
    start = _clock()
    mr.write_dataset(source, directory, units=UNITS, records_per_shard=per_shard, schema=schema(), client=client)
    return _since(start)


def build_rows(data: Any, work: Path, per_shard: int, rounds: int, dask: bool) -> Dict[str, Clock]:
    """The fastest of ``rounds`` builds without Dask, and on clusters of 1 and 2 workers."""
    out: Dict[str, Clock] = {}

    def keep(name: str, took: Clock) -> None:
        best = out.get(name)
        out[name] = took if best is None else (min(best[0], took[0]), min(best[1], took[1]))

    for _ in range(rounds):
        keep("no dask", build(data, work / "built", per_shard))
        keep("ceiling: 1 process", ceiling(data, work / "ceiling", per_shard, 1))
        keep("ceiling: 2 processes", ceiling(data, work / "ceiling", per_shard, 2))
    if dask:
        import cloudpickle
        import distributed
        if __name__ != "__main__":  # (loaded by path, as the smoke test does: workers cannot import it)
            cloudpickle.register_pickle_by_value(sys.modules[__name__])
        for workers in (1, 2):
            with distributed.LocalCluster(n_workers=workers, processes=True, threads_per_worker=1,
                                          dashboard_address=":0", host="127.0.0.1") as cluster, \
                    distributed.Client(cluster) as client:
                client.run(lambda: __import__("molrec_raw.dataset.build"))  # imports outside the clock
                name = f"{workers} worker{'s' if workers > 1 else ''}"
                for _ in range(rounds):
                    keep(f"{name}, records from the client", build(data, work / "built", per_shard, client))
                    keep(f"{name}, a bag made on the workers", build(data, work / "built", per_shard, client, True))
    return out


_CEILING: Dict[str, Any] = {}


def _ceiling_shard(k: int) -> None:
    from molrec_raw.dataset.build import ShardPlan, write_shard
    data, directory, per_shard = _CEILING["data"], _CEILING["directory"], _CEILING["per_shard"]
    records = [record(r, data.atoms, data.seed) for r in range(k * per_shard, min((k + 1) * per_shard, data.records))]
    write_shard(ShardPlan(str(directory), dict(UNITS), schema=schema().to_json()), k, records)


def ceiling(data: Any, directory: Path, per_shard: int, processes: int) -> Clock:
    """What the machine gives two processes now: the shards written by ``processes`` forked
    processes without Dask (the records made in each process, nothing sent)."""
    import multiprocessing
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    _CEILING.update(data=data, directory=directory, per_shard=per_shard)
    shards = list(range(-(-data.records // per_shard)))
    context = multiprocessing.get_context("fork")
    with context.Pool(processes) as pool:
        pool.map(_ceiling_shard, [0])  # the pool's processes started outside the clock
        start = _clock()
        pool.map(_ceiling_shard, shards, chunksize=1)
        return _since(start)


# -- reads ---------------------------------------------------------------------------------------
Reader = Tuple[Callable[[List[int]], None], Callable[[], None]]


def single_molrec(source: Any) -> Reader:
    def read(order: List[int]) -> None:
        for g in order:
            record = source[g]
            record.system
            record.trajectory[0]
    return read, source.close


def batch_molrec(source: Any, size: int) -> Reader:
    def read(order: List[int]) -> None:
        for lo in range(0, len(order), size):
            source.batch(order[lo:lo + size])
    return read, lambda: None


def write_atompack(data: Any, path: Path, lo: int, hi: int) -> None:
    """Records ``lo .. hi - 1`` in one atompack file (positions and forces as its float32)."""
    import atompack
    db = atompack.Database(str(path), overwrite=True)
    molecules = []
    for r in range(lo, hi):
        elements, fields, pe = arrays(r, data.atoms, data.seed)
        numbers = np.array([NUMBERS[e] for e in elements], np.uint8)
        positions = np.stack([fields[c] for c in "xyz"], axis=-1).astype(np.float32)
        forces = np.stack([fields[c] for c in ("fx", "fy", "fz")], axis=-1).astype(np.float32)
        molecules.append(atompack.Molecule.from_arrays(positions, numbers, energy=pe, forces=forces))
    db.add_molecules(molecules)
    db.flush()


def single_atompack(db: Any) -> Reader:
    def read(order: List[int]) -> None:
        for g in order:
            m = db[g]
            m.positions, m.forces, m.energy, m.atomic_numbers
    return read, lambda: None


def batch_atompack(db: Any, size: int) -> Reader:
    def read(order: List[int]) -> None:
        for lo in range(0, len(order), size):
            for m in db.get_molecules(order[lo:lo + size]):
                m.positions, m.forces
    return read, lambda: None


def read_rows(data: Any, work: Path, per_shard: int, args: argparse.Namespace, skip: set) -> Dict[str, Dict[str, Clock]]:
    import molrec_raw as mr
    one = work / "one.mrec.lmdb"
    if not one.exists():  # (written once: the trees of --tree read the same files)
        with mr.CollectionWriter(one, units=UNITS, schema=schema()) as writer:
            for item in items(data):
                writer.add_record(**item)
    shards = work / "built"
    if not shards.exists():
        build(data, shards, per_shard)
    rng = np.random.default_rng(args.seed + 1)
    order = rng.permutation(data.records)[:args.reads].tolist()
    # ShardSampler's order: the shards shuffled, each shard's records shuffled inside it
    starts = list(range(0, data.records, per_shard))
    shardwise = [int(lo + r) for k in rng.permutation(len(starts)) for lo in [starts[k]]
                 for r in rng.permutation(min(per_shard, data.records - lo))][:args.reads]
    plan: Dict[str, Reader] = {
        "read one file": single_molrec(mr.read_collection(one)),
        "read dataset": single_molrec(mr.open_dataset(shards)),
        "batch one file": batch_molrec(mr.read_collection(one), args.batch),
        "batch dataset": batch_molrec(mr.open_dataset(shards), args.batch),
        "batch one file, shard-wise order": batch_molrec(mr.read_collection(one), args.batch),
        "batch dataset, shard-wise order": batch_molrec(mr.open_dataset(shards), args.batch)}
    if "atompack" not in skip and importlib.util.find_spec("atompack") is not None:
        import atompack
        import atompack.hub
        if not (work / "atp").exists():
            write_atompack(data, work / "one.atp", 0, data.records)
            (work / "atp.part").mkdir(exist_ok=True)
            for k, lo in enumerate(range(0, data.records, per_shard)):
                write_atompack(data, work / "atp.part" / f"part-{k:05d}.atp", lo, min(lo + per_shard, data.records))
            (work / "atp.part").rename(work / "atp")
        whole, sharded = atompack.Database.open(str(work / "one.atp")), atompack.hub.open_path(work / "atp")
        plan.update({"atompack read one file": single_atompack(whole), "atompack read shards": single_atompack(sharded),
                     "atompack batch one file": batch_atompack(whole, args.batch),
                     "atompack batch shards": batch_atompack(sharded, args.batch)})
    orders = {name: shardwise if "shard-wise" in name else order for name in plan}
    for name, (read, _) in plan.items():  # one warm-up epoch each
        read(orders[name])
    out: Dict[str, Clock] = {}
    for _ in range(args.rounds):
        for name, (read, _) in plan.items():
            start = _clock()
            read(orders[name])
            wall, cpu = _since(start)
            per = (wall / len(order), cpu / len(order))
            best = out.get(name)
            out[name] = per if best is None else (min(best[0], per[0]), min(best[1], per[1]))
    for _, close in plan.values():
        close()
    return {"read_times": out}


def open_rows(work: Path, count: int, rounds: int) -> Dict[str, Any]:
    """``open_dataset`` of ``count`` one-record shards: every round's (wall, cpu)."""
    import molrec_raw as mr
    directory = work / f"many-{count}"
    if not directory.exists():
        small = [{"system": mr.Frame({}, {"atoms": mr.Block({"element": np.array(["H", "O"], object)})}),
                  "index": {"n": r}} for r in range(count)]
        mr.write_dataset(small, work / f"many-{count}.part", units=UNITS, records_per_shard=1, durable=False)
        (work / f"many-{count}.part").rename(directory)
    times = []
    for _ in range(rounds):
        start = _clock()
        ds = mr.open_dataset(directory)
        times.append(_since(start))
        assert len(ds) == count and len(ds.shards) == count
        ds.close()
    return {"shards": count, "times": times}


# -- the run -------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> Dict[str, Any]:
    if getattr(args, "tree", None):
        return run_trees(args)
    import molrec_raw
    data = Data(args.records, args.atoms, args.seed)
    skip = set(args.skip.split(",")) if args.skip else set()
    per_shard = -(-args.records // args.shards)
    work = Path(args.dir or tempfile.mkdtemp(prefix="molrec-bench-dataset-"))
    work.mkdir(parents=True, exist_ok=True)
    out: Dict[str, Any] = {"records": args.records, "atoms": args.atoms, "shards": args.shards, "reads": args.reads,
                           "batch": args.batch, "rounds": args.rounds, "package": molrec_raw.__file__}
    try:
        if "build" not in skip:
            out["build"] = build_rows(data, work, per_shard, args.rounds, "dask" not in skip)
        out.update(read_rows(data, work, per_shard, args, skip))
        if "open" not in skip:
            out["open"] = open_rows(work, args.open_shards, args.rounds)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return out


def run_trees(args: argparse.Namespace) -> Dict[str, Any]:
    """The reads and the open of each source tree of ``--tree NAME=PATH`` (its package first
    on ``PYTHONPATH``) over the same files: ``--tree-runs`` runs of this script per tree, each
    in its own process, the trees taking turns (their order alternating run by run); each run
    forms its own ratios (``--rounds`` rounds inside it).  The first run writes the files
    (every tree writes the same bytes); the build is not run."""
    import subprocess
    trees: Dict[str, str] = dict(t.split("=", 1) for t in args.tree)
    work = Path(args.dir or tempfile.mkdtemp(prefix="molrec-bench-dataset-"))
    work.mkdir(parents=True, exist_ok=True)
    skip = ",".join(sorted({"build", *(args.skip.split(",") if args.skip else [])}))
    runs: Dict[str, List[Dict[str, Any]]] = {name: [] for name in trees}
    try:
        for k in range(args.tree_runs):
            for name in (list(trees) if k % 2 == 0 else list(reversed(list(trees)))):
                tree = str(Path(trees[name]).resolve())
                figures = work / "run.json"
                command = [sys.executable, str(Path(__file__).resolve()), "--records", str(args.records), "--atoms",
                           str(args.atoms), "--shards", str(args.shards), "--reads", str(args.reads), "--batch",
                           str(args.batch), "--open-shards", str(args.open_shards), "--rounds", str(args.rounds),
                           "--seed", str(args.seed), "--skip", skip, "--dir", str(work), "--keep", "--json",
                           str(figures)]
                subprocess.run(command, check=True, env={**os.environ, "PYTHONPATH": tree}, cwd=tree,
                               stdout=subprocess.DEVNULL)
                out = json.loads(figures.read_text())
                if not out["package"].startswith(tree):
                    raise SystemExit(f"the run of {name} ({tree}) measured {out['package']}")
                runs[name].append(out)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return {"records": args.records, "atoms": args.atoms, "shards": args.shards, "reads": args.reads,
            "batch": args.batch, "rounds": args.rounds, "trees": runs}


def report_trees(out: Dict[str, Any]) -> str:
    """Each tree's ratios (cpu) and open times, the range over its runs."""
    trees = out["trees"]
    names = list(trees)
    lines = [f"{out['records']} records x {out['atoms']} atoms in {out['shards']} shards, {out['reads']} shuffled "
             f"reads, batches of {out['batch']}; {len(trees[names[0]])} runs per tree, best of {out['rounds']} "
             "rounds inside each run; the range over the runs", "",
             "| | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]

    def span(values: List[float], form: str) -> str:
        return f"{form.format(min(values))}–{form.format(max(values))}" if len(values) > 1 else form.format(values[0])

    rows: Dict[str, Dict[str, List[float]]] = {}
    for name, got in trees.items():
        for one in got:
            for row, wall, cpu, _ in ratios(one):
                rows.setdefault(f"{row} (cpu)", {}).setdefault(name, []).append(cpu)
                rows.setdefault(f"{row} (wall)", {}).setdefault(name, []).append(wall)
            reads = one["read_times"]
            for kind in reads:
                rows.setdefault(f"{kind}: µs/record cpu", {}).setdefault(name, []).append(reads[kind][1] * 1e6)
            if "open" in one:
                for label, at in (("wall", 0), ("cpu", 1)):
                    rows.setdefault(f"open_dataset of {one['open']['shards']} shards, s {label}", {}).setdefault(
                        name, []).extend(t[at] for t in one["open"]["times"])
    for row, by_tree in rows.items():
        form = "{:.3f}" if row.startswith("open") else ("{:.1f}" if "µs/record" in row else "{:.2f}x")
        lines.append(f"| {row} | " + " | ".join(span(by_tree[n], form) if n in by_tree else "" for n in names) + " |")
    return "\n".join(lines)


def ratios(out: Dict[str, Any]) -> List[Tuple[str, float, float, float]]:
    """(row, wall ratio, cpu ratio, target)."""
    rows = []
    built = out.get("build", {})
    for how in ("records from the client", "a bag made on the workers"):
        if f"1 worker, {how}" in built:
            one, two = built[f"1 worker, {how}"], built[f"2 workers, {how}"]
            rows.append((f"build, {how}: 1 worker / 2 workers", one[0] / two[0], float("nan"), TARGETS["build"]))
    if "ceiling: 2 processes" in built:
        one, two = built["ceiling: 1 process"], built["ceiling: 2 processes"]
        rows.append(("ceiling: 1 process / 2 (no Dask)", one[0] / two[0], float("nan"), 0.0))
    reads = out["read_times"]
    for kind in ("read", "batch"):
        one, ds = reads[f"{kind} one file"], reads[f"{kind} dataset"]
        rows.append((f"{kind}: one file / {out['shards']} shards", one[0] / ds[0], one[1] / ds[1], TARGETS[kind]))
        if kind == "batch":
            one, ds = reads["batch one file, shard-wise order"], reads["batch dataset, shard-wise order"]
            rows.append((f"batch, shard-wise order: one file / {out['shards']} shards", one[0] / ds[0], one[1] / ds[1],
                         TARGETS[kind]))
        if f"atompack {kind} shards" in reads:
            one, ds = reads[f"atompack {kind} one file"], reads[f"atompack {kind} shards"]
            rows.append((f"atompack {kind}: one file / {out['shards']} shards", one[0] / ds[0], one[1] / ds[1], 0.0))
    return rows


def report(out: Dict[str, Any]) -> str:
    lines = [f"{out['records']} records x {out['atoms']} atoms in {out['shards']} shards, {out['reads']} shuffled "
             f"reads, batches of {out['batch']}, best of {out['rounds']}", ""]
    if "build" in out:
        lines += ["| build | s (wall / client cpu) |", "|---|---|"]
        lines += [f"| {name} | {w:.2f} / {c:.2f} |" for name, (w, c) in out["build"].items()]
        lines.append("")
    lines += ["| reads | µs/record (wall / cpu) |", "|---|---|"]
    lines += [f"| {name} | {w * 1e6:.1f} / {c * 1e6:.1f} |" for name, (w, c) in out["read_times"].items()]
    if "open" in out:
        walls = [w for w, _ in out["open"]["times"]]
        cpus = [c for _, c in out["open"]["times"]]
        lines += ["", f"open_dataset of {out['open']['shards']} shards: wall {min(walls):.3f}..{max(walls):.3f} s, "
                  f"cpu {min(cpus):.3f}..{max(cpus):.3f} s (target < {TARGETS['open_seconds']} s wall: "
                  f"{'met' if max(walls) < TARGETS['open_seconds'] else 'not met'})"]
    lines += ["", "| ratio | wall | cpu | target | met |", "|---|---|---|---|---|"]
    for row, wall, cpu, target in ratios(out):
        judged = wall if row.startswith("build") else cpu
        lines.append(f"| {row} | {wall:.2f}x | {'' if cpu != cpu else f'{cpu:.2f}x'} | "
                     f"{f'>= {target}x' if target else '(reported)'} | "
                     f"{('yes' if judged >= target else 'no') if target else ''} |")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=16000)
    parser.add_argument("--atoms", type=int, default=32)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--reads", type=int, default=4000, help="records read per round, in shuffled order")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--open-shards", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip", default="", help="comma-separated parts to leave out (build, dask, atompack, open)")
    parser.add_argument("--dir", default=None, help="where the stores are written (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the stores")
    parser.add_argument("--json", default=None, help="write the raw figures here")
    parser.add_argument("--tree", action="append", default=[],
                        help="NAME=PATH of a source tree whose reads and open are measured (repeat: before and after "
                             "in one run); each run in its own process, the trees taking turns")
    parser.add_argument("--tree-runs", type=int, default=3, help="runs per tree with --tree")
    args = parser.parse_args(argv)
    out = run(args)
    print(report_trees(out) if args.tree else report(out))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
