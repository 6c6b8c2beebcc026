"""The MolRec trajectory section (trajectory.md): the pinned ``SequenceSchema``, the
streaming ``MrecWriter`` / ``MrecReader`` and the whole-trajectory doors.

Modules: ``schema`` (the pin), ``extents`` (reference geometry), ``writer`` and ``reader``
(the public classes), and their parts ``blocks``, ``cell``, ``meta``, ``progressions``,
``references``, ``storage`` and ``common``.
"""
from __future__ import annotations

from molrec_raw.record.trajectory.reader import MrecReader, Trajectory, read_mrec_trajectory
from molrec_raw.record.trajectory.schema import BlockSpec, ColumnSpec, MetaSpec, SequenceSchema
from molrec_raw.record.trajectory.writer import MrecWriter, write_mrec_trajectory

__all__ = [
    "BlockSpec", "ColumnSpec", "MetaSpec", "SequenceSchema", "MrecWriter", "MrecReader", "Trajectory",
    "read_mrec_trajectory", "write_mrec_trajectory",
]
