"""The MolRec trajectory section (trajectory.md): the pinned ``SequenceSchema`` so far;
the streaming ``MrecWriter`` / ``MrecReader`` build on it (issue 4)."""
from __future__ import annotations

from molrec_raw.record.trajectory.schema import BlockSpec, ColumnSpec, MetaSpec, SequenceSchema

__all__ = ["BlockSpec", "ColumnSpec", "MetaSpec", "SequenceSchema"]
