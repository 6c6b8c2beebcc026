"""The ``forcefield/`` section: a plain-JSON document plus one table block per style.

documents §7 (force field, molrec_version 2) and checklist items documents#9.23–9.31, 9.35.
On disk the section is frame-shaped (frame_io with ``typed_meta=False``): the group's
attributes are the force-field document (no ``_meta_types``), and each style entry
``{category, style}`` owns the block ``<category>.<percent-encoded style>``.

Storage only (README decision 11): values are carried exactly as given — no unit
conversion, no degree/radian change, no linking of a system, no expression parsing, no
version-1 conversion. Blocks that no style entry produces are unknown content: carried,
never checked beyond the frame-shaped rules, never refused.

Decisions where the digest is unclear (also in the module's report):

- Units are compared with a preset by exact string (no pint); ``units`` keys other than
  ``preset`` and the six quantities are preserved and do not count as a quantity.
- ``null`` on an optional named key (``source``, ``special_bonds``, a units quantity,
  ``source.uri``/``sha256``, a style's ``params``/``expression``/``endpoint_key``) reads as
  absent; the writer refuses it (omit the key instead), as documents.py does.
- A table with zero rows and no columns at all is accepted as an empty table; a table with
  columns is checked in full whatever its row count.
- Precision is refused on every column of a style's table (not only on parameters).
- 1-D f64 parameters are not checked for finiteness (the checklist names array
  parameters only); annotation columns must be ``string[T]``.
- ``_meta_types`` in the document is refused (§7.1: the document is plain JSON), and a
  ``box`` child read from a store is refused (a force field has no cell).
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from molrec_raw.errors import MolrecError, SpecViolationError
from molrec_raw.record.columns import VOCABULARY, as_column, column_dtype_of, same_values
from molrec_raw.record.documents import check_finite_json
from molrec_raw.record.frame_io import read_frame_group, write_frame_group
from molrec_raw.record.model import Block, Frame
from molrec_raw.record.violations import Checks, Violation, refuse
from molrec_raw.zarr import Group

__all__ = [
    "encode_style", "decode_style", "block_name", "parse_block_name",
    "ForceFieldSection", "check_forcefield", "write_forcefield_group", "read_forcefield_group",
    "PRESETS", "ARITY", "QUANTITIES", "ENDPOINTS",
]

SECTION = "forcefield"
QUANTITIES = ("length", "energy", "angle", "charge", "mass", "time")
PRESETS: Dict[str, Dict[str, str]] = {  # documents §7.3, order as QUANTITIES
    name: dict(zip(QUANTITIES, units)) for name, units in {
        "real": ("angstrom", "kcal/mol", "degree", "e", "dalton", "fs"),
        "metal": ("angstrom", "eV", "degree", "e", "dalton", "ps"),
        "si": ("m", "J", "degree", "C", "kg", "s"),
        "cgs": ("cm", "erg", "degree", "statcoulomb", "g", "s"),
        "electron": ("bohr", "hartree", "degree", "e", "dalton", "fs"),
        "micro": ("micrometer", "picogram * micrometer**2 / microsecond**2", "degree",
                  "picocoulomb", "picogram", "microsecond"),
        "nano": ("nm", "attogram * nm**2 / ns**2", "degree", "e", "attogram", "ns"),
        "openmm": ("nm", "kJ/mol", "degree", "e", "dalton", "ps"),
    }.items()
}
PRESETS["lj"] = {"angle": "degree"}  # only the angle unit; any other quantity is refused
ARITY: Dict[str, int] = {  # documents §7.7
    "atom": 0, "bond": 2, "angle": 3, "dihedral": 4, "improper": 4, "pair": 2,
    "constraint": 2, "virtual_site": 0, "drude": 2, "cmap": 5,
}
ENDPOINTS = ("itom", "jtom", "ktom", "ltom", "mtom")
ANNOTATIONS = frozenset(("class", "element", "smarts", "smirks", "overrides", "desc", "doi"))
ENDPOINT_KEYS = ("type", "class", "smirks")
SPECIAL = ("lj", "coul")
MIXING = ("arithmetic", "geometric", "sixthpower")
ONE_FOUR = ("regular", "epsilon14")
META_TYPES = "_meta_types"

_CATEGORY = re.compile(r"^[a-z][a-z0-9_]*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
_HEX = "0123456789ABCDEF"


def _rule(item: str) -> str:
    return f"documents#{item}"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# -- block names (documents §7.5, #9.35) ------------------------------------------------------
def encode_style(style: str) -> str:
    """UTF-8 bytes outside ``A-Za-z0-9-_`` as uppercase ``%XX`` (so ``.`` and ``/`` too)."""
    if not isinstance(style, str):
        raise TypeError(f"a style name is a str, not {type(style).__name__}")
    return "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in style.encode("utf-8"))


def decode_style(encoded: str) -> str:
    """Inverse of :func:`encode_style`; only its exact output is accepted: ``%`` + two
    uppercase hex digits for every byte outside the unreserved set, decoding to UTF-8."""
    out = bytearray()
    i = 0
    while i < len(encoded):
        ch = encoded[i]
        if ch == "%":
            pair = encoded[i + 1:i + 3]
            if len(pair) != 2 or any(c not in _HEX for c in pair):
                raise SpecViolationError(
                    f"malformed escape {encoded[i:i + 3]!r} in {encoded!r}: '%' must be followed by "
                    "two uppercase hex digits", rule=_rule("9.35"))
            byte = int(pair, 16)
            if byte in _UNRESERVED:
                raise SpecViolationError(f"escape {encoded[i:i + 3]!r} in {encoded!r} encodes a character "
                                         "that is written as itself", rule=_rule("9.35"))
            out.append(byte)
            i += 3
        elif ord(ch) < 128 and ord(ch) in _UNRESERVED:
            out.append(ord(ch))
            i += 1
        else:
            raise SpecViolationError(f"character {ch!r} in {encoded!r} must be percent-encoded",
                                     rule=_rule("9.35"))
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecViolationError(f"{encoded!r} does not decode to UTF-8", rule=_rule("9.35")) from None


def block_name(category: str, style: str) -> str:
    """``block_name("pair", "lj/cut/coul/long") == "pair.lj%2Fcut%2Fcoul%2Flong"``."""
    if not isinstance(category, str):
        raise TypeError(f"a category is a str, not {type(category).__name__}")
    return f"{category}.{encode_style(style)}"


def parse_block_name(name: str) -> Tuple[str, str]:
    """(category, style) of a table block name: split at the first ``.``, percent-decode the rest.

    Refuses (SpecViolationError) a name without ``.``, a category outside
    ``^[a-z][a-z0-9_]*$``, an empty style and any escape :func:`encode_style` would not write.
    """
    if not isinstance(name, str):
        raise TypeError(f"a block name is a str, not {type(name).__name__}")
    category, dot, encoded = name.partition(".")
    if not dot:
        raise SpecViolationError(f"block name {name!r} has no '.' between category and style",
                                 rule=_rule("9.35"))
    if not _CATEGORY.match(category):
        raise SpecViolationError(f"block name {name!r}: category {category!r} does not match "
                                 "^[a-z][a-z0-9_]*$", rule=_rule("9.35"))
    style = decode_style(encoded)
    if not style:
        raise SpecViolationError(f"block name {name!r} has an empty style", rule=_rule("9.35"))
    return category, style


# -- the section --------------------------------------------------------------------------------
class ForceFieldSection:
    """Lossless carrier of a force-field document and its per-style tables (keyed by block name).

    Nothing is checked on construction beyond the Python types; :meth:`validate` lists every
    violation, the writer refuses on the first.
    """

    block_name = staticmethod(block_name)

    def __init__(self, document: Mapping[str, Any], tables: Optional[Mapping[str, Block]] = None) -> None:
        if not isinstance(document, Mapping):
            raise TypeError(f"a force-field document is a mapping, not {type(document).__name__}")
        if tables is not None and not isinstance(tables, Mapping):
            raise TypeError(f"force-field tables are a mapping of block name to Block, not {type(tables).__name__}")
        self.document: Dict[str, Any] = dict(document)
        self.tables: Dict[str, Block] = dict(tables or {})
        for key, table in self.tables.items():
            if not isinstance(key, str) or not isinstance(table, Block):
                raise TypeError(f"force-field table {key!r} must be a Block keyed by its block name, "
                                f"not {type(table).__name__}")

    @property
    def name(self) -> Any:
        """The document's ``name`` (required on read, documents#9.23), or None when it has none."""
        return self.document.get("name")

    @property
    def styles(self) -> List[Dict[str, Any]]:
        """The document's ``styles`` entries in their stored order (documents#9.25); [] when absent."""
        styles = self.document.get("styles")
        return list(styles) if isinstance(styles, list) else []

    def table(self, category: str, style: str) -> Block:
        """The table of style ``(category, style)``, found at its block name
        ``<category>.<percent-encoded style>`` (documents#9.35); KeyError when there is none."""
        key = block_name(category, style)
        try:
            return self.tables[key]
        except KeyError:
            raise KeyError(f"no force-field table {key!r} for style ({category!r}, {style!r})") from None

    def validate(self, node: str = "/forcefield") -> List[Violation]:
        """Every violation of documents#9.23–9.31 / #9.35 (as a reader sees the section)."""
        tables, out = _coerced_tables(self.tables, node)
        for name, block in tables.items():  # what the frame writer would refuse and the checks skip
            rows = _rows_of(block)
            if rows is None:
                out.append(Violation("frame-and-types#14.6", f"{node}/{name}", f"table {name!r}: count {block.count!r} "
                                     "and the columns' row counts disagree"))
                continue
            for column in block.masks:
                if _valid(block, column, rows) is None:
                    out.append(Violation("frame-and-types#14.9", f"{node}/{name}/_validity/{column}",
                                         f"mask of {column!r} is not bool[{rows}]"))
        out.extend(check_forcefield(self.document, tables, node))
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ForceFieldSection):
            return NotImplemented
        return (self.document == other.document and self.tables.keys() == other.tables.keys()
                and all(blocks_equal(self.tables[k], other.tables[k]) for k in self.tables))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ForceFieldSection(name={self.name!r}, tables={sorted(self.tables)})"


