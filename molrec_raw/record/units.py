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
known spellings with their size in one reference unit (nm, ps, kJ/mol, dalton, e, K); derived
quantities (:data:`DERIVED`: velocity, force, stress, volume, dipole, polarization) are products
of base ones, spelled ``"<energy>/<length>"`` and so on, or stated directly in a ``units``
object (``{"force": "eV/angstrom"}``).  Every door converts through it; a unit it does not know
is refused, naming it, unless source and target spell it the same way.  Temperature converts
as a factor only, so kelvin is its one unit: an affine scale (°C, °F: an offset from kelvin) is
refused, naming the rule (:data:`AFFINE_TEMPERATURES`).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Dict, List, Optional, Tuple

from molrec_raw.errors import InvalidValueError, SpecViolationError, UnsupportedFeatureError
from molrec_raw.record import typed_json
from molrec_raw.record.forcefield import PRESETS
from molrec_raw.zarr import Group

__all__ = ["declared_units", "parse_units", "unit_of_meta_key", "META_KEY_QUANTITIES", "SCALE", "BASE", "DERIVED",
           "ASE_TIME", "spelling", "unit_of", "unit_factor", "unit_factors", "MissingUnitError", "UNITS_BELONG",
           "refuse_units_in_meta", "AFFINE_TEMPERATURES"]

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


#: Where a record states its units (§13.5), for every message about units put elsewhere.
UNITS_BELONG = ("a record's units belong in the 'units' meta key (tag json) of its system section (or frame), e.g. "
                "Frame({'units': MetaValue('json', {'length': 'nm', 'time': 'ps'})}) written with "
                "write_mrec_system / write_mrec_trajectory(..., system=) (frame-and-types §13.5)")


def refuse_units_in_meta(meta: Any, where: str) -> None:
    """A writer given a record ``meta`` document with a ``units`` key refuses it: no reader
    looks there (the document's keys are the record's provenance, frame-and-types §11), so
    the units would be dropped without a word; the message names where they belong."""
    if isinstance(meta, Mapping) and "units" in meta:
        raise InvalidValueError(f"{where}: the meta document's 'units' key would state nothing (no reader looks "
                                f"there); {UNITS_BELONG}", rule=_RULE)


def unit_of_meta_key(key: str, units: Dict[str, str]) -> Optional[str]:
    """The stated unit of per-step meta key ``key`` (§13.4 names), or None."""
    quantity, power = META_KEY_QUANTITIES.get(key, (None, 1))
    unit = None if quantity is None else units.get(quantity)
    return unit if unit is None or power == 1 else f"{unit}^{power}"


# -- the conversion table ----------------------------------------------------------------------
_AMU_KG = 1.66053906660e-27
_E_C = 1.602176634e-19
_AVOGADRO = 6.02214076e23
#: The amu and e of ASE's default constants (CODATA 2014), which define its time unit: a
#: velocity converts to what ``ase.units.fs`` says to float rounding (CODATA 2018 differs at 4e-9).
_ASE_AMU_KG = 1.660539040e-27
_ASE_E_C = 1.6021766208e-19
#: ASE's time unit, Å·sqrt(amu/eV) ≈ 10.18 fs, spelled so pint parses it.
ASE_TIME = "angstrom * (dalton / eV) ** 0.5"
BASE = ("length", "time", "energy", "mass", "charge", "temperature")
#: Each base quantity's known spellings and their size in one reference unit (nm, ps, kJ/mol,
#: dalton, e, K).  Energies per mole and per particle convert through Avogadro's number.
#: Temperature has kelvin only: every tool here uses it, and a factor cannot carry an offset.
SCALE: Dict[str, Dict[str, float]] = {
    "length": {"angstrom": 0.1, "nm": 1.0, "nanometer": 1.0, "pm": 1e-3, "bohr": 0.0529177210903,
               "m": 1e9, "meter": 1e9, "cm": 1e7, "micrometer": 1e3, "um": 1e3},
    "time": {"fs": 1e-3, "femtosecond": 1e-3, "ps": 1.0, "picosecond": 1.0, "ns": 1e3, "nanosecond": 1e3,
             "microsecond": 1e6, "s": 1e12, "second": 1e12,
             ASE_TIME: 1e12 * 1e-10 * math.sqrt(_ASE_AMU_KG / _ASE_E_C)},
    "energy": {"kJ/mol": 1.0, "kcal/mol": 4.184, "eV": _E_C * _AVOGADRO / 1e3,
               "hartree": 4.3597447222071e-18 * _AVOGADRO / 1e3, "J": _AVOGADRO / 1e3,
               "J/mol": 1e-3, "erg": 1e-10 * _AVOGADRO / 1e3},
    "mass": {"dalton": 1.0, "amu": 1.0, "g/mol": 1.0, "kg": 1.0 / _AMU_KG, "g": 1e-3 / _AMU_KG},
    "charge": {"e": 1.0, "C": 1.0 / _E_C},
    "temperature": {"K": 1.0, "kelvin": 1.0},
}
#: Temperature scales with an offset from kelvin (compared lower-case, without spaces): a factor
#: table cannot convert them, so they are refused by name rather than as unknown (§13.5).
AFFINE_TEMPERATURES = frozenset(("degc", "°c", "℃", "celsius", "degreecelsius", "degreescelsius", "degf", "°f",
                                 "℉", "fahrenheit", "degreefahrenheit", "degreesfahrenheit"))
