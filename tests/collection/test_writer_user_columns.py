"""Columns built as a user builds them — views of a record's ``(N, 3)`` positions, strided —
take the writer's kept encoding plan like C-order arrays, and give the same bytes (lmdb#L10:
every buffer C-order little-endian; issue 37's write row)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Tuple

import numpy as np

import molrec_raw as mr
from collection_helpers import UNITS
from molrec_raw.collection import binding


def _write(path: Path, strided: bool) -> Tuple[int, List[Tuple[bytes, bytes]]]:
    rng = np.random.default_rng(1)
    with mr.CollectionWriter(path, units=UNITS) as w:
        for r in range(6):
            positions = rng.normal(size=(5, 3))
            columns = {c: positions[:, i] if strided else positions[:, i].copy() for i, c in enumerate("xyz")}
            w.add_record(system=mr.Frame({}, {"atoms": mr.Block({"element": np.array(["C"] * 5, dtype=object)})}),
                         frames=[mr.Frame({"pe": float(r)}, {"atoms": mr.Block(columns)})])
        plans = len(w._encodes.plans)
    handle = binding.acquire(path)
    try:
        with handle.env.begin() as txn:
            return plans, [(bytes(k), bytes(v)) for k, v in txn.cursor()]
    finally:
        handle.release()


def test_lmdb_L10_strided_columns_take_the_kept_plan_and_write_c_order_bytes(tmp_path: Path) -> None:
    plans, strided = _write(tmp_path / "strided.mrec.lmdb", strided=True)
    contiguous_plans, contiguous = _write(tmp_path / "contiguous.mrec.lmdb", strided=False)
    assert strided == contiguous
    assert plans == contiguous_plans == 2  # the system's and the frame's
    c = mr.read_collection(tmp_path / "strided.mrec.lmdb")
    x = c[3].trajectory[0]["atoms"]["x"]
    assert x.flags.c_contiguous and x.shape == (5,)
    c.close()
