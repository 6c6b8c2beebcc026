"""Collections from and to ASE's files: extended XYZ (and any multi-image format ASE reads)
and ASE databases (``*.db``) into a ``*.mrec.lmdb``; a collection out to extended XYZ.

Each image becomes one record (or, with ``group_by=KEY``, each run of consecutive images
sharing ``atoms.info[KEY]`` one record of many frames): its ``system`` holds the atoms'
``element``, ``atomic_number`` and ``mass``; its trajectory one frame per image with the
positions ``x y z``, the forces ``fx fy fz``, the energy ``pe`` and the stress (``stress``,
f64x9, the full 3×3 tensor row-major) as per-step meta, the cell and ``pbc`` as the frame's
cell — each image turned into a frame by the same code as the ``mrec`` ASE format
(:mod:`molrec_raw.integrations.ase`), the cell through :mod:`~molrec_raw.integrations.conventions`
(records hold lattice vectors as columns, ASE as rows).  The record's meta is its first
image's ``atoms.info`` (JSON values only; a database row's key-value pairs and data).

Units are ASE's and stated in the collection document: length Å, energy eV, force eV/Å,
stress eV/Å³.  Reading is streaming (memory holds one record; the file is read twice: a first
pass fixes the one declaration every record shares — a quantity some images lack is a
nullable column, or a per-step key with a NaN fill, so every record keeps the declaration).
Decisions: spec-notes/collection.md, "Converting".
"""
from __future__ import annotations

import math
import os
import warnings
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

import numpy as np

from molrec_raw.errors import InvalidValueError, MolrecError
from molrec_raw.integrations.ase import _complete, _fill, _image_frame
from molrec_raw.integrations.conventions import ASE_UNITS, FORCES, POSITIONS, cell_rows, require
from molrec_raw.integrations.frames_as_records import ConvertedCollection
from molrec_raw.record.model import Block, Frame, MetaValue
from molrec_raw.record.trajectory import SequenceSchema
from molrec_raw.record.units import unit_factor

__all__ = ["ASE_COLLECTION_UNITS", "ConvertedCollection", "ImageRecords", "images_to_collection", "image_declaration",
           "collection_to_extxyz", "read_images"]

_ase_io = require("ase.io", "ase")
_ase = require("ase", "ase")
_singlepoint = require("ase.calculators.singlepoint", "ase")
_data = require("ase.data", "ase")

#: The units of everything converted from ASE (its own: Å, eV; stress eV/Å³, time ASE's).
ASE_COLLECTION_UNITS = {"length": "angstrom", "energy": "eV", "force": "eV/angstrom", "stress": "eV/angstrom^3"}
_PROGRESS_EVERY = 64


def read_images(source: str, in_format: Optional[str] = None) -> Iterator[Tuple[Any, Dict[str, Any]]]:
    """The images of ``source`` one at a time, each with its record meta: an ASE database
    (``*.db``, rows in id order: key-value pairs and ``data``) or any file ``ase.io.iread``
    reads (extended XYZ by default for ``*.xyz``/``*.extxyz``: ``atoms.info``)."""
    if not os.path.exists(source):
        raise InvalidValueError(f"{source}: no such file")
    if in_format == "db" or (in_format is None and source.endswith(".db")):
        db = require("ase.db", "ase").connect(source, type="db")
        for row in db.select():
            meta = dict(row.key_value_pairs)
            if row.get("data"):
                meta.update(row.data)
            meta["db_id"] = int(row.id)
            yield row.toatoms(), meta
        return
    fmt = in_format or ("extxyz" if source.endswith((".xyz", ".extxyz")) else None)
    try:
        for atoms in _ase_io.iread(source, index=":", format=fmt):
            yield atoms, dict(atoms.info)
    except MolrecError:
        raise
    except (ValueError, KeyError, IndexError, TypeError, OSError, StopIteration) as exc:  # ASE's parse errors
        raise InvalidValueError(f"{source}: ASE cannot read it ({' '.join(str(exc).split()) or type(exc).__name__})")


