#!/usr/bin/env python
"""Fault-injection campaign (issue 23 item 3): every I/O fault of every standard workload.

Through the FileOps seam (``FaultInjector``) the k-th call of each kind — write, pwrite, fsync,
rename, exchange, truncate, open, mkdir, unlink — fails with EIO, ENOSPC and EDQUOT, for EVERY
k the workload's clean run makes, over the workloads of ``tests/safety/fault_campaign.py``
(one implementation, shared with the suite's bounded version ``tests/safety/test_faults.py``):
trajectory (ragged blocks, automatic commits, durable flushes, reopen), metrics, the
whole-record doors write_mrec_frame / write_mrec / write_mrec_trajectory, pack
(--remove-source), repair of a crashed record, and the collection writer as far as the seam
reaches it.  LMDB's own I/O (beside the seam) is failed with ``strace -e inject=`` on a child
process: every pwrite64 and fdatasync on the collection file, the same three errnos
(``--no-lmdb`` skips it; it is skipped, saying so, where strace cannot trace).

Prints, per kind, the cases, how many raised a MolrecError, how many finished, how many were
not reached (the run made fewer calls of that kind than the clean one) and the violations;
then every violation (case and what broke).  Exit status 1 when any case violates a promise.

    nice python bench/faults.py [--jobs 2] [--workloads trajectory,metrics,...] [--no-lmdb]
                                [--sample N --seed 1] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import resource
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Dict, List, Tuple

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests" / "safety"), str(HERE.parent)]

import fault_campaign as fc  # noqa: E402  (the workloads and checks of the suite)

_SCRATCH: List[Path] = []


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (the workers, strace's children)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _one(case: Tuple[str, str, int, int]) -> fc.Outcome:
    workload, kind, k, code = case
    scratch = _SCRATCH[0]
    if workload == "collection-lmdb":
        return fc.run_lmdb_case(kind, k, code, scratch)
    return fc.run_case(fc.WORKLOADS[workload](), kind, k, code, scratch)


def main() -> int:
    """Run the campaign and print the counts."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", default=",".join(fc.WORKLOADS))
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--no-lmdb", action="store_true", help="skip the strace campaign of LMDB's own I/O")
    parser.add_argument("--sample", type=int, default=None,
                        help="at most N cases per kind and workload (seeded) instead of every case")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--errnos", choices=["all", "rotate"], default="all",
                        help="all: each (kind, k) with EIO, ENOSPC and EDQUOT; rotate: each (kind, k) once, "
                             "the errno taken in turn (a third of the cases)")
    parser.add_argument("--json", default=None, help="write the counts and violations here")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="molrec-faults-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    _SCRATCH.append(scratch)
    rng = random.Random(args.seed)
    cases: List[Tuple[str, str, int, int]] = []
    calls: Dict[str, Dict[str, int]] = {}
    for name in args.workloads.split(","):
        counts = fc.clean_counts(fc.WORKLOADS[name](), scratch)
        calls[name] = counts
        chosen = fc.sampled_cases(counts, rng, args.sample) if args.sample else list(fc.all_cases(counts, args.errnos == "rotate"))
        cases += [(name, kind, k, code) for kind, k, code in chosen]
    lmdb_note = ""
    if not args.no_lmdb:
        if fc.strace_runs():
            counts = fc.lmdb_counts(scratch)
            calls["collection-lmdb"] = counts
            cases += [("collection-lmdb", kind, k, code) for kind, k, code in
                      fc.all_cases(counts, args.errnos == "rotate", kinds=fc.LMDB_SYSCALLS)]
        else:
            lmdb_note = "LMDB's own I/O: SKIPPED (strace is not installed or cannot trace here)"
    print(f"clean runs, calls per kind: {json.dumps(calls)}", flush=True)
    wall, cpu = time.perf_counter(), cpu_seconds()
    with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
        outcomes = pool.map(_one, cases, chunksize=4)
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    table: Dict[str, Counter[str]] = defaultdict(Counter)
    by_workload: Dict[str, Counter[str]] = defaultdict(Counter)
    for o in outcomes:
        kind = f"{o.kind} (LMDB, strace)" if o.workload == "collection-lmdb" else o.kind
        for row in (table[kind], by_workload[o.workload]):
            row["cases"] += 1
            row[o.result] += 1
            row["violations"] += bool(o.violations)
    header = f"{'':24} {'cases':>7} {'raised':>7} {'finished':>9} {'unreached':>10} {'violations':>11}"

    def show(rows: Dict[str, Counter[str]]) -> None:
        print(header)
        total: Counter[str] = Counter()
        for name, row in rows.items():
            total.update(row)
            print(f"{name:24} {row['cases']:7} {row['raised']:7} {row['finished']:9} {row['unreached']:10} "
                  f"{row['violations']:11}")
        print(f"{'total':24} {total['cases']:7} {total['raised']:7} {total['finished']:9} {total['unreached']:10} "
              f"{total['violations']:11}")

    errnos = "each of EIO, ENOSPC, EDQUOT" if args.errnos == "all" else "EIO, ENOSPC, EDQUOT in turn"
    print(f"\nper kind (every k of the clean run, {errnos}{'; sampled' if args.sample else ''})")
    show({k: table[k] for k in [*fc.KINDS, *(f"{c} (LMDB, strace)" for c in fc.LMDB_SYSCALLS)] if k in table})
    print("\nper workload")
    show(dict(by_workload))
    if lmdb_note:
        print(lmdb_note)
    print(f"\n{len(outcomes)} cases in {wall:.0f} s wall, {cpu:.0f} s CPU ({args.jobs} jobs)")
    shutil.rmtree(scratch, ignore_errors=True)
    bad = [o for o in outcomes if o.violations]
    for o in bad:
        print(f"VIOLATION {o.label()} ({o.result}): {'; '.join(o.violations)}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "calls": calls, "per_kind": {k: dict(v) for k, v in table.items()},
            "per_workload": {k: dict(v) for k, v in by_workload.items()},
            "violations": [{"case": o.label(), "result": o.result, "what": o.violations} for o in bad]}, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