def blocks_equal(a: Block, b: Block) -> bool:
    """Two tables hold the same bits: columns (dtype, shape, every value — masked rows
    included), masks (all-true ≡ none), precision, targets, structural_shape, attrs,
    column attributes, count."""
    def masks(block: Block) -> Dict[str, np.ndarray]:
        return {c: np.asarray(m) for c, m in block.masks.items() if not np.asarray(m).all()}
    ma, mb = masks(a), masks(b)
    return (a.count == b.count and a.columns.keys() == b.columns.keys()
            and all(same_values(a.columns[c], b.columns[c]) for c in a.columns)
            and ma.keys() == mb.keys() and all(same_values(ma[c], mb[c]) for c in ma)
            and a.precision == b.precision and a.targets == b.targets and a.attrs == b.attrs
            and a.column_attrs == b.column_attrs
            and (tuple(a.structural_shape) if a.structural_shape is not None else None)
            == (tuple(b.structural_shape) if b.structural_shape is not None else None))


def _coerced_tables(tables: Mapping[str, Block], node: str) -> Tuple[Dict[str, Block], List[Violation]]:
    """The tables as the writer stores them (``as_column``: strings as object arrays, exact
    canonical-key conversions); a column as_column refuses becomes a violation and is left out."""
    out: List[Violation] = []
    coerced: Dict[str, Block] = {}
    for name, block in tables.items():
        columns = {}
        for column, values in block.columns.items():
            try:
                columns[column] = as_column(column, values, f"{node}/{name}/{column}")
            except MolrecError as exc:
                out.append(Violation(exc.rule or _rule("9.28"), exc.node or f"{node}/{name}/{column}", exc.message))
        coerced[name] = Block(columns, {c: np.asarray(m) for c, m in block.masks.items()}, dict(block.precision),
                              dict(block.targets), block.structural_shape, dict(block.attrs), block.count,
                              {c: dict(a) for c, a in block.column_attrs.items()})
    return coerced, out


