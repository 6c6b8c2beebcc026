"""molrec_raw — a from-scratch MolRec record library on a hand-rolled Zarr V3 subset.

Layers: ``molrec_raw.zarr`` (the Zarr V3 subset, knows nothing of MolRec) and
``molrec_raw.record`` (the record format), re-exported here.
"""
from molrec_raw import errors
from molrec_raw.collection import CollectionReader, CollectionWriter, read_collection
from molrec_raw.record.doors import (
    read_mrec_forcefield, read_mrec_frame, read_mrec_meta, read_mrec_system, section_names,
    write_mrec_forcefield, write_mrec_frame, write_mrec_system,
)
from molrec_raw.record.forcefield import ForceFieldSection
from molrec_raw.record.metrics import MetricEvent, MetricsWriter, Series, discover_metrics, follow_metrics, read_metrics
from molrec_raw.record.model import Block, Box, Frame, MetaValue
from molrec_raw.record.molrec import MolRec, read_mrec, validate, write_mrec
from molrec_raw.record.observables import Observable
from molrec_raw.record.pack import pack_mrec_zip, unpack_mrec_zip
from molrec_raw.record.repair import RepairReport, repair_mrec
from molrec_raw.record.trajectory import (
    MrecReader, MrecWriter, SequenceSchema, Trajectory, read_mrec_trajectory, write_mrec_trajectory,
)
from molrec_raw.record.violations import Violation

__version__ = "0.1.0"

__all__ = [
    "Block", "Box", "ForceFieldSection", "Frame", "MetaValue", "MetricsWriter", "MolRec", "MrecReader",
    "MrecWriter", "Observable", "SequenceSchema", "Series", "Trajectory", "Violation", "discover_metrics",
    "read_metrics", "follow_metrics", "MetricEvent", "read_mrec_trajectory", "write_mrec_trajectory",
    "errors", "pack_mrec_zip", "unpack_mrec_zip", "repair_mrec", "RepairReport", "read_mrec", "read_mrec_forcefield", "read_mrec_frame", "read_mrec_meta",
    "read_mrec_system", "section_names", "validate", "write_mrec", "write_mrec_forcefield",
    "write_mrec_frame", "write_mrec_system", "__version__",
    "CollectionReader", "CollectionWriter", "read_collection",
]
