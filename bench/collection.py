#!/usr/bin/env python
"""Benchmark collections (issue 22): a training set read in shuffled order, against the
stores such a data set lives in today.

The data set: ``--records`` records (40,000) of ``--atoms`` atoms (64): a system with
``element`` (random H/C/N/O per record), one trajectory frame with ``x y z fx fy fz`` (f64)
and ``pe``.  Every store holds the same values:

* ``molrec``   CollectionWriter (schema derived, commit every 1,000 records, durable) ->
  ``c[r].system`` + ``c[r].trajectory[0]``; batches ``c.batch(records)``.
* ``atompack`` atompack-db (Rust, mmap; positions/forces as its float32) -> ``db[r]`` and the
  molecule's positions, forces, energy, atomic numbers; batches ``get_molecules_flat``.
* ``add_records`` the same records through ``CollectionWriter.add_records`` (each column whole,
  the records' rows concatenated; written, not read: its store is byte-identical).
* ``pickle``   LMDB, one key per record, a pickle (protocol 5) of the record's arrays (element
  ``U2``, positions and forces ``(N, 3)``), a
  write transaction every 1,000 records (sync on, as ours).
* ``h5py``     one dataset per field (``(R, 64)``, chunks of 32 records) -> each field's row.
* ``ase``      ASE's SQLite database (``ase.db``), ``db.get(id=r+1)`` and the row's arrays
  (read on ``--ase-reads`` records only: it is slow; its rate is per record like the others).

Reads: the same shuffled order for every store, ``--rounds`` rounds interleaved store after
store (the machine is shared and noisy); a store's time is its fastest round, taken after one
warm-up epoch (a training loader reads epoch after epoch from the page cache).  Wall and CPU
(process) time per record; ratio = peer time / ours (> 1: ours faster).

    python bench/collection.py [--records 40000] [--atoms 64] [--reads 10000] [--rounds 3] [--json out.json]
    python bench/collection.py --rss 100000 1000000      # the streaming writer's memory (small records)
    python bench/collection.py --records 300 --reads 300 --rounds 1 --ase-reads 50    # the suite's smoke run
    python bench/collection.py --torch --records 20000 [--workers 2]   # DataLoader(MrecDataset) vs c.batch
    python bench/collection.py --writes --records 20000 --rounds 5      # the write rows alone (issue 37)

No timing is asserted anywhere (tests/collection/test_bench_smoke.py runs the small version).
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

SYMBOLS = np.array(["H", "C", "N", "O"], dtype=object)
NUMBERS = {"H": 1, "C": 6, "N": 7, "O": 8}
FIELDS = ("x", "y", "z", "fx", "fy", "fz")
UNITS = {"length": "angstrom", "energy": "eV", "force": "eV/angstrom"}
TARGETS = {"floor": 0.8, "atompack": 0.25, "pickle": 1.5, "h5py": 4.0, "ase": 20.0, "batch_floor": 1.0,
           "batch_atompack": 0.4, "write_pickle": 0.6, "add_records_pickle": 1.5}


class Data:
    """The data set, generated once: elements (R, N) objects, six (R, N) f64 fields, pe (R,);
    the same values as a user holds them: ``positions`` and ``forces`` (R, N, 3)."""

    def __init__(self, records: int, atoms: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.records, self.atoms = records, atoms
        self.elements = SYMBOLS[rng.integers(0, 4, (records, atoms))]
        self.fields = {f: rng.normal(size=(records, atoms)) for f in FIELDS}
        self.pe = rng.normal(size=records)
        self.positions = np.stack([self.fields[f] for f in FIELDS[:3]], axis=-1)
        self.forces = np.stack([self.fields[f] for f in FIELDS[3:]], axis=-1)


def _clock() -> Tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(start: Tuple[float, float]) -> Tuple[float, float]:
    return time.perf_counter() - start[0], time.process_time() - start[1]


# -- writers ---------------------------------------------------------------------------------
def write_molrec(data: Data, path: Path) -> Tuple[float, float]:
    """``add_record`` with the objects built in the loop as a user builds them (issue 37): the
    columns ``x y z`` / ``fx fy fz`` are the columns of the record's ``(N, 3)`` positions and
    forces (strided views, as an engine or ASE hands them), the elements an object array."""
    import molrec_raw as mr
    mr.CollectionWriter, mr.Frame, mr.Block  # loaded outside the clock (the peers' imports are too)
    start = _clock()
    with mr.CollectionWriter(path, units=UNITS) as w:
        for r in range(data.records):
            positions, forces = data.positions[r], data.forces[r]
            system = mr.Frame({}, {"atoms": mr.Block({"element": data.elements[r]})})
            frame = mr.Frame({"pe": float(data.pe[r])}, {"atoms": mr.Block({
                "x": positions[:, 0], "y": positions[:, 1], "z": positions[:, 2],
                "fx": forces[:, 0], "fy": forces[:, 1], "fz": forces[:, 2]})})
            w.add_record(system=system, frames=[frame])
    return _since(start)


def write_molrec_columns(data: Data, path: Path) -> Tuple[float, float]:
    """The same records through ``add_records`` (issue 37): a converter that holds arrays
    hands each column whole (the records' rows concatenated) and the per-record row counts."""
    import molrec_raw as mr
    mr.CollectionWriter  # loaded outside the clock
    start = _clock()
    positions, forces = data.positions.reshape(-1, 3), data.forces.reshape(-1, 3)
    with mr.CollectionWriter(path, units=UNITS) as w:
        w.add_records({"atoms": np.full(data.records, data.atoms)},
                      system={"atoms": {"element": data.elements.reshape(-1)}},
                      frame={"atoms": {"x": positions[:, 0], "y": positions[:, 1], "z": positions[:, 2],
                                       "fx": forces[:, 0], "fy": forces[:, 1], "fz": forces[:, 2]}},
                      frame_meta={"pe": data.pe})
    return _since(start)


def write_pickle(data: Data, path: Path) -> Tuple[float, float]:
    import lmdb
    start = _clock()
    env = lmdb.open(str(path), subdir=False, map_size=1 << 34, readahead=False)
    txn = env.begin(write=True)
    for r in range(data.records):  # the dict a user pickles: the record's arrays as it holds them
        record = {"element": data.elements[r].astype("U2"), "positions": data.positions[r],
                  "forces": data.forces[r], "pe": float(data.pe[r])}
        txn.put(r.to_bytes(8, "big"), pickle.dumps(record, protocol=5))
        if r % 1000 == 999:
            txn.commit()
            txn = env.begin(write=True)
    txn.commit()
    env.sync(True)
    env.close()
    return _since(start)


def write_atompack(data: Data, path: Path) -> Tuple[float, float]:
    import atompack
    start = _clock()
    db = atompack.Database(str(path), overwrite=True)
    numbers = np.vectorize(NUMBERS.get)(data.elements).astype(np.uint8)
    positions = np.stack([data.fields["x"], data.fields["y"], data.fields["z"]], axis=-1).astype(np.float32)
    forces = np.stack([data.fields["fx"], data.fields["fy"], data.fields["fz"]], axis=-1).astype(np.float32)
    for lo in range(0, data.records, 1000):
        hi = min(lo + 1000, data.records)
        db.add_molecules([atompack.Molecule.from_arrays(positions[r], numbers[r], energy=float(data.pe[r]),
                                                        forces=forces[r]) for r in range(lo, hi)])
    db.flush()
    return _since(start)


def write_h5py(data: Data, path: Path) -> Tuple[float, float]:
    import h5py
    start = _clock()
    with h5py.File(path, "w") as f:
        f.create_dataset("element", data=data.elements.astype("S2"), chunks=(32, data.atoms))
        for name in FIELDS:
            f.create_dataset(name, data=data.fields[name], chunks=(32, data.atoms))
        f.create_dataset("pe", data=data.pe, chunks=(32,))
    return _since(start)


def write_ase(data: Data, path: Path) -> Tuple[float, float]:
    import ase.db
    from ase import Atoms
    from ase.calculators.singlepoint import SinglePointCalculator
    start = _clock()
    with ase.db.connect(str(path), append=False) as db:
        for r in range(data.records):
            atoms = Atoms(symbols=list(data.elements[r]),
                          positions=np.stack([data.fields["x"][r], data.fields["y"][r], data.fields["z"][r]], axis=-1))
            forces = np.stack([data.fields["fx"][r], data.fields["fy"][r], data.fields["fz"][r]], axis=-1)
            atoms.calc = SinglePointCalculator(atoms, energy=float(data.pe[r]), forces=forces)
            db.write(atoms)
    return _since(start)


# -- readers (one record each) ----------------------------------------------------------------
def reader_molrec(path: Path) -> Tuple[Callable[[List[int]], None], Callable[[], None]]:
    import molrec_raw as mr
    c = mr.read_collection(path)

    def read(order: List[int]) -> None:
        for r in order:
            rec = c[r]
            rec.system
            rec.trajectory[0]
    return read, c.close


def reader_pickle(path: Path) -> Tuple[Callable[[List[int]], None], Callable[[], None]]:
    import lmdb
    env = lmdb.open(str(path), subdir=False, readonly=True, lock=True, readahead=False)

    def read(order: List[int]) -> None:
        for r in order:
            with env.begin() as txn:
                pickle.loads(txn.get(r.to_bytes(8, "big")))
    return read, env.close


def reader_atompack(path: Path) -> Tuple[Callable[[List[int]], None], Callable[[], None]]:
    import atompack
    db = atompack.Database.open(str(path))

    def read(order: List[int]) -> None:
        for r in order:
            m = db[r]
            m.positions, m.forces, m.energy, m.atomic_numbers
    return read, lambda: None


def reader_h5py(path: Path) -> Tuple[Callable[[List[int]], None], Callable[[], None]]:
    import h5py
    f = h5py.File(path, "r")
    datasets = [f[name] for name in ("element", *FIELDS, "pe")]

    def read(order: List[int]) -> None:
        for r in order:
            for ds in datasets:
                ds[r]
    return read, f.close


def reader_ase(path: Path) -> Tuple[Callable[[List[int]], None], Callable[[], None]]:
    import ase.db
    db = ase.db.connect(str(path))

    def read(order: List[int]) -> None:
        for r in order:
            row = db.get(id=r + 1)
            row.numbers, row.positions, row.forces, row.energy
    return read, lambda: None


def batch_molrec(path: Path, size: int) -> Tuple[Callable[[List[int]], None], Callable[[], None]]:
    import molrec_raw as mr
    c = mr.read_collection(path)

    def read(order: List[int]) -> None:
        for lo in range(0, len(order), size):
            c.batch(order[lo:lo + size])
    return read, c.close


def batch_atompack(path: Path, size: int) -> Tuple[Callable[[List[int]], None], Callable[[], None]]:
    import atompack
    db = atompack.Database.open(str(path))

    def read(order: List[int]) -> None:
        for lo in range(0, len(order), size):
            db.get_molecules_flat(order[lo:lo + size])
    return read, lambda: None


# -- the floor: what any Python reader of this binding cannot avoid (issue 29) ------------------
_PREFIX = 8  # magic + header length


def _floor_value(value: bytes) -> Tuple[Dict[str, Any], int]:
    """One MRF1 value's header (one ``orjson`` parse) and its payload's offset: no checks."""
    import orjson
    length = int.from_bytes(value[4:8], "little")
    return orjson.loads(value[_PREFIX:_PREFIX + length]), (_PREFIX + length + 7) & ~7


def reader_floor(path: Path) -> Tuple[Callable[[List[int]], None], Callable[[], None]]:
    """The floor of a single read: per record the two LMDB gets (system, frame 0) in one
    read transaction, one ``orjson`` parse of each header, a numpy view of each payload
    column, the ``pe`` value — no checks, no objects."""
    import lmdb
    env = lmdb.open(str(path), subdir=False, readonly=True, lock=True, max_dbs=0, readahead=False)
    f64 = np.dtype("<f8")

    def read(order: List[int]) -> None:
        frombuffer = np.frombuffer
        for r in order:
            tail = r.to_bytes(8, "big")
            with env.begin() as txn:
                system, frame = txn.get(b"s" + tail), txn.get(b"f" + tail)
            header, at = _floor_value(system)
            header["blocks"]["atoms"]["columns"]["element"]["values"]
            header, at = _floor_value(frame)
            for entry in header["blocks"]["atoms"]["columns"].values():
                frombuffer(frame, f64, entry["shape"][0], at + entry["offset"])
            header["meta"]["pe"]
    return read, env.close


def batch_floor(path: Path, size: int) -> Tuple[Callable[[List[int]], None], Callable[[], None]]:
    """The floor of a batch: the same gets and parses, then one join of the frames' payloads
    and one slice per column (the element strings: one list)."""
    import lmdb
    env = lmdb.open(str(path), subdir=False, readonly=True, lock=True, max_dbs=0, readahead=False)
    f64 = np.dtype("<f8")

    def read(order: List[int]) -> None:
        for lo in range(0, len(order), size):
            payloads, elements, pe = [], [], []
            with env.begin(buffers=True) as txn:
                for r in order[lo:lo + size]:
                    tail = r.to_bytes(8, "big")
                    system, frame = txn.get(b"s" + tail), txn.get(b"f" + tail)
                    header, at = _floor_value(system)
                    elements += header["blocks"]["atoms"]["columns"]["element"]["values"]
                    header, at = _floor_value(frame)
                    payloads.append(frame[at:])
                    pe.append(header["meta"]["pe"])
                joined = np.frombuffer(b"".join(payloads), f64).reshape(len(payloads), -1)
            columns = header["blocks"]["atoms"]["columns"]  # the last record's offsets: same shape
            for entry in columns.values():
                n, start = entry["shape"][0], entry["offset"] // 8
                joined[:, start:start + n].ravel()
            np.asarray(pe)
    return read, env.close


# -- PyTorch: one shuffled epoch through DataLoader(MrecDataset) against c.batch in process ------
def torch_epochs(path: Path, batch: int, workers: int, rounds: int, seed: int) -> Dict[str, Any]:
    """Per-record wall and CPU time of one shuffled epoch: ``c.batch`` in this process (the
    reference), ``DataLoader(MrecDataset(path), batch_size, shuffle, num_workers=workers,
    collate_fn=MrecDataset.collate)`` (persistent workers: the first epoch warms them, the
    figure is the best later one; ``first`` includes starting the workers), and the dataset
    with no worker.  CPU time is this process's plus its live children's (the workers')."""
    import torch
    from torch.utils.data import DataLoader
    import molrec_raw as mr
    from molrec_raw.integrations.torch import MrecDataset
    c = mr.read_collection(path)
    n = len(c)

    def clock() -> Tuple[float, float]:
        t = os.times()
        return time.perf_counter(), t.user + t.system + _live_children_cpu()

    def epoch_batch() -> None:
        order = np.random.default_rng(seed).permutation(n)
        for lo in range(0, n, batch):
            c.batch(order[lo:lo + batch])

    def loader_epoch(loader: Any) -> None:
        for _ in loader:
            pass

    ds = MrecDataset(path)
    loaders = {
        "dataloader": DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers, persistent_workers=True,
                                 collate_fn=MrecDataset.collate, generator=torch.Generator().manual_seed(seed)),
        "dataset_in_process": DataLoader(ds, batch_size=batch, shuffle=True, num_workers=0,
                                         collate_fn=MrecDataset.collate, generator=torch.Generator().manual_seed(seed)),
    }
    out: Dict[str, Any] = {"records": n, "batch": batch, "workers": workers}
    start = clock()
    loader_epoch(loaders["dataloader"])  # starts the workers
    out["first"] = tuple(x / n for x in _elapsed(start, clock()))
    epoch_batch()
    for _ in range(rounds):
        for name, run in (("c.batch", epoch_batch), ("dataloader", lambda: loader_epoch(loaders["dataloader"])),
                          ("dataset_in_process", lambda: loader_epoch(loaders["dataset_in_process"]))):
            start = clock()
            run()
            per = tuple(x / n for x in _elapsed(start, clock()))
            best = out.get(name)
            out[name] = per if best is None else (min(best[0], per[0]), min(best[1], per[1]))
    return out


