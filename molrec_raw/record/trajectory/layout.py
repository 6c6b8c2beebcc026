"""The committed layout of a trajectory as one root holds it (trajectory §3–§11): what a
reader reads, found without decoding any frame.

:func:`load_layout` reads the commit marker (``nstep``, the pin, the progressions), finds
each block's committed updates (regular markers or a CSR index), the cell's changes and
the per-step meta arrays, and checks them against the pin (R2–R15); every array it will
read gets its committed rows (``logical``: trajectory §11, longer arrays are an
uncommitted tail).  ``step`` and ``time`` stored as arrays are checked for length here
and decoded on first use (:class:`Series`).  Nothing is written and nothing is cached:
recovery (``recovery.py``) chooses which root to load and proves it; the read engine
(``engine.py``) reads frames from it.
"""
from __future__ import annotations

import copy
from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np

from molrec_raw.errors import CorruptDataError, InvalidMetadataError, MolrecError

from molrec_raw.record import typed_json
from molrec_raw.record.columns import ZARR_TO_COLUMN
from molrec_raw.record.trajectory.blocks import BlockReader, check_column_array, find_updates
from molrec_raw.record.trajectory.cell import BoxReader
from molrec_raw.record.trajectory.common import I64, TRAJ, spec_error
from molrec_raw.record.trajectory.meta import META_STORAGE, open_meta_array
from molrec_raw.record.trajectory.progressions import check_progression, expand_progression
from molrec_raw.record.trajectory.references import refuse_aligned_system_names, section_rows
from molrec_raw.record.trajectory.schema import RESERVED_BLOCK_NAMES, SequenceSchema
from molrec_raw.record.trajectory.storage import read_nstep
from molrec_raw.zarr import Array, Group

__all__ = ["TrajectoryLayout", "Series", "load_layout", "derive_schema"]


class Series:
    """``step`` or ``time`` of ``n`` committed frames (§3): a progression ``(start, stride)``,
    a stored array (decoded once, on first use), or for ``step`` without either the ordinals."""

    def __init__(self, n: int, is_float: bool, progression: Optional[Tuple[Any, Any]] = None,
                 array: Optional[Array] = None) -> None:
        self.n, self.is_float, self.progression, self.array = n, is_float, progression, array
        self._values: Optional[np.ndarray] = None

    def values(self) -> np.ndarray:
        """Every value as an array (i64 or f64), exact: a progression expands as
        ``start + i * stride`` (``start`` itself at 0); integers beyond i64 stay Python ints."""
        if self._values is None:
            n, dtype = self.n, (np.float64 if self.is_float else np.int64)
            if self.array is not None:
                found = np.asarray(self.array[0:n]) if n else np.zeros(0, dtype)
            elif self.progression is None:
                found = np.arange(n, dtype=np.int64)
            else:
                start, stride = self.progression
                if self.is_float:
                    found = start + np.arange(n, dtype=np.float64) * stride
                    if n:
                        found[0] = start
                elif n and not (I64[0] <= start <= I64[1] and I64[0] <= start + (n - 1) * stride <= I64[1]):
                    found = np.asarray(expand_progression(self.progression, n, False), dtype=object)
                else:
                    found = start + np.arange(n, dtype=np.int64) * np.int64(stride)
            self._values = found
        return self._values

    def ends(self) -> Optional[List[Any]]:
        """``[first, last]`` (None without frames), without expanding a progression."""
        if not self.n:
            return None
        if self.progression is not None and self._values is None:
            start, stride = self.progression
            last = start + (float(self.n - 1) if self.is_float else self.n - 1) * stride
            return [start, start if self.n == 1 else last]
        values = self.values()
        return [values[0].item() if hasattr(values[0], "item") else values[0],
                values[-1].item() if hasattr(values[-1], "item") else values[-1]]

    def as_list(self) -> List[Any]:
        """Every value as Python numbers (the reader's ``step`` / ``time``)."""
        if self.progression is not None:
            return expand_progression(self.progression, self.n, self.is_float)
        return list(self.values().tolist())


