"""Datasets: many collection files (shards) read as one sequence of records, and built
shard by shard (issue 35).  A room over ``collection/``: a shard is an ordinary
``*.mrec.lmdb``.

``open_dataset(source, cache=None)`` / :class:`Dataset` (``shards``: the dataset, its
numbering and its reads; ``merge``: many shards' batches and indexes joined as one
collection's), ``write_dataset(items, directory, ...)`` (``build``: shards written
deterministically, crash-safely, resumably; the Dask glue is
``molrec_raw.integrations.dask_build``), ``staging`` (shards fetched from object storage
into a local cache).  Rule ids: ``dataset#D1`` .. (``molrec_raw/rules/dataset.py``).
"""
from __future__ import annotations

from molrec_raw.dataset.build import write_dataset
from molrec_raw.dataset.shards import Dataset, Shard, open_dataset

__all__ = ["Dataset", "Shard", "open_dataset", "write_dataset"]
