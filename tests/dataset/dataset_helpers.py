"""Helpers of the dataset tests (tests/dataset/): records of varied shapes to write, one
collection of them all to compare a dataset with, and file digests."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Dict, List

import numpy as np

import molrec_raw as mr

UNITS = {"length": "angstrom", "energy": "eV", "force": "eV/angstrom"}


def varied_items(n: int, seed: int = 0) -> List[Dict[str, Any]]:
    """``n`` records (``CollectionWriter.add_record``'s arguments) that vary in what a batch
    joins: atom counts, string columns, one-frame trajectories with a cell on every third
    record, times on the first ten only, a nullable index column missing on every fifth."""
    rng = np.random.default_rng(seed)
    items = []
    for i in range(n):
        atoms = int(rng.integers(1, 6))
        system = mr.Frame(blocks={"atoms": mr.Block({"x": rng.normal(size=atoms),
                                                     "element": np.array(["H", "O", "C", "N", "S"][:atoms], object)})})
        box = mr.Box(np.eye(3) * (10.0 + i)) if i % 3 == 0 else None
        frame = mr.Frame(blocks={"atoms": mr.Block({"fx": rng.normal(size=atoms)})}, box=box)
        item: Dict[str, Any] = {"meta": {"name": f"r{i}"}, "system": system, "frames": [frame], "steps": [i],
                                "index": {"energy": float(rng.normal()), "tag": None if i % 5 == 4 else i % 3}}
        if i < 10:
            item["times"] = [0.5 * i]
        items.append(item)
    return items


INDEX_SCHEMA = {"energy": "f64", "tag": {"dtype": "i64", "nullable": True}}


def one_collection(items: List[Dict[str, Any]], path: Path) -> Path:
    """All ``items`` in one collection file (the reference a dataset of them is compared with)."""
    with mr.CollectionWriter(path, units=UNITS, index_schema=INDEX_SCHEMA, durable=False) as writer:
        for item in items:
            writer.add_record(**item)
    return path


def digests(directory: Path) -> Dict[str, str]:
    """SHA-256 of every shard and checksum file in ``directory``, by name."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())
            if p.name.endswith((".mrec.lmdb", ".sha256"))}


def assert_same_batch(got: Dict[str, np.ndarray], want: Dict[str, np.ndarray]) -> None:
    """Two batches with the same keys and equal arrays (dtype and shape included)."""
    assert list(got) == list(want) or sorted(got) == sorted(want), (sorted(got), sorted(want))
    for name, values in want.items():
        assert got[name].dtype == values.dtype and got[name].shape == values.shape, name
        assert np.array_equal(got[name], values), name