def _live_children_cpu() -> float:
    """CPU seconds of this process's live children (the DataLoader's persistent workers:
    ``os.times`` counts a child only once it has been waited for), from ``/proc``."""
    me, total = os.getpid(), 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:  # fields after the name: state, ppid, ..., utime (12), stime (13)
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _elapsed(a: Tuple[float, float], b: Tuple[float, float]) -> Tuple[float, float]:
    return b[0] - a[0], b[1] - a[1]


def torch_report(out: Dict[str, Any]) -> str:
    ref = out["c.batch"]
    lines = [f"{out['records']} records, batches of {out['batch']}, {out['workers']} workers",
             "", "| one shuffled epoch | µs/record (wall / cpu) | rate vs in-process c.batch (wall) | target |",
             "|---|---|---|---|"]
    for name, label, target in (("c.batch", "`c.batch` in process", ""),
                                ("dataloader", f"DataLoader(MrecDataset), num_workers={out['workers']}", ">= 0.5x"),
                                ("first", "the same, first epoch (workers starting)", ""),
                                ("dataset_in_process", "DataLoader(MrecDataset), num_workers=0", "")):
        per = out[name]
        lines.append(f"| {label} | {per[0] * 1e6:.1f} / {per[1] * 1e6:.1f} | {ref[0] / per[0]:.2f}x | {target} |")
    return "\n".join(lines)


