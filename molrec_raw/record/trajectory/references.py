"""Row references (§8.6) and alignments (§8.7–§8.8) checked on one resolved frame, by the
writer (``W27``/``W28``/``W13``) and the reader (``R17``/``R16``).
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from molrec_raw.errors import CorruptDataError, InvalidMetadataError
from molrec_raw.record.model import Block
from molrec_raw.record.trajectory.common import spec_error
from molrec_raw.record.trajectory.schema import SequenceSchema
from molrec_raw.zarr import Array, Group

_SECTIONS_WITH_BLOCKS = ("frame", "system")


def section_rows(root: Group) -> Any:
    """Row counts of frame-shaped sections' blocks for absolute targets ``/<section>/<block>``:
    None when the section is absent (not checked), -1 when it lacks the block."""
    cache: Dict[Tuple[str, str], Optional[int]] = {}

    def rows(section: str, block: str) -> Optional[int]:
        if (section, block) not in cache:
            value: Optional[int] = None
            sec = root.get(section) if section in _SECTIONS_WITH_BLOCKS else None
            if isinstance(sec, Group):
                node = sec.get(block)
                count = node.attrs.get("count") if isinstance(node, Group) else None
                value = count if type(count) is int else -1
            cache[(section, block)] = value
        return cache[(section, block)]
    return rows


def check_resolved(schema: SequenceSchema, rows: Dict[str, int], values: Any, section_rows: Any,
                   ordinal: int, writing: bool, only: Optional[Dict[str, List[str]]] = None) -> None:
    """Row references (§8.6, ``#W27``/``#R17``) and alignments (§8.7, ``#W28``/``#R16``) on
    one resolved frame.  ``rows``: block -> resolved row count (absent blocks missing);
    ``values(block, column)`` -> (values, mask or None) of a resolved block's column."""
    rt, ra = ("W27", "W28") if writing else ("R17", "R16")
    for name in schema.block_names():
        if name not in rows:
            continue
        spec = schema.block_spec(name)
        if spec.aligned_with is not None:
            target = spec.aligned_with
            if target not in rows:
                raise spec_error(ra, f"trajectory frame {ordinal}: block {name!r} is aligned with {target!r}, "
                                 "which is absent", f"/trajectory/{name}")
            if rows[target] != rows[name]:
                raise spec_error(ra, f"trajectory frame {ordinal}: block {name!r} has {rows[name]} rows but its "
                                 f"alignment target {target!r} has {rows[target]} (restate {name!r} when "
                                 f"{target!r} changes its row count)", f"/trajectory/{name}")
        if not rows[name]:
            continue
        for column, target in spec.targets.items():
            if only is not None and column not in only.get(name, ()):
                continue
            node = f"/trajectory/{name}/{column}"
            if target.startswith("/"):
                _, section, block = target.split("/")
                limit = section_rows(section, block)
                if limit is None:
                    continue  # the section is absent: not checked
            else:
                limit = rows.get(target, -1)
            if limit < 0:
                raise spec_error(rt, f"trajectory frame {ordinal}: column {column!r} of block {name!r} references "
                                 f"{target!r}, which is missing", node)
            vals, mask = values(name, column)
            live = vals if mask is None else vals[np.asarray(mask, bool)]
            if live.size and int(live.max()) >= limit:
                raise spec_error(rt, f"trajectory frame {ordinal}: column {column!r} of block {name!r} holds row "
                                 f"{int(live.max())}, not below the {limit} rows of {target!r}", node)


def refuse_aligned_system_names(schema: SequenceSchema, root: Group, rule_id: str) -> None:
    """An aligned block never shares a name with a ``system/`` block (``#W13``/``#R16``)."""
    try:
        system = root.get("system")
    except (CorruptDataError, InvalidMetadataError):  # damaged metadata: refused only where it matters
        if any(schema.aligned_with(name) is not None for name in schema.block_names()):
            raise
        return
    if not isinstance(system, Group):
        return
    for name in schema.block_names():
        if schema.aligned_with(name) is not None and isinstance(system.get(name), Group):
            raise spec_error(rule_id, f"aligned block {name!r} shares its name with a system block "
                             f"(/system/{name})", f"/trajectory/{name}")


class SystemCounterparts:
    """Trajectory blocks named like a ``system/`` block (§8.8): aligned with it 1:1 by row
    order, so every update holds exactly the system block's row count and, when both carry
    ``id``, the same ids row for row.  (The reference enforces only the aligned-block case;
    writers here refuse such an update and ``validate`` reports a store that breaks it —
    readers stay lenient, so stores written elsewhere still open.)"""

    def __init__(self, schema: SequenceSchema, root: Group) -> None:
        self._blocks: Dict[str, Tuple[Optional[int], Callable[[], Optional[np.ndarray]]]] = {}
        self._ids: Dict[str, Optional[np.ndarray]] = {}
        system = root.get("system")
        if not isinstance(system, Group):
            return
        for name in schema.block_names():
            node = system.get(name)
            if isinstance(node, Group):
                count = node.attrs.get("count")
                self._blocks[name] = (count if type(count) is int else None, partial(_stored_ids, node))

    @classmethod
    def of_blocks(cls, schema: SequenceSchema, system: Dict[str, Block]) -> "SystemCounterparts":
        """The counterparts of an in-memory system's blocks (a collection record's ``system``)."""
        self = cls.__new__(cls)
        self._blocks, self._ids = {}, {}
        for name in schema.block_names():
            block = system.get(name)
            if block is not None:
                self._blocks[name] = (block.nrows, partial(_given_ids, block.columns.get("id")))
        return self

    def __contains__(self, block: str) -> bool:
        return block in self._blocks

    def _system_ids(self, block: str) -> Optional[np.ndarray]:
        if block not in self._ids:
            self._ids[block] = self._blocks[block][1]()
        return self._ids[block]

    def check(self, block: str, rows: int, ids: Optional[np.ndarray], where: str) -> None:
        """Refuse an update of ``block`` (``rows`` rows, its ``id`` column or None) that is
        not row-aligned with ``/system/<block>`` (rule ``trajectory#8.8``)."""
        if block not in self._blocks:
            return
        count, _ = self._blocks[block]
        node = f"/trajectory/{block}"
        if count is not None and rows != count:
            raise spec_error("8.8", f"{where}: block {block!r} has {rows} rows but /system/{block} has {count}; "
                             "a trajectory block named like a system block holds exactly its rows (rename the "
                             "block if it is ragged)", node)
        system_ids = self._system_ids(block) if ids is not None else None
        if system_ids is not None and ids is not None and (
                system_ids.shape != ids.shape or not np.array_equal(system_ids, ids)):
            bad = int(np.flatnonzero(system_ids != ids)[0]) if system_ids.shape == ids.shape else 0
            raise spec_error("8.8", f"{where}: block {block!r} id differs from /system/{block}/id at row {bad}",
                             f"{node}/id")


def _stored_ids(group: Group) -> Optional[np.ndarray]:
    arr = group.get("id")
    return arr[...] if isinstance(arr, Array) else None


def _given_ids(ids: Any) -> Optional[np.ndarray]:
    return None if ids is None else np.asarray(ids)
