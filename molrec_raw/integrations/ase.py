"""ASE reads and writes MolRec records: the ``mrec`` I/O format and ``MrecTrajectory``.

The format is registered through the ``ase.ioformats`` entry point (name ``mrec``, many
images, needs a path; globs ``*.mrec`` and ``*.mrec.zip``), so ``ase.io.read``,
``ase.io.iread`` and ``ase.io.write(..., append=True)`` work on records.  ASE takes every
directory for a BundleTrajectory: a ``*.mrec`` directory that exists needs ``format="mrec"``.
``MrecTrajectory(path, mode, atoms, precision)`` behaves like ASE's ``Trajectory`` (``write``
attached to a dynamics, ``len``, ``[i]``, iteration).

What an image becomes (decisions in spec-notes/integrations.md, "ASE"): numbers and masses
go to ``system/atoms`` (``element``, ``atomic_number``, ``mass``) while the composition is
fixed, else to every frame (a trajectory-only ``atoms`` block, ``ase.io.write`` with all the
images); positions ``x y z``; momenta as velocities ``vx vy vz``; the cell as lattice vectors
(columns in the record, rows in ASE), ``pbc`` as its boundary flags, ``celldisp`` as its
origin (frame-and-types §10).  Calculator results: forces ``fx fy fz``, charges ``charge``,
magmoms ``magmom`` (per atom); energy ``pe``, free_energy, magmom, dipole (f64x3) and stress
(f64x9, the full 3×3 tensor row-major) as per-step meta.  Units: written in ASE's (Å, ASE
time, eV), recorded in ``system``'s ``units`` meta key; read in ASE's, converted from the
units the record states (a record without a trajectory reads as one image, its ``frame``);
everything unit- or cell-shaped goes through :mod:`molrec_raw.integrations.conventions`.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Set, Tuple, Union

import numpy as np

from molrec_raw.errors import InvalidValueError
from molrec_raw.integrations.conventions import (
    ASE_UNITS, COLUMN_QUANTITIES, FORCES, POSITIONS, UNITS_KEY, VELOCITIES, Topology, Units, as_units,
    atomic_numbers, atoms_frame, box_from_rows, cell_rows, continue_trajectory, require, start_trajectory,
    stated_factors, trajectory_schema, units_meta, units_of, xyz_of,
)
from molrec_raw.record.doors import read_mrec_frame, read_mrec_system, section_names
from molrec_raw.record.model import Block, Frame, MetaValue
from molrec_raw.record.trajectory import MrecReader, MrecWriter, SequenceSchema
from molrec_raw.zarr import PathLike

__all__ = ["MREC_FORMAT", "MrecTrajectory", "read_mrec", "write_mrec"]

# Nothing here imports ase.io: ASE loads this module while ase.io.formats is being imported.
_ase = require("ase", "ase")
_plugins = require("ase.utils.plugins", "ase")
_singlepoint = require("ase.calculators.singlepoint", "ase")
_calculator = require("ase.calculators.calculator", "ase")
_stress = require("ase.stress", "ase")
_data = require("ase.data", "ase")

#: The ``ase.ioformats`` entry point: many images, path-based (``+S``).
MREC_FORMAT = _plugins.ExternalIOFormat(desc="MolRec record (Zarr V3)", code="+S",
                                        module="molrec_raw.integrations.ase", glob=["*.mrec", "*.mrec.zip"])

#: Per-atom arrays of an ``Atoms`` object -> trajectory ``atoms`` columns (not canonical keys).
_ATOM_ARRAYS = {"initial_charges": ("initial_charge", "f64"), "initial_magmoms": ("initial_magmom", "f64"),
                "tags": ("tag", "i64")}
#: Per-atom calculator results -> ``atoms`` columns (``forces`` go to ``fx fy fz``).
_ATOM_RESULTS = {"charges": "charge", "magmoms": "magmom", "energies": "energy", "stresses": "stress",
                 "born_effective_charges": "born_charge"}
#: Per-image calculator results -> per-step meta ``(key, tag)``.
_IMAGE_RESULTS = {"energy": ("pe", "f64"), "free_energy": ("free_energy", "f64"), "magmom": ("magmom", "f64"),
                  "dipole": ("dipole", "f64x3"), "stress": ("stress", "f64x9"),
                  "dielectric_tensor": ("dielectric_tensor", "f64x9"), "polarization": ("polarization", "f64x3")}
#: Stresses ASE holds as Voigt 6-vectors (xx yy zz yz xz xy); records hold full 3×3 tensors.
_VOIGT = ("stress", "stresses")
_RECORDED_RESULTS = frozenset(_IMAGE_RESULTS) | frozenset(_ATOM_RESULTS) | {"forces"}
#: The ASE name of what a record column or meta key holds (for messages).
_SOURCE = {**{c: "forces" for c in FORCES}, **{c: "momenta" for c in VELOCITIES},
           **{c: a for a, (c, _) in _ATOM_ARRAYS.items()}, **{c: r for r, c in _ATOM_RESULTS.items()},
           **{k: r for r, (k, _) in _IMAGE_RESULTS.items()}}
_NAN = float("nan")


# ---------------------------------------------------------------------- image -> frame
def _results(atoms: Any, given: Mapping[str, Any]) -> Dict[str, Any]:
    """The calculator results that belong to these very positions (as ASE's Trajectory:
    stale results of a calculator whose atoms moved are not written), then ``given``."""
    calc = atoms.calc
    results: Dict[str, Any] = {}
    if calc is not None:
        if hasattr(calc, "check_state") and isinstance(getattr(calc, "results", None), dict):
            results = {} if calc.check_state(atoms) else dict(calc.results)
        else:
            for name in _RECORDED_RESULTS:
                try:
                    value = calc.get_property(name, atoms, allow_calculation=False)
                except (_calculator.PropertyNotImplementedError, KeyError):
                    value = None
                if value is not None:
                    results[name] = value
    results.update({k: v for k, v in given.items() if v is not None})
    return results


def _image_frame(atoms: Any, given: Mapping[str, Any], composition: bool) -> Tuple[Frame, List[str]]:
    """One frame from one image (positions, momenta as velocities, arrays, results, cell),
    and the names of results it cannot record."""
    results = _results(atoms, given)
    velocities = atoms.get_velocities() if atoms.has("momenta") else None
    cell = np.asarray(atoms.cell.array, dtype=np.float64)
    pbc = np.asarray(atoms.pbc, dtype=bool)
    origin = np.asarray(atoms.get_celldisp(), dtype=np.float64).reshape(3)
    box = box_from_rows(cell, [bool(b) for b in pbc], origin)
    if box is None and (pbc.any() or origin.any()):
        raise InvalidValueError(f"an image with pbc {pbc.tolist()} or celldisp {origin.tolist()} but no cell vectors "
                                "cannot be recorded: a record's boundary flags and origin belong to a cell "
                                "(frame-and-types §10)")
    frame = atoms_frame(atoms.positions, velocities=velocities, forces=results.get("forces"), box=box)
    columns = frame.blocks["atoms"].columns
    for name, (column, dtype) in _ATOM_ARRAYS.items():
        if atoms.has(name):
            columns[column] = np.array(atoms.arrays[name], dtype=np.float64 if dtype == "f64" else np.int64)
    for name, column in _ATOM_RESULTS.items():
        if name in results:
            columns[column] = _full_tensor(name, results[name])
    for name, (key, tag) in _IMAGE_RESULTS.items():
        if name in results:
            value = _full_tensor(name, results[name])
            frame.meta[key] = MetaValue(tag, float(value) if tag == "f64" else tuple(value.reshape(-1).tolist()))
    if composition:
        columns["atomic_number"] = np.asarray(atoms.numbers, dtype=np.uint64)
        columns["mass"] = np.asarray(atoms.get_masses(), dtype=np.float64)
    unrecorded = sorted(set(results) - _RECORDED_RESULTS)
    return frame, unrecorded


def _full_tensor(name: str, value: Any) -> np.ndarray:
    """A result as f64, a Voigt stress as its full 3×3 tensor (one per atom for ``stresses``)."""
    array = np.array(value, dtype=np.float64)
    if name in _VOIGT and array.shape[-1:] == (6,):
        array = np.asarray(_stress.voigt_6_to_full_3x3_stress(array), dtype=np.float64)
    return array


def _fill(tag: str) -> Any:
    """The NaN fill of an f64 / f64xN meta key (read back as "no such result")."""
    return _NAN if tag == "f64" else (_NAN,) * int(tag[4:])


def _schema(frames: Sequence[Frame], precision: Optional[float]) -> SequenceSchema:
    """The pin for these frames: the union of what they carry; a column some frame lacks is
    nullable (the frame records it as missing), a meta key some frame lacks has a NaN fill."""
    blocks = [f.blocks["atoms"] for f in frames]
    velocities, forces = (any(all(n in b.columns for n in names) for b in blocks) for names in (VELOCITIES, FORCES))
    schema = trajectory_schema(max(b.nrows for b in blocks), velocities=velocities, forces=forces,
                               precision=precision)
    for block in blocks:
        for column, values in block.columns.items():
            if column not in POSITIONS + VELOCITIES + FORCES:
                dtype = {"f": "f64", "i": "i64", "u": "u64"}[values.dtype.kind]
                schema.declare_column("atoms", column, dtype, values.shape[1:] or None)
    for column in schema.column_names("atoms"):
        if any(column not in b.columns for b in blocks):
            schema.declare_nullable("atoms", column)
    tags = {k: v.tag for f in frames for k, v in f.meta.items()}
    for key, tag in tags.items():
        if all(key in f.meta for f in frames):
            schema.declare_meta(key, tag)
        else:
            schema.declare_meta_with_fill(key, _fill(tag), tag)
    return schema


def _complete(frame: Frame, schema: SequenceSchema, ordinal: int) -> List[str]:
    """Fit ``frame`` to the pin: a nullable column it lacks is written missing (mask all
    false); a pinned column or unfilled key it lacks is refused.  Returns what the pin
    cannot hold (those entries are dropped)."""
    block = frame.blocks["atoms"]
    dropped = [c for c in block.columns if c not in schema.column_names("atoms")]
    dropped += [k for k in frame.meta if k not in dict(schema.meta_keys())]
    for name in dropped:
        block.columns.pop(name, None)
        frame.meta.pop(name, None)
    for column, spec in schema.columns("atoms").items():
        if column in block.columns:
            continue
        if not spec.nullable:
            raise InvalidValueError(f"image {ordinal} has no {_SOURCE.get(column, column)} ({column!r}), which the "
                                    "record holds for every image (its first image fixed what is recorded)")
        dtype = {"f64": np.float64, "i64": np.int64, "u64": np.uint64}[spec.dtype]
        block.columns[column] = np.zeros((block.nrows,) + tuple(spec.trailing), dtype=dtype)
        block.masks[column] = np.zeros(block.nrows, dtype=bool)
    for key, _ in schema.meta_keys():
        if key not in frame.meta and not schema.meta_spec(key).has_fill:
            raise InvalidValueError(f"image {ordinal} has no {_SOURCE.get(key, key)} ({key!r}), which the record "
                                    "holds for every image (its first image fixed what is recorded)")
    return dropped


def _system(first: Any, fixed: bool) -> Frame:
    """``system/``: the atoms with their element, atomic number and mass while the
    composition is fixed; only the ``units`` key otherwise."""
    if not fixed:
        return Frame({UNITS_KEY: units_meta(ASE_UNITS)})
    system = Topology(len(first), {"element": first.get_chemical_symbols(), "mass": first.get_masses()}).system(ASE_UNITS)
    system.blocks["atoms"].columns["atomic_number"] = np.asarray(first.numbers, dtype=np.uint64)
    return system


class _ImageWriter:
    """Images -> frames of one record: the pin, the fixed composition (or None), warnings."""

    def __init__(self, writer: MrecWriter, path: PathLike, numbers: Optional[np.ndarray],
                 masses: Optional[np.ndarray]) -> None:
        self.writer, self.path, self.numbers, self.masses = writer, path, numbers, masses
        self.schema = writer.schema
        self.count = writer.committed
        self.has_cell = False  # a recorded cell carries forward: no image may drop it (trajectory §6)
        self._warned: Set[str] = set()

    @classmethod
    def start(cls, path: PathLike, images: Sequence[Any], given: Sequence[Mapping[str, Any]],
              precision: Optional[float], append: bool) -> Tuple["_ImageWriter", List[Tuple[Frame, List[str]]]]:
        """A writer for ``path`` — created, or continued (``append`` and a record is there) —
        and the frames of ``images`` with the results each cannot record."""
        if append and Path(path).is_dir():
            return cls._continue(path, images, given, precision)
        first = images[0]
        fixed = all(len(a) == len(first) and np.array_equal(a.numbers, first.numbers) for a in images)
        frames = [_image_frame(a, g, not fixed) for a, g in zip(images, given)]
        writer = start_trajectory(path, _system(first, fixed), _schema([f for f, _ in frames], precision))
        numbers = np.array(first.numbers) if fixed else None
        return cls(writer, path, numbers, np.array(first.get_masses()) if fixed else None), frames

    @classmethod
    def _continue(cls, path: PathLike, images: Sequence[Any], given: Sequence[Mapping[str, Any]],
                  precision: Optional[float]) -> Tuple["_ImageWriter", List[Tuple[Frame, List[str]]]]:
        where = f"appending to {str(path)!r}"
        layout = _StoredLayout(read_mrec_system(path))
        frames = [_image_frame(a, g, layout.numbers is None) for a, g in zip(images, given)]
        writer, _, _ = continue_trajectory(path, ASE_UNITS, _schema([frames[0][0]], precision), where)
        self = cls(writer, path, layout.numbers, layout.masses)
        with MrecReader(path) as reader:
            self.has_cell = len(reader) > 0 and reader.box_at(len(reader) - 1) is not None
        pinned = {self.schema.precision("atoms", c) for c in POSITIONS}
        if precision is not None and pinned != {precision}:
            writer.close()
            raise InvalidValueError(f"{where}: the record's positions are pinned to precision "
                                    f"{pinned.pop()}, not {precision}")
        return self, frames

    def append(self, atoms: Any, frame: Frame, unrecorded: Sequence[str]) -> None:
        """Append one image's frame; what it cannot record is named in one warning per name."""
        if self.numbers is not None:
            if len(atoms) != len(self.numbers) or not np.array_equal(atoms.numbers, self.numbers):
                raise InvalidValueError(
                    f"image {self.count} has other atoms than the record's system ({len(atoms)} vs "
                    f"{len(self.numbers)}, or other numbers): a record whose composition changes is written in "
                    "one call, ase.io.write(path, images, format='mrec'), which stores it per frame")
            if atoms.has("masses") and (self.masses is None or not np.array_equal(atoms.get_masses(), self.masses)):
                raise InvalidValueError(f"image {self.count} has other masses than the record's system")
        if frame.box is None and self.has_cell:
            raise InvalidValueError(f"image {self.count} has no cell, the images before it have one: a record's cell "
                                    "carries forward (trajectory §6), so it would read back with the previous cell")
        dropped = _complete(frame, self.schema, self.count)
        fresh = sorted(set(unrecorded).union(_SOURCE.get(d, d) for d in dropped) - self._warned)
        if fresh:
            self._warned.update(fresh)
            warnings.warn(f"{str(self.path)!r}: not recorded: {', '.join(fresh)} (no place in a MolRec record, or "
                          "absent from the first image, which fixed what is recorded)", stacklevel=3)
        self.writer.append(frame)
        self.has_cell = self.has_cell or frame.box is not None
        self.count += 1

    def close(self) -> None:
        self.writer.close()


