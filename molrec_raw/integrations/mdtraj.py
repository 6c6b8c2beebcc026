"""MolRec records in mdtraj: :func:`load_mrec` and :func:`save_mrec`.

mdtraj works in nm and ps and holds the cell as lengths and angles, whose vectors are rows;
a record holds lattice vectors as columns in the units it states (conventions,
frame-and-types §10, §13.5).  Cells convert through mdtraj's own
``lengths_and_angles_to_box_vectors``/``box_vectors_to_lengths_and_angles`` in double
precision, so an mdtraj trajectory saved and loaded again gives back its float32 lengths and
angles exactly.  The topology goes to and comes from the record's ``system`` atoms
(``name element res_name res_id chain``) and ``bonds``.  An mdtraj ``Trajectory`` holds no
velocities, forces, energies or charges, and takes masses from its elements: a record's
``vx vy vz``, ``fx fy fz``, per-step energies, ``charge`` and ``mass`` are not read into one,
and ``save_mrec`` writes none (tests/integrations/test_unit_matrix.py lists each).
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

import numpy as np

from molrec_raw.integrations.conventions import (
    MDTRAJ_UNITS, RESIDUE_KEYS, Topology, as_units, renumbered_res_ids, require, runs_of,
)
from molrec_raw.integrations.trajectories import TrajectorySink, TrajectorySource

md = require("mdtraj", "mdtraj")
from mdtraj.utils import box_vectors_to_lengths_and_angles, lengths_and_angles_to_box_vectors  # noqa: E402,E501

__all__ = ["load_mrec", "save_mrec", "topology_of", "mdtraj_topology"]


def topology_of(top: Any) -> Topology:
    """The canonical topology of an ``mdtraj.Topology`` (chain: its ``chain_id``, else its
    index; residues renumbered when one has a negative ``resSeq``)."""
    atoms = list(top.atoms)
    columns: Dict[str, Any] = {
        "name": [a.name for a in atoms],
        "element": ["" if a.element is None else a.element.symbol for a in atoms],
        "res_name": [a.residue.name for a in atoms],
        "chain": [_chain_label(a.residue.chain) for a in atoms],
    }
    res_ids, renumbered = renumbered_res_ids(np.array([a.residue.resSeq for a in atoms], dtype=np.int64))
    if renumbered:
        warnings.warn("negative residue numbers cannot be stored (u64, frame-and-types §13.2): residues "
                      "renumbered 1, 2, … in order", stacklevel=3)
    columns["res_id"] = res_ids
    bonds = np.array([(b[0].index, b[1].index) for b in top.bonds], dtype=np.int64).reshape(-1, 2)
    return Topology(top.n_atoms, columns, {"bonds": bonds} if bonds.size else {})


def _chain_label(chain: Any) -> str:
    label = getattr(chain, "chain_id", None)
    return str(chain.index) if label is None else str(label)


def _element(symbol: Any) -> Any:
    try:
        return md.element.get_by_symbol(str(symbol)) if str(symbol) else md.element.virtual
    except KeyError:
        return md.element.virtual


def mdtraj_topology(top: Topology) -> Any:
    """An ``mdtraj.Topology`` from a canonical one: chains per run of ``chain``, residues per
    run of ``chain res_id res_name``; atoms without a name are called ``X``, without an
    element are virtual sites."""
    out = md.Topology()
    atoms = top.atoms
    chains, residues = runs_of(top, ("chain",)), runs_of(top, RESIDUE_KEYS)
    chain = residue = None
    last_chain = last_residue = -1
    made = []
    for i in range(top.n_atoms):
        if chains[i] != last_chain:
            label = str(atoms["chain"][i]) if "chain" in atoms else None
            try:
                chain = out.add_chain(chain_id=label)
            except TypeError:  # mdtraj before chain ids
                chain = out.add_chain()
            last_chain = chains[i]
        if residues[i] != last_residue:
            name = str(atoms["res_name"][i]) if "res_name" in atoms else "UNK"
            seq = int(atoms["res_id"][i]) if "res_id" in atoms else int(residues[i]) + 1
            residue = out.add_residue(name, chain, resSeq=seq)
            last_residue = residues[i]
        name = str(atoms["name"][i]) if "name" in atoms else "X"
        element = _element(atoms["element"][i]) if "element" in atoms else md.element.virtual
        made.append(out.add_atom(name, element, residue))
    for i, j in top.relations.get("bonds", np.zeros((0, 2), np.uint64)).tolist():
        out.add_bond(made[int(i)], made[int(j)])
    return out


def _given_topology(top: Any) -> Any:
    if top is None:
        return None
    if isinstance(top, md.Topology):
        return top
    if isinstance(top, md.Trajectory):
        return top.topology
    return md.load_topology(str(top))


def load_mrec(path: Any, top: Any = None, stride: Optional[int] = None, atom_indices: Optional[Sequence[int]] = None,
              frame: Optional[int] = None, *, assume_units: Any = None) -> Any:
    """The record at ``path`` as an ``mdtraj.Trajectory`` (nm, ps).  ``top`` (an
    ``mdtraj.Topology``, a Trajectory or a file mdtraj reads) replaces the record's own
    topology; ``stride``, ``atom_indices`` and ``frame`` (one frame) select as
    ``mdtraj.load`` does.  Positions and cells convert from the record's length unit, times
    from its time unit (frame-and-types §13.5); ``assume_units`` (e.g. ``{"length": "nm"}``)
    states those the record leaves unstated; a unit needed and stated nowhere is refused."""
    source = TrajectorySource(path, MDTRAJ_UNITS, assume=as_units(assume_units), groups=("positions",), meta=False)
    try:
        given = _given_topology(top)
        if given is None:
            canonical = source.topology()
            given = mdtraj_topology(Topology(source.n_atoms) if canonical is None else canonical)
        if given.n_atoms != source.n_atoms:
            raise ValueError(f"the topology has {given.n_atoms} atoms, the record {source.n_atoms}")
        if frame is not None:
            frames = np.array([range(source.n_frames)[frame]], dtype=np.int64)
        else:
            frames = np.arange(0, source.n_frames, stride or 1, dtype=np.int64)
        atoms = None if atom_indices is None else np.asarray(atom_indices, dtype=np.int64)
        n_atoms = source.n_atoms if atoms is None else atoms.size
        xyz = np.empty((frames.size, n_atoms, 3), dtype=np.float32)
        start = 0
        for batch in source.batches(frames, ["positions"]):  # each next batch read ahead meanwhile
            xyz[start:start + batch.frames.size] = batch.stacked("positions", np.float32, atoms)
            start += batch.frames.size
        rows = [source.cell_rows(int(i)) for i in frames]
        lengths = angles = None
        if frames.size and all(r is not None for r in rows):
            cells = np.stack([r for r in rows if r is not None])
            a, b, c, alpha, beta, gamma = box_vectors_to_lengths_and_angles(cells[:, 0], cells[:, 1], cells[:, 2])
            lengths = np.stack([a, b, c], axis=1).astype(np.float32)
            angles = np.stack([alpha, beta, gamma], axis=1).astype(np.float32)
        times = source.times[frames] if source.times is not None else frames.astype(np.float64)
    finally:
        source.close()
    topology = given if atoms is None else given.subset(atoms)
    return md.Trajectory(xyz, topology, time=times, unitcell_lengths=lengths, unitcell_angles=angles)


def save_mrec(traj: Any, path: Any, precision: Optional[float] = None) -> Path:
    """Write ``traj`` to a new record at ``path`` (an existing record is replaced): the
    topology into ``system`` with ``units`` nm, ps, kJ/mol, frames with their times and cells;
    ``precision`` (nm; None = lossless) rounds positions."""
    sink = TrajectorySink(path, traj.n_atoms, MDTRAJ_UNITS, topology=topology_of(traj.topology), precision=precision)
    try:
        cells = None
        if traj.unitcell_lengths is not None and traj.unitcell_angles is not None:
            lengths = np.asarray(traj.unitcell_lengths, dtype=np.float64)
            angles = np.asarray(traj.unitcell_angles, dtype=np.float64)
            a, b, c = lengths_and_angles_to_box_vectors(lengths[:, 0], lengths[:, 1], lengths[:, 2],
                                                        angles[:, 0], angles[:, 1], angles[:, 2])
            cells = np.stack([a, b, c], axis=1)
        times = np.asarray(traj.time, dtype=np.float64)
        for i in range(traj.n_frames):
            sink.append(traj.xyz[i], cell=None if cells is None else cells[i], time=float(times[i]))
    except BaseException:
        sink.abort()
        raise
    sink.close()
    return sink.path
