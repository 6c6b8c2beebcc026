"""Snapshots: the durable copy of what a writer changes in place (recovery after a power cut).

A writer that grows positional shards in place (their index page rewritten at offset 0)
and publishes ``zarr.json`` files by rename without an fsync (cheap commits) can lose, in a
power cut, exactly those two kinds of bytes: an index page may tear, a ``zarr.json`` may
be empty or stale.  Everything else it writes is appended past the old end of a shard, so
the bytes an earlier durable point relied on are never touched.  A :class:`Snapshot`
taken at a durable point holds copies of those two kinds of bytes:

- the ``zarr.json`` of every node of a subtree, and
- for each array, the size and the index page of the shard that holds its last rows —
  the one shard later landings rewrite in place.

:class:`SnapshotView` is a read-only store that shows the base store as it was at the
snapshot (its ``zarr.json`` files, nodes created later hidden, each tail shard cut to its
size and served with its saved page) — what a reader opens instead of a damaged live
state, without writing.  :func:`restore_plan` lists the changes that put the snapshot's
state back in place (repair).  Serialised form: a magic line, a crc32c, then one zstd
frame of a JSON directory and the saved bytes; deterministic for equal content.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Set, Tuple

import orjson
import zstandard

from molrec_raw.errors import CorruptDataError, MolrecError, ResourceLimitError, StoreError
from molrec_raw.zarr.array import Array
from molrec_raw.zarr.codecs.crc32c_codec import crc32c_of
from molrec_raw.zarr.codecs.zstd_codec import ZstdCodec
from molrec_raw.zarr.metadata import ArrayMetadata, parse_metadata
from molrec_raw.zarr.store import Store, _slice_range, _validate_prefix, list_dir_of_keys

__all__ = ["Snapshot", "capture", "SnapshotView", "Action", "restore_plan", "apply_plan"]

_MAGIC = b"MOLREC-RAW SNAPSHOT 1\n"
_RULE = "zarr-v3-subset#7"
# A snapshot's decompressed size, at most: the zarr.json files and tail index pages of one
# subtree, a few KiB per array (a 500-array trajectory: about 3 MiB), and of that the JSON
# directory line (about 50 bytes per file).  A reader holds the body and a copy of the saved
# bytes; parsed JSON costs ~20x its size in Python objects, hence the directory's own bound:
# what a hostile checkpoint can make a reader allocate stays near 2 x 16 + 20 MiB.
_MAX_BYTES = 16 << 20
_MAX_DIRECTORY_BYTES = 1 << 20


@dataclass(frozen=True)
class Snapshot:
    """``metadata``: zarr.json key -> bytes; ``shards``: shard key -> (size, index page)."""

    metadata: Dict[str, bytes]
    shards: Dict[str, Tuple[int, bytes]] = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        keys = sorted(self.metadata)
        shard_keys = sorted(self.shards)
        directory = {"metadata": [[k, len(self.metadata[k])] for k in keys],
                     "shards": [[k, self.shards[k][0], len(self.shards[k][1])] for k in shard_keys]}
        body = b"".join([orjson.dumps(directory), b"\n", *(self.metadata[k] for k in keys),
                         *(self.shards[k][1] for k in shard_keys)])
        if len(body) > _MAX_BYTES or body.index(b"\n") > _MAX_DIRECTORY_BYTES:
            raise ResourceLimitError(f"a snapshot of {len(keys)} nodes and {len(shard_keys)} shards takes "
                             f"{len(body)} bytes, more than a reader accepts ({_MAX_BYTES} bytes, "
                             f"{_MAX_DIRECTORY_BYTES} of them the directory)", rule=_RULE)
        packed = zstandard.ZstdCompressor(level=3, write_content_size=True).compress(body)
        return _MAGIC + crc32c_of(packed).to_bytes(4, "little") + packed

    @classmethod
    def from_bytes(cls, raw: bytes, where: str = "") -> "Snapshot":
        def bad(why: str) -> CorruptDataError:
            return CorruptDataError(f"unreadable snapshot: {why}", key=where or None, rule=_RULE)
        if not raw.startswith(_MAGIC) or len(raw) < len(_MAGIC) + 4:
            raise bad("no snapshot header")
        packed = raw[len(_MAGIC) + 4:]
        if crc32c_of(packed) != int.from_bytes(raw[len(_MAGIC):len(_MAGIC) + 4], "little"):
            raise bad("checksum mismatch")
        try:  # the zstd codec's bounded reader: a declared size is checked before it is allocated
            body = bytes(ZstdCodec(3, False).decode(packed, None, _MAX_BYTES))
        except CorruptDataError as exc:
            raise bad(exc.message) from None
        try:
            cut = body.find(b"\n", 0, _MAX_DIRECTORY_BYTES + 1)
            if cut < 0 and len(body) > _MAX_DIRECTORY_BYTES:
                raise bad(f"its directory is longer than {_MAX_DIRECTORY_BYTES} bytes")
            directory = orjson.loads(body[:cut] if cut >= 0 else body)
            data = memoryview(body)[cut + 1:] if cut >= 0 else memoryview(b"")  # no copy of the saved bytes
            metadata: Dict[str, bytes] = {}
            shards: Dict[str, Tuple[int, bytes]] = {}
            pos = 0
            for key, length in directory["metadata"]:
                metadata[str(key)] = bytes(data[pos:pos + int(length)])
                pos += int(length)
            for key, size, length in directory["shards"]:
                shards[str(key)] = (int(size), bytes(data[pos:pos + int(length)]))
                pos += int(length)
        except (zstandard.ZstdError, orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise bad(str(exc)) from None
        if pos != len(data):
            raise bad("length mismatch")
        return cls(metadata, shards)

    def nodes(self) -> List[str]:
        """Paths of the nodes the snapshot holds ('' is the store root)."""
        return sorted(k[:-len("/zarr.json")] if k != "zarr.json" else "" for k in self.metadata)


def _tail_pages(store: Store, array: Array, length: int) -> Iterator[Tuple[str, int, bytes]]:
    """(key, size, page) of each stored shard holding row ``length - 1`` of a positional array."""
    sharding = array.pipeline.sharding
    if sharding is None or sharding.index_location != "start" or array.ndim == 0 or length <= 0:
        return
    k = (length - 1) // array.metadata.chunk_shape[0]
    start, size = sharding.index_range()
    for coords in itertools.product([k], *(range(g) for g in array.metadata.grid_shape[1:])):
        key = array.chunk_key(coords)
        total = store.size(key)
        if total is not None:
            page = store.get_range(key, start, size) or b""
            yield key, total, page[:total]


def capture(store: Store, nodes: Iterable[str], lengths: Dict[str, int]) -> Snapshot:
    """Snapshot the ``zarr.json`` of every node in ``nodes`` (paths) and, for every array
    path in ``lengths``, the tail shard holding its first ``lengths[path]`` rows."""
    metadata: Dict[str, bytes] = {}
    shards: Dict[str, Tuple[int, bytes]] = {}
    for path in sorted(set(nodes) | set(lengths)):
        key = f"{path}/zarr.json" if path else "zarr.json"
        raw = store.get(key)
        if raw is None:
            raise StoreError("cannot snapshot a node without zarr.json", store=store.describe(), key=key)
        metadata[key] = raw
        if path in lengths:
            meta = parse_metadata(raw)
            if isinstance(meta, ArrayMetadata):
                for shard, size, page in _tail_pages(store, Array(store, path, meta), lengths[path]):
                    shards[shard] = (size, page)
    return Snapshot(metadata, shards)


class SnapshotView(Store):
    """The base store as it stood at ``snapshot`` under ``prefix`` (read-only): zarr.json
    files from the snapshot (nodes it does not hold are absent), tail shards cut to their
    saved size and served with their saved index page; everything else from the base."""

    read_only = True

    def __init__(self, base: Store, snapshot: Snapshot, prefix: str) -> None:
        _validate_prefix(prefix)
        self.base, self.snapshot, self.prefix = base, snapshot, prefix

    def describe(self) -> str:
        return self.base.describe()

    def _hidden(self, key: str) -> bool:
        return key.startswith(self.prefix) and key.rsplit("/", 1)[-1] == "zarr.json" \
            and key not in self.snapshot.metadata

    def get(self, key: str) -> Optional[bytes]:
        return self.get_range(key, 0, None)

    def get_range(self, key: str, start: int, length: Optional[int] = None) -> Optional[bytes]:
        saved = self.snapshot.metadata.get(key)
        if saved is not None:
            lo, hi = _slice_range(len(saved), start, length)
            return saved[lo:hi]
        if self._hidden(key):
            return None
        shard = self.snapshot.shards.get(key)
        if shard is None:
            return self.base.get(key) if start == 0 and length is None else self.base.get_range(key, start, length)
        size, page = shard
        lo, hi = _slice_range(size, start, length)
        data = bytearray(self.base.get_range(key, lo, hi - lo) or b"")
        if lo < len(page):  # the saved page over whatever the live page holds now
            overlap = page[lo:min(hi, len(page))]
            data[0:len(overlap)] = overlap
        return bytes(data)

    def size(self, key: str) -> Optional[int]:
        saved = self.snapshot.metadata.get(key)
        if saved is not None:
            return len(saved)
        if self._hidden(key):
            return None
        shard = self.snapshot.shards.get(key)
        return shard[0] if shard is not None else self.base.size(key)

    def list(self, prefix: str = "") -> Iterator[str]:
        keys = {k for k in self.base.list(prefix) if not self._hidden(k)}
        keys.update(k for k in self.snapshot.metadata if k.startswith(prefix))
        return iter(sorted(keys))

    def list_dir(self, prefix: str = "") -> Tuple[List[str], List[str]]:
        names, dirs = self.base.list_dir(prefix)
        extra_names, extra_dirs = list_dir_of_keys([k for k in self.snapshot.metadata if k.startswith(prefix)], prefix)
        names = sorted((set(n for n in names if not self._hidden(prefix + n)) | set(extra_names)))
        return names, sorted(set(dirs) | set(extra_dirs))

    def close(self) -> None:
        self.base.close()


@dataclass(frozen=True)
class Action:
    """One change of a restore: ``write`` a zarr.json, ``truncate`` a shard, rewrite its
    index ``page``, ``delete`` a value; ``why`` says it for people."""

    verb: str
    key: str
    why: str
    data: bytes = b""
    size: int = 0


def restore_plan(store: Store, snapshot: Snapshot, prefix: str, keep: Iterable[str] = ()) -> List[Action]:
    """The changes that make the values under ``prefix`` what ``snapshot`` describes: its
    zarr.json files, each tail shard at its saved size with its saved page, and no value
    the snapshot's nodes do not own (later nodes, chunks past an array's shape).  ``keep``:
    keys left alone.  Deletions of zarr.json come first (a node disappears before its
    chunks), then the other deletions, the shards, and the zarr.json writes."""
    _validate_prefix(prefix)
    kept: Set[str] = set(keep)
    arrays: Dict[str, Array] = {}
    groups: Set[str] = set()
    for key, raw in snapshot.metadata.items():
        path = key[:-len("/zarr.json")] if key != "zarr.json" else ""
        try:
            meta = parse_metadata(raw)
        except MolrecError as exc:
            raise exc.add_context(store=store.describe(), key=key) from None
        if isinstance(meta, ArrayMetadata):
            arrays[path] = Array(store, path, meta)
        else:
            groups.add(path)
    owned: Set[str] = set(snapshot.metadata) | kept
    for path, array in arrays.items():
        grid = array.metadata.grid_shape
        for coords, key in array._stored_chunks():
            if all(c < g for c, g in zip(coords, grid)):
                owned.add(key)
    first: List[Action] = []
    rest: List[Action] = []
    for key in store.list(prefix):
        if key in owned:
            continue
        verb_list = first if key.rsplit("/", 1)[-1] == "zarr.json" else rest
        verb_list.append(Action("delete", key, "not part of the state to restore"))
    shards: List[Action] = []
    for key, (size, page) in sorted(snapshot.shards.items()):
        live = store.size(key)
        if live is None:
            raise CorruptDataError("a shard the snapshot relies on is missing", store=store.describe(), key=key,
                                   rule=_RULE)
        if live < size:
            raise CorruptDataError(f"a shard the snapshot relies on holds {live} bytes, fewer than its {size}",
                                   store=store.describe(), key=key, rule=_RULE)
        if live > size:
            shards.append(Action("truncate", key, f"cut back to its {size} durable bytes", size=size))
        if store.get_range(key, 0, len(page)) != page:
            shards.append(Action("page", key, "restore its durable index page", data=page))
    writes = [Action("write", key, "restore its durable metadata", data=raw)
              for key, raw in sorted(snapshot.metadata.items()) if store.get(key) != raw]
    return first + rest + shards + writes


def apply_plan(store: Store, plan: Iterable[Action]) -> None:
    """Carry out a :func:`restore_plan` (not synced: the caller makes it durable)."""
    for action in plan:
        if action.verb == "delete":
            store.delete(action.key)
        elif action.verb == "truncate":
            store.truncate(action.key, action.size)
        elif action.verb == "page":
            store.write_at(action.key, 0, action.data)
        elif action.verb == "write":
            store.replace_atomic(action.key, action.data)
        else:  # pragma: no cover - the verbs above are the only ones planned
            raise ValueError(action.verb)