# ---------------------------------------------------------------------- frame -> image
#: The quantity each converted ``atoms`` column and per-step meta key carries (frame-and-types
#: §13.5); what is not here (magnetic moments in μB, tags, dielectric tensors) has no unit of a
#: record's unit system and passes as stored.
_COLUMN_QUANTITY = {**COLUMN_QUANTITIES, "initial_charge": "charge", "born_charge": "charge", "energy": "energy",
                    "stress": "stress"}
_META_QUANTITY = {"pe": "energy", "free_energy": "energy", "stress": "stress", "dipole": "dipole",
                  "polarization": "polarization"}
_HINT = ("; state it in the record (the 'units' meta key of system or frame) or when reading "
         "(ase.io.read(path, format='mrec', assume_units={'length': 'nm', ...}))")


class _Conversion:
    """Factors from a record's units to ASE's (Å, eV, eV/Å, ASE time; frame-and-types §13.5)
    for the columns and meta keys it holds, computed when the record opens: a unit needed and
    stated nowhere (neither in the record nor in ``assume``) is refused there, naming it."""

    def __init__(self, stated: Optional[Units], assume: Units, where: str, columns: Iterable[str],
                 meta_keys: Iterable[str]) -> None:
        units = (stated or assume).with_defaults(assume)
        column_names = [c for c in set(columns) | set(POSITIONS) | {"mass", "charge"} if c in _COLUMN_QUANTITY]
        keys = [k for k in meta_keys if k in _META_QUANTITY]
        factor = stated_factors([_COLUMN_QUANTITY[c] for c in column_names] + [_META_QUANTITY[k] for k in keys],
                                units, ASE_UNITS, where, _HINT, where)  # every missing unit at once
        self.column = {c: factor[_COLUMN_QUANTITY[c]] for c in column_names}
        self.meta = {k: factor[_META_QUANTITY[k]] for k in keys}
        self.length = self.column["x"]

    def xyz(self, block: Block, names: Tuple[str, str, str] = POSITIONS) -> Optional[np.ndarray]:
        """``(n, 3)`` of three columns in ASE's units."""
        values = xyz_of(block, names)
        return None if values is None else values * self.column[names[0]]


