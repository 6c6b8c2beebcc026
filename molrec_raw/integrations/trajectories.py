"""A record's frames as analysis tools read and write them, shared by every tool integration.

:class:`TrajectorySource` reads a record's frames the way MDAnalysis and mdtraj need them: a
fixed atom count (a trajectory whose ``atoms`` block changes its row count is refused, since
neither tool can represent it), positions/velocities/forces converted from the record's units
to the tool's (conventions, frame-and-types §13.5), read many frames at a time
(the read engine: ``MrecReader.block_columns`` for the coordinates and ``read_frames`` for the
batch's per-step meta and cells, each planned as one read instead of one per frame), the cell
as rows, steps, times and per-step meta.  A record without a trajectory section yields its
``frame`` section (or a ``system`` section with coordinates) as a single frame.

:class:`TrajectorySink` writes frames a tool hands over, already in the units it states:
the ``system`` section (topology and the ``units`` key) first, then the trajectory through
``MrecWriter``, one ``append`` per frame, so memory stays flat however long the run.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from molrec_raw.errors import InvalidValueError, SpecViolationError, UnsupportedFeatureError
from molrec_raw.integrations.conventions import (
    FORCES, NO_UNITS, POSITIONS, VELOCITIES, Topology, Units, atoms_frame, box_from_rows, cell_rows,
    META_QUANTITIES, UNSTATED_AS_STORED, start_trajectory, stated_factors, trajectory_schema, units_of,
    unstated_warning,
)
from molrec_raw.record.doors import check_record_path, read_mrec_frame, read_mrec_system, section_names
from molrec_raw.record.model import Box, Frame, MetaValue
from molrec_raw.record.trajectory import MrecReader, SequenceSchema
from molrec_raw.record.trajectory.readahead import Pending, ReadAhead

__all__ = ["GROUPS", "Batch", "TrajectorySource", "TrajectorySink", "BATCH_BYTES"]

_HINT = ("; state it in the record (the 'units' meta key of system or frame) or when reading "
         "(assume_units={'length': 'nm', ...})")

#: Each per-atom vector group: its three ``atoms`` columns and the quantity it carries.
GROUPS: Dict[str, Tuple[Tuple[str, str, str], str]] = {
    "positions": (POSITIONS, "length"), "velocities": (VELOCITIES, "velocity"), "forces": (FORCES, "force"),
}
#: Bytes of f64 columns one sequential read batch holds: one range read per column and
#: batch amortises the record layer's per-call cost (measured: 1 frame per call 0.24x the
#: DCD reader, 16 frames 0.45x, little gain beyond; bench/integrations.py), and bounds memory.
BATCH_BYTES = 4 << 20
_ABOVE_DIAGONAL = (np.array([0, 0, 1]), np.array([1, 2, 2]))  # np.triu_indices(3, 1), made once


@dataclass
class Batch:
    """Reads of ``frames`` at once: ``columns[name]`` is ``(len(frames), n_atoms)`` f64 in
    the record's units; ``factors[group]`` converts a group to the tool's units;
    ``resolved[frame]`` its per-step meta (converted) and cell, when the source reads meta."""

    frames: np.ndarray
    columns: Dict[str, np.ndarray]
    factors: Dict[str, float]
    resolved: Dict[int, Tuple[Dict[str, Any], Optional[Box]]] = field(default_factory=dict)
    prepared: Dict[str, np.ndarray] = field(default_factory=dict)  # group -> stacked (see TrajectorySource.read)

    def __post_init__(self) -> None:
        self._position = {int(f): k for k, f in enumerate(self.frames.tolist())}

    def __contains__(self, frame: int) -> bool:
        return frame in self._position

    def fill(self, frame: int, group: str, out: np.ndarray) -> None:
        """Frame ``frame``'s ``group`` into ``out`` (``(n_atoms, 3)``, any float dtype), converted."""
        k = self._position[frame]
        ready = self.prepared.get(group)
        if ready is not None and ready.dtype == out.dtype:  # converted with the read: one copy
            out[...] = ready[k]
            return
        factor = self.factors[group]
        for axis, name in enumerate(GROUPS[group][0]):
            if factor == 1.0:
                out[:, axis] = self.columns[name][k]
            else:
                np.multiply(self.columns[name][k], factor, out=out[:, axis], casting="unsafe")

    def stacked(self, group: str, dtype: Any = np.float32, atoms: Any = None) -> np.ndarray:
        """The whole batch of ``group`` as ``(n_frames, n_atoms, 3)`` in the tool's units
        (``atoms``: an index array selecting atoms)."""
        names = GROUPS[group][0]
        first = self.columns[names[0]] if atoms is None else self.columns[names[0]][:, atoms]
        out = np.empty(first.shape + (3,), dtype=dtype)
        for axis, name in enumerate(names):
            values = self.columns[name] if atoms is None else self.columns[name][:, atoms]
            np.multiply(values, self.factors[group], out=out[:, :, axis], casting="unsafe")
        return out


