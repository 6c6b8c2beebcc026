"""Frame-shaped groups (``frame/``, ``system/``, ``forcefield/``, producer sections).

frame-and-types §3–§10: the group's attributes are the meta document (typed, with
``_meta_types``; plain JSON for the force field); each child group is a block with a
``count``; each block's child arrays are its columns; ``_validity/`` holds masks;
``box/`` is the cell.  Writing checks everything before the first byte lands;
reading collects every violation (the doors refuse on the first, ``validate`` lists all).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from math import prod
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

import numpy as np

from molrec_raw.errors import UnsupportedFeatureError
from molrec_raw.record import typed_json
from molrec_raw.record.columns import COLUMN_DTYPES, EXACT_U64_KEYS, VOCABULARY, ZARR_TO_COLUMN, as_column
from molrec_raw.record.documents import check_finite_json
from molrec_raw.record.layout import column_codecs, fixed_extents
from molrec_raw.record.model import Block, Box, Frame
from molrec_raw.record.precision import check_precision, round_to_precision
from molrec_raw.record.violations import Violation, refuse
from molrec_raw.zarr import Array, Group

__all__ = ["write_frame_group", "read_frame_group", "RowsOf", "PreparedFrame", "prepare_frame", "check_targets",
           "check_block_shape", "check_box", "canonical_violation"]

BOX = "box"
VALIDITY = "_validity"
META_TYPES = "_meta_types"
_BLOCK_KEYS = ("count", "structural_shape", "targets")
_TARGET = re.compile(r"/[^/]+/[^/]+|[^/]+")


def is_target_syntax(target: Any) -> bool:
    """frame-and-types §9: ``<block>`` or ``/<section>/<block>``, never ``/trajectory/…``."""
    return isinstance(target, str) and bool(_TARGET.fullmatch(target)) and not target.startswith("/trajectory/")

# Resolves an absolute target "/<section>/<block>" to its row count; None when the section
# is absent (then not checked, §9), MISSING_BLOCK when the section lacks the block.
RowsOf = Callable[[str, str], Optional[int]]
MISSING_BLOCK = -1


def _v(rule: str, node: str, message: str) -> Violation:
    return Violation(f"frame-and-types#{rule}", node, message)


def concurrently(jobs: List[Callable[[], Any]], threads: int = 2) -> List[Any]:
    """Run independent array reads/writes on a small thread pool (the codecs release the
    GIL); results in job order, the first exception propagates."""
    if len(jobs) < 2:
        return [job() for job in jobs]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(lambda job: job(), jobs))


# -- checks shared by the writer and the reader ---------------------------------------
def check_targets(block: Block, blocks: Dict[str, Block], node: str, rows_of: Optional[RowsOf]) -> Iterable[Violation]:
    """Row references (§9): syntax, u64[N] columns, existing targets, values in range."""
    for column, target in block.targets.items():
        where = f"{node}/{column}"
        if not is_target_syntax(target):
            yield _v("14.13", where, f"target {target!r} is not '<block>' or '/<section>/<block>' (never /trajectory/)")
            continue
        values = block.columns.get(column)
        if values is None or values.dtype != np.uint64 or values.ndim != 1:
            yield _v("14.14", where, f"targets names {column!r}, which is not a u64[N] column of the block")
            continue
        if target.startswith("/"):
            _, section, name = target.split("/")
            limit = rows_of(section, name) if rows_of is not None else None
            if limit is None:
                continue  # the section is absent: not checked (§9)
        else:
            limit = blocks[target].nrows if target in blocks else MISSING_BLOCK
        if limit == MISSING_BLOCK:
            if block.nrows:
                yield _v("14.11", where, f"target block {target!r} is missing")
            continue
        mask = block.masks.get(column)
        live = values if mask is None else values[np.asarray(mask, dtype=bool)]
        if live.size and int(live.max()) >= limit:
            yield _v("14.12", where, f"row reference {int(live.max())} is not below the target's {limit} rows")


def check_block_shape(block: Block, node: str) -> Iterable[Violation]:
    """A block's shape (§5, §7): ``count`` a non-negative integer, every column that many rows,
    ``structural_shape`` multiplying to it, masks bool of one flag per row, for a column."""
    count = block.count
    if count is None or isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
        yield _v("14.5", node, f"count {count!r} is not a non-negative integer (columns disagree?)")
        return
    for column, values in block.columns.items():
        if np.ndim(values) == 0 or np.shape(values)[0] != count:
            yield _v("14.6", f"{node}/{column}", f"row_count_mismatch: block count={count}, column has "
                     f"{np.shape(values)[0] if np.ndim(values) else 'no'} rows")
    shape = block.structural_shape
    if shape is not None and (
        not isinstance(shape, (list, tuple))
        or not all(isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)) and s >= 0 for s in shape)
        or prod(shape) != count
    ):
        yield _v("14.7", node, f"structural_shape {shape!r} is not non-negative integers multiplying to count {count}")
    for column, mask in block.masks.items():
        where = f"{node}/{VALIDITY}/{column}"
        if column not in block.columns:
            yield _v("14.10", where, f"mask for {column!r}, which is not a column of the block")
        mask = np.asarray(mask)
        if mask.dtype != np.bool_:
            yield _v("14.8", where, f"mask stored as {mask.dtype}, not bool")
        elif mask.ndim != 1 or mask.shape[0] != count:
            yield _v("14.9", where, f"mask of shape {mask.shape} for a block of {count} rows")


def check_box(box: Box, node: str) -> Iterable[Violation]:
    """A cell (§10): vectors 3×3, origin and boundary of 3, f64; an undefined cell is not periodic."""
    vectors, origin = np.asarray(box.vectors), np.asarray(box.origin)
    if vectors.shape != (3, 3) or origin.shape != (3,) or len(tuple(box.boundary)) != 3:
        yield _v("14.19", node, "box needs vectors 3x3, origin of 3 and boundary of 3")
    elif vectors.dtype.kind != "f" or vectors.dtype.itemsize != 8 or origin.dtype.itemsize != 8:
        yield _v("14.19", node, "box vectors and origin must be f64")
    if not box.defined and any(bool(b) for b in box.boundary):
        yield _v("14.18", node, "an undefined cell cannot be periodic in any direction")


# -- writing ----------------------------------------------------------------------------
def _prepare_block(name: str, block: Block, node: str) -> Block:
    """Coerce columns (dtype table, canonical keys) and validate names, before any write."""
    if name == BOX:
        refuse([_v("14.31", node, "a block may not be named 'box' (the cell's reserved name)")])
    columns = {}
    for column, values in block.columns.items():
        where = f"{node}/{column}"
        if column == VALIDITY:
            refuse([_v("14.32", where, "a column may not be named '_validity'")])
        columns[column] = as_column(column, values, where)
        if column in block.precision:
            refuse(check_precision(block.precision[column], columns[column].dtype, where, write=True))
    for column in block.precision:
        if column not in block.columns:
            refuse([_v("14.34", f"{node}/{column}", "precision declared for a column the block does not have")])
    clash = [k for k in block.attrs if k in _BLOCK_KEYS]
    if clash:
        refuse([_v("5", node, f"block attributes {clash} are set through the Block fields, not attrs")])
    refuse(check_finite_json(block.attrs, node, "frame-and-types#14.41"))
    masks = {c: np.asarray(m) for c, m in block.masks.items()}
    for column, extra in block.column_attrs.items():
        refuse(check_finite_json(extra, f"{node}/{column}", "frame-and-types#14.41"))
        if "precision" in extra:
            refuse([_v("8", f"{node}/{column}", "declare precision through Block.precision")])
    prepared = Block(columns, masks, dict(block.precision), dict(block.targets),
                     block.structural_shape, dict(block.attrs), block.count,
                     {c: dict(a) for c, a in block.column_attrs.items() if c in columns})
    refuse(check_block_shape(prepared, node))
    return prepared


def _write_array(group: Group, name: str, values: np.ndarray, *, precision: Optional[float] = None,
                 attributes: Optional[Dict[str, Any]] = None) -> None:
    chunks, shards = fixed_extents(values.shape, values.dtype)
    dtype = str if values.dtype.kind in "OUT" else values.dtype
    attrs = dict(attributes or {})
    if precision is not None:
        values = round_to_precision(values, precision)  # only the stored copy is rounded
        attrs["precision"] = float(precision)
    array = group.create_array(name, shape=values.shape, dtype=dtype, chunks=chunks, shards=shards,
                               codecs=column_codecs(values.dtype, precision is not None), attributes=attrs)
    if values.size:
        array[...] = values


@dataclass
class PreparedFrame:
    """A frame checked for writing (every refusal of frame-and-types §14 "Writer refuses"
    already raised): the meta document in its stored JSON form, ``meta_types`` (empty for an
    untyped document or an empty meta) and the blocks with their columns coerced
    (``as_column``).  What any binding of a frame-shaped section stores."""

    meta: Dict[str, Any]
    meta_types: Dict[str, str]
    blocks: Dict[str, Block]


def prepare_frame(frame: Frame, node: str, *, typed_meta: bool = True,
                  rows_of: Optional[RowsOf] = None) -> PreparedFrame:
    """Check ``frame`` as a frame-shaped section at ``node`` (names, dtypes, canonical keys,
    shapes, masks, precision, targets, the cell, typed meta) and coerce its columns; refuses
    on the first violation, before anything is stored."""
    meta_types: Dict[str, str] = {}
    if typed_meta:
        attrs, meta_types = typed_json.encode_document(frame.meta)
    else:
        refuse(check_finite_json(frame.meta, node, "frame-and-types#14.41"))
        attrs = dict(frame.meta)
    blocks = {b: _prepare_block(b, block, f"{node}/{b}") for b, block in frame.blocks.items()}
    for b, block in blocks.items():
        refuse(check_targets(block, blocks, f"{node}/{b}", rows_of))
    if frame.box is not None:
        refuse(check_box(frame.box, f"{node}/{BOX}"))
    return PreparedFrame(attrs, meta_types, blocks)


def write_frame_group(parent: Group, name: str, frame: Frame, *, typed_meta: bool = True,
                      rows_of: Optional[RowsOf] = None) -> Group:
    """Write ``frame`` as the frame-shaped group ``parent/name``; refuses before writing."""
    node = f"{parent.name.rstrip('/')}/{name}"
    prepared = prepare_frame(frame, node, typed_meta=typed_meta, rows_of=rows_of)
    attrs, blocks = dict(prepared.meta), prepared.blocks
    if prepared.meta_types:
        attrs[META_TYPES] = prepared.meta_types
    group = parent.create_group(name, attributes=attrs)
    jobs: List[Callable[[], Any]] = []
    for b, block in blocks.items():
        block_attrs: Dict[str, Any] = {"count": int(block.nrows)}
        if block.structural_shape is not None:
            block_attrs["structural_shape"] = [int(s) for s in block.structural_shape]
        if block.targets:
            block_attrs["targets"] = dict(block.targets)
        block_attrs.update(block.attrs)
        block_group = group.create_group(b, attributes=block_attrs)
        for column, values in block.columns.items():
            jobs.append(partial(_write_array, block_group, column, values, precision=block.precision.get(column),
                                attributes=block.column_attrs.get(column)))
        masks = {c: m for c, m in block.masks.items() if not m.all()}  # all-true ≡ no mask
        if masks:
            validity = block_group.create_group(VALIDITY)
            for column, mask in masks.items():
                jobs.append(partial(_write_array, validity, column, mask))
    concurrently(jobs)
    if frame.box is not None:
        _write_box(group, frame.box)
    return group


def _write_box(group: Group, box: Box) -> None:
    """§10: vectors always; origin when non-zero; boundary when not all true (always for an
    undefined cell, whose vectors are the identity); ``cell_defined`` only when false."""
    box_group = group.create_group(BOX, attributes={} if box.defined else {"cell_defined": False})
    vectors = np.asarray(box.vectors, dtype=np.float64) if box.defined else np.eye(3)
    _write_array(box_group, "vectors", vectors)
    origin = np.asarray(box.origin, dtype=np.float64)
    if origin.any() or np.signbit(origin).any():
        _write_array(box_group, "origin", origin)
    boundary = np.asarray(box.boundary, dtype=bool)
    if not box.defined or not boundary.all():
        _write_array(box_group, "boundary", boundary)


# -- reading ----------------------------------------------------------------------------
def _column_problem(array: Array, node: str) -> Optional[Violation]:
    name = array.metadata.dtype.name
    if name not in ZARR_TO_COLUMN:
        rule = "14.1" if name in ("float16", "float32") else "14.2"
        return _v(rule, node, f"Zarr data type {name} is not a column dtype (never widened)")
    if array.ndim == 0:
        return _v("14.6", node, "a column needs a leading row axis")
    return None


def canonical_violation(name: str, stored: str, shape: Tuple[int, ...], where: str) -> Optional[Violation]:
    """A canonical key stored at another dtype or with trailing axes (frame-and-types#14.3):
    ``stored`` is the MolRec dtype found, ``shape`` the column's shape.  Never converted on read."""
    canonical = VOCABULARY.get(name)
    if name in EXACT_U64_KEYS and stored != "u64":
        return _v("14.3", where, f"column {name!r} is stored as {COLUMN_DTYPES[stored]}; the canonical key is u64")
    if canonical is not None and (canonical != stored or len(shape) != 1):
        return _v("14.3", where, f"column {name!r} is stored as {COLUMN_DTYPES[stored]}{list(shape[1:]) or ''}; "
                  f"the canonical key is {canonical}[N], and a store is not converted on read")
    return None


def _values(member: Union[Group, Array]) -> Optional[np.ndarray]:
    """An array's whole data; None for a group (the caller reports it)."""
    return np.asarray(member[...]) if isinstance(member, Array) else None


def _read_block(group: Group, node: str, out: List[Violation]) -> Block:
    attrs = dict(group.attrs)
    if "count" not in attrs:
        out.append(_v("14.4", node, "block group has no 'count' attribute"))
        count = None
    else:
        count = attrs.pop("count")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            out.append(_v("14.5", node, f"count {count!r} is not a non-negative JSON integer"))
            count = None
    shape = attrs.pop("structural_shape", None)
    targets = attrs.pop("targets", None) or {}
    if not isinstance(targets, dict):
        out.append(_v("14.13", node, "targets must be an object {column: target}"))
        targets = {}
    columns: Dict[str, np.ndarray] = {}
    precision: Dict[str, float] = {}
    column_attrs: Dict[str, Dict[str, Any]] = {}
    masks: Dict[str, np.ndarray] = {}
    readable: List[Tuple[str, Array]] = []
    mask_arrays: List[Tuple[str, Union[Group, Array]]] = []
    for name, member in _members(group, node, out):
        if isinstance(member, Group):
            if name == VALIDITY:
                mask_arrays = list(_members(member, f"{node}/{VALIDITY}", out))
            continue  # other sub-groups inside a block are not columns; nothing to read
        if name == VALIDITY:
            out.append(_v("14.32", f"{node}/{name}", "'_validity' must be the group of masks, not an array"))
            continue
        problem = _column_problem(member, f"{node}/{name}")
        if problem is None:
            readable.append((name, member))
        else:
            out.append(problem)
    data = concurrently([partial(_values, array) for _, array in readable + mask_arrays])
    for (column, mask), values in zip(mask_arrays, data[len(readable):]):
        if isinstance(mask, Group):
            out.append(_v("14.8", f"{node}/{VALIDITY}/{column}", "a mask must be a bool array, not a group"))
        else:
            masks[column] = values
    for (name, member), values in zip(readable, data):
        where = f"{node}/{name}"
        extra = dict(member.attrs)
        if "precision" in extra:
            p = extra.pop("precision")
            violations = list(check_precision(p, values.dtype, where))
            out.extend(violations)
            if not violations:
                precision[name] = p
        problem = canonical_violation(name, ZARR_TO_COLUMN[member.metadata.dtype.name], values.shape, where)
        if problem is not None:
            out.append(problem)
        columns[name] = values
        if extra:
            column_attrs[name] = extra
    block = Block(columns, masks, precision, dict(targets),
                  tuple(shape) if isinstance(shape, list) else shape, attrs, count, column_attrs)
    if count is not None:
        out.extend(check_block_shape(block, node))
    # normalise: all-true ≡ no mask (§7)
    block.masks = {c: m for c, m in masks.items() if not (m.dtype == np.bool_ and m.all())}
    return block


def _read_box(group: Group, node: str, out: List[Violation]) -> Box:
    defined = group.attrs.get("cell_defined", True)
    if not isinstance(defined, bool):
        out.append(_v("14.17", node, f"cell_defined {defined!r} is not a JSON boolean"))
        defined = True
    parts = {name: np.asarray(member[...]) for name, member in _members(group, node, out) if isinstance(member, Array)}
    for name, dtype, shape in (("vectors", "float64", (3, 3)), ("origin", "float64", (3,)), ("boundary", "bool", (3,))):
        if name in parts and (parts[name].dtype != np.dtype(dtype) or parts[name].shape != shape):
            out.append(_v("14.19", f"{node}/{name}", f"box {name} stored as {parts[name].dtype}{list(parts[name].shape)}, "
                          f"not {dtype}{list(shape)}"))
            parts[name] = {"vectors": np.eye(3), "origin": np.zeros(3), "boundary": np.full(3, defined)}[name]
    vectors = parts.get("vectors", np.eye(3)) if defined else np.eye(3)
    origin = parts.get("origin", np.zeros(3))
    boundary = parts.get("boundary", np.full(3, defined))
    x, y, z = (bool(b) for b in np.ravel(boundary))  # shape (3,): checked above
    box = Box(np.asarray(vectors, dtype=np.float64) if vectors.dtype.kind == "f" else vectors,
              origin, (x, y, z), defined)
    out.extend(check_box(box, node))
    return box


def read_frame_group(group: Group, *, typed_meta: bool = True, out: Optional[List[Violation]] = None,
                     rows_of: Optional[RowsOf] = None) -> Frame:
    """Read a frame-shaped group; violations go to ``out`` (refused on the first when None)."""
    collect: List[Violation] = [] if out is None else out
    node = group.name.rstrip("/") or "/"
    attrs = dict(group.attrs)
    if typed_meta:
        meta = _decode_meta(attrs, node, collect)
    else:
        meta = attrs
    blocks: Dict[str, Block] = {}
    box = None
    for name, member in _members(group, node, collect):
        if not isinstance(member, Group):
            continue
        if name == BOX:
            box = _read_box(member, f"{node}/{BOX}", collect)
        else:
            blocks[name] = _read_block(member, f"{node}/{name}", collect)
    for name, block in blocks.items():
        if block.count is not None:
            collect.extend(check_targets(block, blocks, f"{node}/{name}", rows_of))
    if out is None:
        refuse(collect)
    return Frame(meta, blocks, box)


def _members(group: Group, node: str, out: List[Violation]) -> Iterable[Tuple[str, Union[Group, Array]]]:
    """A group's children; a child whose Zarr data type is outside the subset becomes a
    violation of frame-and-types#14.2 (naming it) instead of ending the read."""
    for name in group:
        try:
            yield name, group[name]
        except UnsupportedFeatureError as exc:
            if exc.rule != "zarr-v3-subset#8":
                raise
            out.append(_v("14.2", f"{node}/{name}", f"{exc.message} — not a column dtype"))


def _decode_meta(attrs: Dict[str, Any], node: str, out: List[Violation]) -> Dict[str, Any]:
    violations = list(typed_json.check_document(attrs, node))
    if violations:
        out.extend(violations)
        return {k: v for k, v in attrs.items() if k != META_TYPES}
    return typed_json.decode_document(attrs, node)
