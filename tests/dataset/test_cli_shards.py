"""``molrec-raw convert IN... DIR --records-per-shard N / --shards K [--workers W]`` (issue 35
item 2): many inputs into a directory of shards, against real ASE files and a real trajectory
record; the shards equal one collection of the same inputs converted one by one."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

ase = pytest.importorskip("ase", reason="converting extxyz needs the [ase] extra (pip install 'molrec-raw[ase]')")
import ase.db  # noqa: E402
import ase.io  # noqa: E402
from ase.calculators.singlepoint import SinglePointCalculator  # noqa: E402

import molrec_raw as mr  # noqa: E402
from molrec_raw.cli import main  # noqa: E402

from dataset_helpers import digests  # noqa: E402


def _images(n: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        atoms = ase.Atoms("H2O" if i % 2 else "CH4", positions=rng.normal(size=(3 if i % 2 else 5, 3)),
                          cell=np.eye(3) * 8.0, pbc=True)
        atoms.info.update(name=f"s{seed}i{i}")
        atoms.calc = SinglePointCalculator(atoms, energy=-float(i), forces=rng.normal(size=(len(atoms), 3)))
        out.append(atoms)
    return out


@pytest.fixture
def inputs(tmp_path: Path):
    a, b = tmp_path / "a.extxyz", tmp_path / "b.db"
    ase.io.write(a, _images(7, 1), format="extxyz")
    with ase.db.connect(str(b)) as db:
        for atoms in _images(4, 2):
            db.write(atoms, name=atoms.info["name"])
    return a, b


def test_D5_extxyz_and_ase_db_into_shards_in_input_order(inputs, tmp_path, capsys):
    a, b = inputs
    target = tmp_path / "train"
    assert main(["convert", str(a), str(b), str(target), "--records-per-shard", "4"]) == 0
    assert capsys.readouterr().out.startswith(f"{target}: 11 records in 3 shards of up to 4 (")
    with mr.open_dataset(target) as ds:
        assert [s.n_records for s in ds.shards] == [4, 4, 3]
        assert [ds[g].meta["name"] for g in range(11)] == [f"s1i{i}" for i in range(7)] + [f"s2i{i}" for i in range(4)]
        assert ds.index.columns["source"].tolist() == [0] * 7 + [1] * 4
        assert ds.index.columns["image"].tolist() == list(range(7)) + list(range(4))
        assert ds.units["length"] == "angstrom"
        one = tmp_path / "a.mrec.lmdb"
        assert main(["convert", str(a), str(one)]) == 0
        with mr.read_collection(one) as c:
            got, want = ds.batch(range(7)), c.batch(range(7))
            for name in ("atoms/x", "atoms/fx", "pe", "box/vectors", "n_atoms"):
                assert np.array_equal(got[name], want[name]), name
    again = tmp_path / "again"
    assert main(["convert", str(a), str(b), str(again), "--shards", "3"]) == 0
    assert digests(again) == digests(target)


@pytest.mark.campaign  # a LocalCluster of its own (seconds to start): the Dask build's own tests run by default
def test_D5_workers_write_the_same_shards(inputs, tmp_path, capsys):
    pytest.importorskip("distributed", reason="--workers needs the [dask] extra")
    a, b = inputs
    assert main(["convert", str(a), str(b), str(tmp_path / "one"), "--records-per-shard", "3"]) == 0
    assert main(["convert", str(a), str(b), str(tmp_path / "two"), "--records-per-shard", "3", "--workers", "2"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("2 workers")
    assert digests(tmp_path / "two") == digests(tmp_path / "one") and len(digests(tmp_path / "one")) == 8


def test_D5_records_frames_as_records_into_shards(write_coordinates, tmp_path, capsys):
    record = write_coordinates(tmp_path / "run.mrec", 9, 4)
    target = tmp_path / "frames"
    assert main(["convert", str(record), str(record), str(target), "--frames-as-records", "--shards", "4",
                 "--units", "length=nm"]) == 0
    with mr.open_dataset(target) as ds, mr.MrecReader(record) as reader:
        assert len(ds) == 18 and [s.n_records for s in ds.shards] == [5, 5, 5, 3]
        assert ds.index.columns["frame"].tolist() == list(range(9)) * 2
        assert np.array_equal(ds[12].frame(0).blocks["atoms"].columns["x"], reader[3].blocks["atoms"].columns["x"])
        assert ds.units == {"length": "nm"}


@pytest.mark.parametrize("extra, message", [
    ([], "give --records-per-shard N or --shards N"),
    (["--records-per-shard", "2", "--shards", "2"], "give one of them"),
    (["--records-per-shard", "0"], "positive integers"),
    (["--records-per-shard", "2", "--frames-as-records"], "--frames-as-records and --units convert records"),
    (["--records-per-shard", "2", "--precision", "0.1"], "--precision: not for a directory of shards"),
])
def test_D5_the_command_refuses_what_does_not_fit(inputs, tmp_path, capsys, extra, message):
    a, b = inputs
    assert main(["convert", str(a), str(b), str(tmp_path / "out"), *extra]) != 0
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