class TrajectorySource:
    """The frames of the record at ``path`` in ``to`` units (None: as stored).

    The record's units are the ones its ``system`` (or ``frame``) section states, each unit it
    leaves unstated taken from ``assume`` (default: none but the spec's mass and charge
    defaults).  A unit needed to convert what the caller reads — ``groups`` (default: every
    vector group present), the times, ``meta`` per-step keys — and stated nowhere is refused
    when the source opens, naming it (frame-and-types §13.5: never guessed); a per-step ``temp``
    whose unit is stated nowhere is handed over as stored, with one warning per source when it
    is first handed over (conventions.UNSTATED_AS_STORED).
    """

    def __init__(self, path: Any, to: Optional[Units] = None, *, assume: Units = NO_UNITS,
                 groups: Optional[Sequence[str]] = None, meta: bool = True) -> None:
        self.path = check_record_path(path)
        sections = section_names(self.path)
        self.system = read_mrec_system(self.path) if "system" in sections else None
        self.frame = read_mrec_frame(self.path) if "frame" in sections else None
        stated = units_of(self.system, self.frame)
        self.units = (stated or assume).with_defaults(assume)
        self.to = self.units if to is None else to
        self._convert = to is not None
        self._reader: Optional[MrecReader] = None
        self._single: Optional[Frame] = None
        self._meta_cache: Tuple[int, Dict[str, Any], Optional[Box]] = (-1, {}, None)
        self._batch_resolved: Dict[int, Tuple[Dict[str, Any], Optional[Box]]] = {}  # the last read's frames
        self._ahead: Optional[Tuple[np.ndarray, Any, ReadAhead[Batch]]] = None  # read()'s ahead=
        self._pending = Pending()
        self._cell: Tuple[Any, Optional[np.ndarray]] = (None, None)  # the last cell converted: (key, rows)
        self._warned_boundary = False
        self._warned_orientation = False
        self._warned_unstated = False
        if "trajectory" in sections:
            reader = MrecReader(self.path)
            if len(reader) or (self.frame is None and not self._has_positions(self.system)):
                self._reader = reader
            else:
                reader.close()
        if self._reader is None:
            single = self.frame if self._has_positions(self.frame) else self.system
            if not self._has_positions(single):
                raise SpecViolationError(f"{self.path}: the record holds no coordinates (no trajectory, and no "
                                         "frame or system section with atoms x, y, z)", rule="frame-and-types#13.2")
            self._single = single
        self._columns = self._declared_columns()
        missing = [c for c in POSITIONS if c not in self._columns]
        if missing:
            raise SpecViolationError(f"{self.path}: the trajectory's atoms block has no {'/'.join(missing)} column",
                                     rule="frame-and-types#13.2")
        self.groups = [g for g, (names, _) in GROUPS.items() if all(n in self._columns for n in names)
                       and (groups is None or g in groups or g == "positions")]
        self.n_frames, self.n_atoms = self._extent()
        meta_keys = [] if self._reader is None or not meta else [k for k, _ in self._reader.schema.meta_keys()]
        quantities = {k: META_QUANTITIES[k][0] for k in meta_keys if k in META_QUANTITIES}
        #: per-step keys handed over as stored, with a warning: their unit is stated nowhere
        self._unstated = {k: q for k, q in quantities.items()
                          if self._convert and q in UNSTATED_AS_STORED and getattr(self.units, q) is None}
        if self._convert:  # every unit the tool needs and the record leaves unstated, named at once
            needed = [GROUPS[g][1] for g in self.groups] + [q for k, q in quantities.items() if k not in self._unstated]
            if self._reader is not None and self._reader.time is not None:
                needed.append("time")
            stated_factors(needed, self.units, self.to, str(self.path), _HINT, self.path)
        self.factors = {g: self.factor(GROUPS[g][1]) for g in self.groups}  # the groups read only
        self.steps, self.times = self._numbering()
        self.meta_keys = meta_keys
        self._meta_factors = {k: self._meta_factor(k) for k in self.meta_keys}

    def factor(self, quantity: str) -> float:
        """The factor from the record's units of ``quantity`` to the tool's (1 when reading as
        stored); a unit stated nowhere is refused, naming it and how to state it."""
        if not self._convert:
            return 1.0
        return self.units.factor(quantity, self.to, where=str(self.path), hint=_HINT)

    def _meta_factor(self, key: str) -> float:
        quantity = META_QUANTITIES.get(key)
        return 1.0 if quantity is None or key in self._unstated else self.factor(quantity[0]) ** quantity[1]

    # -- what the record holds --------------------------------------------------------------
    @staticmethod
    def _has_positions(section: Optional[Frame]) -> bool:
        atoms = None if section is None else section.blocks.get("atoms")
        return atoms is not None and all(c in atoms.columns for c in POSITIONS)

    def _declared_columns(self) -> List[str]:
        if self._reader is not None:
            schema = self._reader.schema
            return schema.column_names("atoms") if schema.has_block("atoms") else []
        assert self._single is not None, "a source reads a trajectory or a single section"
        return list(self._single.blocks["atoms"].columns)

    def _extent(self) -> Tuple[int, int]:
        if self._reader is None:
            assert self._single is not None
            return 1, self._single.blocks["atoms"].nrows
        n = len(self._reader)
        if n == 0:
            return 0, self._system_atoms()
        try:
            self._reader.block_columns("atoms", [], None)  # one row count over every frame, or refused
        except InvalidValueError as exc:
            raise UnsupportedFeatureError(f"{self.path}: {exc.message}: MDAnalysis and mdtraj need one atom count "
                                          "for the whole trajectory", rule="trajectory#8.1") from None
        return n, int(self._reader.block_columns("atoms", ["x"], [0])["x"].shape[1])

    def _system_atoms(self) -> int:
        atoms = None if self.system is None else self.system.blocks.get("atoms")
        return 0 if atoms is None else atoms.nrows

    def _numbering(self) -> Tuple[np.ndarray, Optional[np.ndarray]]:
        if self._reader is None:
            return np.zeros(1, np.int64), None
        times = self._reader.time
        steps = np.asarray(self._reader.step, dtype=np.int64)
        return steps, None if times is None else np.asarray(times, dtype=np.float64) * self.factor("time")

    def topology(self) -> Optional[Topology]:
        """The record's topology: its ``system`` section, else its ``frame`` section; masses
        and charges in the tool's units."""
        section = self.system if self.system is not None and "atoms" in self.system.blocks else self.frame
        if section is None or "atoms" not in section.blocks:
            return None
        top = Topology.from_section(section)
        for key in ("mass", "charge"):
            if key in top.atoms:
                top.atoms[key] = top.atoms[key] * self.factor(key)
        return top

    # -- reading ------------------------------------------------------------------------------
    def batch_size(self) -> int:
        """Frames per sequential read, from :data:`BATCH_BYTES`."""
        per_frame = 8 * max(1, self.n_atoms) * 3 * len(self.groups)
        return max(1, BATCH_BYTES // per_frame)

    def read(self, frames: Any, groups: Optional[Sequence[str]] = None, ahead: Any = None,
             stacked: Any = None) -> Batch:
        """Frames ``frames`` (a sequence or array of indices) of ``groups`` (default: every
        group present); their per-step meta and cells are read with them (one planned read,
        kept for :meth:`meta` and :meth:`cell_rows` until the next batch).  ``ahead``: the
        frames the caller reads next, read on a thread from now (record/trajectory/readahead.py)
        and handed to the next call that asks for exactly them, these groups and ``stacked``
        (its error, if any, raised there); any other call drops it.  ``stacked`` (a dtype):
        each group also converted to the tool's ``(frames, atoms, 3)`` with the read (for a
        batch read ahead, on its thread), so :meth:`Batch.fill` is one copy."""
        index = np.asarray(frames, dtype=np.int64).reshape(-1)
        names = tuple(n for g in (self.groups if groups is None else groups) for n in GROUPS[g][0])
        kind = (names, None if stacked is None else np.dtype(stacked).str)
        pending, self._ahead = self._ahead, None
        batch: Optional[Batch] = None
        if pending is not None:
            if pending[1] == kind and np.array_equal(pending[0], index):
                batch = pending[2].result()
            else:
                pending[2].wait()
        if batch is None:
            batch = self._read_now(index, names, stacked)
        following = None if ahead is None or self._reader is None else np.asarray(ahead, np.int64).reshape(-1)
        if following is not None and following.size:
            self._ahead = (following, kind, ReadAhead(partial(self._read_now, following, names, stacked),
                                                      self._pending))
        self._batch_resolved = batch.resolved
        return batch

    def batches(self, frames: np.ndarray, groups: Optional[Sequence[str]] = None) -> Iterator[Batch]:
        """:meth:`read` of ``frames`` in order, :meth:`batch_size` frames at a time, each next
        batch read ahead while the caller works on one."""
        step = self.batch_size()
        for start in range(0, int(frames.size), step):
            yield self.read(frames[start:start + step], groups, ahead=frames[start + step:start + 2 * step])

    def _read_now(self, index: np.ndarray, names: Sequence[str], stacked: Any = None) -> Batch:
        """:meth:`read`'s work (on the caller's thread or a read-ahead's: it changes nothing
        of the source)."""
        resolved: Dict[int, Tuple[Dict[str, Any], Optional[Box]]] = {}
        if self._reader is not None:
            columns = self._reader.block_columns("atoms", list(names), index)
            if self.meta_keys:  # the batch's meta and cells in one planned read, not one per frame
                found = self._reader.read_frames(index, columns=[])
                resolved = {int(f): (self._converted_meta(r), r.box) for f, r in zip(index.tolist(), found)}
        else:
            assert self._single is not None
            if index.size and (index.min() < 0 or index.max() > 0):
                raise IndexError(f"{self.path}: a single-frame record has frame 0 only")
            atoms = self._single.blocks["atoms"]
            columns = {n: np.broadcast_to(np.asarray(atoms.columns[n], dtype=np.float64), (index.size, atoms.nrows))
                       for n in names}
        batch = Batch(index, columns, self.factors, resolved)
        if stacked is not None:
            batch.prepared = {g: batch.stacked(g, stacked) for g in self.groups
                              if all(n in columns for n in GROUPS[g][0])}
        return batch

    def _resolved(self, frame: int) -> Tuple[Dict[str, Any], Optional[Box]]:
        """Frame ``frame``'s per-step meta (converted) and cell, read once for both."""
        if self._meta_cache[0] == frame:
            return self._meta_cache[1], self._meta_cache[2]
        if self._reader is None:
            assert self._single is not None
            meta: Dict[str, Any] = {}
            box = self._single.box
        elif frame in self._batch_resolved:
            meta, box = self._batch_resolved[frame]
        elif self.meta_keys:
            resolved = self._reader.read_columns(frame, [])
            meta, box = self._converted_meta(resolved), resolved.box
        else:
            meta, box = {}, self._reader.box_at(frame)
        self._meta_cache = (frame, meta, box)
        return meta, box

    def _converted_meta(self, resolved: Frame) -> Dict[str, Any]:
        """A resolved frame's per-step meta as plain values in the tool's units."""
        if self._unstated and not self._warned_unstated and any(k in resolved.meta for k in self._unstated):
            self._warned_unstated = True
            warnings.warn(unstated_warning(str(self.path), self._unstated), stacklevel=4)
        meta: Dict[str, Any] = {}
        for key, value in resolved.meta.items():
            plain = value.value if isinstance(value, MetaValue) else value
            factor = self._meta_factors.get(key, 1.0)
            meta[key] = plain * factor if factor != 1.0 and isinstance(plain, float) else plain
        return meta

    def meta(self, frame: int) -> Dict[str, Any]:
        """Frame ``frame``'s per-step meta, canonical energies and volume in the tool's units."""
        return self._resolved(frame)[0]

    def cell_rows(self, frame: int) -> Optional[np.ndarray]:
        """Frame ``frame``'s cell as lattice-vector rows in the tool's length unit, or None.
        A cell that is not periodic along every axis is still returned (the tools have no
        per-axis flag), with one warning per source; so is a cell whose vectors are not in the
        tools' orientation (a along x, b in the xy plane: MDAnalysis and mdtraj keep lengths
        and angles only, so they hold it rotated against the positions)."""
        box = self._resolved(frame)[1]
        key = None if box is None else (np.asarray(box.vectors, np.float64).tobytes(), tuple(box.boundary), box.defined)
        if key is not None and key == self._cell[0]:  # the cell of the frame before: checked already
            rows = self._cell[1]
            return None if rows is None else rows.copy()
        rows = cell_rows(box)
        if rows is not None:
            rows = self._checked_cell(box, rows)
        self._cell = (key, rows)
        return None if rows is None else rows.copy()

    def _checked_cell(self, box: Any, rows: np.ndarray) -> np.ndarray:
        """A cell's rows in the tool's length unit, warning once per source about what the
        tools cannot hold (see :meth:`cell_rows`)."""
        if not all(box.boundary) and not self._warned_boundary:
            self._warned_boundary = True
            warnings.warn(f"{self.path.name}: the cell is periodic along {list(box.boundary)} only; the tool treats "
                          "it as periodic along every axis", stacklevel=4)
        if not self._warned_orientation and np.any(np.abs(rows[_ABOVE_DIAGONAL]) > 1e-6 * np.abs(rows).max()):
            self._warned_orientation = True
            warnings.warn(f"{self.path.name}: the cell's lattice vectors are not in the orientation the tool keeps "
                          "(a along x, b in the xy plane); it gets their lengths and angles, a cell rotated "
                          "against the positions", stacklevel=4)
        factor = self.factors["positions"]
        return rows * factor if factor != 1.0 else rows

    def close(self) -> None:
        """Release the record's reader (idempotent), once a batch read ahead is done."""
        self._ahead = None
        self._pending.wait()
        if self._reader is not None:
            self._reader.close()


class TrajectorySink:
    """A new record at ``path`` written frame by frame, in the tool's ``units``.

    ``topology`` (default: the atom count only) goes to the ``system`` section with the
    ``units`` key; an existing record at ``path`` is replaced.  ``precision`` (None = lossless)
    rounds positions only.  ``meta_keys`` are f64 per-step keys; a frame that omits one
    stores NaN.
    """

    def __init__(self, path: Any, n_atoms: int, units: Units, *, topology: Optional[Topology] = None,
                 precision: Optional[float] = None, velocities: bool = False, forces: bool = False,
                 meta_keys: Sequence[str] = (), system_meta: Optional[Dict[str, Any]] = None,
                 flush_every: Optional[int] = None) -> None:
        top = Topology(n_atoms) if topology is None else topology
        if top.n_atoms != n_atoms:
            raise InvalidValueError(f"the topology has {top.n_atoms} atoms, the trajectory {n_atoms}")
        schema: SequenceSchema = trajectory_schema(n_atoms, velocities=velocities, forces=forces,
                                                   precision=precision, meta_keys=meta_keys)
        self._writer = start_trajectory(path, top.system(units, system_meta), schema, flush_every=flush_every)
        self.path = Path(path).absolute()
        self.n_atoms, self.meta_keys = n_atoms, list(meta_keys)
        self.velocities, self.forces = velocities, forces
        self._had_cell = False
        self.frames = 0

    def append(self, positions: Any, *, velocities: Any = None, forces: Any = None, cell: Any = None,
               pbc: Sequence[bool] = (True, True, True), step: Optional[int] = None, time: Optional[float] = None,
               meta: Optional[Dict[str, Any]] = None) -> None:
        """One frame: ``(n_atoms, 3)`` arrays, ``cell`` as lattice-vector rows (None or all
        zero: no cell; a record's cell carries forward, so a cell cannot vanish mid-run)."""
        for name, given, declared in (("velocities", velocities, self.velocities), ("forces", forces, self.forces)):
            if (given is not None) != declared:
                raise InvalidValueError(f"frame {self.frames}: {name} {'missing' if declared else 'not declared'}: "
                                        f"the record's schema was pinned at the first frame")
        box = box_from_rows(cell, pbc)
        if box is None and self._had_cell:
            raise InvalidValueError(f"frame {self.frames} has no cell after frames with one; a record's cell carries "
                                    "forward, so it cannot express a cell that disappears (trajectory §7)")
        self._had_cell = self._had_cell or box is not None
        values = {k: math.nan for k in self.meta_keys}
        for key, value in (meta or {}).items():
            if key in values:
                values[key] = float(value)
        frame = atoms_frame(positions, velocities=velocities, forces=forces, box=box, meta=values)
        self._writer.append(frame, step=step, time=time)
        self.frames += 1

    def close(self) -> None:
        """Commit what is buffered and close the record's writer (a durable last flush)."""
        self._writer.close()

    def abort(self) -> None:
        """Leave committed frames as they are and drop the buffer (an error mid-run)."""
        self._writer.__exit__(InvalidValueError, None, None)

