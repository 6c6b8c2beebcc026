"""The fault-injection campaign, bounded (issue 23 item 3; spec-notes/safety.md "The fault
campaign").  ``bench/faults.py`` runs every case; here a fixed-seed share of them: of each
standard workload (``fault_campaign.WORKLOADS``), one seeded call of every kind its clean run makes,
each failed with a seeded errno of EIO, ENOSPC, EDQUOT; and a few of LMDB's own writes and
syncs failed in a child process by ``strace -e inject=``.  Every case is judged as in the full
campaign: raised a MolrecError or finished correctly; poisoned after its first error; the
reader sees at least the last durable commit, every frame as appended; the record reopens
writable and validates clean.
"""
from __future__ import annotations

import errno
import random
from pathlib import Path
from typing import Dict

import pytest

import fault_campaign as fc

SEED = 23
PER_KIND = 1
_COUNTS: Dict[str, Dict[str, int]] = {}


def _counts(name: str, scratch: Path) -> Dict[str, int]:
    if name not in _COUNTS:
        _COUNTS[name] = fc.clean_counts(fc.WORKLOADS[name](), scratch)
    return _COUNTS[name]


@pytest.mark.parametrize("name", list(fc.WORKLOADS))
def test_safety_poison_fault_campaign_bounded(name: str, tmp_path: Path) -> None:
    """safety#poison: a seeded share of the campaign's cases of one workload: no violation;
    every case reached its fault, and the writer raised (a failure the workload's code may
    tolerate is the only way to finish, and then its result is checked whole)."""
    counts = _counts(name, tmp_path)
    cases = fc.sampled_cases(counts, random.Random(f"{SEED}-{name}"), PER_KIND)
    kinds = {kind for kind, _, _ in cases}
    assert kinds == {kind for kind, n in counts.items() if n}, "every kind the workload makes is failed"
    outcomes = [fc.run_case(fc.WORKLOADS[name](), kind, k, code, tmp_path) for kind, k, code in cases]
    bad = [f"{o.label()} ({o.result}): {o.violations}" for o in outcomes if o.violations]
    assert not bad, "\n".join(bad)
    assert all(o.result != "unreached" for o in outcomes), [o.label() for o in outcomes if o.result == "unreached"]
    assert sum(o.result == "raised" for o in outcomes) >= len(outcomes) // 2


def test_safety_poison_fault_campaign_counts_every_kind_of_the_trajectory_workload(tmp_path: Path) -> None:
    """The trajectory workload reaches the mutations the campaign is about (so its bounded
    share and the full campaign fail them): writes, positional writes, fsyncs, renames, opens,
    mkdirs and unlinks each happen in its clean run."""
    counts = _counts("trajectory", tmp_path)
    assert all(counts[kind] > 0 for kind in ("write", "pwrite", "fsync", "rename", "open", "mkdir", "unlink")), counts
    doors = _counts("write_mrec_frame", tmp_path)
    assert doors["exchange"] == 1 and doors["rename"] > 0, doors


@pytest.mark.skipif(not fc.strace_runs(), reason="strace is not installed or cannot trace here (ptrace refused)")
def test_safety_poison_fault_campaign_lmdb_io_by_strace(tmp_path: Path) -> None:
    """safety#poison for LMDB's own I/O (beside the seam): the first and the last pwrite64 and
    fdatasync on the collection file, failed by strace in a child writer: it raises an
    IOFailureError (the errno LMDB reported), refuses every later call naming it, releases
    its lock; afterwards no collection or a whole one is there, and a new writer works."""
    counts = fc.lmdb_counts(tmp_path)
    assert counts["pwrite64"] >= 2 and counts["fdatasync"] >= 2, counts
    picks = [("pwrite64", 1, errno.EIO), ("pwrite64", counts["pwrite64"], errno.ENOSPC),
             ("fdatasync", 1, errno.EDQUOT), ("fdatasync", counts["fdatasync"], errno.EIO)]
    outcomes = [fc.run_lmdb_case(call, k, code, tmp_path) for call, k, code in picks]
    bad = [f"{o.label()} ({o.result}): {o.violations}" for o in outcomes if o.violations]
    assert not bad, "\n".join(bad)
    assert [o.result for o in outcomes] == ["raised"] * 4
