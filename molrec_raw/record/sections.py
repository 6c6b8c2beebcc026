"""Lazy access to one block of a frame-shaped section (``frame/``, ``system/``;
frame-and-types §3–§7): its columns and masks as arrays that read only what is indexed.

``read_mrec_frame`` loads a whole section; tools that index a large block (the xarray
backend) open it with :func:`open_section_block` instead.  The same checks apply as on
reading — a ``count``, column data types from the column table (never widened), a leading
row axis of ``count`` rows, bool masks of ``count`` rows — and a failed one raises.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from molrec_raw.errors import NodeNotFoundError, SpecViolationError
from molrec_raw.record.frame_io import BOX, VALIDITY, _column_problem
from molrec_raw.record.violations import refuse
from molrec_raw.zarr import Array, Group

__all__ = ["SectionBlock", "open_section_block", "FRAME_SHAPED_SECTIONS"]

FRAME_SHAPED_SECTIONS = ("frame", "system")


@dataclass(frozen=True)
class SectionBlock:
    """A block of a frame-shaped section: ``count`` rows, column arrays (leading axis = rows),
    masks (bool[count]), the stated precision and row-reference targets of its columns."""

    section: str
    name: str
    count: int
    structural_shape: Optional[Tuple[int, ...]]
    columns: Dict[str, Array]
    masks: Dict[str, Array]
    precision: Dict[str, float]
    targets: Dict[str, str]


def _fail(rule: str, node: str, message: str) -> SpecViolationError:
    return SpecViolationError(message, node=node, rule=f"frame-and-types#{rule}")


def open_section_block(root: Group, section: str, block: str) -> SectionBlock:
    """Block ``block`` of section ``section`` of an open record root (see the module)."""
    if section not in FRAME_SHAPED_SECTIONS:
        raise NodeNotFoundError(f"{section!r} is not a frame-shaped section ({', '.join(FRAME_SHAPED_SECTIONS)})",
                                store=root.store.describe(), node=section)
    node = f"/{section}/{block}"
    group = root.get(f"{section}/{block}") if block != BOX else None
    if not isinstance(group, Group):
        raise NodeNotFoundError(f"record has no block {node}", store=root.store.describe(), node=node)
    attrs = dict(group.attrs)
    count = attrs.get("count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise _fail("14.5", node, f"count {count!r} is not a non-negative JSON integer")
    shape = attrs.get("structural_shape")
    targets = attrs.get("targets") or {}
    columns: Dict[str, Array] = {}
    precision: Dict[str, float] = {}
    for name, member in group.members():
        if not isinstance(member, Array):
            continue
        problem = _column_problem(member, f"{node}/{name}")
        refuse([problem] if problem is not None else [])
        if member.shape[0] != count:
            raise _fail("14.6", f"{node}/{name}", f"row_count_mismatch: block count={count}, column has "
                        f"{member.shape[0]} rows")
        columns[name] = member
        p = member.attrs.get("precision")
        if isinstance(p, (int, float)) and not isinstance(p, bool):
            precision[name] = float(p)
    masks: Dict[str, Array] = {}
    validity = group.get(VALIDITY)
    if isinstance(validity, Group):
        for name, member in validity.members():
            if isinstance(member, Array) and name in columns:
                if member.metadata.dtype.name != "bool" or member.shape != (count,):
                    raise _fail("14.9", f"{node}/{VALIDITY}/{name}", f"mask of {name!r} is not bool[{count}]")
                masks[name] = member
    return SectionBlock(section, block, count, tuple(shape) if isinstance(shape, list) else None, columns, masks,
                        precision, dict(targets) if isinstance(targets, dict) else {})