class TrajectoryLayout:
    """What :func:`load_layout` found under one root (see the module docstring).

    ``tgroup``/``marker``: the trajectory group the marker was read from and its attributes
    (None without a trajectory); ``blocks``: block name -> :class:`BlockReader` of the
    declared blocks with a group; ``meta``: key -> (tag, array or None); ``logical``: array
    path -> committed rows of every array read, ``arrays`` the arrays opened for them."""

    def __init__(self, root: Group) -> None:
        self.root = root
        self.tgroup: Optional[Group] = None
        self.marker: Optional[Dict[str, Any]] = None
        self.nstep = 0
        self.schema = SequenceSchema()
        self.blocks: Dict[str, BlockReader] = {}
        self.box = BoxReader.empty()
        self.meta: Dict[str, Tuple[str, Optional[Array]]] = {}
        self.steps = Series(0, False)
        self.times: Optional[Series] = None
        self.logical: Dict[str, int] = {}
        self.arrays: Dict[str, Array] = {}
        self.section_rows: Any = lambda section, block: None
        self.needs_check = False
        # damage that costs only the reads needing it (spec-notes/safety.md): block -> why the
        # block cannot be read at all; array path -> why its shard index pages fail
        self.damaged: Dict[str, MolrecError] = {}
        self.damaged_arrays: Dict[str, MolrecError] = {}
        # array path -> why some of its inner chunks cannot be read (a shard cut short): the
        # reads of those chunks refuse, every other read of the array reads
        self.damaged_parts: Dict[str, MolrecError] = {}

    @property
    def has_damage(self) -> bool:
        """A block, a column or an array was found damaged when the layout was loaded."""
        return bool(self.damaged) or bool(self.damaged_arrays) or any(b.damaged for b in self.blocks.values())

    def refuse_damaged_arrays(self, arrays: Iterable[Array]) -> None:
        """Raise the damage of the first of ``arrays`` whose shard index pages failed (a copy)."""
        for arr in arrays:
            found = self.damaged_arrays.get(arr.path)
            if found is not None:
                raise copy.copy(found)

    def damage(self) -> Dict[str, MolrecError]:
        """Node path -> the damage found when the layout was loaded: whole blocks, columns,
        arrays whose shard index pages fail, arrays some of whose inner chunks are lost."""
        found: Dict[str, MolrecError] = {f"{TRAJ}/{name}": exc for name, exc in self.damaged.items()}
        for name, b in self.blocks.items():
            found.update((f"{TRAJ}/{name}/{c}", exc) for c, exc in b.damaged.items())
        found.update(self.damaged_parts)
        found.update(self.damaged_arrays)
        return dict(sorted(found.items()))

    def refuse_damaged(self, block: str, columns: Optional[Iterable[str]] = None) -> None:
        """Raise the damage found in ``block`` (its group, or one of ``columns``; None: any
        column) — a copy of the error, each read its own."""
        found = self.damaged.get(block)
        b = self.blocks.get(block)
        if found is None and b is not None and b.damaged:
            names = b.damaged if columns is None else [c for c in columns if c in b.damaged]
            found = b.damaged[next(iter(names))] if names else None
        if found is not None:
            raise copy.copy(found)
        if b is not None and self.damaged_arrays:
            names = list(b.columns) if columns is None else list(columns)
            self.refuse_damaged_arrays([a for c in names for a in (b.columns.get(c), b.masks.get(c)) if a is not None])

    def read_arrays(self) -> Dict[str, Array]:
        """Path -> array of every array frames are read from (columns, masks, meta)."""
        out = {arr.path: arr for b in self.blocks.values() for arr in (*b.columns.values(), *b.masks.values())}
        out.update((arr.path, arr) for _, arr in self.meta.values() if arr is not None)
        return out


