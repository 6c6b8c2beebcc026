#!/usr/bin/env python
"""The cost of the structure check that runs before a collection file is mapped (issue 34;
molrec_raw/collection/structure.py, lmdb#L18, lmdb#L19).

Builds, once, a collection of about ``--gb`` GiB of realistic records (the training set of
bench/collection.py: ``--atoms`` atoms, a system with ``element``, one frame with ``x y z fx
fy fz`` f64 and ``pe``; about 8 KiB a record on disk, values mostly in overflow pages) in
``--dir`` (default: $TMPDIR), then, ``--runs`` times, in CPU seconds of this process:

* ``check``: ``structure.check_file`` alone, and its cost per GiB;
* ``open``: ``read_collection(path)`` (check + LMDB open + meta, index) against
  ``read_collection(path, check_structure=False)``;
* ``epoch``: one full epoch of reads (``c.batch`` of every record, in batches of 256, the way a
  training loader reads; and ``--single`` records through ``c[r].system`` and
  ``c[r].trajectory[0]``), and the check's share of it.

``--baseline OLD.py`` (another version of molrec_raw/collection/structure.py, e.g. from
``git show REV:molrec_raw/collection/structure.py``) also times its ``check_file`` in each run,
next to this one's (``check_baseline``), and the ratio within each run; both must find the same.

The file is removed afterwards unless ``--keep``.  No timing is asserted anywhere.

    python bench/structure.py [--gb 1.0] [--atoms 64] [--runs 5] [--dir DIR] [--keep] [--json out.json]
                              [--baseline OLD.py]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

FIELDS = ("x", "y", "z", "fx", "fy", "fz")
SYMBOLS = np.array(["H", "C", "N", "O"], dtype=object)


def build(path: Path, gib: float, atoms: int) -> int:
    """Records until the file holds ``gib`` GiB; returns the record count."""
    import molrec_raw as mr
    rng = np.random.default_rng(34)
    target = int(gib * (1 << 30))
    records = 0
    with mr.CollectionWriter(path, units={"length": "angstrom", "energy": "eV", "force": "eV/angstrom"}) as w:
        while True:
            for _ in range(1000):
                system = mr.Frame({}, {"atoms": mr.Block({"element": SYMBOLS[rng.integers(0, 4, atoms)]})})
                frame = mr.Frame({"pe": float(rng.normal())},
                                 {"atoms": mr.Block({f: rng.normal(size=atoms) for f in FIELDS})})
                w.add_record(system=system, frames=[frame])
                records += 1
            if os.path.getsize(path) >= target:
                break
    return records


def cpu(call: Callable[[], Any]) -> float:
    start = time.process_time()
    call()
    return time.process_time() - start


def main(argv: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--atoms", type=int, default=64)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--single", type=int, default=20000, help="records read one by one per epoch run")
    parser.add_argument("--dir", default=None)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--json", default=None)
    parser.add_argument("--baseline", default=None, help="another structure.py to time next to this one")
    args = parser.parse_args(argv)
    import molrec_raw as mr
    from molrec_raw.collection import structure

    folder = Path(args.dir or tempfile.gettempdir())
    path = folder / f"structure-bench-{args.gb:g}g-{args.atoms}.mrec.lmdb"
    out: Dict[str, Any] = {"gib": args.gb, "atoms": args.atoms}
    try:
        if not path.exists():
            began = time.perf_counter()
            out["records"] = build(path, args.gb, args.atoms)
            out["build_seconds"] = time.perf_counter() - began
        size = path.stat().st_size
        found = structure.check_file(str(path))
        out.update(bytes=size, pages=found.last_page + 1, tree_pages=found.branch_pages + found.leaf_pages,
                   overflow_pages=found.overflow_pages, entries=found.entries)
        runs: Dict[str, List[float]] = {k: [] for k in ("check", "open", "open_unchecked", "epoch_batch",
                                                        "epoch_single")}
        baseline = None
        if args.baseline:
            spec = importlib.util.spec_from_file_location("structure_baseline", args.baseline)
            assert spec is not None and spec.loader is not None
            baseline = importlib.util.module_from_spec(spec)
            sys.modules["structure_baseline"] = baseline
            spec.loader.exec_module(baseline)
            assert repr(baseline.check_file(str(path))) == repr(found), "the baseline finds something else"
            runs["check_baseline"] = []
        for _ in range(args.runs):
            if baseline is not None:
                runs["check_baseline"].append(cpu(lambda: baseline.check_file(str(path))))
            runs["check"].append(cpu(lambda: structure.check_file(str(path))))
            runs["open"].append(cpu(lambda: mr.read_collection(path).close()))
            runs["open_unchecked"].append(cpu(lambda: mr.read_collection(path, check_structure=False).close()))
            with mr.read_collection(path, check_structure=False) as c:
                n = len(c)
                order = list(range(n))

                def batches() -> None:
                    for lo in range(0, n, 256):
                        c.batch(order[lo:lo + 256])

                def singles() -> None:
                    for r in range(0, n, max(1, n // args.single)):
                        rec = c[r]
                        rec.system
                        rec.trajectory[0]
                runs["epoch_batch"].append(cpu(batches))
                single = cpu(singles)
                runs["epoch_single"].append(single * n / len(range(0, n, max(1, n // args.single))))
        out["runs"] = runs
        gib = size / (1 << 30)
        print(f"{path.name}: {size / (1 << 30):.2f} GiB, {out['entries']} entries, {out['tree_pages']} tree pages, "
              f"{out['overflow_pages']} overflow pages (machine shared and loaded: CPU seconds, {args.runs} runs)")
        for name, values in runs.items():
            print(f"  {name:15} median {statistics.median(values):7.3f} s  range {min(values):.3f}..{max(values):.3f}")
        check = runs["check"]
        print(f"  check per GiB  {statistics.median(check) / gib:.3f} s")
        if baseline is not None:
            ratios = [b / a for b, a in zip(runs["check_baseline"], check)]
            print(f"  check_baseline / check  median {statistics.median(ratios):.2f}x  range "
                  f"{min(ratios):.2f}..{max(ratios):.2f}x")
        for epoch in ("epoch_batch", "epoch_single"):
            shares = [a / b * 100 for a, b in zip(check, runs[epoch])]
            print(f"  check / {epoch:12} median {statistics.median(shares):.2f} %  range {min(shares):.2f}..{max(shares):.2f} %")
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1))
    finally:
        if not args.keep:
            for leftover in (path, Path(f"{path}-lock")):
                leftover.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