class _StoredLayout:
    """What a record's ``system`` fixes: numbers and masses (None when each frame has them),
    and its partial charges (``charge``, e.g. a force field's: ASE's initial charges)."""

    def __init__(self, system: Optional[Frame], mass_factor: float = 1.0, charge_factor: float = 1.0,
                 where: str = "") -> None:
        atoms = None if system is None else system.blocks.get("atoms")
        self.numbers: Optional[np.ndarray] = None
        self.masses: Optional[np.ndarray] = None
        self.charges: Optional[np.ndarray] = None
        self.custom_masses = False
        self.where = where
        if atoms is not None and "charge" in atoms.columns and "charge" not in atoms.masks:
            self.charges = np.asarray(atoms.columns["charge"], dtype=np.float64) * charge_factor
        if atoms is not None and ("atomic_number" in atoms.columns or "element" in atoms.columns):
            self.numbers = _numbers_of(atoms, where)
            self.masses = (np.asarray(atoms.columns["mass"], dtype=np.float64) * mass_factor
                           if "mass" in atoms.columns else None)
            self.custom_masses = self.masses is not None and not np.array_equal(
                self.masses, _data.atomic_masses[self.numbers])


def _numbers_of(block: Block, where: str = "") -> np.ndarray:
    """Atomic numbers of an ``atoms`` block (``atomic_number``, else ``element``); refused,
    naming the record, the rule and the fix, when it has neither."""
    if "atomic_number" in block.columns:
        return np.asarray(block.columns["atomic_number"], dtype=np.int64)
    if "element" in block.columns:  # "" (no element: a virtual site) is ASE's "X", number 0
        symbols = np.asarray(block.columns["element"], dtype=object)
        blank = symbols == ""
        try:
            numbers = atomic_numbers(np.where(blank, "H", symbols))
        except InvalidValueError as exc:
            raise InvalidValueError(f"{where or 'the record'}: system/atoms.element: {exc.message}",
                                    rule="frame-and-types#13.2") from None
        numbers[blank] = 0
        return numbers
    raise InvalidValueError(f"{where or 'the record'}: the record's atoms carry neither 'atomic_number' nor 'element', "
                            "and an ASE Atoms needs each atom's element: add an 'element' (or 'atomic_number') "
                            "column to system/atoms (for a record made by 'molrec-raw convert', convert again from "
                            "a topology that names elements, or one MDAnalysis can guess them from)",
                            rule="frame-and-types#13.2")


