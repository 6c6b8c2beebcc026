"""The closed (dense) form inside ``metrics/``: catalog, series/steps/wall_time arrays.

documents §4.2 (layout), §4.4 (catalog), §4.5 (densify), checklist #9.11, #9.13.

Reading: the catalog is the commit record.  When it carries ``wal`` (the watermark) its
``series`` entries name exactly the densified series and their ``count``; array elements
past ``count`` and arrays without an entry are left-overs of an interrupted densify and
are not read.  Without ``wal`` the arrays are the whole record (a series' length is its
count unless the catalog says otherwise).

Writing: new points are appended (``Array.append``: chunks land before the array's
zarr.json); a WAL event that re-logs a densified step rewrites that one point in place
(the duplicate-step rule), which a replay of the same WAL tail reproduces exactly, so a
crash before the catalog is written changes nothing a reader sees.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np

from molrec_raw.errors import CorruptDataError, SpecViolationError
from molrec_raw.record.metrics.safe_name import decode_safe_name, encode_safe_name
from molrec_raw.record.metrics.series import Series
from molrec_raw.zarr import Array, Group

__all__ = [
    "CHUNK_POINTS", "SHARD_POINTS", "WAL_NAME", "array_name", "Catalog", "DenseArrays", "read_catalog", "find_arrays",
    "read_dense", "create_arrays", "append_points", "replace_points", "catalog_entry", "TailCache",
]

CHUNK_POINTS = 4096  # points per (inner) chunk: what one flush re-encodes at most per array
SHARD_POINTS = 32768  # points per shard (one file): few files to write and fsync per densify
WAL_NAME = "metrics.jsonl"
ARRAY_DIRS = ("series", "steps", "wall_time")
_CRC = {"name": "crc32c"}
_BYTES = {"name": "bytes", "configuration": {"endian": "little"}}
_ZSTD = {"name": "zstd", "configuration": {"level": 1, "checksum": False}}
SERIES_CODECS = [_BYTES, _CRC]  # as the reference writer: bytes → crc32c
STEPS_CODECS = [_BYTES, _ZSTD, _CRC]
WALL_CODECS = [{"name": "vlen-utf8", "configuration": {}}, _ZSTD, _CRC]
_DTYPES = {"series": ("float64", np.float64, SERIES_CODECS), "steps": ("int64", np.int64, STEPS_CODECS),
           "wall_time": ("string", str, WALL_CODECS)}
CATALOG_RULE = "documents#9.13"
ARRAY_RULE = "documents#9.11"


def array_name(key: str) -> str:
    """The array name of series ``key`` on a record: its safe name, which must also be a valid
    Zarr node name.  The safe-name rule escapes only ``.`` and ``..``; a key of three or more
    dots keeps its name, which Zarr forbids (a name made only of periods), so such a key
    cannot be densified and a record writer refuses it before it reaches the WAL."""
    name = encode_safe_name(key)
    if set(name) == {"."}:
        raise SpecViolationError(
            f"series key {key!r}: its safe name {name!r} is made only of periods, which Zarr forbids "
            "as a node name (the safe-name rule escapes only '.' and '..'), so it cannot be densified",
            rule="documents#9.10")
    return name


def _is_count(value: Any) -> bool:
    return type(value) is int and value >= 0


@dataclass
class Catalog:
    """The attributes of ``metrics/``: all of them (unknown keys are kept), the watermark
    ``(lines, bytes)`` or None, and the ``series`` entries by original key."""

    attrs: Dict[str, Any]
    wal: Optional[Tuple[int, int]]
    entries: Dict[str, Dict[str, Any]]


def read_catalog(attrs: Dict[str, Any], node: str = "/metrics") -> Catalog:
    """Parse and check the catalog document (documents#9.13)."""
    wal = attrs.get("wal")
    mark: Optional[Tuple[int, int]] = None
    if wal is not None:
        if not isinstance(wal, dict) or not _is_count(wal.get("lines")) or not _is_count(wal.get("bytes")):
            raise SpecViolationError(f"catalog 'wal' must be {{\"lines\": n, \"bytes\": n}} with non-negative "
                                     f"integers, not {wal!r}", node=node, rule=CATALOG_RULE)
        if (wal["lines"] == 0) != (wal["bytes"] == 0):
            raise SpecViolationError(f"catalog 'wal' {wal!r}: lines and bytes must both be zero or both "
                                     "positive", node=node, rule=CATALOG_RULE)
        mark = (wal["lines"], wal["bytes"])
    series = attrs.get("series", {})
    if series is None:
        series = {}
    if not isinstance(series, dict):
        raise SpecViolationError("catalog 'series' must be an object", node=node, rule=CATALOG_RULE)
    for key, entry in series.items():
        where = f"catalog series {key!r}"
        if not key:
            raise SpecViolationError(f"{where}: empty series key", node=node, rule="documents#9.10")
        if not isinstance(entry, dict):
            raise SpecViolationError(f"{where} must be an object", node=node, rule=CATALOG_RULE)
        if not isinstance(entry.get("type"), str) or not entry["type"]:
            raise SpecViolationError(f"{where}: 'type' must be a non-empty string", node=node, rule=CATALOG_RULE)
        if not _is_count(entry.get("count")):
            raise SpecViolationError(f"{where}: 'count' must be a non-negative integer", node=node, rule=CATALOG_RULE)
        step = entry.get("latest_step")
        if step is not None and type(step) is not int:
            raise SpecViolationError(f"{where}: 'latest_step' must be an integer or null", node=node, rule=CATALOG_RULE)
        stamp = entry.get("latest_timestamp")
        if stamp is not None and not isinstance(stamp, str):
            raise SpecViolationError(f"{where}: 'latest_timestamp' must be a string or null", node=node,
                                     rule=CATALOG_RULE)
    return Catalog(dict(attrs), mark, dict(series))


@dataclass
class DenseArrays:
    """The arrays of one densified series (``steps``/``wall_time`` may be absent)."""

    key: str
    name: str
    series: Array
    steps: Optional[Array]
    wall_time: Optional[Array]

    def all(self) -> List[Array]:
        return [a for a in (self.series, self.steps, self.wall_time) if a is not None]


def find_arrays(group: Group, catalog: Optional[Catalog] = None) -> Dict[str, DenseArrays]:
    """Every dense series under ``series/`` with its ``steps/`` and ``wall_time/`` companions,
    checked (documents#9.10, #9.11): names decode, series float64, steps int64,
    wall_time string, all one-dimensional, no companion without its series — except, under
    a ``catalog`` with a watermark, arrays of a key the catalog does not name: those are
    left-overs of an interrupted densify (not part of the record; a power cut may have left
    their zarr.json empty) and are never opened."""
    found: Dict[str, Dict[str, Array]] = {}
    named = None
    if catalog is not None and catalog.wal is not None:
        named = sorted(encode_safe_name(key) for key in catalog.entries)
        if not named:
            return {}  # nothing committed: nothing to open
    for sub in ARRAY_DIRS:
        node = group.get(sub)
        if node is None:
            continue
        if not isinstance(node, Group):
            raise SpecViolationError(f"metrics/{sub} must be a group", node=f"{group.name}/{sub}", rule=ARRAY_RULE)
        want, _, _ = _DTYPES[sub]
        members = node.arrays() if named is None else [(n, a) for n in named if isinstance(a := node.get(n), Array)]
        for name, array in members:
            where = f"{group.name}/{sub}/{name}"
            try:
                key = decode_safe_name(name)
            except SpecViolationError as exc:
                raise exc.add_context(node=where) from None
            if array.metadata.dtype.name != want:
                what = "a series array" if sub == "series" else f"a {sub} array"
                raise SpecViolationError(
                    f"metrics {sub} {name!r} is {array.metadata.dtype.name}: {what} must be {want}",
                    node=where, rule=ARRAY_RULE)
            if array.ndim != 1:
                raise SpecViolationError(f"metrics {sub} {name!r} has shape {array.shape}: must be one-dimensional",
                                         node=where, rule=ARRAY_RULE)
            found.setdefault(key, {})[sub] = array
    out: Dict[str, DenseArrays] = {}
    for key, arrays in found.items():
        if "series" not in arrays:
            if catalog is not None and catalog.wal is not None and key not in catalog.entries:
                continue  # an interrupted densify's left-over; the next writer replaces it
            sub = next(iter(arrays))
            raise SpecViolationError(f"metrics/{sub}/{encode_safe_name(key)} has no series array beside it",
                                     node=group.name, rule=ARRAY_RULE)
        out[key] = DenseArrays(key, arrays["series"].basename, arrays["series"], arrays.get("steps"),
                               arrays.get("wall_time"))
    return out


def committed(catalog: Catalog, arrays: Dict[str, DenseArrays], node: str) -> Dict[str, Tuple[int, Optional[DenseArrays]]]:
    """Key → (committed point count, arrays) of every series the dense form holds."""
    out: Dict[str, Tuple[int, Optional[DenseArrays]]] = {}
    for key, entry in catalog.entries.items():
        out[key] = (entry["count"], arrays.get(key))
    if catalog.wal is None:  # no watermark: the arrays are the whole record
        for key, held in arrays.items():
            if key not in out:
                lengths = {a.shape[0] for a in held.all()}
                if len(lengths) != 1:
                    raise SpecViolationError(
                        f"series {key!r}: series/steps/wall_time lengths {sorted(lengths)} differ",
                        node=node, rule=ARRAY_RULE)
                out[key] = (lengths.pop(), held)
    for key, (count, found) in out.items():
        if count and found is None:
            raise CorruptDataError(f"catalog series {key!r} has count {count} but no series array",
                                   node=node, rule=CATALOG_RULE)
        if found is not None:
            for array in found.all():
                if array.shape[0] < count:
                    raise CorruptDataError(
                        f"catalog series {key!r} has count {count} but {array.name} holds {array.shape[0]}",
                        node=node, rule=CATALOG_RULE)
    return out


def read_dense(group: Group, catalog: Catalog) -> Dict[str, Series]:
    """The dense series, each cut to its committed count."""
    arrays = find_arrays(group, catalog)
    out: Dict[str, Series] = {}
    for key, (count, found) in committed(catalog, arrays, group.name).items():
        kind = catalog.entries.get(key, {}).get("type", "scalar")
        if found is None:
            out[key] = Series(key, kind, None, np.empty(0, np.float64), np.empty(0, dtype=object))
            continue
        for array in found.all():
            array.threads = 1  # a pool per array costs more than it saves on these sizes
        values = found.series[:count]
        steps = found.steps[:count] if found.steps is not None else None
        walls = _loader(found.wall_time, count) if found.wall_time is not None else None
        out[key] = Series(key, kind, steps, values, walls)
    return out


def _loader(array: Array, count: int) -> Any:
    return lambda: array[:count]


# -- writing --------------------------------------------------------------------------------

def create_arrays(group: Group, key: str, stepped: bool, durable: bool = False) -> DenseArrays:
    """Empty arrays for a new series (replacing left-overs of an interrupted densify);
    ``durable``: the ``series``/``steps``/``wall_time`` groups, when new, are written with
    ``replace_durable`` (a power cut never leaves their zarr.json empty)."""
    name = array_name(key)
    made: Dict[str, Array] = {}
    for sub in ARRAY_DIRS:
        if sub == "steps" and not stepped:
            _delete_node(group, f"{sub}/{name}")  # a left-over steps array of an earlier attempt
            continue
        _, dtype, codecs = _DTYPES[sub]
        parent = group.require_group(sub, durable=durable)
        made[sub] = parent.create_array(name, shape=(0,), dtype=dtype, chunks=(CHUNK_POINTS,),
                                        shards=(SHARD_POINTS,), codecs=codecs, overwrite=True)
    return DenseArrays(key, name, made["series"], made.get("steps"), made["wall_time"])


def _delete_node(group: Group, rel: str) -> None:
    """Remove a node if present: its zarr.json first, so no half-deleted node is ever visible."""
    store = group.store
    path = f"{group.path}/{rel}" if group.path else rel
    meta = f"{path}/zarr.json"
    if store.size(meta) is None:
        return
    keys = list(store.list(f"{path}/"))
    store.delete(meta)
    for key in keys:
        if key != meta:
            store.delete(key)


class TailCache:
    """The points of each array's last, partly filled (inner) chunk, kept in memory by the
    writer so that appending re-encodes that chunk without decoding it again."""

    def __init__(self) -> None:
        self._tails: Dict[str, Tuple[int, np.ndarray]] = {}  # array path -> (first index, points)

    def head(self, array: Array, start: int, count: int) -> np.ndarray:
        """Points ``[start, count)`` of ``array`` (from memory when they are there)."""
        cached = self._tails.get(array.path)
        if cached is not None and cached[0] == start and cached[1].shape[0] == count - start:
            return cached[1]
        if count <= start:
            return np.empty(0, dtype=array.dtype)
        return np.asarray(array[start:count])

    def keep(self, array: Array, start: int, points: np.ndarray) -> None:
        self._tails[array.path] = (start, points)

    def forget(self, arrays: Iterable[Array]) -> None:
        for array in arrays:
            self._tails.pop(array.path, None)


def append_points(found: DenseArrays, count: int, points: Series, cache: TailCache,
                  durable: bool = False) -> List[str]:
    """Write ``points`` after the first ``count`` (uncommitted left-overs past ``count`` are
    overwritten); return the store keys written.  ``durable``: every replaced file's new
    bytes are durable before its name moves (``Store.replace_durable``), so a power cut
    leaves the old shard (with every densified point) or the new one.

    Each array: the chunks from the one holding point ``count`` on are landed whole (the
    selection covers them, so nothing is decoded), then the new shape is published
    (root-layout invariant 7: data precede metadata)."""
    touched: List[str] = []
    total = count + len(points)
    columns = [(found.series, points.values), (found.steps, points.steps), (found.wall_time, points.wall_time)]
    for array, data in columns:
        if array is None:
            continue
        inner = array.chunks[0]
        start = count - count % inner
        block = np.concatenate([cache.head(array, start, count), np.asarray(data, dtype=array.dtype)])
        touched += array.land(slice(start, total), block, shape=(total,), durable=durable)
        touched.append(array.publish((total,), durable=durable))
        rest = total - total % inner
        cache.keep(array, rest, block[rest - start:])
    return touched


def replace_points(found: DenseArrays, at: np.ndarray, points: Series, cache: TailCache,
                   durable: bool = False) -> List[str]:
    """Rewrite the points at indices ``at`` with ``points`` (a re-logged step: later wins;
    ``durable`` as in :func:`append_points`)."""
    if at.shape[0] == 0:
        return []
    lo, hi = int(at.min()), int(at.max()) + 1
    touched: List[str] = []
    for array, data in ((found.series, points.values), (found.wall_time, points.wall_time)):
        if array is None:
            continue
        block = array[lo:hi]
        block[at - lo] = data
        touched += array.land(slice(lo, hi), block, durable=durable)
    cache.forget(found.all())
    return touched


def catalog_entry(old: Optional[Dict[str, Any]], kind: str, count: int, latest_step: Optional[int],
                  latest_timestamp: Optional[str]) -> Dict[str, Any]:
    """A catalog ``series`` entry: the four named keys (null when none), producer keys kept."""
    entry = dict(old or {})
    entry.update({"type": kind, "count": count, "latest_step": latest_step, "latest_timestamp": latest_timestamp})
    return entry
