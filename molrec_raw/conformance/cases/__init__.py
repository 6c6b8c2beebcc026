"""The conformance cases, one module per kind; importing this package registers them all
in :data:`~molrec_raw.conformance.cases.base.CASES`."""
from molrec_raw.conformance.cases import collections, frames, invalid, layouts, trajectories, zarr_python  # noqa: F401
from molrec_raw.conformance.cases.base import CASES, Case

__all__ = ["CASES", "Case"]
