"""Units a record states (frame-and-types §13.5): never a default, never a guess.

A record stores no intrinsic unit.  The ``units`` meta key (tag ``json``) of the record's
``system`` section — or, when system states none, of ``frame`` (the package's one convention,
as in ``molrec_raw.integrations.conventions``) — is an object shaped like the force-field
``units`` object: ``{"preset": "real"}`` or ``{"length": "nm", "energy": "kJ/mol"}``; a string
value reads as ``{"preset": <string>}``; absent means the record states none.  A preset stands
for the quantities of its row in the documents §7.3 table (``PRESETS``; an unknown preset is
refused); a quantity named beside it overrides the preset's.

Per-step keys (frame-and-types §13.4) take: ``pe``/``ke``/``etotal`` the energy unit,
``volume`` the length unit cubed, ``temp`` the ``temperature`` entry and ``press`` the
``pressure`` entry (keys no preset defines: shown only where a producer states them); the
trajectory's ``time`` takes the time unit.  Any other key has no stated unit.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Dict, Optional, Tuple

from molrec_raw.errors import SpecViolationError, UnsupportedFeatureError
from molrec_raw.record import typed_json
from molrec_raw.record.forcefield import PRESETS
from molrec_raw.zarr import Group

__all__ = ["declared_units", "parse_units", "unit_of_meta_key", "META_KEY_QUANTITIES"]

_RULE = "frame-and-types#13.5"
_SECTIONS = ("system", "frame")  # system first: where writers state the run's units
#: The quantity and power each canonical per-step key (frame-and-types §13.4) carries.
META_KEY_QUANTITIES: Dict[str, Tuple[str, int]] = {
    "pe": ("energy", 1), "ke": ("energy", 1), "etotal": ("energy", 1), "volume": ("length", 3),
    "temp": ("temperature", 1), "press": ("pressure", 1)}


def parse_units(value: Any, where: str = "units") -> Dict[str, str]:
    """Quantity → unit of a ``units`` meta value: the preset's quantities, then every other
    entry (each a string) over them."""
    if isinstance(value, str):
        value = {"preset": value}
    if not isinstance(value, Mapping):
        raise SpecViolationError(f"{where}: 'units' must be an object or a preset name, found "
                                 f"{type(value).__name__}", rule=_RULE)
    stated: Dict[str, str] = {}
    preset = value.get("preset")
    if preset is not None:
        if not isinstance(preset, str) or preset not in PRESETS:
            raise UnsupportedFeatureError(f"{where}: unknown units preset {preset!r} "
                                          f"(known: {', '.join(sorted(PRESETS))})", rule=_RULE)
        stated.update(PRESETS[preset])
    for quantity, unit in value.items():
        if quantity == "preset" or unit is None:
            continue
        if not isinstance(unit, str):
            raise SpecViolationError(f"{where}: units.{quantity} must be a string, found {unit!r}", rule=_RULE)
        stated[quantity] = unit
    return stated


def declared_units(root: Group) -> Dict[str, str]:
    """Quantity → unit the record states (``system``'s ``units``, else ``frame``'s; empty when
    neither has one)."""
    for name in _SECTIONS:
        group = root.get(name)
        if not isinstance(group, Group):
            continue
        attrs = dict(group.attrs)
        if "units" not in attrs:
            continue
        tags = attrs.get(typed_json.META_TYPES_KEY)
        tag = tags.get("units") if isinstance(tags, dict) else None
        where = f"/{name}@units"
        raw = attrs["units"]
        return parse_units(raw if tag is None else typed_json.decode_value(tag, raw, where), where)
    return {}


def unit_of_meta_key(key: str, units: Dict[str, str]) -> Optional[str]:
    """The stated unit of per-step meta key ``key`` (§13.4 names), or None."""
    quantity, power = META_KEY_QUANTITIES.get(key, (None, 1))
    unit = None if quantity is None else units.get(quantity)
    return unit if unit is None or power == 1 else f"{unit}^{power}"