# -- checks ---------------------------------------------------------------------------------------
def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _is_finite_number(value: Any) -> bool:
    return _is_number(value) and bool(np.isfinite(value))


def _optional(doc: Mapping[str, Any], key: str, writing: bool, rule: str, node: str,
              where: str) -> Tuple[bool, List[Violation]]:
    """(present, violations) for an optional named key; null reads as absent, a writer refuses it."""
    if key not in doc:
        return False, []
    if doc[key] is None:
        if writing:
            return False, [Violation(rule, node, f"{where}{key!r} is None: omit an unset key instead of writing null")]
        return False, []
    return True, []


def _optional_object(doc: Mapping[str, Any], key: str, writing: bool, rule: str, node: str,
                     where: str) -> Tuple[Optional[Mapping[str, Any]], List[Violation]]:
    """(the object, violations) for an optional key whose value must be a JSON object; the
    object is None when absent, null or not an object."""
    present, problems = _optional(doc, key, writing, rule, node, where)
    if not present:
        return None, problems
    value = doc[key]
    if not isinstance(value, Mapping):
        label = f"{where}{key}" if where else repr(key)
        return None, [Violation(rule, node, f"{label} must be an object, found {_show(value)}")]
    return value, []


def _check_units(doc: Mapping[str, Any], node: str, writing: bool) -> Checks:
    rule = _rule("9.23")
    units = doc.get("units")
    if units is None:
        yield Violation(rule, node, "the force field has no 'units' (a preset or at least one quantity is required)")
        return
    if not isinstance(units, Mapping):
        yield Violation(rule, node, f"'units' must be an object, found {_show(units)}")
        return
    given: Dict[str, str] = {}
    for key in ("preset",) + QUANTITIES:
        present, problems = _optional(units, key, writing, rule, node, "units.")
        yield from problems
        if not present:
            continue
        if not isinstance(units[key], str):
            yield Violation(rule, node, f"units.{key} must be a string, found {_show(units[key])}")
        else:
            given[key] = units[key]
    preset = given.pop("preset", None)
    if preset is None:
        if not given:
            yield Violation(rule, node, "'units' states neither a preset nor any quantity "
                                        f"({', '.join(QUANTITIES)})")
        return
    if preset not in PRESETS:
        yield Violation(rule, node, f"unknown units preset {preset!r} (known: {', '.join(sorted(PRESETS))})")
        return
    expected = PRESETS[preset]
    for quantity, unit in given.items():
        if quantity not in expected:
            yield Violation(rule, node, f"units.{quantity} {unit!r} beside preset {preset!r}: the 'lj' preset "
                                        "allows only angle = 'degree'")
        elif unit != expected[quantity]:
            yield Violation(rule, node, f"units.{quantity} {unit!r} disagrees with preset {preset!r} "
                                        f"({quantity} = {expected[quantity]!r}; compared as exact strings)")


