"""The suite's short, fixed-seed run of bench/dataset.py (issue 35): the dataset and the one
file are written and read back through the benchmark's own code, the ratios come out.  The
Dask rows are left out here (each cluster takes seconds to start; tests/dataset/test_build.py
covers the Dask build).  No timing is asserted (timings live in bench/README.md)."""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "dataset.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_dataset", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_dataset"] = module
    spec.loader.exec_module(module)
    return module


def test_bench_dataset_runs_small_with_a_fixed_seed(tmp_path: Path) -> None:
    bench = _bench()
    args = argparse.Namespace(records=90, atoms=6, shards=4, reads=60, batch=16, open_shards=12, rounds=1, seed=3,
                              skip="dask", dir=str(tmp_path / "b"), keep=True, json=None)
    out = bench.run(args)
    assert set(out["build"]) == {"no dask", "ceiling: 1 process", "ceiling: 2 processes"}
    assert {"read one file", "read dataset", "batch one file", "batch dataset"} <= set(out["read_times"])
    assert len(out["open"]["times"]) == 1 and out["open"]["shards"] == 12
    rows = [row[0] for row in bench.ratios(out) if "atompack" not in row[0]]
    assert rows == ["ceiling: 1 process / 2 (no Dask)", "read: one file / 4 shards", "batch: one file / 4 shards",
                    "batch, shard-wise order: one file / 4 shards"]
    assert "open_dataset of 12 shards" in bench.report(out)
    import molrec_raw as mr
    with mr.open_dataset(tmp_path / "b" / "built") as ds, mr.read_collection(tmp_path / "b" / "one.mrec.lmdb") as c:
        assert [s.n_records for s in ds.shards] == [23, 23, 23, 21]
        got, want = ds.batch([89, 0, 45]), c.batch([89, 0, 45])
        assert all((got[k] == want[k]).all() for k in want) and sorted(got) == sorted(want)
