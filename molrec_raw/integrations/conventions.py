"""The one set of conventions every integration shares (names, units, cell orientation).

A record stores no intrinsic unit and its cell holds lattice vectors as **columns**; every tool
an integration talks to (MDAnalysis, mdtraj, ASE, OpenMM) uses rows and a unit system of its
own.  This module is the only place that knows how the two meet, so no integration repeats it:

- **Units** (frame-and-types §13.5).  A writer records the unit system it wrote in the ``units``
  meta key (tag ``json``) of the record's ``system`` section — or of ``frame`` for a frame-only
  record — as an object with the quantities ``length``, ``time``, ``energy``, ``mass``,
  ``charge`` and ``temperature`` (kelvin: every tool here uses it) spelled out
  (``{"length": "nm", "time": "ps", ...}``; a ``preset`` such as ``"openmm"`` is understood on
  read).  Velocities are length/time, forces energy/length.  A
  reader converts from the record's units to its tool's through the package's one table
  (:mod:`molrec_raw.record.units`).  A unit the record does not state is never guessed: a
  reader that would hand over a value of that quantity refuses, naming the unit, unless the
  caller states it (``assume`` units, e.g. ``assume_units={"length": "nm"}``).  A unit the
  table does not know is refused unless source and target spell it the same way.  One
  exception (:data:`UNSTATED_AS_STORED`): a per-step temperature (``temp``) whose unit the
  record does not state is handed over as stored with one warning, not refused — it is no
  quantity of the tools' own, and records written before writers stated a temperature unit
  stay readable.
- **Cell** (frame-and-types §10).  ``Box.vectors[:, k]`` is lattice vector k; tools hold
  ``rows[k]``: ``rows = vectors.T``.  ``Box.boundary`` is the tools' per-axis ``pbc``; an undefined
  cell (``Box.defined`` false, or no box) is "no cell".
- **Vocabulary** (frame-and-types §13).  The ``atoms`` block carries ``x y z``, ``vx vy vz``,
  ``fx fy fz`` and the canonical topology columns; relation blocks ``bonds``, ``angles``,
  ``dihedrals``, ``impropers`` carry 0-based u64 endpoints ``atomi…atoml``.  Per-step energies
  use the canonical meta keys ``pe ke etotal temp press volume`` (tag f64).
"""
from __future__ import annotations

import importlib
from pathlib import Path
from dataclasses import dataclass, field, fields
from types import ModuleType
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence, Tuple

import numpy as np

from molrec_raw.errors import InvalidValueError, MolrecError, SpecViolationError
from molrec_raw.record.model import Block, Box, Frame, MetaValue
from molrec_raw.record.units import (
    ASE_TIME, BASE, DERIVED, META_KEY_QUANTITIES, UNITS_BELONG, MissingUnitError, parse_units, spelling, unit_factor,
    unit_factors,
)
from molrec_raw.record.doors import read_mrec_meta, read_mrec_system, section_names, write_mrec_system
from molrec_raw.record.trajectory import MrecReader, MrecWriter, SequenceSchema

__all__ = [
    "require", "Units", "NO_UNITS", "MDANALYSIS_UNITS", "MDTRAJ_UNITS", "OPENMM_UNITS", "ASE_UNITS",
    "ASE_TIME", "UNITS_KEY", "units_of", "cell_rows", "box_from_rows", "Topology", "RELATIONS",
    "POSITIONS", "VELOCITIES", "FORCES", "ENERGY_KEYS", "COLUMN_QUANTITIES", "trajectory_schema", "atoms_frame",
    "xyz_of",
    "units_meta", "refuse_units_change", "META_QUANTITIES", "as_units", "renumbered_res_ids", "runs_of",
    "RESIDUE_KEYS", "stated_factors", "UNITS_BELONG", "UNSTATED_AS_STORED", "unstated_warning",
]

UNITS_KEY = "units"
POSITIONS = ("x", "y", "z")
VELOCITIES = ("vx", "vy", "vz")
FORCES = ("fx", "fy", "fz")
ENERGY_KEYS = ("pe", "ke", "etotal", "temp", "press", "volume")  # frame-and-types §13.4, all f64
#: The quantity each canonical ``atoms`` column carries (§13.2, §13.5).
COLUMN_QUANTITIES: Dict[str, str] = {**{c: "length" for c in POSITIONS}, **{c: "velocity" for c in VELOCITIES},
                                     **{c: "force" for c in FORCES}, "mass": "mass", "charge": "charge"}
