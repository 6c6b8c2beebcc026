"""Reading a dataset of shards across ranks: ``MrecDataset`` over a dataset, with
``DistributedSampler`` and with ``ShardSampler`` — for real (two processes, ``torch.distributed``
with the gloo backend on CPU, tests/integrations/ddp_worker.py) and as properties of the
sampler's plan (hypothesis).  Needs torch (the CI's Python 3.11 job)."""
from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

pytest.importorskip("lmdb", reason="collections need the [lmdb] extra (pip install 'molrec-raw[lmdb]')")
if importlib.util.find_spec("torch") is None:
    pytest.skip("needs torch (pip install 'molrec-raw[torch]'; torch==2.13.0 under Python 3.11 here)",
                allow_module_level=True)

from hypothesis import assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import molrec_raw as mr  # noqa: E402
from molrec_raw.errors import InvalidValueError  # noqa: E402
from molrec_raw.integrations.torch import MrecDataset, ShardSampler  # noqa: E402

UNITS = {"length": "angstrom", "energy": "eV", "force": "eV/angstrom"}
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def records(n: int, frames: Any = lambda r: 1) -> List[Dict[str, Any]]:
    """``n`` records of 2 to 4 atoms; record ``r`` has ``frames(r)`` frames whose ``pe`` is ``r``."""
    rng = np.random.default_rng(n)
    out = []
    for r in range(n):
        atoms = 2 + r % 3
        system = mr.Frame({}, {"atoms": mr.Block({"element": np.array(["O"] * atoms, dtype=object)})})
        out.append({"system": system, "frames": [
            mr.Frame({"pe": float(r)}, {"atoms": mr.Block({c: rng.normal(size=atoms) for c in "xyz"})})
            for _ in range(frames(r))] or None})
    return out


