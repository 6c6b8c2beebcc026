"""``write_dataset``: records written as shards of a dataset (issue 35; ``dataset#D5``–``D8``).

Record order is input order; shard ``k`` holds records ``[k*n, (k+1)*n)`` and is named
``<prefix>-<k, five digits>.mrec.lmdb`` (``D5``).  Each shard is written by
:func:`write_shard` — in this process, or by a Dask worker
(``molrec_raw.integrations.dask_build``): the same function on the same records and
settings gives the same bytes wherever it runs.

A shard is built in a hidden directory beside its final place (``.<name>.partial/``),
synced by the collection writer; its checksum file ``<name>.sha256`` (``D8``) is written,
synced and renamed into place, then the shard is renamed into place and the directory synced
(``D6``): a file under a shard's final name is always complete.  A rerun keeps a shard whose
file and checksum file are in place and agree, and writes the others again (``D7``): it ends
byte-identical to an uninterrupted build.

The declaration: ``schema`` / ``index_schema`` when given.  Without them shard 0 is written
first, alone, deriving them from its records, and every later shard is written under shard
0's (a later record outside it is refused, ``collection#C2``/``C6``): shards of one build
always share one declaration (``dataset#D1``).
"""
from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

from molrec_raw.collection import CollectionWriter
from molrec_raw.collection.summary import CollectionSummary, read_summary
from molrec_raw.errors import InvalidValueError, MolrecError, StoreError
from molrec_raw.record.forcefield import ForceFieldSection
from molrec_raw.record.trajectory.schema import SequenceSchema
from molrec_raw.zarr.fileops import FileOps

__all__ = ["ShardPlan", "write_dataset", "write_shard", "shard_name", "shard_finished", "checksum_line",
           "MAX_SHARDS"]

D5, D6, D7, D8 = "dataset#D5", "dataset#D6", "dataset#D7", "dataset#D8"
MAX_SHARDS = 100_000  # five digits of shard number keep sorted names in shard order (D5)
_RECORD_KEYS = frozenset(("meta", "system", "frames", "steps", "times", "schema", "index"))
_CHUNK = 1 << 20


@dataclass(frozen=True)
class ShardPlan:
    """What every shard of one build is written with (picklable: a Dask task carries it)."""

    directory: str
    units: Dict[str, str]
    prefix: str = "part"
    schema: Optional[Dict[str, Any]] = None  # the declaration as JSON (SequenceSchema.to_json)
    index_schema: Optional[Dict[str, Any]] = None
    forcefield: Optional[ForceFieldSection] = None
    meta: Optional[Dict[str, Any]] = None
    durable: bool = True
    commit_every: Optional[int] = None

    def path(self, k: int) -> Path:
        """Shard ``k``'s final path."""
        return Path(self.directory) / shard_name(self.prefix, k)


def shard_name(prefix: str, k: int) -> str:
    """Shard ``k``'s file name (``dataset#D5``): sorted names are shard order."""
    if not 0 <= k < MAX_SHARDS:
        raise InvalidValueError(f"shard {k}: a build writes at most {MAX_SHARDS} shards (five-digit names keep "
                                "sorted names in shard order); give more records per shard", rule=D5)
    return f"{prefix}-{k:05d}.mrec.lmdb"


def checksum_line(digest: str, name: str) -> str:
    """A checksum file's text (``dataset#D8``): the hex digest, two spaces, the name (sha256sum)."""
    return f"{digest}  {name}\n"