# -- the run ------------------------------------------------------------------------------------
def file_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())


def run(args: argparse.Namespace) -> Dict[str, Any]:
    data = Data(args.records, args.atoms, args.seed)
    work = Path(args.dir or tempfile.mkdtemp(prefix="molrec-bench-collection-"))
    work.mkdir(parents=True, exist_ok=True)
    paths = {"molrec": work / "set.mrec.lmdb", "add_records": work / "set.columns.mrec.lmdb",
             "pickle": work / "set.pickle.lmdb", "atompack": work / "set.atp", "h5py": work / "set.h5",
             "ase": work / "set.db"}
    skip = set(args.skip.split(",")) if args.skip else set()
    writers = {"molrec": write_molrec, "pickle": write_pickle, "atompack": write_atompack, "h5py": write_h5py,
               "ase": write_ase}
    if _has_add_records():
        writers["add_records"] = write_molrec_columns
    out: Dict[str, Any] = {"records": args.records, "atoms": args.atoms, "reads": args.reads, "rounds": args.rounds,
                           "write": {}, "size": {}, "read": {}, "batch": {}}
    try:
        for name, writer in writers.items():
            if name in skip:
                continue
            for stale in work.glob(paths[name].name + "*"):
                stale.unlink()
            out["write"][name] = writer(data, paths[name])
            out["size"][name] = file_size(paths[name])
        order = np.random.default_rng(args.seed + 1).permutation(args.records)[:args.reads].tolist()
        readers = {"molrec": reader_molrec, "pickle": reader_pickle, "atompack": reader_atompack, "h5py": reader_h5py,
                   "ase": reader_ase}
        opened = {name: make(paths[name]) for name, make in readers.items() if name not in skip}
        floor = work / "set.floor.lmdb"  # the same bytes (py-lmdb opens a file once per process)
        shutil.copyfile(paths["molrec"], floor)
        floor_batch = work / "set.floor-batch.lmdb"
        shutil.copyfile(paths["molrec"], floor_batch)
        opened["floor"] = reader_floor(floor)
        batches = {"molrec": batch_molrec(paths["molrec"], args.batch), "floor": batch_floor(floor_batch, args.batch)}
        if "atompack" not in skip:
            batches["atompack"] = batch_atompack(paths["atompack"], args.batch)
        plan: List[Tuple[str, str, Callable[[List[int]], None], List[int]]] = []
        for name, (read, _) in opened.items():
            plan.append(("read", name, read, order[:args.ase_reads] if name == "ase" else order))
        for name, (read, _) in batches.items():
            plan.append(("batch", name, read, order))
        for _, _, read, records in plan:  # one warm-up epoch each
            read(records)
        for _ in range(args.rounds):
            for kind, name, read, records in plan:
                start = _clock()
                read(records)
                wall, cpu = _since(start)
                best = out[kind].get(name)
                per = (wall / len(records), cpu / len(records))
                out[kind][name] = per if best is None else (min(best[0], per[0]), min(best[1], per[1]))
        for _, close in list(opened.values()) + list(batches.values()):
            close()
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return out


