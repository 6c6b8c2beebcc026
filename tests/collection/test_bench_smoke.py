"""The suite's short, fixed-seed run of bench/collection.py (issue 22): every store is
written and read back through the benchmark's own code, the table and the ratios come out.
No timing is asserted (timings live in bench/README.md)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from molrec_raw.collection import binding

BENCH = Path(__file__).resolve().parents[2] / "bench" / "collection.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_collection", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_collection"] = module
    spec.loader.exec_module(module)
    return module


def test_bench_collection_runs_small_with_a_fixed_seed(tmp_path: Path) -> None:
    peers = {"atompack": "atompack", "h5py": "h5py", "ase": "ase"}
    missing = [name for name, module in peers.items() if importlib.util.find_spec(module) is None]
    if missing:
        pytest.skip(f"the bench extra's peers are not installed: {missing} (pip install 'molrec-raw[bench]')")
    bench = _bench()
    args = bench.main.__globals__["argparse"].Namespace(
        records=120, atoms=8, reads=120, ase_reads=20, batch=32, rounds=1, seed=3, skip="", dir=str(tmp_path / "b"),
        keep=True, json=None)
    out = bench.run(args)
    assert set(out["write"]) == {"molrec", "add_records", "pickle", "atompack", "h5py", "ase"}
    assert set(out["read"]) == set(out["write"]) - {"add_records"} | {"floor"}
    assert set(out["batch"]) == {"molrec", "atompack", "floor"}
    assert all(size > 0 for size in out["size"].values())
    rows = bench.ratios(out)
    assert [row[0] for row in rows][:6] == ["read one record vs floor", "read one record vs atompack",
                                             "read one record vs pickle", "read one record vs h5py",
                                             "read one record vs ase", "batch vs the floor's batch"]
    assert [row[0] for row in rows][-2:] == ["write vs LMDB + pickle", "add_records vs LMDB + pickle"]
    assert "| ratio (peer / ours) |" in bench.report(out)
    for name in ("set.mrec.lmdb", "set.columns.mrec.lmdb"):  # add_records: the bytes of add_record
        handle = binding.acquire(tmp_path / "b" / name)
        with handle.env.begin() as txn:
            pairs = [(bytes(k), bytes(v)) for k, v in txn.cursor()]
        handle.release()
        if name == "set.mrec.lmdb":
            expected = pairs
    assert pairs == expected and len(pairs) == 3 * 120 + 2
    args.rounds, args.records = 2, 50
    writes = bench.writes(args)
    assert len(writes["rounds"]) == 2 and set(writes["rounds"][0]) == {"molrec", "add_records", "pickle"}
    assert "| add_records |" in bench.writes_report(writes)
    import molrec_raw as mr
    c = mr.read_collection(tmp_path / "b" / "set.mrec.lmdb")
    assert len(c) == 120 and c[0].frame(0).blocks["atoms"].count == 8 and c.batch([1, 2])["n_atoms"].tolist() == [8, 8]


def test_bench_reference_runs_small_and_says_where_molrs_is_missing(tmp_path: Path) -> None:
    """bench/reference.py (ours against molrs, both ways on both stores) runs its small
    version; without molrs each molrs row says so."""
    spec = importlib.util.spec_from_file_location("bench_reference", BENCH.parent / "reference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_reference"] = module
    spec.loader.exec_module(module)
    args = module.main.__globals__["argparse"].Namespace(frames=40, picks=10, sequential=40, rounds=1,
                                                         dir=str(tmp_path))
    out = module.run(args)
    text = module.report(out)
    if importlib.util.find_spec("molrs") is None:
        assert not out["molrs"] and "molrs is not installed" in text
        assert set(out["cpu"]) == {"append ours", "random ours on ours's", "in order ours on ours's"}
    else:
        assert out["molrs"] and out["same_values"] is True
        assert len(out["cpu"]) == 10 and "| streaming appends, durable |" in text