def _json_meta(info: Dict[str, Any], skipped: Set[str]) -> Dict[str, Any]:
    """The JSON-representable part of ``info`` (numpy scalars and small arrays as lists);
    names of what cannot be represented go to ``skipped``."""
    out: Dict[str, Any] = {}
    for k, v in info.items():
        if isinstance(v, np.generic):
            v = v.item()
        elif isinstance(v, np.ndarray) and v.dtype.kind in "biuf" and v.size <= 4096:
            v = v.tolist()
        if isinstance(v, float) and not math.isfinite(v):
            skipped.add(str(k))
            continue
        if isinstance(k, str) and isinstance(v, (str, bool, int, float, list, dict)) or v is None:
            out[str(k)] = v
        else:
            skipped.add(str(k))
    return out


class _Declaration:
    """The first pass: the union of what the images' frames carry, as the one declaration
    every record of the collection shares."""

    def __init__(self) -> None:
        self.columns: Dict[str, Tuple[str, Tuple[int, ...]]] = {}
        self.column_count: Dict[str, int] = {}
        self.tags: Dict[str, str] = {}
        self.meta_count: Dict[str, int] = {}
        self.frames = 0

    def add(self, frame: Frame) -> None:
        self.frames += 1
        for column, values in frame.blocks["atoms"].columns.items():
            dtype = {"f": "f64", "i": "i64", "u": "u64"}[values.dtype.kind]
            seen = self.columns.setdefault(column, (dtype, tuple(values.shape[1:])))
            if seen != (dtype, tuple(values.shape[1:])):
                raise InvalidValueError(f"image {self.frames - 1}: {column} is {dtype}{list(values.shape[1:])}, an "
                                        f"earlier image's {seen[0]}{list(seen[1])}")
            self.column_count[column] = self.column_count.get(column, 0) + 1
        for key, value in frame.meta.items():
            self.tags.setdefault(key, value.tag if isinstance(value, MetaValue) else "f64")
            self.meta_count[key] = self.meta_count.get(key, 0) + 1

    def schema(self) -> SequenceSchema:
        schema = SequenceSchema()
        ordered = [c for c in POSITIONS + FORCES if c in self.columns] + \
            [c for c in self.columns if c not in POSITIONS + FORCES]
        for column in ordered:
            dtype, trailing = self.columns[column]
            schema.declare_column("atoms", column, dtype, trailing or None)
            if self.column_count[column] < self.frames:
                if column in POSITIONS:
                    raise InvalidValueError(f"an image has no positions ({column})")
                schema.declare_nullable("atoms", column)
        for key, tag in self.tags.items():
            if self.meta_count[key] == self.frames:
                schema.declare_meta(key, tag)
            else:
                schema.declare_meta_with_fill(key, _fill(tag), tag)
        return schema


def _system(atoms: Any) -> Frame:
    return Frame({}, {"atoms": Block({"element": np.array(atoms.get_chemical_symbols(), dtype=object),
                                      "atomic_number": np.asarray(atoms.numbers, dtype=np.uint64),
                                      "mass": np.asarray(atoms.get_masses(), dtype=np.float64)})})