def ratios(out: Dict[str, Any]) -> List[Tuple[str, float, float, Optional[float]]]:
    """(row, wall ratio, cpu ratio, target): peer time / ours."""
    rows = []
    ours = out["read"].get("molrec")
    for name in ("floor", "atompack", "pickle", "h5py", "ase"):
        if ours and name in out["read"]:
            peer = out["read"][name]
            rows.append((f"read one record vs {name}", peer[0] / ours[0], peer[1] / ours[1], TARGETS[name]))
    if "floor" in out["batch"]:
        ours_b, peer = out["batch"]["molrec"], out["batch"]["floor"]
        rows.append(("batch vs the floor's batch", peer[0] / ours_b[0], peer[1] / ours_b[1], TARGETS["batch_floor"]))
    if "atompack" in out["batch"]:
        ours_b, peer = out["batch"]["molrec"], out["batch"]["atompack"]
        rows.append(("batch vs atompack get_molecules_flat", peer[0] / ours_b[0], peer[1] / ours_b[1],
                     TARGETS["batch_atompack"]))
    if "pickle" in out["write"]:
        ours_w, peer = out["write"]["molrec"], out["write"]["pickle"]
        rows.append(("write vs LMDB + pickle", peer[0] / ours_w[0], peer[1] / ours_w[1], TARGETS["write_pickle"]))
        if "add_records" in out["write"]:
            ours_w = out["write"]["add_records"]
            rows.append(("add_records vs LMDB + pickle", peer[0] / ours_w[0], peer[1] / ours_w[1],
                         TARGETS["add_records_pickle"]))
    return rows