_ALIASES = {"a": "angstrom", "å": "angstrom", "ang": "angstrom", "angstroms": "angstrom",
            "kj/mol": "kJ/mol", "kcal/mol": "kcal/mol", "ev": "eV", "u": "dalton", "da": "dalton",
            "å·sqrt(amu/ev)": ASE_TIME, "angstrom*sqrt(amu/ev)": ASE_TIME, "ase time": ASE_TIME}
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
        unit = f"({unit})" if any(c in unit for c in "*^ (") else unit  # ASE's time: one part
        part = unit if abs(power) == 1 else f"{unit}^{abs(power)}"
        text = part if not text else f"{text}{'/' if power < 0 else '*'}{part}"
    return text


def _squeezed(unit: str) -> str:
    """A unit's text compared without spaces, ``**`` as ``^``, one pair of outer parentheses off."""
    text = "".join(unit.split()).replace("**", "^")
    while text.startswith("(") and text.endswith(")") and _depths(text)[:-1].count(0) == 0:
        text = text[1:-1]
    return text


def _depths(text: str) -> List[int]:
    """The parenthesis depth after each character of ``text``."""
    depth, out = 0, []
    for char in text:
        depth += (char == "(") - (char == ")")
        out.append(depth)
    return out


#: Each base quantity's spellings compared as :func:`_squeezed` text (``"kJ/mol"``, ASE's time).
_SQUEEZED: Dict[str, Dict[str, float]] = {
    base: {_squeezed(unit): size for unit, size in table.items()} for base, table in SCALE.items()}


def _base_size(base: str, unit: str) -> Optional[float]:
    """The size of a unit of base quantity ``base``, spelled as the table or an alias has it."""
    table = SCALE[base]
    named = table.get(spelling(unit))
    return named if named is not None else _SQUEEZED[base].get(_squeezed(spelling(_squeezed(unit))))


def _power_size(base: str, power: int, text: str) -> Optional[float]:
    """The size of ``text`` as ``<unit of base>^power`` (the exponent may be left out for 1)."""
    whole = _base_size(base, text)
    if power == 1:
        return whole
    depths = _depths(text)
    for k in range(len(text) - 1, -1, -1):  # the last top-level '^'
        if text[k] == "^" and depths[k] == 0:
            size = _base_size(base, text[:k])
            return None if size is None or text[k + 1:].strip() != str(power) else size ** power
    return None


def _size(quantity: str, unit: str) -> Optional[float]:
    """The size of ``unit`` (of ``quantity``) in the reference unit, or None if unknown.  A
    derived unit is read as ``<first>/<second>[^n]`` or ``<first>*<second>``: each top-level
    ``/`` or ``*`` is tried as the separator (parts may be parenthesised: units such as
    ``kJ/mol`` and ASE's time hold separators of their own)."""
    if quantity in SCALE:
        return _base_size(quantity, unit)
    parts = DERIVED[quantity]
    text = _squeezed(unit)
    if len(parts) == 1:  # a power of one base unit: "nm^3"
        return _power_size(parts[0][0], parts[0][1], text)
    (first, p1), (second, p2) = parts
    depths = _depths(text)
    for k, sep in enumerate(text):
        if sep not in "/*" or depths[k] != 0 or (sep == "/") != (p2 < 0) or text[k + 1:k + 2] == "*" \
                or text[k - 1:k] == "*":
            continue
        a, b = _power_size(first, p1, text[:k]), _power_size(second, abs(p2), text[k + 1:])
        if a is not None and b is not None:
            return float(a * (b if p2 > 0 else 1.0 / b))
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
    affine = [unit for unit in (have, want) if quantity == "temperature" and _is_affine(unit)]
    if affine:
        raise UnsupportedFeatureError(f"{where}: cannot convert temperature from {have!r} to {want!r}: {affine[0]!r} "
                                      "is a scale with an offset from kelvin, which a factor table cannot carry; only "
                                      "kelvin converts (state temperatures in 'K')", rule=_RULE)
    if unknown:
        known = ", ".join(sorted(SCALE[quantity])) if quantity in SCALE else \
            " / ".join(", ".join(sorted(SCALE[b])) for b, _ in DERIVED[quantity])
        raise UnsupportedFeatureError(f"{where}: cannot convert {quantity} from {have!r} to {want!r}: unknown unit "
                                      f"{unknown[0]!r} (known: {known})", rule=_RULE)
    return float(sizes[have]) / float(sizes[want])  # type: ignore[arg-type]


def _is_affine(unit: str) -> bool:
    """Whether ``unit`` names a temperature scale with an offset (:data:`AFFINE_TEMPERATURES`)."""
    return "".join(unit.split()).lower() in AFFINE_TEMPERATURES


def unit_factors(quantities: Iterable[str], source: Mapping[str, Optional[str]],
                 target: Mapping[str, Optional[str]], where: str = "units", hint: str = "") -> Dict[str, float]:
    """:func:`unit_factor` of each quantity, but every unit the record (``source``) leaves
    unstated is named in one :class:`MissingUnitError`, in alphabetical order, with the
    quantities that need it — not one per attempt (§13.5)."""
    factors: Dict[str, float] = {}
    missing: Dict[str, List[str]] = {}
    for quantity in sorted(set(quantities)):
        try:
            factors[quantity] = unit_factor(quantity, source, target, where, hint)
        except MissingUnitError:
            if unit_of(quantity, source) is not None:  # the target lacks it: as unit_factor says
                raise
            for base, _ in DERIVED.get(quantity, ((quantity, 1),)):
                if source.get(base) is None:
                    missing.setdefault(base, []).append(quantity)
    if missing:
        units = sorted(missing)
        named = units[0] if len(units) == 1 else f"{', '.join(units[:-1])} or {units[-1]}"
        needs = "; ".join(f"{unit}: {', '.join(missing[unit])}" for unit in units)
        raise MissingUnitError(f"{where}: the record states no {named} unit, needed to convert its values ({needs}; "
                               f"a unit is never guessed){hint}", rule=_RULE)
    return factors