def _image(frame: Frame, layout: _StoredLayout, filled: Set[str], units: _Conversion) -> Any:
    """The ``Atoms`` of one frame in ASE's units, with a ``SinglePointCalculator`` holding its
    results (``filled``: meta keys whose NaN fill means "no such result")."""
    block = frame.blocks["atoms"]

    def valid(column: str) -> bool:  # a masked column is one this image did not have
        return column in block.columns and column not in block.masks

    def converted(column: str) -> np.ndarray:
        return np.array(block.columns[column]) * units.column.get(column, 1.0)

    if layout.numbers is not None:
        numbers, masses, custom = layout.numbers, layout.masses, layout.custom_masses
    else:
        numbers = _numbers_of(block, layout.where)
        masses = converted("mass") if "mass" in block.columns else None
        custom = masses is not None and not np.array_equal(masses, _data.atomic_masses[numbers])
    positions = units.xyz(block)
    if positions is None:
        missing = [c for c in POSITIONS if c not in block.columns]
        raise InvalidValueError(f"the record's atoms have no {'/'.join(missing)} column: an ASE image needs "
                                "positions x, y, z", rule="frame-and-types#13.2")
    rows = cell_rows(frame.box)
    box = frame.box
    atoms = _ase.Atoms(numbers=numbers, positions=positions,
                       cell=np.zeros((3, 3)) if rows is None else rows * units.length,
                       pbc=False if box is None else box.boundary,
                       celldisp=None if box is None else np.asarray(box.origin) * units.length)
    if custom:
        atoms.set_masses(masses)
    if layout.charges is not None and len(layout.charges) == len(atoms):
        atoms.set_initial_charges(layout.charges)  # a frame's own initial_charge column (below) wins
    if all(valid(c) for c in VELOCITIES):
        atoms.set_velocities(units.xyz(block, VELOCITIES))
    for name, (column, _) in _ATOM_ARRAYS.items():
        if valid(column):
            atoms.set_array(name, converted(column) if column in units.column else np.array(block.columns[column]))
    results: Dict[str, Any] = {}
    if all(valid(c) for c in FORCES):
        results["forces"] = units.xyz(block, FORCES)
    for name, column in _ATOM_RESULTS.items():
        if valid(column):
            value = converted(column)
            results[name] = _stress.full_3x3_to_voigt_6_stress(value) if name in _VOIGT else value
    for name, (key, tag) in _IMAGE_RESULTS.items():
        if key not in frame.meta:
            continue
        raw = frame.meta[key]
        value = np.asarray(raw.value if isinstance(raw, MetaValue) else raw, dtype=np.float64)
        if key in filled and np.isnan(value).all():
            continue  # the fill: this image had no such result
        value = value * units.meta.get(key, 1.0)
        if name in _VOIGT:
            results[name] = _stress.full_3x3_to_voigt_6_stress(value.reshape(3, 3))
        elif tag == "f64x9":
            results[name] = value.reshape(3, 3)
        else:
            results[name] = float(value) if tag == "f64" else value
    if results:
        atoms.calc = _singlepoint.SinglePointCalculator(atoms, **results)
    return atoms