def report(out: Dict[str, Any]) -> str:
    lines = [f"{out['records']} records x {out['atoms']} atoms, {out['reads']} shuffled reads, best of {out['rounds']}",
             "", "| store | read µs/record (wall / cpu) | batch µs/record | write s (wall / cpu) | file MB |",
             "|---|---|---|---|---|"]
    for name in ("molrec", "add_records", "floor", "atompack", "pickle", "h5py", "ase"):
        if name not in out["write"] and name != "floor":
            continue
        read = out["read"].get(name)
        batch = out["batch"].get(name)
        w = out["write"].get(name)
        size = out["size"].get(name)
        lines.append(f"| {name} | {'' if read is None else f'{read[0] * 1e6:.1f} / {read[1] * 1e6:.1f}'} | "
                     f"{'' if batch is None else f'{batch[0] * 1e6:.1f} / {batch[1] * 1e6:.1f}'} | "
                     f"{'' if w is None else f'{w[0]:.2f} / {w[1]:.2f}'} | "
                     f"{'' if size is None else f'{size / 1e6:.1f}'} |")
    lines += ["", "| ratio (peer / ours) | wall | cpu | target | met (cpu) |", "|---|---|---|---|---|"]
    for row, wall, cpu, target in ratios(out):
        lines.append(f"| {row} | {wall:.2f}x | {cpu:.2f}x | >= {target}x | {'yes' if cpu >= (target or 0) else 'no'} |")
    return "\n".join(lines)