def _check_source(doc: Mapping[str, Any], node: str, writing: bool) -> Checks:
    rule = _rule("9.24")
    source, problems = _optional_object(doc, "source", writing, rule, node, "")
    yield from problems
    if source is None:
        return
    if not isinstance(source.get("format"), str):
        yield Violation(rule, node, "source.format is required (a string such as 'openmm-xml', 'lammps')"
                        if source.get("format") is None else f"source.format must be a string, found {_show(source['format'])}")
    for key in ("uri", "sha256"):
        present, problems = _optional(source, key, writing, rule, node, "source.")
        yield from problems
        if present and not isinstance(source[key], str):
            yield Violation(rule, node, f"source.{key} must be a string, found {_show(source[key])}")
        elif present and key == "sha256" and not _SHA256.match(source[key]):
            yield Violation(rule, node, f"source.sha256 {_show(source[key])} is not 64 lowercase hex digits")


def _check_special_bonds(doc: Mapping[str, Any], node: str, writing: bool) -> Checks:
    rule = _rule("9.24")
    special, problems = _optional_object(doc, "special_bonds", writing, rule, node, "")
    yield from problems
    if special is None:
        return
    extra = [k for k in special if k not in SPECIAL]
    if extra:
        yield Violation(rule, node, f"special_bonds has keys {extra}; only 'lj' and 'coul' are allowed")
    for key in SPECIAL:
        weights = special.get(key)
        if key not in special:
            yield Violation(rule, node, f"special_bonds.{key} is missing (both 'lj' and 'coul' are required)")
        elif not isinstance(weights, (list, tuple)) or len(weights) != 3 or not all(_is_finite_number(w) for w in weights):
            yield Violation(rule, node, f"special_bonds.{key} must be exactly 3 finite numbers [w12, w13, w14], "
                                        f"found {_show(weights)}")


