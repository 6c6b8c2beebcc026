"""Shards written by ``write_dataset`` (issue 35 item 2; dataset#D5-D8): record order and
shard ranges, byte-identical shards without Dask and on a ``LocalCluster`` of one or two
worker processes, a build killed by SIGKILL then rerun, checksum files."""
from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import molrec_raw as mr
from molrec_raw.errors import InvalidValueError, MolrecError, SpecViolationError

from dataset_helpers import INDEX_SCHEMA, UNITS, digests, varied_items

N, PER_SHARD = 29, 6
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The build without Dask every other build is compared with."""
    directory = tmp_path_factory.mktemp("reference") / "shards"
    paths = mr.write_dataset(varied_items(N), directory, units=UNITS, records_per_shard=PER_SHARD,
                             index_schema=INDEX_SCHEMA)
    return directory, paths


def test_D5_shard_k_holds_records_k_n_to_k_plus_one_n(reference):
    directory, paths = reference
    assert [p.name for p in paths] == [f"part-{k:05d}.mrec.lmdb" for k in range(5)]
    assert sorted(p.name for p in directory.iterdir()) == sorted(
        [p.name for p in paths] + [f"{p.name}.sha256" for p in paths])  # nothing else left behind
    for k, path in enumerate(paths):
        with mr.read_collection(path) as c:
            assert [r.meta["name"] for r in c] == [f"r{i}" for i in range(k * PER_SHARD, min(N, (k + 1) * PER_SHARD))]
    with mr.open_dataset(directory) as ds:
        assert [ds[g].meta["name"] for g in range(N)] == [f"r{i}" for i in range(N)]


def test_D8_each_shard_has_a_sha256sum_checksum_file(reference):
    _, paths = reference
    for path in paths:
        text = Path(f"{path}.sha256").read_text(encoding="ascii")
        assert text == f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}\n"


def test_D5_the_same_input_gives_the_same_bytes_without_dask(reference, tmp_path):
    mr.write_dataset(iter(varied_items(N)), tmp_path, units=UNITS, records_per_shard=PER_SHARD,
                     index_schema=INDEX_SCHEMA)
    assert digests(tmp_path) == digests(reference[0])


def test_D5_a_derived_declaration_is_shard_zeros(tmp_path):
    """Without schema/index_schema shard 0 derives them and every later shard is written
    under them: a later record outside the declaration is refused naming its shard."""
    items = varied_items(12)
    items = [{**item, "index": {"energy": item["index"]["energy"]}} for item in items]
    paths = mr.write_dataset(items, tmp_path / "ok", units=UNITS, records_per_shard=5, durable=False)
    with mr.open_dataset(paths) as ds:
        assert len(ds) == 12 and list(ds.index_schema) == ["energy"]
    items[7] = {**items[7], "index": {"energy": 1.0, "extra": 2}}
    with pytest.raises(SpecViolationError) as caught:
        mr.write_dataset(items, tmp_path / "bad", units=UNITS, records_per_shard=5, durable=False)
    assert caught.value.store == str(tmp_path / "bad" / "part-00001.mrec.lmdb")


def test_D5_bad_arguments_are_refused(tmp_path):
    with pytest.raises(InvalidValueError, match="records_per_shard"):
        mr.write_dataset([], tmp_path, units=UNITS, records_per_shard=0)
    with pytest.raises(InvalidValueError, match="mapping of CollectionWriter.add_record"):
        mr.write_dataset([mr.Frame()], tmp_path, units=UNITS, records_per_shard=2)
    assert mr.write_dataset([], tmp_path / "empty", units=UNITS, records_per_shard=2) == []


_CHILD = """
import sys, time
sys.path[:0] = [{here!r}, {root!r}]
import molrec_raw as mr
from dataset_helpers import INDEX_SCHEMA, UNITS, varied_items

def slow():
    for i, item in enumerate(varied_items({n})):
        if i >= {per}:
            time.sleep(0.1)  # past shard 0: slow enough to be killed mid-build
        yield item