# -- writes alone, several rounds (issue 37) --------------------------------------------------------
def _has_add_records() -> bool:
    import molrec_raw as mr
    return hasattr(mr.CollectionWriter, "add_records")


def writes(args: argparse.Namespace) -> Dict[str, Any]:
    """``--writes``: the write rows alone, ``--rounds`` rounds, each round ``add_record`` (the
    objects built as a user does, in the loop), ``add_records`` (when the library has it) and
    LMDB + pickle one after the other; the ratios are formed inside each round (CPU beside
    wall), the table gives their median and range over the rounds."""
    data = Data(args.records, args.atoms, args.seed)
    writers = {"molrec": write_molrec, "pickle": write_pickle}
    if _has_add_records():
        writers["add_records"] = write_molrec_columns
    import molrec_raw as mr
    out: Dict[str, Any] = {"records": args.records, "atoms": args.atoms, "library": mr.__file__, "rounds": []}
    with tempfile.TemporaryDirectory(prefix="molrec-bench-writes-") as tmp:
        for _ in range(args.rounds):
            got = {}
            for name, writer in writers.items():
                path = Path(tmp) / f"{name}.mrec.lmdb"
                for stale in Path(tmp).glob("*"):
                    stale.unlink()
                got[name] = writer(data, path)
            out["rounds"].append(got)
    return out


def writes_report(out: Dict[str, Any]) -> str:
    rounds = out["rounds"]
    lines = [f"{out['records']} records x {out['atoms']} atoms, {len(rounds)} rounds; library {out['library']}", "",
             "| writer | µs per record, CPU (median; range) | wall (median; range) |", "|---|---|---|"]

    def spread(values: List[float], scale: float = 1.0, unit: str = "") -> str:
        v = sorted(x * scale for x in values)
        return f"{v[len(v) // 2]:.2f}{unit} ({v[0]:.2f}–{v[-1]:.2f})"

    per = 1e6 / out["records"]
    for name in ("molrec", "add_records", "pickle"):
        if name in rounds[0]:
            lines.append(f"| {name} | {spread([r[name][1] for r in rounds], per)} | "
                         f"{spread([r[name][0] for r in rounds], per)} |")
    lines += ["", "| ratio, LMDB + pickle time / ours, formed in each round | CPU | wall | target |", "|---|---|---|---|"]
    for name, target in (("molrec", TARGETS["write_pickle"]), ("add_records", TARGETS["add_records_pickle"])):
        if name in rounds[0]:
            lines.append(f"| {name} | {spread([r['pickle'][1] / r[name][1] for r in rounds], unit='x')} | "
                         f"{spread([r['pickle'][0] / r[name][0] for r in rounds], unit='x')} | >= {target}x |")
    return "\n".join(lines)