def _check_style_entry(index: int, entry: Any, node: str, writing: bool) -> Checks:
    rule = _rule("9.25")
    where = f"styles[{index}]"
    if not isinstance(entry, Mapping):
        yield Violation(rule, node, f"{where} must be an object, found {_show(entry)}")
        return
    category, style = entry.get("category"), entry.get("style")
    if not isinstance(category, str) or not _CATEGORY.match(category):
        yield Violation(rule, node, f"{where}.category {_show(category)} does not match ^[a-z][a-z0-9_]*$")
    if not isinstance(style, str) or not style:
        yield Violation(rule, node, f"{where}.style must be a non-empty string, found {_show(style)}")
    present, problems = _optional(entry, "endpoint_key", writing, rule, node, f"{where}.")
    yield from problems
    if present and entry["endpoint_key"] not in ENDPOINT_KEYS:
        yield Violation(rule, node, f"{where}.endpoint_key {_show(entry['endpoint_key'])} is not one of "
                                    f"{', '.join(ENDPOINT_KEYS)}")
    present, problems = _optional(entry, "expression", writing, rule, node, f"{where}.")
    yield from problems
    if present and not isinstance(entry["expression"], str):
        yield Violation(rule, node, f"{where}.expression must be a string, found {_show(entry['expression'])}")
    params, problems = _optional_object(entry, "params", writing, rule, node, f"{where}.")
    yield from problems
    if params is None:
        return
    for key, value in params.items():
        if not (isinstance(value, str) or _is_finite_number(value)):
            yield Violation(rule, node, f"{where}.params.{key} must be a finite number or a string, found {_show(value)}")
    vocabularies = [("special", SPECIAL), ("mixing", MIXING)]
    if category == "pair" and style == "lj/charmm":
        vocabularies.append(("one_four", ONE_FOUR))
    for key, allowed in vocabularies:
        if key in params and params[key] not in allowed:
            yield Violation(rule, node, f"{where}.params.{key} {_show(params[key])} is not one of {', '.join(allowed)}")


def _check_document(doc: Mapping[str, Any], node: str, writing: bool) -> Checks:
    if META_TYPES in doc:
        yield Violation(_rule("7.1"), node, "the force-field document is plain JSON: it has no '_meta_types'")
    name = doc.get("name")
    if name is None:
        yield Violation(_rule("9.23"), node, "the force field has no 'name'")
    elif not isinstance(name, str):
        yield Violation(_rule("9.23"), node, f"'name' must be a string, found {_show(name)}")
    yield from _check_units(doc, node, writing)
    yield from _check_source(doc, node, writing)
    yield from _check_special_bonds(doc, node, writing)
    styles = doc.get("styles")
    if styles is None:
        yield Violation(_rule("9.25"), node, "the force field has no 'styles' list (write [] for none)")
    elif not isinstance(styles, list):
        yield Violation(_rule("9.25"), node, f"'styles' must be a list, found {_show(styles)}")
    else:
        for index, entry in enumerate(styles):
            yield from _check_style_entry(index, entry, node, writing)


