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

**The package's one conversion table** (:data:`SCALE`, :func:`unit_factor`): each base quantity's
known spellings with their size in one reference unit (nm, ps, kJ/mol, dalton, e); derived
quantities (:data:`DERIVED`: velocity, force, stress, volume, dipole, polarization) are products
of base ones, spelled ``"<energy>/<length>"`` and so on, or stated directly in a ``units``
object (``{"force": "eV/angstrom"}``).  Every door converts through it; a unit it does not know
is refused, naming it, unless source and target spell it the same way.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Dict, Optional, Tuple

from molrec_raw.errors import SpecViolationError, UnsupportedFeatureError
from molrec_raw.record import typed_json
from molrec_raw.record.forcefield import PRESETS
from molrec_raw.zarr import Group

__all__ = ["declared_units", "parse_units", "unit_of_meta_key", "META_KEY_QUANTITIES", "SCALE", "BASE", "DERIVED",
           "ASE_TIME", "spelling", "unit_of", "unit_factor", "MissingUnitError"]

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


# -- the conversion table ----------------------------------------------------------------------
_AMU_KG = 1.66053906660e-27
_E_C = 1.602176634e-19
_AVOGADRO = 6.02214076e23
#: ASE's time unit, Å·sqrt(amu/eV) ≈ 10.18 fs, spelled so pint parses it.
ASE_TIME = "angstrom * (dalton / eV) ** 0.5"
BASE = ("length", "time", "energy", "mass", "charge")
#: Each base quantity's known spellings and their size in one reference unit (nm, ps, kJ/mol,
#: dalton, e).  Energies per mole and per particle convert through Avogadro's number.
SCALE: Dict[str, Dict[str, float]] = {
    "length": {"angstrom": 0.1, "nm": 1.0, "nanometer": 1.0, "pm": 1e-3, "bohr": 0.0529177210903,
               "m": 1e9, "meter": 1e9, "cm": 1e7, "micrometer": 1e3, "um": 1e3},
    "time": {"fs": 1e-3, "femtosecond": 1e-3, "ps": 1.0, "picosecond": 1.0, "ns": 1e3, "nanosecond": 1e3,
             "microsecond": 1e6, "s": 1e12, "second": 1e12,
             ASE_TIME: 1e12 * 1e-10 * math.sqrt(_AMU_KG / _E_C)},
    "energy": {"kJ/mol": 1.0, "kcal/mol": 4.184, "eV": _E_C * _AVOGADRO / 1e3,
               "hartree": 4.3597447222071e-18 * _AVOGADRO / 1e3, "J": _AVOGADRO / 1e3,
               "J/mol": 1e-3, "erg": 1e-10 * _AVOGADRO / 1e3},
    "mass": {"dalton": 1.0, "amu": 1.0, "g/mol": 1.0, "kg": 1.0 / _AMU_KG, "g": 1e-3 / _AMU_KG},
    "charge": {"e": 1.0, "C": 1.0 / _E_C},
}
_ALIASES = {"a": "angstrom", "å": "angstrom", "ang": "angstrom", "angstroms": "angstrom",
            "kj/mol": "kJ/mol", "kcal/mol": "kcal/mol", "ev": "eV", "u": "dalton", "da": "dalton"}
#: Derived quantities as products of base ones (quantity, power).
DERIVED: Dict[str, Tuple[Tuple[str, int], ...]] = {
    "velocity": (("length", 1), ("time", -1)), "force": (("energy", 1), ("length", -1)),
    "stress": (("energy", 1), ("length", -3)), "volume": (("length", 3),),
    "dipole": (("charge", 1), ("length", 1)), "polarization": (("charge", 1), ("length", -2)),
}


class MissingUnitError(UnsupportedFeatureError):
    """A conversion needs a unit the record (or the target) does not state (§13.5: no default)."""


def spelling(unit: str) -> str:
    """One spelling per unit: whitespace squeezed, known aliases mapped."""
    squeezed = " ".join(unit.split())
    return _ALIASES.get(squeezed.lower(), squeezed)