# -- the streaming writer's memory ---------------------------------------------------------------
def _status() -> Dict[str, int]:
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return {name: int(fields.get(name, "0 kB").split()[0]) for name in ("VmHWM", "VmRSS", "RssAnon", "RssFile")}


def _rss_child(n: int, path: str) -> None:
    import molrec_raw as mr
    rng = np.random.default_rng(0)
    elements = SYMBOLS[rng.integers(0, 4, 8)]
    xyz = rng.normal(size=(3, 8))
    with mr.CollectionWriter(path, units=UNITS, durable=False) as w:
        for r in range(n):
            w.add_record(system=mr.Frame({}, {"atoms": mr.Block({"element": elements})}),
                         frames=[mr.Frame({"pe": float(r)}, {"atoms": mr.Block({"x": xyz[0], "y": xyz[1], "z": xyz[2]})})])
        streaming = _status()  # after the last record, before close builds the index
    done = _status()
    print(json.dumps({"records": n, "anon_streaming_kib": streaming["RssAnon"], "file_streaming_kib": streaming["RssFile"],
                      "peak_rss_kib": done["VmHWM"], "anon_at_close_kib": done["RssAnon"],
                      "file_mb": os.path.getsize(path) / 1e6}))


def rss(counts: List[int]) -> str:
    lines = ["| records | anonymous RSS after the last record MiB | file-backed (the map) MiB | peak RSS (close included) MiB "
             "| index rows held (24 B/record) MiB | file MB |", "|---|---|---|---|---|---|"]
    for n in counts:
        with tempfile.TemporaryDirectory(prefix="molrec-bench-rss-") as tmp:
            path = os.path.join(tmp, "rss.mrec.lmdb")
            done = subprocess.run([sys.executable, __file__, "--rss-child", str(n), path], capture_output=True,
                                  text=True, check=True)
            got = json.loads(done.stdout.strip().splitlines()[-1])
        lines.append(f"| {n:,} | {got['anon_streaming_kib'] / 1024:.1f} | {got['file_streaming_kib'] / 1024:.1f} | "
                     f"{got['peak_rss_kib'] / 1024:.1f} | {24 * n / 2**20:.1f} | {got['file_mb']:.0f} |")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=40000)
    parser.add_argument("--atoms", type=int, default=64)
    parser.add_argument("--reads", type=int, default=10000, help="records read per round, in shuffled order")
    parser.add_argument("--ase-reads", type=int, default=1000, help="records ASE's database reads per round")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip", default="", help="comma-separated stores to leave out (ase, h5py, atompack, pickle)")
    parser.add_argument("--dir", default=None, help="where the stores are written (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the stores")
    parser.add_argument("--json", default=None, help="write the raw figures here")
    parser.add_argument("--rss", type=int, nargs="*", default=None, help="the streaming writer's memory at these counts")
    parser.add_argument("--rss-child", type=int, nargs=1, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--torch", action="store_true",
                        help="one shuffled epoch through DataLoader(MrecDataset) vs c.batch (needs torch)")
    parser.add_argument("--workers", type=int, default=2, help="DataLoader workers of --torch")
    parser.add_argument("--writes", action="store_true",
                        help="the write rows alone (add_record, add_records, LMDB + pickle), --rounds rounds")
    args, rest = parser.parse_known_args(argv)
    if args.torch:
        with tempfile.TemporaryDirectory(prefix="molrec-bench-torch-") as tmp:
            path = Path(tmp) / "set.mrec.lmdb"
            write_molrec(Data(args.records, args.atoms, args.seed), path)
            got = torch_epochs(path, args.batch, args.workers, args.rounds, args.seed)
        print(torch_report(got))
        if args.json:
            Path(args.json).write_text(json.dumps(got, indent=1))
        return 0
    if args.writes:
        got = writes(args)
        print(writes_report(got))
        if args.json:
            Path(args.json).write_text(json.dumps(got, indent=1))
        return 0
    if args.rss_child:
        _rss_child(args.rss_child[0], rest[0])
        return 0
    if args.rss is not None:
        print(rss(args.rss or [100000, 1000000]))
        return 0
    out = run(args)
    print(report(out))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