def _has_positions(section: Optional[Frame]) -> bool:
    atoms = None if section is None else section.blocks.get("atoms")
    return atoms is not None and all(c in atoms.columns for c in POSITIONS)


class _ImageReader:
    """Random access to the images of a record (directory or ``*.mrec.zip``): its trajectory's
    frames, or — a record without a trajectory, or with an empty one beside a ``frame``
    section — its one ``frame`` section (else a ``system`` section with positions) as one
    image, in ASE's units (``assume``: units the record leaves unstated)."""

    def __init__(self, path: PathLike, assume_units: Any = None) -> None:
        where = str(path)
        sections = section_names(path)
        system = read_mrec_system(path) if "system" in sections else None
        frame = read_mrec_frame(path) if "frame" in sections else None
        self.reader: Optional[MrecReader] = None
        self.single: Optional[Frame] = None
        if "trajectory" in sections:
            reader = MrecReader(path)
            if len(reader) or (frame is None and not _has_positions(system)):
                self.reader = reader
            else:
                reader.close()
        try:
            if self.reader is not None:
                schema = self.reader.schema
                columns: List[str] = schema.column_names("atoms") if schema.has_block("atoms") else []
                meta_keys = [k for k, _ in schema.meta_keys()]
                self.filled = {k for k in meta_keys if schema.meta_spec(k).has_fill}
            else:
                self.single = frame if _has_positions(frame) else system if _has_positions(system) else None
                if self.single is None:
                    raise InvalidValueError(f"{where}: the record holds no image: no trajectory, and no frame or "
                                            "system section with atoms x, y, z", rule="frame-and-types#13.2")
                columns, meta_keys = list(self.single.blocks["atoms"].columns), list(self.single.meta)
                self.filled = set()
            if system is not None and "atoms" in system.blocks:
                columns += [c for c in system.blocks["atoms"].columns if c == "mass"]
            self.units = _Conversion(units_of(system, frame), as_units(assume_units), where, columns, meta_keys)
            self.layout = _StoredLayout(system if self.single is not system else None, self.units.column["mass"],
                                        self.units.column["charge"], where)
        except BaseException:
            self.close()
            raise

    def __len__(self) -> int:
        return 1 if self.reader is None else len(self.reader)

    def image(self, i: int) -> Any:
        if self.reader is None:
            assert self.single is not None
            if i not in (0, -1):
                raise IndexError(f"image {i} of a one-image record")
            return _image(self.single, self.layout, self.filled, self.units)
        return _image(self.reader[i], self.layout, self.filled, self.units)

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()