@pytest.fixture(scope="module")
def shard_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 records of one frame each in 4 shards of 6 (the dataset of the two-rank run)."""
    directory = tmp_path_factory.mktemp("ddp") / "train"
    mr.write_dataset(records(24), directory, units=UNITS, records_per_shard=6, durable=False)
    return directory


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def two_ranks(shard_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> List[Dict[str, Any]]:
    """What each of two gloo ranks read (ddp_worker.py), gathered with all_gather_object."""
    out = tmp_path_factory.mktemp("ddp-out") / "gathered.json"
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, str(HERE / "ddp_worker.py"), str(rank), "2", str(port),
                               str(shard_dir), str(out)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for rank in range(2)]
    logs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], logs
    gathered: List[Dict[str, Any]] = json.loads(out.read_text())
    return gathered


def shard_of(record: int) -> int:
    return record // 6


def test_ddp_distributed_sampler_reads_every_record_once(two_ranks: List[Dict[str, Any]]) -> None:
    """MrecDataset over a directory of shards with torch's DistributedSampler, two gloo ranks:
    every record exactly once per epoch over the ranks, 12 on each."""
    seen = [r for rank in two_ranks for r in rank["distributed"]]
    assert sorted(seen) == list(range(24))
    assert [len(rank["distributed"]) for rank in two_ranks] == [12, 12]


def test_ddp_shard_sampler_every_record_once_whole_shards_per_rank(two_ranks: List[Dict[str, Any]]) -> None:
    """ShardSampler, two gloo ranks (num_replicas and rank from torch.distributed): each epoch
    every record exactly once over the ranks, each rank whole shards (two of the four), the
    same number of batches on both, and another order in the next epoch."""
    assert [rank["replicas"] for rank in two_ranks] == [[2, 0], [2, 1]]
    for epoch in (0, 1):
        per_rank = [rank[f"shard_epoch{epoch}"] for rank in two_ranks]
        assert sorted(r for part in per_rank for r in part) == list(range(24)), epoch
        shards = [{shard_of(r) for r in part} for part in per_rank]
        assert [len(s) for s in shards] == [2, 2] and not shards[0] & shards[1], shards
        assert [rank[f"batches_epoch{epoch}"] for rank in two_ranks] == [3, 3]
    assert [rank["shard_epoch0"] for rank in two_ranks] != [rank["shard_epoch1"] for rank in two_ranks]


def test_ddp_shard_sampler_resume_mid_epoch_gives_exactly_the_rest(two_ranks: List[Dict[str, Any]]) -> None:
    """Two batches of epoch 2 trained on, the sampler's state saved (through JSON), a new
    sampler loaded with it: on every rank it yields exactly the records not yet seen, in the
    order the uninterrupted epoch has them."""
    for rank in two_ranks:
        assert len(rank["before"]) == 8
        assert rank["before"] + rank["rest"] == rank["whole_epoch2"]
    assert sorted(r for rank in two_ranks for r in rank["whole_epoch2"]) == list(range(24))


# -- MrecDataset over a dataset, in one process --------------------------------------------
def test_mrec_dataset_over_shards_items_and_spans(tmp_path: Path) -> None:
    """MrecDataset over a Dataset (and over its directory): items are every record's frames in
    dataset order, a record without frames has none; shard_spans are each shard's items; the
    dataset pickles as its shard table."""
    import pickle
    frames = lambda r: [2, 0, 1][r % 3]  # noqa: E731
    directory = tmp_path / "shards"
    mr.write_dataset(records(7, frames), directory, units=UNITS, records_per_shard=3, durable=False)
    expected = [(r, k) for r in range(7) for k in range(frames(r))]
    with mr.open_dataset(directory) as dataset:
        for ds in (MrecDataset(dataset), MrecDataset(directory), pickle.loads(pickle.dumps(MrecDataset(directory)))):
            assert len(ds) == len(expected) == 8
            batch = ds.read_batch(range(len(ds)))
            assert list(zip(batch["record"].tolist(), batch["frame"].tolist())) == expected
            assert batch["energy"].tolist() == [float(r) for r, _ in expected]
            assert ds.shard_spans == [(0, 3), (3, 6), (6, 8)]
            one = ds[4]
            assert (one["record"].item(), one["frame"].item()) == expected[4]


# -- ShardSampler's plan: properties ----------------------------------------------------------
def filled(spans: List[Tuple[int, int]]) -> int:
    """Shards with items (fewer than the ranks is refused: every rank needs a whole shard)."""
    return sum(1 for a, b in spans if b > a)


spans_strategy = st.lists(st.integers(0, 9), min_size=1, max_size=9).map(
    lambda sizes: [(int(a), int(b)) for a, b in zip(np.cumsum([0] + sizes[:-1]), np.cumsum(sizes))])


def samplers(spans: List[Tuple[int, int]], world: int, **options: Any) -> List[ShardSampler]:
    fake = SimpleNamespace(shard_spans=spans)
    return [ShardSampler(fake, num_replicas=world, rank=rank, **options) for rank in range(world)]


@settings(max_examples=60, deadline=None)
@given(spans=spans_strategy, world=st.integers(1, 4), seed=st.integers(0, 2**32 - 1), epoch=st.integers(0, 50),
       shuffle=st.booleans())
def test_shard_sampler_partitions_whole_shards_and_balances(spans: List[Tuple[int, int]], world: int, seed: int,
                                                            epoch: int, shuffle: bool) -> None:
    """Every shard goes whole to one rank; the ranks' shares (without padding) are every item
    exactly once; every rank yields the same number (the largest share), a rank with less
    repeating its own items; shares differ by at most one shard's size."""
    assume(filled(spans) >= world)
    ranks = samplers(spans, world, seed=seed, shuffle=shuffle)
    for s in ranks:
        s.set_epoch(epoch)
    shares = ranks[0].assignment()
    assert sorted(k for share in shares for k in share) == list(range(len(spans)))
    loads = [sum(spans[k][1] - spans[k][0] for k in share) for share in shares]
    assert max(loads) - min(loads) <= max(b - a for a, b in spans)
    total = spans[-1][1]
    own_items: List[int] = []
    for s, share, load in zip(ranks, shares, loads):
        order = list(s)
        assert len(order) == len(s) == max(loads)
        own = {i for k in share for i in range(*spans[k])}
        assert set(order) <= own
        assert sorted(order[:load]) == sorted(own)
        own_items.extend(order[:load])
    assert sorted(own_items) == list(range(total))


