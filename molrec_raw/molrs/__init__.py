"""A drop-in for the record part of molrs's Python API, on molrec_raw (pure Python).

``import molrec_raw.molrs as molrs`` in place of ``import molrs`` runs a program written
against molrs's records where molrs has no wheel (Python < 3.12, Linux aarch64, musl):
``molrs.Frame`` / ``Block`` / ``Box`` / ``Trajectory``, ``molrs.core.MetaValue``,
``molrs.io.write_mrec`` and ``molrs.io.mrec`` (``MrecFile``, ``MrecReader``,
``MrecWriter``, ``SequenceSchema``, ``ForceFieldSection``, ``pack_mrec_zip``), with
molrs's names, signatures, defaults and exception types.  Every object is a thin handle on
molrec_raw's own (``molrec_raw.record``); the rest of molrs (chemistry, force-field
compilation, MD) is not here.  What differs from molrs, and why: spec-notes/dropin.md and
docs/guide/molrs-dropin.md.
"""
from __future__ import annotations

from molrec_raw.molrs import core, io
from molrec_raw.molrs.core import Block, Box, Frame, Trajectory

__version__ = "0.19.0"  # the molrs API this module mirrors (molrec_raw's own is molrec_raw.__version__)

__all__ = ["Block", "Box", "Frame", "Trajectory", "core", "io", "__version__"]