def _plain(value: Any) -> Any:
    """A grouping value comparable with ``==`` and printable: numpy scalars as Python values,
    arrays as tuples."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return tuple(value.tolist())
    return value


def _groups(images: Iterator[Tuple[Any, Dict[str, Any]]], group_by: Optional[str]
            ) -> Iterator[Tuple[int, List[Tuple[Any, Dict[str, Any]]]]]:
    """Records of images: each image alone, or runs of consecutive images of one
    ``info[group_by]`` (the first image's ordinal with each)."""
    run: List[Tuple[Any, Dict[str, Any]]] = []
    first, current, ordinal = 0, None, -1
    for ordinal, (atoms, meta) in enumerate(images):
        if group_by is None:
            yield ordinal, [(atoms, meta)]
            continue
        if group_by not in meta:
            raise InvalidValueError(f"image {ordinal} has no info[{group_by!r}] to group by")
        value = _plain(meta[group_by])
        if run and value != current:
            yield first, run
            run = []
        if not run:
            first, current = ordinal, value
        run.append((atoms, meta))
    if run:
        yield first, run


def image_declaration(sources: List[str], in_format: Optional[str] = None) -> Tuple[SequenceSchema, int]:
    """The first pass over ``sources``: the one declaration every record of their images
    shares, and the number of images."""
    declaration = _Declaration()
    total = 0
    for source in sources:
        for atoms, _ in read_images(source, in_format):
            frame, _ = _image_frame(atoms, {}, False)
            declaration.add(frame)
            total += 1
    if total == 0:
        raise InvalidValueError(f"{', '.join(sources)}: no image to convert")
    return declaration.schema(), total


class ImageRecords:
    """The second pass: the records of ``source``'s images under ``schema`` (one per image,
    or per run of consecutive images sharing ``atoms.info[group_by]``), each as
    ``CollectionWriter.add_record``'s arguments with the index ``{"image": ordinal}`` (plus
    ``extra_index``); counts ``images``, ``records`` and ``atoms`` as it goes, and the
    ``skipped`` info keys (no place in a record)."""

    def __init__(self, source: str, schema: SequenceSchema, *, group_by: Optional[str] = None,
                 in_format: Optional[str] = None, extra_index: Optional[Dict[str, Any]] = None) -> None:
        self.source, self.schema, self.group_by, self.in_format = source, schema, group_by, in_format
        self.extra_index = dict(extra_index or {})
        self.images = self.records = self.atoms = 0
        self.skipped: Set[str] = set()

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        group_by, schema = self.group_by, self.schema
        for first, run in _groups(read_images(self.source, self.in_format), group_by):
            head = run[0][0]
            frames = []
            had_cell = False
            for k, (atoms, _) in enumerate(run):
                if len(atoms) != len(head) or not np.array_equal(atoms.numbers, head.numbers):
                    raise InvalidValueError(f"image {first + k} has other atoms than image {first} of its group "
                                            f"(info[{group_by!r}] = {_plain(run[0][1].get(str(group_by)))!r}): a "
                                            "record's system is fixed")
                frame, unrecorded = _image_frame(atoms, {}, False)
                if frame.box is None and had_cell:
                    raise InvalidValueError(f"image {first + k} has no cell, an earlier image of its group has one: a "
                                            "record's cell carries forward (trajectory#W29: defined or not for the "
                                            "whole trajectory), so it would read back with the earlier cell")
                had_cell = had_cell or frame.box is not None
                self.skipped.update(unrecorded)
                self.skipped.update(_complete(frame, schema, first + k))
                frames.append(frame)
                self.atoms += len(atoms)
            self.records += 1
            self.images += len(run)
            yield {"meta": _json_meta(run[0][1], self.skipped), "system": _system(head), "frames": frames,
                   "index": {**self.extra_index, "image": first}}

    def warn_skipped(self) -> None:
        """The info keys no record holds, in one warning naming the source."""
        if self.skipped:
            warnings.warn(f"{self.source}: not recorded: {', '.join(sorted(self.skipped))} (no place in a collection "
                          "record)", stacklevel=3)


def images_to_collection(source: str, target: str, *, group_by: Optional[str] = None,
                         in_format: Optional[str] = None,
                         progress: Optional[Callable[[int, int], None]] = None) -> ConvertedCollection:
    """Write the images of ``source`` (an extended XYZ file, an ASE database, any format
    ASE reads) into the new collection ``target``: one record per image, or per run of
    consecutive images sharing ``atoms.info[group_by]``.  ``progress(done, total)`` follows
    the images of the second pass."""
    from molrec_raw.collection import CollectionWriter

    schema, total = image_declaration([source], in_format)
    records = ImageRecords(source, schema, group_by=group_by, in_format=in_format)
    meta = {"source": os.path.basename(source), "converted_by": "molrec-raw convert (ASE)"}
    with CollectionWriter(target, units=ASE_COLLECTION_UNITS, schema=schema, meta=meta,
                          index_schema={"image": "i64"}) as writer:
        for record in records:
            writer.add_record(**record)
            if progress is not None and (records.images == total or records.records % _PROGRESS_EVERY == 0):
                progress(records.images, total)
    records.warn_skipped()
    return ConvertedCollection(source, target, records.records, total, records.atoms)


# -- a collection to extended XYZ -----------------------------------------------------------------
def _factors(units: Dict[str, str], where: str) -> Dict[str, float]:
    """Factors from the collection's units to ASE's (Å, eV) through the package's one table;
    a unit a quantity needs and the collection does not state is refused, naming it
    (extended XYZ readers take ASE's units, and a guess would be silent)."""
    target = ASE_UNITS.to_json()
    hint = "; the collection's units (collection#C1) must state it"
    return {q: unit_factor(q, units, target, where, hint) for q in ("length", "energy", "force", "stress")}


def _numbers(block: Block, r: int) -> np.ndarray:
    if "atomic_number" in block.columns:
        return np.asarray(block.columns["atomic_number"], dtype=np.int64)
    if "element" in block.columns:
        try:
            return np.array([_data.atomic_numbers[str(s)] for s in block.columns["element"]], dtype=np.int64)
        except KeyError as exc:
            raise InvalidValueError(f"record {r}: element {exc.args[0]!r} is not a chemical symbol") from None
    raise InvalidValueError(f"record {r} has neither atomic_number nor element in its atoms: an image needs them")


def _image(frame: Frame, r: int, k: int, meta: Dict[str, Any], factors: Dict[str, float]) -> Any:
    block = frame.blocks.get("atoms")
    if block is None or not all(c in block.columns for c in POSITIONS):
        raise InvalidValueError(f"record {r} frame {k} has no positions (atoms x, y, z): an image needs them")
    positions = np.stack([block.columns[c] for c in POSITIONS], axis=1) * factors["length"]
    box = frame.box
    rows = cell_rows(box)
    atoms = _ase.Atoms(numbers=_numbers(block, r), positions=positions,
                       cell=None if rows is None else rows * factors["length"],
                       pbc=False if box is None else list(box.boundary))
    if box is not None and box.defined and np.any(box.origin):
        atoms.set_celldisp(np.asarray(box.origin) * factors["length"])
    results: Dict[str, Any] = {}
    if all(c in block.columns for c in FORCES) and not any(
            c in block.masks and not np.all(block.masks[c]) for c in FORCES):
        results["forces"] = np.stack([block.columns[c] for c in FORCES], axis=1) * factors["force"]
    info = dict(meta)
    for key, value in frame.meta.items():
        raw = value.value if isinstance(value, MetaValue) else value
        if key == "pe" and isinstance(raw, float) and math.isfinite(raw):
            results["energy"] = raw * factors["energy"]
        elif key == "stress" and isinstance(raw, (tuple, list)) and len(raw) == 9 and all(math.isfinite(v) for v in raw):
            full = np.asarray(raw, dtype=np.float64).reshape(3, 3) * factors["stress"]
            results["stress"] = full[[0, 1, 2, 1, 0, 0], [0, 1, 2, 2, 2, 1]]
        elif isinstance(raw, (str, bool, int)) or (isinstance(raw, float) and math.isfinite(raw)):
            info[key] = raw
    atoms.info.update(info)
    atoms.info["mrec_record"] = r
    if results:
        atoms.calc = _singlepoint.SinglePointCalculator(atoms, **results)
    return atoms


def collection_to_extxyz(source: str, target: str, *,
                         progress: Optional[Callable[[int, int], None]] = None) -> ConvertedCollection:
    """Write every frame of every record of the collection ``source`` as one image of the
    new extended XYZ file ``target`` (a record without a trajectory: its system, once; one of
zero frames: nothing);
    ``atoms.info`` holds the record's meta (scalars), its per-step keys and ``mrec_record``
    (so ``--group-by mrec_record`` reads the records back)."""
    from molrec_raw.collection import CollectionReader
    from molrec_raw.collection.inspection import joined

    if os.path.exists(target):
        raise InvalidValueError(f"{target} exists: convert never overwrites")
    frames = atoms_total = 0
    with CollectionReader(source) as c:
        factors = _factors(c.units, str(source))
        total = len(c)
        with open(target, "x", encoding="utf-8") as out:
            for r, rec in enumerate(c):
                meta = {k: v for k, v in rec.meta.items() if isinstance(v, (str, bool, int, float))}
                system, trajectory = rec.system, rec.trajectory
                views = [system or Frame()] if trajectory is None else (
                    joined(system, frame, source, r) for frame in trajectory)  # one pass, carry-forward kept
                for k, view in enumerate(views):
                    image = _image(view, r, k, meta, factors)
                    _ase_io.write(out, image, format="extxyz")
                    frames += 1
                    atoms_total += len(image)
                if progress is not None and (r + 1 == total or (r + 1) % _PROGRESS_EVERY == 0):
                    progress(r + 1, total)
    return ConvertedCollection(source, target, total, frames, atoms_total)
