"""Damage no repair can undo: stored chunks that do not decode (checksums that fail, torn or
garbled bytes), found array by array, chunk by chunk (spec-notes/safety.md, "Truthful tools").

``repair`` reports them (it restores what a crash left, never bytes that rotted or were
overwritten), ``validate`` lists every damaged chunk of a section whose reading failed, so one
damaged node never hides another.  Each array is read in its storage units (a shard, or a
chunk); a unit that fails is read again inner chunk by inner chunk, so the report names every
damaged chunk, not only the first.  Only what readers read is checked: the committed rows
(``limits``: array path -> rows, e.g. a trajectory reader's logical lengths, the catalog
counts of metrics); an uncommitted tail is not damage.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Dict, Iterator, List, Mapping, Optional, Tuple

from molrec_raw.errors import MolrecError
from molrec_raw.record.metrics import dense
from molrec_raw.zarr import Array, Group

__all__ = ["Damage", "damaged_chunks", "record_damage", "arrays_under"]


@dataclass(frozen=True)
class Damage:
    """One stored value that does not decode: the array (``node``), the store ``key`` of the
    chunk or shard, what is wrong, and the rule it breaks."""

    node: str
    key: str
    message: str
    rule: Optional[str] = None

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


def arrays_under(group: Group) -> Iterator[Array]:
    """Every array below ``group``, depth first in name order."""
    for _, member in group.members():
        if isinstance(member, Array):
            yield member
        else:
            yield from arrays_under(member)


def _cut(region: Tuple[slice, ...], step: Tuple[int, ...]) -> Iterator[Tuple[slice, ...]]:
    """``region`` cut into pieces of ``step`` (aligned on multiples of it)."""
    grid = [range(r.start, r.stop, s) for r, s in zip(region, step)]
    for corner in itertools.product(*grid):
        yield tuple(slice(c, min(c + s, r.stop)) for c, s, r in zip(corner, step, region))


def _fault(array: Array, exc: MolrecError, where: Tuple[slice, ...]) -> Damage:
    corner = tuple(s.start // c for s, c in zip(where, array.chunks))
    key = exc.key or (array.chunk_key(corner) if where else array.chunk_key(()))
    return Damage(array.path, key, exc.message, exc.rule)


def damaged_chunks(array: Array, rows: Optional[int] = None) -> List[Damage]:
    """Every stored chunk of ``array`` (its first ``rows`` rows; default all) that does not
    decode.  A shard is read whole, and again chunk by chunk only when it fails."""
    if array.ndim == 0:
        try:
            array[()]
        except MolrecError as exc:
            return [_fault(array, exc, ())]
        return []
    limit = array.shape[0] if rows is None else min(rows, array.shape[0])
    unit = array.shards or array.chunks
    found: List[Damage] = []
    whole = (slice(0, limit),) + tuple(slice(0, n) for n in array.shape[1:])
    for region in _cut(whole, unit):
        try:
            array[region]
            continue
        except MolrecError as exc:
            if unit == array.chunks:
                found.append(_fault(array, exc, region))
                continue
        for inner in _cut(region, array.chunks):
            try:
                array[inner]
            except MolrecError as exc:
                damage = _fault(array, exc, inner)
                chunk = [i.start // c for i, c in zip(inner, array.chunks)]
                found.append(Damage(damage.node, damage.key, f"{damage.message} (inner chunk {chunk})", damage.rule))
    return found


def record_damage(root: Group, trajectory: Optional[Tuple[Group, Mapping[str, int]]] = None) -> List[Damage]:
    """Every damaged chunk of the record ``root`` that readers read: each section's arrays
    whole, the metrics arrays up to their catalog counts, and the trajectory through
    ``trajectory`` = (the root a reader reads it from, its logical rows per array path) —
    only the arrays that reader reads.  Sections are in name order."""
    found: List[Damage] = []
    for name, member in root.members():
        if not isinstance(member, Group) or name == "trajectory":
            continue
        limits: Dict[str, int] = {}
        if name == "metrics":
            limits = _metrics_limits(member)
        for array in arrays_under(member):
            found += damaged_chunks(array, limits.get(array.path))
    if trajectory is not None:
        view, rows = trajectory
        for path, count in sorted(rows.items()):
            node = _array_at(view, path)
            if node is not None:
                found += damaged_chunks(node, count)
    return found


def _array_at(root: Group, path: str) -> Optional[Array]:
    try:
        node = root[path]
    except (KeyError, MolrecError):
        return None
    return node if isinstance(node, Array) else None


def _metrics_limits(group: Group) -> Dict[str, int]:
    """The committed points of each dense metrics array (its catalog count); {} when the
    catalog cannot say (then the arrays are scanned whole)."""
    try:
        catalog = dense.read_catalog(group.attrs.asdict(), node=group.name)
        held = dense.committed(catalog, dense.find_arrays(group, catalog), group.name)
    except MolrecError:
        return {}
    limits: Dict[str, int] = {}
    for count, found in held.values():
        if found is not None:
            for array in found.all():
                limits[array.path] = count
    return limits
