"""Shards of a dataset written by Dask workers (the optional extra ``molrec-raw[dask]``;
``molrec_raw.write_dataset(..., client=...)``, issue 35).

Every shard is one task running :func:`molrec_raw.dataset.build.write_shard` — the function
a build without Dask runs — on the shard's records, so the shards are byte-identical
whoever writes them (``dataset#D5``).  How the records reach the workers:

- an iterable: cut into shards in input order on the client, each shard's records sent with
  its task as one pickle (one buffer: Dask would otherwise send every array of every record
  as a message frame of its own, several times slower); at most ``2 x workers`` shards are
  in flight, so the client holds a bounded number of records;
- a Dask bag: persisted on the cluster, its partitions counted, and each shard's task takes
  the slices of the partitions that hold its records (records never pass through the
  client; a bag whose partitions are the shards moves no record between workers).

Without a declaration (``schema`` / ``index_schema``) shard 0 is written first and the
others under its declaration (molrec_raw/dataset/build.py).  The shard directory must be
one every worker sees (a local directory for a ``LocalCluster``, a shared file system for a
cluster of machines).
"""
from __future__ import annotations

import pickle
from typing import Any, Dict, List, Optional, Sequence, Tuple

try:
    import dask.bag as db
    from dask.base import compute
    from dask.delayed import delayed
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("molrec_raw.integrations.dask_build needs dask: pip install 'molrec-raw[dask]'") from exc

from molrec_raw.dataset.build import ShardPlan, declared, shards_of, write_shard

__all__ = ["build_on_dask"]


def build_on_dask(items: Any, plan: ShardPlan, records_per_shard: int, client: Any) -> List[str]:
    """The shards of ``items`` written by ``client``'s workers (or, for a bag without a
    client, by Dask's default scheduler); their names in order."""
    if isinstance(items, db.Bag):
        return _from_bag(items, plan, records_per_shard, client)
    return _from_iterable(items, plan, records_per_shard, client)


def _workers(client: Any) -> int:
    return max(1, len(client.scheduler_info().get("workers", {})))


def _from_iterable(items: Any, plan: ShardPlan, records_per_shard: int, client: Any) -> List[str]:
    window = 2 * _workers(client)
    names: List[str] = []
    pending: List[Any] = []
    for k, records in shards_of(items, records_per_shard):
        # one in-band pickle: sent as one buffer, not one message frame per array of every record
        future = client.submit(write_pickled, plan, k, pickle.dumps(records, protocol=pickle.HIGHEST_PROTOCOL),
                               pure=False)
        if k == 0 and (plan.schema is None or plan.index_schema is None):
            plan = declared(plan, future.result())  # every later shard under shard 0's declaration
        pending.append(future)
        while len(pending) > window:
            names.append(pending.pop(0).result()["name"])
    names += [future.result()["name"] for future in pending]
    return names


def write_pickled(plan: ShardPlan, k: int, records: bytes) -> Dict[str, Any]:
    """One task: shard ``k`` of the pickled list ``records``."""
    return write_shard(plan, k, pickle.loads(records))


def _count(partition: Any) -> List[int]:
    return [sum(1 for _ in partition)]


def write_slices(plan: ShardPlan, k: int, slices: Sequence[Tuple[int, int]], *partitions: Any) -> Dict[str, Any]:
    """One task: shard ``k`` of the records ``partitions[i][lo:hi]`` for each ``(lo, hi)``."""
    records: List[Any] = []
    for (lo, hi), partition in zip(slices, partitions):
        records.extend(list(partition)[lo:hi])
    return write_shard(plan, k, records)


def _from_bag(bag: Any, plan: ShardPlan, records_per_shard: int, client: Any) -> List[str]:
    bag = bag.persist() if client is None else client.persist(bag)
    counts = bag.map_partitions(_count).compute() if client is None else client.compute(
        bag.map_partitions(_count)).result()
    parts = bag.to_delayed()
    starts = [0]
    for n in counts:
        starts.append(starts[-1] + n)
    total = starts[-1]
    tasks = []
    for k, lo in enumerate(range(0, total, records_per_shard)):
        hi = min(lo + records_per_shard, total)
        used = [i for i in range(len(counts)) if starts[i] < hi and starts[i + 1] > lo and counts[i]]
        slices = [(max(lo, starts[i]) - starts[i], min(hi, starts[i + 1]) - starts[i]) for i in used]
        tasks.append((k, slices, [parts[i] for i in used]))
    names: List[str] = []
    if tasks and (plan.schema is None or plan.index_schema is None):
        k, slices, inputs = tasks.pop(0)
        first = _run([delayed(write_slices, pure=False)(plan, k, slices, *inputs)], client)[0]
        plan = declared(plan, first)
        names.append(first["name"])
    done = _run([delayed(write_slices, pure=False)(plan, k, slices, *inputs) for k, slices, inputs in tasks],
                client)
    return names + [result["name"] for result in done]


def _run(tasks: List[Any], client: Optional[Any]) -> List[Dict[str, Any]]:
    if client is None:
        return list(compute(*tasks))  # type: ignore[no-untyped-call]
    return list(client.gather(client.compute(tasks)))