mr.write_dataset(slow(), {directory!r}, units=UNITS, records_per_shard={per}, index_schema=INDEX_SCHEMA)
"""


def test_D6_D7_a_build_killed_after_its_first_shard_then_rerun_ends_byte_identical(reference, tmp_path):
    directory = tmp_path / "shards"
    script = _CHILD.format(here=str(HERE), root=str(ROOT), n=N, per=PER_SHARD, directory=str(directory))
    child = subprocess.Popen([sys.executable, "-c", script])
    first = directory / "part-00000.mrec.lmdb"
    deadline = time.monotonic() + 120
    while not first.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL, "the build ended before it was killed"
    finished = sorted(p.name for p in directory.glob("*.mrec.lmdb"))
    assert "part-00000.mrec.lmdb" in finished and len(finished) < 5
    for name in finished:  # D6: a file under a final name is complete, and its checksum file agrees
        with mr.read_collection(directory / name) as c:
            assert len(c) == PER_SHARD
        assert digests(directory)[name] == digests(reference[0])[name]
    kept = os.stat(first).st_ino
    mr.write_dataset(varied_items(N), directory, units=UNITS, records_per_shard=PER_SHARD, index_schema=INDEX_SCHEMA)
    assert os.stat(first).st_ino == kept  # D7: the finished shard was kept, not written again
    assert digests(directory) == digests(reference[0])
    assert not [p for p in directory.iterdir() if p.name.startswith(".")]


def test_D7_a_damaged_or_unacknowledged_shard_is_written_again(reference, tmp_path):
    directory = tmp_path / "shards"
    mr.write_dataset(varied_items(N), directory, units=UNITS, records_per_shard=PER_SHARD, index_schema=INDEX_SCHEMA)
    damaged, bare = directory / "part-00001.mrec.lmdb", directory / "part-00003.mrec.lmdb"
    with open(damaged, "r+b") as file:
        file.seek(5000)
        byte = file.read(1)
        file.seek(5000)
        file.write(bytes([byte[0] ^ 0xFF]))
    os.unlink(f"{bare}.sha256")
    (directory / ".part-00004.mrec.lmdb.partial").mkdir()  # what a killed build leaves
    inodes = {p.name: os.stat(p).st_ino for p in directory.glob("*.mrec.lmdb")}
    mr.write_dataset(varied_items(N), directory, units=UNITS, records_per_shard=PER_SHARD, index_schema=INDEX_SCHEMA)
    assert digests(directory) == digests(reference[0])
    again = {p.name: os.stat(p).st_ino for p in directory.glob("*.mrec.lmdb")}
    assert {name for name in inodes if inodes[name] != again[name]} == {damaged.name, bare.name}


# -- Dask --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster():
    """One LocalCluster of two single-threaded worker processes (scaled down to one by the
    last test of this file)."""
    distributed = pytest.importorskip("distributed", reason="the Dask build needs the [dask] extra")
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0",
                                  host="127.0.0.1") as made, distributed.Client(made) as client:
        yield made, client


def _workers(client):
    return len(client.scheduler_info()["workers"])


def test_D5_a_refused_record_on_a_worker_is_the_callers_error(cluster, tmp_path):
    items = varied_items(N)
    items[20] = {**items[20], "meta": {"molrec_version": "1"}}
    with pytest.raises(MolrecError, match="lmdb#L5") as caught:
        mr.write_dataset(items, tmp_path, units=UNITS, records_per_shard=PER_SHARD, index_schema=INDEX_SCHEMA,
                         client=cluster[1], durable=False)
    assert caught.value.store == str(tmp_path / "part-00003.mrec.lmdb")


def test_D5_a_dask_bag_is_written_in_its_order_by_the_workers(reference, cluster, tmp_path):
    bag = pytest.importorskip("dask.bag")
    items = bag.from_sequence(varied_items(N), npartitions=4)
    mr.write_dataset(items, tmp_path / "a", units=UNITS, records_per_shard=PER_SHARD, index_schema=INDEX_SCHEMA,
                     client=cluster[1], durable=False)
    assert digests(tmp_path / "a") == digests(reference[0])
    import dask
    with dask.config.set(scheduler="synchronous"):
        mr.write_dataset(bag.from_sequence(varied_items(N), npartitions=7), tmp_path / "b", units=UNITS,
                         records_per_shard=PER_SHARD, index_schema=INDEX_SCHEMA, durable=False)
    assert digests(tmp_path / "b") == digests(reference[0])


def test_D5_a_local_cluster_of_two_workers_then_one_writes_byte_identical_shards(reference, cluster, tmp_path):
    """The issue's test: a LocalCluster of 2 worker processes, and of 1, each build's digests
    equal to the build without Dask (the durable flag syncs, it changes no byte)."""
    made, client = cluster
    assert _workers(client) == 2
    mr.write_dataset(varied_items(N), tmp_path / "two", units=UNITS, records_per_shard=PER_SHARD,
                     index_schema=INDEX_SCHEMA, client=client, durable=False)
    assert digests(tmp_path / "two") == digests(reference[0])
    made.scale(1)
    deadline = time.monotonic() + 60
    while _workers(client) != 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _workers(client) == 1
    mr.write_dataset(varied_items(N), tmp_path / "one", units=UNITS, records_per_shard=PER_SHARD,
                     index_schema=INDEX_SCHEMA, client=client, durable=False)
    assert digests(tmp_path / "one") == digests(reference[0])