# ---------------------------------------------------------------------- ASE I/O format
def read_mrec(filename: PathLike, index: Any = None, assume_units: Any = None) -> Iterator[Any]:
    """ASE's reader of format ``mrec``: the images selected by ``index`` (a slice, or an int)
    in ASE's units, converted from the record's (``assume_units``: units it leaves unstated,
    e.g. ``{"length": "nm"}``; a unit needed and stated nowhere is refused).  A record without
    a trajectory is one image (its ``frame`` section)."""
    reader = _ImageReader(filename, assume_units)
    try:
        n = len(reader)
        if index is None:
            index = slice(None)
        if n == 0 and index != slice(None):
            raise InvalidValueError(f"{str(filename)}: the record's trajectory has no committed frame (no image to "
                                    "read; index=':' gives an empty list)")
        if isinstance(index, (int, np.integer)):
            yield reader.image(int(index))
            return
        if not isinstance(index, slice):
            raise InvalidValueError(f"index must be an integer or a slice, got {index!r}")
        for i in range(*index.indices(n)):
            yield reader.image(i)
    finally:
        reader.close()


def write_mrec(filename: PathLike, images: Any, append: bool = False, precision: Optional[float] = None) -> None:
    """ASE's writer of format ``mrec``: all ``images`` in one record (a changing composition
    is stored per frame); ``append`` continues a record already there; ``precision`` (Å)
    rounds positions (frame-and-types §8)."""
    if isinstance(images, _ase.Atoms) or hasattr(images, "iterimages"):
        images = [images]
    flat = [image for item in images for image in _iterimages(item)]
    if not flat:
        raise InvalidValueError("no images to write")
    writer, frames = _ImageWriter.start(filename, flat, [{}] * len(flat), precision, append)
    try:
        for atoms, (frame, unrecorded) in zip(flat, frames):
            writer.append(atoms, frame, unrecorded)
    finally:
        writer.close()


