"""Units a record states (frame-and-types §13.5): never a default, never a guess.

A record stores no intrinsic unit.  The frame/system meta key ``units`` (tag ``json``) is an
object shaped like the force-field ``units`` object — ``{"preset": "real"}`` or
``{"length": "nm", "energy": "kJ/mol"}``; a string value reads as ``{"preset": <string>}``;
absent means the section states none.  A preset stands for the quantities of its row in the
documents §7.3 table (``PRESETS``); a quantity named beside it overrides the preset's.
When ``frame/`` and ``system/`` both state a quantity and disagree, neither is believed.

Per-step keys (frame-and-types §13.4) take: ``pe``/``ke``/``etotal`` the energy unit,
``volume`` the length unit cubed, ``temp`` the ``temperature`` entry and ``press`` the
``pressure`` entry (keys no preset defines: shown only where a producer states them); the
trajectory's ``time`` takes the time unit.  Any other key has no stated unit.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

from molrec_raw.errors import SpecViolationError
from molrec_raw.record import typed_json
from molrec_raw.record.forcefield import PRESETS
from molrec_raw.zarr import Group

__all__ = ["declared_units", "unit_of_meta_key"]

_RULE = "frame-and-types#13.5"
_SECTIONS = ("frame", "system")
_QUANTITY_OF_KEY = {"pe": "energy", "ke": "energy", "etotal": "energy", "temp": "temperature",
                    "press": "pressure"}


def _stated(group: Group, node: str) -> Dict[str, str]:
    """The quantities one section's ``units`` meta key states (preset expanded)."""
    attrs = dict(group.attrs)
    if "units" not in attrs:
        return {}
    tags = attrs.get(typed_json.META_TYPES_KEY)
    tag = tags.get("units") if isinstance(tags, dict) else None
    where = f"{node}@units"
    value: Any = attrs["units"] if tag is None else typed_json.decode_value(tag, attrs["units"], where)
    if isinstance(value, str):
        value = {"preset": value}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise SpecViolationError(f"{where}: 'units' must be an object of strings (or a preset name), "
                                 f"found {value!r}", node=node, rule=_RULE)
    stated = dict(PRESETS.get(value.get("preset", ""), {}))
    stated.update({k: v for k, v in value.items() if k != "preset"})
    return stated


def declared_units(root: Group) -> Dict[str, str]:
    """Quantity → unit stated by the record's ``frame/`` and ``system/`` sections (empty when
    neither states one; a quantity they disagree on is left out)."""
    found: Dict[str, str] = {}
    conflicting = set()
    for name in _SECTIONS:
        group = root.get(name)
        if not isinstance(group, Group):
            continue
        for quantity, unit in _stated(group, f"/{name}").items():
            if found.setdefault(quantity, unit) != unit:
                conflicting.add(quantity)
    return {q: u for q, u in found.items() if q not in conflicting}


def unit_of_meta_key(key: str, units: Dict[str, str]) -> Optional[str]:
    """The stated unit of per-step meta key ``key`` (§13.4 names), or None."""
    if key == "volume":
        length = units.get("length")
        return None if length is None else f"{length}^3"
    quantity = _QUANTITY_OF_KEY.get(key)
    return None if quantity is None else units.get(quantity)
