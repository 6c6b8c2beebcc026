"""Collections: many records under one declaration in one ``*.mrec.lmdb`` file
(MolCrafts/molrec ``docs/spec/collection.md`` and ``docs/spec/lmdb.md``).

``CollectionWriter`` streams records in; ``read_collection`` / ``CollectionReader`` reads
them at random (``c[r].system``, ``c[r].trajectory[k]``, ``c[r].frame(k)``,
``c.batch(records)``).  Modules: ``model`` (the collection document, the index, the rules),
``frame_bytes`` (the ``MRF1`` value encoding, no LMDB), ``layout_cache`` (checked layouts
kept by their text, the quick decode), ``binding`` (keys, the ``meta`` value, each process's
environments), ``writer``, ``reader`` (opening, decoding and checking a
record's values; ``CollectionView``), ``records`` (``Record``, ``RecordTrajectory``), ``batch``
(``c.batch``) and ``transaction`` (one read transaction).  LMDB (py-lmdb) is the
``lmdb`` extra, imported only when a collection is opened: ``import molrec_raw`` works
without it, and using a collection without it raises an ImportError naming the extra.
"""
from __future__ import annotations

from molrec_raw.collection.reader import CollectionReader, CollectionView, read_collection
from molrec_raw.collection.records import Record, RecordTrajectory
from molrec_raw.collection.writer import CollectionWriter

__all__ = ["CollectionReader", "CollectionView", "CollectionWriter", "Record", "RecordTrajectory", "read_collection"]