def _iterimages(atoms: Any) -> Iterable[Any]:
    return atoms.iterimages() if hasattr(atoms, "iterimages") else [atoms]


# ---------------------------------------------------------------------- Trajectory
class MrecTrajectory:
    """A record used like ASE's ``Trajectory``: ``mode`` ``"r"`` reads (``len``, ``[i]``,
    ``[-1]``, slices, iteration; in ASE's units, ``assume_units`` as for ``read_mrec``);
    ``"w"`` writes a new record (replacing one there) and
    ``"a"`` continues one (or starts it); ``write(atoms=None, **results)`` appends an image —
    ``dyn.attach(traj.write, interval=n)``.  The first image fixes the composition and what
    is recorded; ``close()`` (or leaving a ``with`` block) commits durably (trajectory §10).
    """

    def __init__(self, path: PathLike, mode: str = "r", atoms: Any = None, precision: Optional[float] = None,
                 assume_units: Any = None) -> None:
        if mode not in ("r", "w", "a"):
            raise InvalidValueError(f"mode must be 'r', 'w' or 'a', got {mode!r}")
        self.path, self.mode, self.atoms = path, mode, atoms
        self._precision = precision
        self._reader: Optional[_ImageReader] = None
        self._writer: Optional[_ImageWriter] = None
        self._closed = False
        if mode == "r":
            self._reader = _ImageReader(path, assume_units)
        else:
            trajectory_schema(1, precision=precision)  # a bad precision is refused now

    # -- writing
    def write(self, atoms: Any = None, **results: Any) -> None:
        """Append ``atoms`` (default: the trajectory's own) with its calculator's current
        results, ``results`` given here taking precedence (as ASE's ``Trajectory.write``)."""
        if self.mode == "r" or self._closed:
            raise InvalidValueError(f"MrecTrajectory({str(self.path)!r}) is {'closed' if self._closed else 'read-only'}")
        atoms = self.atoms if atoms is None else atoms
        if atoms is None:
            raise InvalidValueError("write() needs atoms: none given here nor to MrecTrajectory")
        unknown = sorted(set(results) - set(_calculator.all_properties))
        if unknown:
            raise InvalidValueError(f"write(): {', '.join(unknown)} are no ASE calculator properties")
        for image in _iterimages(atoms):
            if self._writer is None:
                self._writer, frames = _ImageWriter.start(self.path, [image], [results], self._precision,
                                                          append=self.mode == "a")
                frame, unrecorded = frames[0]
            else:
                frame, unrecorded = _image_frame(image, results, self._writer.numbers is None)
            self._writer.append(image, frame, unrecorded)

    # -- reading
    def _images(self) -> _ImageReader:
        if self._reader is None:
            raise InvalidValueError(f"MrecTrajectory({str(self.path)!r}) was opened for writing, not reading")
        return self._reader

    def __len__(self) -> int:
        """Images in the record (reading), or written to it so far (writing; with ``"a"``,
        those already there included)."""
        if self._reader is not None:
            return len(self._reader)
        if self._writer is None:
            if self.mode == "a" and Path(self.path).is_dir():
                with MrecReader(self.path) as reader:
                    return len(reader)
            return 0
        return self._writer.count

    def __getitem__(self, i: Union[int, slice]) -> Any:
        images = self._images()
        if isinstance(i, slice):
            return [images.image(k) for k in range(*i.indices(len(images)))]
        return images.image(i)

    def __iter__(self) -> Iterator[Any]:
        images = self._images()
        for i in range(len(images)):
            yield images.image(i)

    # -- both
    def close(self) -> None:
        """Commit durably (writing) or release the record (reading); idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._writer is not None:
            self._writer.close()
        if self._reader is not None:
            self._reader.close()

    def __enter__(self) -> "MrecTrajectory":
        return self

    def __exit__(self, *exc: Any) -> None:
        # Every written image was complete when it was written: an exception later in the run
        # does not spoil it, so leaving the block commits (spec-notes/integrations.md).
        self.close()