def load_layout(root: Group) -> TrajectoryLayout:
    """The committed layout under ``root`` (see the module docstring): R2–R15 refusals as
    ``SpecViolationError``; a root without a trajectory has 0 frames."""
    layout = TrajectoryLayout(root)
    tgroup = root.get(TRAJ)
    if not isinstance(tgroup, Group):
        return layout
    layout.tgroup = tgroup
    if tgroup.get("frames") is not None:
        raise spec_error("R2", "legacy layout (trajectory/frames/, written by molrs <= 0.13); re-write it with 0.13")
    attrs = dict(tgroup.attrs)
    layout.marker = attrs
    nstep = read_nstep(tgroup, attrs)
    schema = SequenceSchema.from_json(attrs["sequence_schema"]) if "sequence_schema" in attrs else derive_schema(tgroup)
    layout.schema, layout.nstep = schema, nstep
    layout.needs_check = any(schema.targets(b) or schema.aligned_with(b) for b in schema.block_names())
    steps = _series(tgroup, attrs, "step", False, nstep)
    layout.steps = steps if steps is not None else Series(nstep, False)
    layout.times = _series(tgroup, attrs, "time", True, nstep)
    for name in ("step", "time"):
        arr = tgroup.get(name)
        if isinstance(arr, Array) and f"{name}_progression" not in attrs:
            layout.logical[arr.path], layout.arrays[arr.path] = nstep, arr
    for name in schema.block_names():
        try:
            group = tgroup.get(name)
            if isinstance(group, Group):
                layout.blocks[name] = _open_block(layout, name, group, nstep)
        except (CorruptDataError, InvalidMetadataError) as exc:  # its zarr.json or index arrays: damaged bytes
            layout.damaged[name] = exc
    refuse_aligned_system_names(schema, root, "R16")
    layout.section_rows = section_rows(root)
    layout.box = BoxReader(tgroup, nstep)
    layout.logical.update(layout.box.lengths)
    mgroup = tgroup.get("meta")
    for key, tag in schema.meta_keys():
        arr = mgroup.get(key) if isinstance(mgroup, Group) else None
        layout.meta[key] = (tag, open_meta_array(arr, key, tag, nstep))
        if isinstance(arr, Array):
            layout.logical[arr.path], layout.arrays[arr.path] = nstep, arr
    return layout


def _series(tgroup: Group, attrs: Dict[str, Any], name: str, is_float: bool, nstep: int) -> Optional[Series]:
    prog = check_progression(attrs, f"{name}_progression", nstep, is_float)
    if prog is not None:
        return Series(nstep, is_float, progression=prog)
    arr = tgroup.get(name)
    if isinstance(arr, Array):
        if arr.shape[0] < nstep:
            raise spec_error("R6", f"trajectory claims {nstep} committed frames but carries {arr.shape[0]} {name} values")
        return Series(nstep, is_float, array=arr)
    return None