def file_sha256(path: Path) -> str:
    """The SHA-256 of the file at ``path`` (lowercase hex)."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def shard_finished(path: Path) -> Optional[str]:
    """The digest of a finished shard at ``path`` — its file and its checksum file in place
    and agreeing (``dataset#D7``) — else None."""
    sidecar = Path(f"{path}.sha256")
    try:
        recorded = sidecar.read_text(encoding="ascii").split()
    except (OSError, UnicodeDecodeError):
        return None
    if not path.is_file() or len(recorded) != 2 or recorded[1] != path.name:
        return None
    digest = file_sha256(path)
    return digest if digest == recorded[0] else None


def write_shard(plan: ShardPlan, k: int, records: List[Mapping[str, Any]]) -> Dict[str, Any]:
    """Write shard ``k`` of ``plan`` from ``records`` (each ``CollectionWriter.add_record``'s
    keyword arguments), unless it is finished already (``dataset#D7``).  Returns its name,
    record count, digest, whether it was written, and its declaration (stored JSON)."""
    final = plan.path(k)
    shutil.rmtree(_partial(final), ignore_errors=True)  # what a killed build left (D6: never under a final name)
    digest = shard_finished(final)
    written = digest is None
    if digest is None:
        digest, summary = _build(plan, k, records, final)
    else:
        summary = read_summary(final)
    if summary.n_records != len(records):
        raise StoreError(f"the finished shard holds {summary.n_records} records, this build gives it {len(records)}: "
                         "the directory holds another build's shards", store=str(final), rule=D7)
    return {"name": final.name, "n_records": summary.n_records, "sha256": digest, "written": written,
            "schema": summary.sequence_schema, "index_schema": summary.index_columns}


def _build(plan: ShardPlan, k: int, records: List[Mapping[str, Any]], final: Path) -> Tuple[str, CollectionSummary]:
    ops = FileOps()
    directory = str(final.parent)
    partial = _partial(final)
    ops.makedirs(str(partial))
    building = partial / final.name
    options: Dict[str, Any] = {}
    if plan.commit_every is not None:
        options["commit_every"] = plan.commit_every
    try:
        with CollectionWriter(building, units=plan.units, forcefield=plan.forcefield, meta=plan.meta,
                              schema=None if plan.schema is None else SequenceSchema.from_json(plan.schema),
                              index_schema=plan.index_schema, durable=plan.durable, **options) as writer:
            for record in records:
                writer.add_record(**_arguments(record, k, writer.n_records))
    except MolrecError as exc:  # named by the shard's final path (the hidden one is the build's own)
        exc.store = str(final)
        raise
    summary = read_summary(building)  # (here: LMDB's reader-lock file goes with the hidden directory)
    digest = file_sha256(building)
    sidecar = partial / f"{final.name}.sha256"
    sidecar.write_text(checksum_line(digest, final.name), encoding="ascii")
    if plan.durable:
        ops.fsync_file(str(sidecar))
    ops.replace(str(sidecar), f"{final}.sha256")
    ops.replace(str(building), str(final))  # last: a shard under its final name is finished (D6)
    if plan.durable:
        ops.fsync_dir(directory)
    shutil.rmtree(partial, ignore_errors=True)
    return digest, summary


def _partial(final: Path) -> Path:
    """The hidden directory a shard is built in (``dataset#D6``)."""
    return final.parent / f".{final.name}.partial"


def _arguments(record: Any, k: int, number: int) -> Dict[str, Any]:
    if not isinstance(record, Mapping) or not set(record) <= _RECORD_KEYS:
        raise InvalidValueError(f"shard {k}, record {number}: a record to write is a mapping of "
                                f"CollectionWriter.add_record's arguments ({', '.join(sorted(_RECORD_KEYS))}), "
                                f"not {type(record).__name__}" + (
                                    f" with keys {sorted(map(str, record))}" if isinstance(record, Mapping) else ""),
                                rule=D5)
    return dict(record)


def shards_of(items: Iterable[Any], records_per_shard: int) -> Iterator[Tuple[int, List[Any]]]:
    """``(k, records of shard k)`` in input order (``dataset#D5``)."""
    iterator = iter(items)
    k = 0
    while True:
        chunk = list(islice(iterator, records_per_shard))
        if not chunk:
            return
        yield k, chunk
        k += 1


def write_dataset(items: Any, directory: Any, *, units: Mapping[str, str], records_per_shard: int,
                  client: Any = None, schema: Optional[SequenceSchema] = None,
                  index_schema: Optional[Mapping[str, Any]] = None, forcefield: Optional[ForceFieldSection] = None,
                  meta: Optional[Mapping[str, Any]] = None, prefix: str = "part", durable: bool = True,
                  commit_every: Optional[int] = None) -> List[Path]:
    """Write ``items`` (an iterable, or a Dask bag, of ``CollectionWriter.add_record``'s
    keyword arguments, one mapping per record) as shards of ``records_per_shard`` records in
    ``directory`` (made when missing); the shard paths in order.  ``client``: a
    ``dask.distributed`` client whose workers write the shards (the directory is one every
    worker sees).  Deterministic, crash-safe, resumable: the module docstring."""
    if type(records_per_shard) is not int or records_per_shard < 1:
        raise InvalidValueError(f"records_per_shard must be a positive integer, got {records_per_shard!r}", rule=D5)
    if not isinstance(prefix, str) or not prefix or "/" in prefix or prefix.startswith("."):
        raise InvalidValueError(f"prefix {prefix!r} must be a non-empty file name part (no '/', not hidden)", rule=D5)
    if schema is not None and not isinstance(schema, SequenceSchema):
        raise InvalidValueError(f"schema must be a SequenceSchema or None, got {type(schema).__name__}", rule=D5)
    target = Path(os.fspath(directory))
    FileOps().makedirs(str(target))
    plan = ShardPlan(str(target), dict(units), prefix, None if schema is None else schema.to_json(),
                     None if index_schema is None else dict(index_schema), forcefield,
                     None if meta is None else dict(meta), durable, commit_every)
    if client is not None or _is_bag(items):
        from molrec_raw.integrations.dask_build import build_on_dask  # (the dask extra)
        names = build_on_dask(items, plan, records_per_shard, client)
    else:
        names = _build_here(shards_of(items, records_per_shard), plan, write_shard)
    return [target / name for name in names]


def _build_here(shards: Iterable[Tuple[int, List[Any]]], plan: ShardPlan,
                write: Callable[[ShardPlan, int, List[Any]], Dict[str, Any]]) -> List[str]:
    names: List[str] = []
    for k, records in shards:
        done = write(plan, k, records)
        if k == 0:
            plan = declared(plan, done)
        names.append(done["name"])
    return names


def declared(plan: ShardPlan, first: Dict[str, Any]) -> ShardPlan:
    """``plan`` with shard 0's declaration (what :func:`write_shard` returned for it) where the
    caller gave none: every later shard is written under it (``dataset#D1``)."""
    return replace(plan, schema=first["schema"] if plan.schema is None else plan.schema,
                   index_schema=first["index_schema"] if plan.index_schema is None else plan.index_schema)


def _is_bag(items: Any) -> bool:
    return type(items).__module__.startswith("dask.bag")
