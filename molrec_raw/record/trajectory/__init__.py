"""The MolRec trajectory section (trajectory.md): the pinned ``SequenceSchema``, the
streaming ``MrecWriter`` / ``MrecReader`` and the whole-trajectory doors."""
from __future__ import annotations

from molrec_raw.record.trajectory.mrec import (
    MrecReader, MrecWriter, Trajectory, read_mrec_trajectory, write_mrec_trajectory,
)
from molrec_raw.record.trajectory.schema import BlockSpec, ColumnSpec, MetaSpec, SequenceSchema

__all__ = [
    "BlockSpec", "ColumnSpec", "MetaSpec", "SequenceSchema", "MrecWriter", "MrecReader", "Trajectory",
    "read_mrec_trajectory", "write_mrec_trajectory",
]