def _open_block(layout: TrajectoryLayout, name: str, group: Group, nstep: int) -> BlockReader:
    spec = layout.schema.block_spec(name)
    b = BlockReader(name, spec)
    committed = _committed_arrays(layout.marker)
    for column, cspec in spec.columns.items():
        try:
            arr = group.get(column)
        except MolrecError as exc:  # a zarr.json that does not parse: this column's reads refuse
            b.damaged[column] = exc
            continue
        if arr is None and f"{name}/{column}" in committed:  # the last commit wrote it: deleted since
            b.damaged[column] = spec_error("R6", f"block {name!r}: the array of column {column!r}, which the last "
                                           "commit holds rows of, is missing", f"/trajectory/{name}/{column}")
        if isinstance(arr, Array):
            check_column_array(arr, name, column, cspec.dtype, cspec.trailing, "R12")
            b.columns[column] = arr
    try:
        validity = group.get("_validity")
    except MolrecError as exc:
        validity = None
        b.damaged.update((c, exc) for c, cs in spec.columns.items() if cs.nullable)
    if isinstance(validity, Group):
        for column in spec.columns:
            try:
                arr = validity.get(column)
            except MolrecError as exc:
                b.damaged[column] = exc
                continue
            if isinstance(arr, Array):
                if arr.metadata.dtype.name != "bool" or arr.ndim != 1:
                    raise spec_error("R14", f"mask of {column!r} in block {name!r} is not bool[rows]",
                                     f"/trajectory/{name}/_validity/{column}")
                b.masks[column] = arr
    b.set_updates(*find_updates(group, name, spec, b.columns, nstep, unknown=b.damaged))
    total = b.total
    if b.count and len(b.columns) < len(spec.columns):
        for c in spec.columns:  # a missing node costs the reads of its column only
            if c not in b.columns and c not in b.damaged:
                b.damaged[c] = spec_error("R6", f"block {name!r} has updates but no array for column {c!r}",
                                          f"/trajectory/{name}/{c}")
    for arr in list(b.columns.values()):
        if arr.shape[0] < total:
            raise spec_error("R6", f"block {name!r}: {arr.basename} has {arr.shape[0]} rows, offsets claim {total}",
                             f"/trajectory/{name}/{arr.basename}")
    for arr in b.masks.values():
        if arr.shape[0] < total:
            raise spec_error("R14", f"block {name!r}: mask {arr.basename} is shorter than its {total} rows",
                             f"/trajectory/{name}/_validity/{arr.basename}")
    for arr in [*b.columns.values(), *b.masks.values()]:
        layout.logical[arr.path], layout.arrays[arr.path] = total, arr
    if b.kind == "indexed":
        layout.logical[f"{group.path}/step_index"] = b.count
        layout.logical[f"{group.path}/offset"] = b.count + 1
    return b


def _committed_arrays(marker: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The arrays (relative to ``trajectory/``) the last commit's manifest holds rows of
    (recovery.py ``molrec_raw_commit``); {} without one."""
    manifest = (marker or {}).get("molrec_raw_commit")
    arrays = manifest.get("arrays") if isinstance(manifest, dict) else None
    return arrays if isinstance(arrays, dict) else {}


def derive_schema(tgroup: Group) -> SequenceSchema:
    """A store without a pin (``trajectory#N3``): blocks = non-reserved child groups,
    columns = their non-reserved arrays (stored dtype and trailing), nullable = a mask."""
    schema = SequenceSchema()
    for name, node in tgroup.members():
        if not isinstance(node, Group) or name in RESERVED_BLOCK_NAMES:
            continue
        schema.declare_block(name)
        validity = node.get("_validity")
        for column, arr in node.members():
            if not isinstance(arr, Array) or column in ("offset", "step_index"):
                continue
            dtype = ZARR_TO_COLUMN.get(arr.metadata.dtype.name)
            if dtype is None:
                raise spec_error("R12", f"column {column!r} of block {name!r} is stored as {arr.metadata.dtype.name}",
                                 f"/trajectory/{name}/{column}")
            schema.declare_column(name, column, dtype, arr.shape[1:])
            if isinstance(validity, Group) and validity.get(column) is not None:
                schema.declare_nullable(name, column)
        shape = node.attrs.get("structural_shape")
        if shape is not None:
            schema.declare_structural_shape(name, shape)
    mgroup = tgroup.get("meta")
    if isinstance(mgroup, Group):
        for key, arr in mgroup.members():
            if isinstance(arr, Array):
                tag = arr.attrs.get("meta_dtype")
                tag = typed_json.LEGACY_TAGS.get(tag, tag) if isinstance(tag, str) else tag
                if tag not in META_STORAGE:
                    raise spec_error("R10", f"meta array {key!r} has no valid meta_dtype ({tag!r})", f"/trajectory/meta/{key}")
                schema.declare_meta(key, tag)
    return schema