@settings(max_examples=40, deadline=None)
@given(spans=spans_strategy, world=st.integers(1, 4), seed=st.integers(0, 1000), epoch=st.integers(0, 20))
def test_shard_sampler_drop_last_cuts_to_the_smallest_share(spans: List[Tuple[int, int]], world: int, seed: int,
                                                            epoch: int) -> None:
    """drop_last=True: every rank yields the smallest share, no item twice over the ranks."""
    assume(filled(spans) >= world)
    ranks = samplers(spans, world, seed=seed, drop_last=True)
    for s in ranks:
        s.set_epoch(epoch)
    orders = [list(s) for s in ranks]
    loads = [sum(spans[k][1] - spans[k][0] for k in share) for share in ranks[0].assignment()]
    assert [len(o) for o in orders] == [min(loads)] * world
    flat = [i for o in orders for i in o]
    assert len(flat) == len(set(flat))


@settings(max_examples=40, deadline=None)
@given(spans=spans_strategy, world=st.integers(1, 3), seed=st.integers(0, 1000), epoch=st.integers(0, 20),
       data=st.data())
def test_shard_sampler_deterministic_per_seed_and_epoch_and_resumes(spans: List[Tuple[int, int]], world: int,
                                                                    seed: int, epoch: int, data: Any) -> None:
    """The order is a function of (seed, epoch) (two samplers agree; iterating twice gives the
    same); resuming from any position yields exactly the rest of that epoch."""
    assume(filled(spans) >= world)
    rank = data.draw(st.integers(0, world - 1))
    a, b = samplers(spans, world, seed=seed)[rank], samplers(spans, world, seed=seed)[rank]
    a.set_epoch(epoch)
    b.set_epoch(epoch)
    whole = list(a)
    assert whole == list(b) == list(a)
    position = data.draw(st.integers(0, len(whole)))
    it = iter(a)
    for _ in range(position):
        next(it)
    state = a.state_dict()
    assert state["position"] == position and state["epoch"] == epoch
    fresh = samplers(spans, world, seed=seed)[rank]
    fresh.load_state_dict(state)
    fresh.set_epoch(epoch)  # the same epoch: the position stays
    assert list(fresh) == whole[position:]
    assert list(fresh) == whole  # the next pass is the whole epoch again


def test_shard_sampler_orders_change_with_the_epoch_and_shuffle_false_keeps_stored_order() -> None:
    """Shard order and the order inside a shard are drawn anew per epoch; shuffle=False reads
    shards in stored order, dealt out to the least loaded rank."""
    spans = [(0, 5), (5, 10), (10, 15), (15, 20)]
    s = samplers(spans, 1, seed=1)[0]
    orders = set()
    for epoch in range(4):
        s.set_epoch(epoch)
        orders.add(tuple(s))
    assert len(orders) == 4
    plain = samplers(spans, 2, shuffle=False)
    assert [list(p) for p in plain] == [list(range(0, 5)) + list(range(10, 15)),
                                        list(range(5, 10)) + list(range(15, 20))]


def test_shard_sampler_refuses_a_state_of_another_sampler() -> None:
    """load_state_dict validates: another seed, replica count, rank or set of shards, or a
    position outside the epoch, is refused naming it."""
    spans = [(0, 4), (4, 8)]
    state = samplers(spans, 2, seed=1)[0].state_dict()
    with pytest.raises(InvalidValueError, match="the state's seed is 1, this sampler's 2"):
        samplers(spans, 2, seed=2)[0].load_state_dict(state)
    with pytest.raises(InvalidValueError, match="the state's rank is 0, this sampler's 1"):
        samplers(spans, 2, seed=1)[1].load_state_dict(state)
    with pytest.raises(InvalidValueError, match="spans is 2 shards, this sampler's 2 shards .same count"):
        samplers([(0, 4), (4, 9)], 2, seed=1)[0].load_state_dict(state)
    with pytest.raises(InvalidValueError, match="position 9"):
        samplers(spans, 2, seed=1)[0].load_state_dict({**state, "position": 9})
    with pytest.raises(InvalidValueError, match="rank 2 of num_replicas 2"):
        ShardSampler(SimpleNamespace(shard_spans=spans), num_replicas=2, rank=2)
    with pytest.raises(InvalidValueError, match="not list"):
        ShardSampler([1, 2, 3])
    with pytest.raises(InvalidValueError, match="1 shard.s. with items for 2 ranks"):
        ShardSampler(SimpleNamespace(shard_spans=[(0, 4), (4, 4)]), num_replicas=2, rank=0)