def _valid(block: Block, column: str, rows: int) -> Optional[np.ndarray]:
    """Row validity of ``column`` (True = value present); None when its mask is malformed."""
    mask = block.masks.get(column)
    if mask is None:
        return np.ones(rows, dtype=bool)
    mask = np.asarray(mask)
    if mask.dtype != np.bool_ or mask.shape != (rows,):
        return None  # frame-and-types#14.8/#14.9 report it
    return mask


def _rows_of(block: Block) -> Optional[int]:
    count = block.count
    if isinstance(count, (int, np.integer)) and not isinstance(count, bool) and count >= 0:
        if all(np.ndim(v) >= 1 and np.shape(v)[0] == count for v in block.columns.values()):
            return int(count)
    return None  # frame-and-types#14.5/#14.6 report it


def _is_string_rows(values: np.ndarray) -> bool:
    return column_dtype_of(values) == "string" and values.ndim == 1


def _check_text_column(block: Block, column: str, rows: int, where: str, rule: str, nullable: bool, what: str) -> Checks:
    values = np.asarray(block.columns[column])
    if not _is_string_rows(values):
        yield Violation(rule, where, f"{what} {column!r} must be string[T], found {values.dtype}{list(values.shape)}")
        return
    valid = _valid(block, column, rows)
    if not nullable and valid is not None and not valid.all():
        yield Violation(rule, where, f"{what} {column!r} is never null; rows {np.flatnonzero(~valid)[:5].tolist()} are null")


def _check_table(table: str, block: Block, entry: Mapping[str, Any], node: str) -> Checks:
    where = f"{node}/{table}"
    category, key = entry.get("category"), entry.get("endpoint_key") or "type"
    if block.structural_shape is not None:
        yield Violation(_rule("9.27"), where, f"a force-field table has no structural_shape "
                                              f"(found {list(block.structural_shape)})")
    rows = _rows_of(block)
    if rows is None:
        return
    if rows == 0 and not block.columns:
        return  # an empty table: nothing to check (see the module's decisions)
    columns = block.columns
    for column in block.precision:
        yield Violation(_rule("9.28"), f"{where}/{column}", f"column {column!r} declares a precision; force-field "
                                                            "tables are stored exactly")
    # name
    if "name" not in columns:
        yield Violation(_rule("9.27"), where, f"table {table!r} has no 'name' column (string[T], never null)")
    else:
        problems = list(_check_text_column(block, "name", rows, f"{where}/name", _rule("9.27"), False, "column"))
        yield from problems
        if not problems:
            names = np.asarray(columns["name"]).tolist()
            seen, repeated = set(), []
            for n in names:
                if n in seen and n not in repeated:
                    repeated.append(n)
                seen.add(n)
            if repeated:
                yield Violation(_rule("9.27"), f"{where}/name", f"type names are unique within a table; "
                                                                f"{repeated[:5]} appear more than once")
    # endpoints
    present = [e for e in ENDPOINTS if e in columns]
    if key == "smirks":
        if present:
            yield Violation(_rule("9.27"), where, f"a smirks-keyed table has no endpoint columns; found {present}")
        if "smirks" not in columns:
            yield Violation(_rule("9.27"), where, "a smirks-keyed table needs a 'smirks' column (string[T], never null)")
        else:
            yield from _check_text_column(block, "smirks", rows, f"{where}/smirks", _rule("9.27"), False, "column")
    else:
        if category in ARITY:
            wanted = list(ENDPOINTS[:ARITY[category]])
            if present != wanted:
                yield Violation(_rule("9.27"), where, f"category {category!r} has arity {ARITY[category]}: endpoint columns "
                                                      f"must be exactly {wanted}, found {present}")
        elif present != list(ENDPOINTS[:len(present)]):
            yield Violation(_rule("9.27"), where, f"endpoint columns of unknown category {category!r} must be a prefix "
                                                  f"of {list(ENDPOINTS)}, found {present}")
    for column in present:
        yield from _check_text_column(block, column, rows, f"{where}/{column}", _rule("9.27"), False, "endpoint")
    # annotations and parameters
    for column, values in columns.items():
        if column == "name" or column in ENDPOINTS or (column == "smirks" and key == "smirks"):
            continue
        at = f"{node}/{table}/{column}"
        values = np.asarray(values)
        if column in ANNOTATIONS:
            yield from _check_text_column(block, column, rows, at, _rule("9.28"), True, "annotation")
            continue
        dtype = column_dtype_of(values)
        canonical = VOCABULARY.get(column)
        if canonical is not None:
            if dtype != canonical or values.ndim != 1:
                yield Violation(_rule("9.28"), at, f"column {column!r} is a canonical key: {canonical}[T], "
                                                   f"found {values.dtype}{list(values.shape)}")
            continue
        if category == "cmap" and column == "grid":
            yield from _check_cmap_grid(block, values, rows, at)
            continue
        if dtype == "string":
            if values.ndim != 1:
                yield Violation(_rule("9.28"), at, f"string parameter {column!r} must be string[T], "
                                                   f"found trailing axes {list(values.shape[1:])}")
        elif dtype != "f64":
            yield Violation(_rule("9.28"), at, f"parameter {column!r} must be f64 or string, found {values.dtype}")
        elif values.ndim > 1:
            if 0 in values.shape[1:]:
                yield Violation(_rule("9.28"), at, f"array parameter {column!r} has a zero-length axis "
                                                   f"{list(values.shape)}")
            else:
                yield from _non_finite_rows(block, column, values, rows, at, _rule("9.28"), "array parameter")


