"""Row references (§8.6) and alignments (§8.7–§8.8) checked on one resolved frame, by the
writer (``W27``/``W28``/``W13``) and the reader (``R17``/``R16``).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from molrec_raw.record.trajectory.common import spec_error
from molrec_raw.record.trajectory.schema import SequenceSchema
from molrec_raw.zarr import Group

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
    system = root.get("system")
    if not isinstance(system, Group):
        return
    for name in schema.block_names():
        if schema.aligned_with(name) is not None and isinstance(system.get(name), Group):
            raise spec_error(rule_id, f"aligned block {name!r} shares its name with a system block "
                       f"(/system/{name})", f"/trajectory/{name}")