def unit_of(quantity: str, units: Mapping[str, Optional[str]]) -> Optional[str]:
    """The unit of ``quantity`` in ``units`` (quantity -> unit): stated directly, else (a derived
    quantity) spelled from its base units (``"kcal/mol/angstrom"``, ``"nm^3"``); None when a
    unit it needs is not stated."""
    stated = units.get(quantity)
    if stated is not None or quantity not in DERIVED:
        return stated
    text = ""
    for base, power in DERIVED[quantity]:
        unit = units.get(base)
        if unit is None:
            return None
        part = unit if abs(power) == 1 else f"{unit}^{abs(power)}"
        text = part if not text else f"{text}{'/' if power < 0 else '*'}{part}"
    return text


def _size(quantity: str, unit: str) -> Optional[float]:
    """The size of ``unit`` (of ``quantity``) in the reference unit, or None if unknown."""
    if quantity in SCALE:
        return SCALE[quantity].get(spelling(unit))
    parts = DERIVED[quantity]
    if len(parts) == 1:  # a power of one base unit: "nm^3"
        base, power = parts[0]
        head, _, tail = unit.replace("**", "^").partition("^")
        size = SCALE[base].get(spelling(head))
        return None if size is None or tail.strip() != str(power) else size ** power
    (first, p1), (second, p2) = parts
    text = unit.replace("**", "^")
    for k, sep in enumerate(text):  # "<first>/<second>[^n]" or "<first>*<second>"
        if sep not in "/*" or (sep == "/") != (p2 < 0):
            continue
        head, tail = text[:k].strip(), text[k + 1:].strip()
        base_unit, _, exponent = tail.partition("^")
        if (exponent.strip() or "1") != str(abs(p2)):
            continue
        a, b = SCALE[first].get(spelling(head)), SCALE[second].get(spelling(base_unit.strip()))
        if a is not None and b is not None:
            return float(a ** p1 * b ** p2)
    return None


def unit_factor(quantity: str, source: Mapping[str, Optional[str]], target: Mapping[str, Optional[str]],
                where: str = "units", hint: str = "") -> float:
    """Multiply values of ``quantity`` held in ``source`` units by this to express them in
    ``target`` units (each a quantity -> unit map, as :func:`parse_units` gives).  A unit
    either side does not state is a :class:`MissingUnitError` naming it; a unit this table
    does not know is refused, naming it, unless both sides spell it the same way (§13.5).
    ``hint`` (how the caller can state the unit) ends a missing-unit message."""
    if quantity not in SCALE and quantity not in DERIVED:
        raise UnsupportedFeatureError(f"{where}: no conversion for quantity {quantity!r} (known: "
                                      f"{', '.join(list(SCALE) + list(DERIVED))})", rule=_RULE)
    have, want = unit_of(quantity, source), unit_of(quantity, target)
    if have is None or want is None:
        side = "states" if have is None else "asks for"
        missing = [b for b, _ in DERIVED.get(quantity, ((quantity, 1),))
                   if (source if have is None else target).get(b) is None]
        raise MissingUnitError(f"{where}: {'the record' if have is None else 'the target'} {side} no "
                               f"{' or '.join(missing) if quantity not in SCALE and missing else quantity} unit, "
                               f"needed to convert its {quantity} (a unit is never guessed){hint}", rule=_RULE)
    if spelling(have) == spelling(want):
        return 1.0
    sizes = {unit: _size(quantity, unit) for unit in (have, want)}
    unknown = [unit for unit, size in sizes.items() if size is None]
    if unknown:
        known = ", ".join(sorted(SCALE[quantity])) if quantity in SCALE else \
            " / ".join(", ".join(sorted(SCALE[b])) for b, _ in DERIVED[quantity])
        raise UnsupportedFeatureError(f"{where}: cannot convert {quantity} from {have!r} to {want!r}: unknown unit "
                                      f"{unknown[0]!r} (known: {known})", rule=_RULE)
    return float(sizes[have]) / float(sizes[want])  # type: ignore[arg-type]