def _non_finite_rows(block: Block, column: str, values: np.ndarray, rows: int, at: str, rule: str, what: str) -> Checks:
    valid = _valid(block, column, rows)
    if valid is None or not rows:
        return
    bad = ~np.isfinite(values.reshape(rows, -1)).all(axis=1) & valid
    if bad.any():
        yield Violation(rule, at, f"{what} {column!r} has non-finite values in non-null rows "
                                  f"{np.flatnonzero(bad)[:5].tolist()}")


def _check_cmap_grid(block: Block, values: np.ndarray, rows: int, at: str) -> Checks:
    rule = _rule("9.29")
    if column_dtype_of(values) != "f64" or values.ndim != 3 or values.shape[1] != values.shape[2] or values.shape[1] < 2:
        yield Violation(rule, at, f"cmap 'grid' must be f64[T, N, N] with N >= 2, found {values.dtype}{list(values.shape)}")
        return
    yield from _non_finite_rows(block, "grid", values, rows, at, rule, "cmap")


def _parameter_columns(block: Block) -> List[str]:
    return [c for c in block.columns if c != "name" and c not in ENDPOINTS and c not in ANNOTATIONS]


def _check_pair_restatements(table: str, block: Block, node: str) -> Checks:
    """documents §7.6: rows restating one unordered {itom, jtom} agree on every parameter."""
    rows = _rows_of(block)
    if rows is None or "itom" not in block.columns or "jtom" not in block.columns:
        return
    itom, jtom = np.asarray(block.columns["itom"]), np.asarray(block.columns["jtom"])
    if not (_is_string_rows(itom) and _is_string_rows(jtom)):
        return
    first: Dict[Tuple[str, str], int] = {}
    params = [(c, np.asarray(block.columns[c]), _valid(block, c, rows)) for c in _parameter_columns(block)]
    for row, (a, b) in enumerate(zip(itom.tolist(), jtom.tolist())):
        pair = (a, b) if a <= b else (b, a)
        if pair not in first:
            first[pair] = row
            continue
        other = first[pair]
        for column, values, valid in params:
            if valid is None:
                continue
            if valid[row] != valid[other] or (valid[row] and not _same_value(values[other], values[row])):
                yield Violation(_rule("9.31"), f"{node}/{table}/{column}",
                                f'pair table restates "{itom[other]}-{jtom[other]}" and "{a}-{b}" (rows {other} and '
                                f"{row}) with a different {column}: rows restating one pair must agree on every parameter")


