"""One rank of tests/integrations/test_torch_distributed.py's real ``torch.distributed`` run
(gloo on CPU): ``python ddp_worker.py RANK WORLD PORT SHARD_DIR OUT_JSON``.  Every rank reads
its share of the dataset of shards through a ``DataLoader``; the record numbers each rank saw
are gathered with ``all_gather_object`` and rank 0 writes them as JSON."""
from __future__ import annotations

import json
import sys
from typing import Any, Dict, List

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler

from molrec_raw.integrations.torch import MrecDataset, ShardSampler

BATCH = 4


def records(loader: Any, stop_after: int = -1) -> List[int]:
    seen: List[int] = []
    for i, batch in enumerate(loader):
        if i == stop_after:
            break
        seen.extend(batch["record"].tolist())
    return seen


def main() -> None:
    rank, world, port, shard_dir, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    ds = MrecDataset(shard_dir)
    mine: Dict[str, Any] = {}

    plain = DistributedSampler(ds, shuffle=True, seed=3)
    plain.set_epoch(0)
    mine["distributed"] = records(DataLoader(ds, batch_size=BATCH, sampler=plain, collate_fn=MrecDataset.collate))

    sampler = ShardSampler(ds, seed=5)  # num_replicas and rank from torch.distributed
    mine["replicas"] = [sampler.num_replicas, sampler.rank]
    loader = DataLoader(ds, batch_size=BATCH, sampler=sampler, collate_fn=MrecDataset.collate)
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        mine[f"shard_epoch{epoch}"] = records(loader)
        mine[f"batches_epoch{epoch}"] = len(loader)

    # resume in the middle of epoch 2: two batches trained on, the state saved, a new sampler
    sampler.set_epoch(2)
    mine["before"] = records(loader, stop_after=2)
    state = sampler.state_dict(consumed=2 * BATCH)
    again = ShardSampler(ds, seed=5)
    again.load_state_dict(json.loads(json.dumps(state)))  # a state survives a JSON checkpoint
    again.set_epoch(2)
    mine["rest"] = records(DataLoader(ds, batch_size=BATCH, sampler=again, collate_fn=MrecDataset.collate))
    sampler.set_epoch(3)
    sampler.set_epoch(2)
    mine["whole_epoch2"] = records(loader)

    gathered: List[Any] = [None] * world
    dist.all_gather_object(gathered, mine)
    if rank == 0:
        with open(out, "w") as fh:
            json.dump(gathered, fh)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