RELATIONS: Dict[str, int] = {"bonds": 2, "angles": 3, "dihedrals": 4, "impropers": 4}  # §13.3
ENDPOINTS = ("atomi", "atomj", "atomk", "atoml")


def require(module: str, extra: str) -> ModuleType:
    """Import the tool an integration needs, or raise an ImportError naming the extra."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"this molrec_raw integration needs {module.split('.')[0]!r}: pip install 'molrec-raw[{extra}]'",
            name=module,
        ) from exc


# -- units ------------------------------------------------------------------------------------
# The conversion table is the record layer's (molrec_raw.record.units): one for the package.
_BASE = BASE


@dataclass(frozen=True)
class Units:
    """A record's unit system (frame-and-types §13.5): one string per base quantity, or None
    where the record states none.  ``factor(quantity, to)`` converts values of ``quantity``
    (a base quantity, ``velocity`` or ``force``) from these units into ``to``."""

    length: Optional[str] = None
    time: Optional[str] = None
    energy: Optional[str] = None
    mass: Optional[str] = "dalton"    # the spec's default (§13.5)
    charge: Optional[str] = "e"       # the spec's default (§13.5)
    temperature: Optional[str] = None  # kelvin only converts (molrec_raw.record.units.SCALE)
    #: Derived quantities stated directly (``("velocity", "angstrom/fs")``, …), sorted by name;
    #: one wins over the unit its base units spell.
    derived: Tuple[Tuple[str, str], ...] = ()

    def to_json(self) -> Dict[str, str]:
        """The ``units`` meta value this writer records (quantities spelled out, no preset)."""
        base = {q: value for q in _BASE if (value := getattr(self, q)) is not None}
        return {**base, **dict(self.derived)}

    @classmethod
    def from_json(cls, value: Any, where: str = "units") -> "Units":
        """Parse a ``units`` meta value with the record layer's parser (an object with a
        ``preset`` and/or quantities, or a preset string, §13.5); quantities it leaves
        unstated keep the spec's defaults (mass dalton, charge e) or None; derived quantities
        stated directly (``velocity``, ``force``, …) are kept."""
        stated = parse_units(value, where)
        derived = tuple(sorted((q, u) for q, u in stated.items() if q in DERIVED))
        return cls(**{q: stated.get(q, getattr(cls(), q)) for q in _BASE}, derived=derived)

    def factor(self, quantity: str, to: "Units", where: str = "units", hint: str = "") -> float:
        """Multiply values of ``quantity`` (a base or derived quantity of the package's table,
        :data:`molrec_raw.record.units.DERIVED`) held in these units by this to express them
        in ``to``; a unit either side lacks or the table does not know is refused, naming it."""
        return unit_factor(quantity, self.to_json(), to.to_json(), where, hint)

    def same_as(self, other: "Units") -> bool:
        """Every quantity spelled the same way (aliases such as ``Å``/``angstrom`` agree)."""
        mine, theirs = self.to_json(), other.to_json()
        return mine.keys() == theirs.keys() and all(spelling(mine[q]) == spelling(theirs[q]) for q in mine)

    def with_defaults(self, assume: "Units") -> "Units":
        """These units, with every quantity the record leaves unstated taken from ``assume``."""
        derived = tuple(sorted({**dict(assume.derived), **dict(self.derived)}.items()))
        return Units(**{q: getattr(self, q) if getattr(self, q) is not None else getattr(assume, q) for q in _BASE},
                     derived=derived)


#: MDAnalysis's base units (Å, ps, kJ/mol); temperatures in K, as its readers that report one
#: (GROMACS EDR auxiliaries) give them.
MDANALYSIS_UNITS = Units("angstrom", "ps", "kJ/mol", temperature="K")
#: No length, time, energy or temperature unit: the spec's defaults only (mass dalton, charge e, §13.5).
NO_UNITS = Units()
MDTRAJ_UNITS = Units("nm", "ps", "kJ/mol", temperature="K")
OPENMM_UNITS = Units("nm", "ps", "kJ/mol", temperature="K")
ASE_UNITS = Units("angstrom", ASE_TIME, "eV", temperature="K")


def units_of(*sections: Optional[Frame]) -> Optional[Units]:
    """The units the first section that states them records (pass ``system`` before ``frame``)."""
    for section in sections:
        if section is not None and UNITS_KEY in section.meta:
            value = section.meta[UNITS_KEY]
            return Units.from_json(value.value if isinstance(value, MetaValue) else value)
    return None


def stated_factors(quantities: Iterable[str], units: Units, to: Units, where: str, hint: str,
                   path: Any = None) -> Dict[str, float]:
    """Factors from ``units`` to ``to`` for every quantity a door hands over, every unit the
    record leaves unstated named in one refusal (:func:`molrec_raw.record.units.unit_factors`);
    when the record's ``/meta`` document has a ``units`` key — units put where no reader looks —
    the refusal says where they belong (§13.5)."""
    try:
        return unit_factors(quantities, units.to_json(), to.to_json(), where, hint)
    except MissingUnitError as exc:
        misplaced = False
        if path is not None:
            try:
                misplaced = UNITS_KEY in read_mrec_meta(path)
            except MolrecError:
                pass
        if not misplaced:
            raise
        raise MissingUnitError(f"{exc.message}; the record's /meta document has a 'units' key, which states nothing: "
                               f"{UNITS_BELONG}", rule=exc.rule) from None


def units_meta(units: Units) -> MetaValue:
    """The ``units`` meta entry (tag json) a writer puts on its ``system``/``frame`` section."""
    return MetaValue("json", units.to_json())


def as_units(value: Any, default: Units = NO_UNITS) -> Units:
    """A caller's units argument: a :class:`Units`, a ``units`` meta value (an object of
    quantities and/or a preset, or a preset name, §13.5) or None (``default``: no unit but the
    spec's mass and charge defaults); quantities it leaves unstated come from ``default``."""
    if value is None:
        return default
    units = value if isinstance(value, Units) else Units.from_json(value, where="assumed units")
    return units.with_defaults(default)


#: The quantity each canonical per-step key carries (§13.4) and its power, where Units converts
#: it: energies, the volume (length³) and ``temp`` (kelvin); ``press`` (no tool here has a
#: pressure unit) and a producer's own keys pass as stored.
META_QUANTITIES: Dict[str, Tuple[str, int]] = {k: q for k, q in META_KEY_QUANTITIES.items() if q[0] in _BASE}
#: Quantities of per-step keys a door hands over as stored, with one warning, when the record
#: states no unit for them (instead of refusing the whole record, §13.5): ``temp`` is no
#: quantity of the tools' own, and records written before the writers stated ``temperature``
#: (OpenMM's reporter until issue 36) stay readable; a caller silences it by stating the unit.
UNSTATED_AS_STORED: Dict[str, str] = {"temperature": "K"}  # quantity -> the unit the warning suggests


def unstated_warning(where: str, keys: Mapping[str, str]) -> str:
    """The warning of a door handing per-step ``keys`` (key -> quantity) over as stored because
    the record states no unit for them (:data:`UNSTATED_AS_STORED`)."""
    quantities = sorted(set(keys.values()))
    named = ", ".join(repr(k) for k in sorted(keys))
    units = ", ".join(f"{q!r}: {UNSTATED_AS_STORED[q]!r}" for q in quantities)
    return (f"{where}: the record states no {' or '.join(quantities)} unit: per-step {named} handed over as stored, "
            f"in a unit nobody stated (frame-and-types §13.5); state it in the record's 'units' ({{{units}}}) or "
            f"when reading (assume_units={{{units}}})")


# -- cell ---------------------------------------------------------------------------------------
def cell_rows(box: Optional[Box]) -> Optional[np.ndarray]:
    """The cell as a tool wants it, lattice vectors as rows (3×3 f64), or None without a cell."""
    if box is None or not box.defined:
        return None
    return np.array(np.asarray(box.vectors, dtype=np.float64).T)


def box_from_rows(rows: Any, pbc: Sequence[bool] = (True, True, True), origin: Any = None) -> Optional[Box]:
    """A record cell from lattice vectors as rows; None for a missing or all-zero cell (a tool's
    "no cell"), which a record writes as no box at all."""
    if rows is None:
        return None
    matrix = np.asarray(rows, dtype=np.float64)
    if matrix.shape != (3, 3):
        raise InvalidValueError(f"a cell must be 3×3 lattice vectors, got shape {matrix.shape}")
    if not np.any(matrix):
        return None
    flags = tuple(bool(b) for b in np.broadcast_to(np.asarray(pbc, dtype=bool), (3,)))
    at = np.zeros(3) if origin is None else np.asarray(origin, dtype=np.float64).reshape(3)
    return Box(np.array(matrix.T), at, (flags[0], flags[1], flags[2]), True)


# -- topology -----------------------------------------------------------------------------------
_STRINGS = ("name", "element", "type", "res_name", "chain")
_U64 = ("res_id", "mol_id")
_F64 = ("mass", "charge")


@dataclass
class Topology:
    """A tool-neutral topology in canonical names (frame-and-types §13.2–§13.3).

    ``atoms`` maps canonical atom columns (``name element type res_name chain`` strings,
    ``res_id mol_id`` u64, ``mass charge`` f64) to one value per atom; ``relations`` maps
    ``bonds angles dihedrals impropers`` to ``(n, arity)`` arrays of 0-based atom indices.
    """

    n_atoms: int
    atoms: Dict[str, np.ndarray] = field(default_factory=dict)
    relations: Dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key, values in list(self.atoms.items()):
            self.atoms[key] = _canonical_atom_column(key, values, self.n_atoms)
        for key, values in list(self.relations.items()):
            self.relations[key] = _relation_array(key, values, self.n_atoms)

    def system(self, units: Units, meta: Optional[Mapping[str, Any]] = None) -> Frame:
        """The ``system`` section: an ``atoms`` block (its row count even without columns),
        relation blocks, and the ``units`` meta key."""
        blocks = {"atoms": Block(dict(self.atoms), count=self.n_atoms)}
        for key, pairs in self.relations.items():
            blocks[key] = Block({ENDPOINTS[k]: pairs[:, k].copy() for k in range(pairs.shape[1])})
        return Frame({**(meta or {}), UNITS_KEY: units_meta(units)}, blocks)

    @classmethod
    def from_section(cls, section: Frame) -> "Topology":
        """The topology a ``system`` (or ``frame``) section holds; unknown columns are left out."""
        atoms = section.blocks.get("atoms")
        if atoms is None:
            raise SpecViolationError("the record's section has no 'atoms' block", rule="frame-and-types#13.2")
        columns = {k: v for k, v in atoms.columns.items() if k in _STRINGS + _U64 + _F64 and k not in atoms.masks}
        relations = {}
        for key, arity in RELATIONS.items():
            block = section.blocks.get(key)
            if block is not None and all(e in block.columns for e in ENDPOINTS[:arity]):
                relations[key] = np.stack([np.asarray(block.columns[e]) for e in ENDPOINTS[:arity]], axis=1)
        return cls(atoms.nrows, columns, relations)


def renumbered_res_ids(res_ids: Any) -> Tuple[np.ndarray, bool]:
    """Residue numbers a record can store (u64, §13.2): unchanged when none is negative;
    otherwise 1, 2, … per run of equal numbers, and True so that the caller says it
    renumbered (the spec leaves renumbering to the reader of such a source)."""
    ids = np.asarray(res_ids).reshape(-1)
    if not ids.size or not np.issubdtype(ids.dtype, np.signedinteger) or ids.min() >= 0:
        return ids, False
    return np.cumsum(np.r_[True, ids[1:] != ids[:-1]]).astype(np.int64), True


def runs_of(top: "Topology", keys: Sequence[str]) -> np.ndarray:
    """0-based group index per atom: a new group starts wherever any of the ``keys`` columns
    the topology has changes from the previous atom (residues: ``chain res_id res_name``;
    chains: ``chain``).  One group when it has none of them."""
    change = np.zeros(top.n_atoms, dtype=bool)
    for key in keys:
        values = top.atoms.get(key)
        if values is not None and top.n_atoms > 1:
            change[1:] |= values[1:] != values[:-1]
    return np.cumsum(change)


RESIDUE_KEYS = ("chain", "res_id", "res_name")


def _canonical_atom_column(key: str, values: Any, n_atoms: int) -> np.ndarray:
    if key in _STRINGS:
        array = np.array([str(v) for v in values], dtype=object)
    elif key in _U64:
        signed = np.asarray(values)
        if signed.size and np.issubdtype(signed.dtype, np.signedinteger) and signed.min() < 0:
            raise InvalidValueError(f"atoms.{key} must be unsigned (frame-and-types §13.2): renumber "
                                    f"negative values before writing (found {int(signed.min())})")
        array = signed.astype(np.uint64)
    elif key in _F64:
        array = np.asarray(values, dtype=np.float64)
    else:
        raise InvalidValueError(f"{key!r} is not a topology column (known: {', '.join(_STRINGS + _U64 + _F64)})")
    if array.shape != (n_atoms,):
        raise InvalidValueError(f"atoms.{key} has shape {array.shape}, expected ({n_atoms},)")
    return array


def _relation_array(key: str, values: Any, n_atoms: int) -> np.ndarray:
    if key not in RELATIONS:
        raise InvalidValueError(f"{key!r} is not a relation block (known: {', '.join(RELATIONS)})")
    arity = RELATIONS[key]
    array = np.asarray(values).reshape(-1, arity) if np.size(values) else np.zeros((0, arity), np.int64)
    if array.size and (array.min() < 0 or array.max() >= n_atoms):
        raise InvalidValueError(f"{key}: an endpoint lies outside the {n_atoms} atoms")
    return array.astype(np.uint64)


# -- trajectory frames ----------------------------------------------------------------------------
def trajectory_schema(n_atoms: int, *, velocities: bool = False, forces: bool = False,
                      precision: Optional[float] = None, meta_keys: Iterable[str] = ()) -> SequenceSchema:
    """The pinned schema integrations write: ``atoms`` with x/y/z (at ``precision`` when given:
    positions only; velocities and forces stay lossless), optional velocities and forces,
    and f64 per-step meta keys."""
    schema = SequenceSchema().declare_block("atoms", rows=n_atoms)
    for group in (POSITIONS, VELOCITIES if velocities else (), FORCES if forces else ()):
        for column in group:
            schema.declare_column("atoms", column, "f64")
    if precision is not None:
        for column in POSITIONS:
            schema.declare_precision("atoms", column, precision)
    for key in meta_keys:
        schema.declare_meta(key, "f64")
    return schema


def atoms_frame(positions: Any, *, velocities: Any = None, forces: Any = None, box: Optional[Box] = None,
                meta: Optional[Mapping[str, float]] = None) -> Frame:
    """One trajectory frame from ``(n, 3)`` arrays already in the record's units."""
    columns: Dict[str, np.ndarray] = {}
    for names, values in ((POSITIONS, positions), (VELOCITIES, velocities), (FORCES, forces)):
        if values is None:
            continue
        array = np.asarray(values, dtype=np.float64)
        if array.ndim != 2 or array.shape[1] != 3:
            raise InvalidValueError(f"{'/'.join(names)} must be an (n, 3) array, got shape {array.shape}")
        for k, name in enumerate(names):
            columns[name] = np.ascontiguousarray(array[:, k])
    return Frame({k: MetaValue("f64", float(v)) for k, v in (meta or {}).items()}, {"atoms": Block(columns)}, box)


def xyz_of(block: Block, names: Tuple[str, str, str] = POSITIONS, dtype: Any = np.float64) -> Optional[np.ndarray]:
    """``(n, 3)`` from three columns of a block (positions by default), or None if any is absent."""
    if not all(name in block.columns for name in names):
        return None
    out = np.empty((block.nrows, 3), dtype=dtype)
    for k, name in enumerate(names):
        out[:, k] = block.columns[name]
    return out


def refuse_units_change(stored: Optional[Units], writing: Units, where: str) -> None:
    """Appending in other units than a record states would mix them: refuse (§13.5)."""
    if stored is not None and not stored.with_defaults(writing).same_as(writing):
        raise InvalidValueError(f"{where} records units {stored.to_json()}; refusing to append in "
                                f"{writing.to_json()}", rule="frame-and-types#13.5")


# -- writing records as a tool runs
# ``system/`` first, then a trajectory that is appended to and, after a restart, reopened.
def start_trajectory(path: Any, system: Frame, schema: SequenceSchema, *,
                     flush_every: Optional[int] = None) -> MrecWriter:
    """A fresh record: ``system/`` (replacing a record already at ``path``, as the tools' own
    writers replace their files; refusing anything that is not a record), then a created,
    empty trajectory pinned to ``schema`` (trajectory §3: zero frames until the first commit)."""
    return MrecWriter(write_mrec_system(path, system, overwrite=True), schema, flush_every=flush_every)


def continue_trajectory(path: Any, writing: Units, schema: SequenceSchema,
                        where: str) -> Tuple[MrecWriter, Frame, Optional[int]]:
    """Reopen an engine's record to append after a restart (trajectory §11).

    Returns the writer, the record's ``system`` section and the last committed step (None when
    no frame is committed yet).  Refuses a path that holds no record, and a record stated in
    other units than ``writing`` (§13.5).  A record whose trajectory was never created (the
    engine died between ``system/`` and the trajectory) gets one pinned to ``schema``."""
    if not Path(path).is_dir():
        raise InvalidValueError(f"{where}: append=True continues an existing record, and {str(path)!r} is none "
                                "(start the first run with append=False)")
    system = read_mrec_system(path)
    refuse_units_change(units_of(system), writing, where)
    if "trajectory" not in section_names(path):
        return MrecWriter(path, schema), system, None
    with MrecReader(path) as reader:
        steps = reader.step
    return MrecWriter.open(path), system, (steps[-1] if steps else None)


# -- elements -----------------------------------------------------------------------------------
#: Element symbols by atomic number (index 0 is unused: no element has number 0).
ELEMENTS = ("", "H", "He", "Li", "Be", "B", "C", "N", "O", "F", "Ne", "Na", "Mg", "Al", "Si", "P", "S", "Cl", "Ar",
            "K", "Ca", "Sc", "Ti", "V", "Cr", "Mn", "Fe", "Co", "Ni", "Cu", "Zn", "Ga", "Ge", "As", "Se", "Br", "Kr",
            "Rb", "Sr", "Y", "Zr", "Nb", "Mo", "Tc", "Ru", "Rh", "Pd", "Ag", "Cd", "In", "Sn", "Sb", "Te", "I", "Xe",
            "Cs", "Ba", "La", "Ce", "Pr", "Nd", "Pm", "Sm", "Eu", "Gd", "Tb", "Dy", "Ho", "Er", "Tm", "Yb", "Lu",
            "Hf", "Ta", "W", "Re", "Os", "Ir", "Pt", "Au", "Hg", "Tl", "Pb", "Bi", "Po", "At", "Rn", "Fr", "Ra",
            "Ac", "Th", "Pa", "U", "Np", "Pu", "Am", "Cm", "Bk", "Cf", "Es", "Fm", "Md", "No", "Lr", "Rf", "Db",
            "Sg", "Bh", "Hs", "Mt", "Ds", "Rg", "Cn", "Nh", "Fl", "Mc", "Lv", "Ts", "Og")
_NUMBER_OF = {symbol: number for number, symbol in enumerate(ELEMENTS) if symbol}


def atomic_numbers(symbols: Any) -> np.ndarray:
    """Atomic numbers (int64) of element symbols as the ``element`` column holds them
    (``"C"``, ``"Cl"``: case as written in the periodic table); an unknown symbol is an
    InvalidValueError naming it, never a guess."""
    values = np.asarray(symbols, dtype=object).ravel()
    try:
        return np.fromiter(map(_NUMBER_OF.__getitem__, values), dtype=np.int64, count=len(values))
    except (KeyError, TypeError):
        bad = next(s for s in values if not isinstance(s, str) or s not in _NUMBER_OF)
        raise InvalidValueError(f"element {bad!r} is not an element symbol (H … Og)") from None