def _same_value(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "f":
        return bool(np.array_equal(a, b, equal_nan=True))
    return bool(a.tolist() == b.tolist())


def check_forcefield(document: Any, tables: Mapping[str, Block], node: str = "/forcefield", *,
                     writing: bool = False) -> Checks:
    """documents#9.23–9.31 and #9.35 on a document and its tables, as stored (no coercion).

    ``writing`` also refuses ``null`` on optional named keys (a writer omits them).
    """
    if not isinstance(document, Mapping):
        yield Violation(_rule("9.23"), node, f"the force-field document must be a JSON object, found {_show(document)}")
        return
    yield from _check_document(document, node, writing)
    styles = document.get("styles")
    produced: Dict[str, Mapping[str, Any]] = {}
    class_keyed = False
    for index, entry in enumerate(styles if isinstance(styles, list) else []):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("category"), str) \
                or not isinstance(entry.get("style"), str):
            continue
        category, style = entry["category"], entry["style"]
        class_keyed = class_keyed or entry.get("endpoint_key") == "class"
        name = block_name(category, style)
        if name in produced:
            yield Violation(_rule("9.26"), node, f"styles[{index}] repeats (category {category!r}, style {style!r}); "
                                                 "a pair appears at most once")
            continue
        produced[name] = entry
        if name not in tables:
            yield Violation(_rule("9.26"), node, f"style ({category!r}, {style!r}) has no table: block {name!r} is missing")
    for name, entry in produced.items():
        if name in tables:
            yield from _check_table(name, tables[name], entry, node)
            if entry.get("category") == "pair":
                yield from _check_pair_restatements(name, tables[name], node)
    if class_keyed:
        for name, entry in produced.items():
            if entry.get("category") == "atom" and name in tables and "class" not in tables[name].columns:
                yield Violation(_rule("9.30"), f"{node}/{name}", f"a style is keyed by class, but atom table {name!r} "
                                                                 "has no 'class' column")
    yield from check_finite_json(document, node, _rule("9.4"))


# -- reading and writing --------------------------------------------------------------------------
def write_forcefield_group(root: Group, section: ForceFieldSection) -> None:
    """Write ``root/forcefield``; refuses (SpecViolationError) before the first byte lands.

    A plain dict is not a section: TypeError (the reference does the same).
    """
    if not isinstance(section, ForceFieldSection):
        raise TypeError(f"forcefield must be a ForceFieldSection, not {type(section).__name__} "
                        "(wrap a document as ForceFieldSection(document, tables))")
    node = f"{root.name.rstrip('/')}/{SECTION}"
    tables, problems = _coerced_tables(section.tables, node)
    refuse(problems)
    refuse(check_forcefield(section.document, tables, node, writing=True))
    write_frame_group(root, SECTION, Frame(meta=section.document, blocks=tables), typed_meta=False)


def read_forcefield_group(group: Group, out: Optional[List[Violation]] = None) -> ForceFieldSection:
    """Read a ``forcefield/`` group; values are carried as stored (README decision 11).

    Violations go to ``out``; when ``out`` is None the first one is raised.
    """
    collect: List[Violation] = [] if out is None else out
    node = group.name.rstrip("/") or "/"
    frame = read_frame_group(group, typed_meta=False, out=collect)
    if frame.box is not None:
        collect.append(Violation("frame-and-types#14.31", f"{node}/box",
                                 "a force field has no cell: 'box' is not a table name"))
    collect.extend(check_forcefield(frame.meta, frame.blocks, node))
    if out is None:
        refuse(collect)
    return ForceFieldSection(frame.meta if isinstance(frame.meta, Mapping) else {}, frame.blocks)
