"""molrec_raw — MolRec molecular records on a hand-rolled Zarr V3 subset.

A record (``*.mrec`` directory, ``*.mrec.zip`` at rest) holds a system, frames, an MD
trajectory, a force field, observables, run status and metrics.  The core needs only numpy,
zstandard, crc32c and orjson.

Whole sections:   ``write_mrec_frame`` / ``read_mrec_frame``, ``write_mrec_system`` /
                  ``read_mrec_system``, ``write_mrec_forcefield`` / ``read_mrec_forcefield``,
                  ``read_mrec_meta``, ``section_names``; ``Frame``, ``Block``, ``Box``,
                  ``MetaValue``, ``ForceFieldSection``, ``Observable``.
Whole records:    ``MolRec``, ``write_mrec`` / ``read_mrec``, ``validate`` (-> ``Violation``),
                  ``repair_mrec`` (-> ``RepairReport``), ``salvage_mrec`` (-> ``SalvageReport``),
                  ``pack_mrec_zip`` / ``unpack_mrec_zip``.
Trajectories:     ``MrecWriter`` (streaming, crash-safe commits) under a ``SequenceSchema``,
                  ``MrecReader`` (frames by index, live following), ``write_mrec_trajectory`` /
                  ``read_mrec_trajectory`` (-> ``Trajectory``).
Collections:      ``CollectionWriter`` / ``CollectionReader`` (``read_collection``): many records
                  under one declaration in one ``*.mrec.lmdb`` (the ``[lmdb]`` extra).
Datasets:         ``open_dataset`` (-> ``Dataset``): many collection files (shards) read as
                  one sequence of records; ``write_dataset`` builds them (on Dask or not).
Metrics:          ``MetricsWriter`` (a JSONL WAL densified into Zarr), ``read_metrics``
                  (-> ``Series``), ``follow_metrics`` (-> ``MetricEvent``), ``discover_metrics``.
Errors:           ``molrec_raw.errors`` (every error is a ``MolrecError`` naming the store,
                  node, key, byte offset and rule id); ``molrec_raw.rules`` defines every rule id.
Layers:           ``molrec_raw.zarr`` (the Zarr V3 subset, knows nothing of MolRec),
                  ``molrec_raw.record`` (the format), ``molrec_raw.integrations`` (optional
                  tools: MDAnalysis, mdtraj, ASE, OpenMM, xarray, dask).

Command line:     ``molrec-raw --help``.

``import molrec_raw`` is cheap: each public name below is imported on first use
(PEP 562, ``molrec_raw._lazy``).  Adding a public name is one line in the
``TYPE_CHECKING`` block, which type checkers read as imports and the package reads as
its table of names.
"""
from typing import TYPE_CHECKING

from molrec_raw import _lazy, errors

__version__ = "0.1.0"

if TYPE_CHECKING:
    from molrec_raw.record.model import Block as Block
    from molrec_raw.record.model import Box as Box
    from molrec_raw.record.model import Frame as Frame
    from molrec_raw.record.model import MetaValue as MetaValue
    from molrec_raw.record.doors import read_mrec_forcefield as read_mrec_forcefield
    from molrec_raw.record.doors import read_mrec_frame as read_mrec_frame
    from molrec_raw.record.doors import read_mrec_meta as read_mrec_meta
    from molrec_raw.record.doors import read_mrec_system as read_mrec_system
    from molrec_raw.record.doors import section_names as section_names
    from molrec_raw.record.doors import write_mrec_forcefield as write_mrec_forcefield
    from molrec_raw.record.doors import write_mrec_frame as write_mrec_frame
    from molrec_raw.record.doors import write_mrec_system as write_mrec_system
    from molrec_raw.record.molrec import MolRec as MolRec
    from molrec_raw.record.molrec import read_mrec as read_mrec
    from molrec_raw.record.molrec import validate as validate
    from molrec_raw.record.molrec import write_mrec as write_mrec
    from molrec_raw.record.violations import Violation as Violation
    from molrec_raw.record.forcefield import ForceFieldSection as ForceFieldSection
    from molrec_raw.record.observables import Observable as Observable
    from molrec_raw.record.trajectory import MrecReader as MrecReader
    from molrec_raw.record.trajectory import MrecWriter as MrecWriter
    from molrec_raw.record.trajectory import SequenceSchema as SequenceSchema
    from molrec_raw.record.trajectory import Trajectory as Trajectory
    from molrec_raw.record.trajectory import read_mrec_trajectory as read_mrec_trajectory
    from molrec_raw.record.trajectory import write_mrec_trajectory as write_mrec_trajectory
    from molrec_raw.record.metrics import MetricEvent as MetricEvent
    from molrec_raw.record.metrics import MetricsWriter as MetricsWriter
    from molrec_raw.record.metrics import Series as Series
    from molrec_raw.record.metrics import discover_metrics as discover_metrics
    from molrec_raw.record.metrics import follow_metrics as follow_metrics
    from molrec_raw.record.metrics import read_metrics as read_metrics
    from molrec_raw.record.pack import pack_mrec_zip as pack_mrec_zip
    from molrec_raw.record.pack import unpack_mrec_zip as unpack_mrec_zip
    from molrec_raw.record.repair import RepairReport as RepairReport
    from molrec_raw.record.repair import repair_mrec as repair_mrec
    from molrec_raw.record.salvage import SalvageReport as SalvageReport
    from molrec_raw.record.salvage import salvage_mrec as salvage_mrec
    from molrec_raw.collection import CollectionReader as CollectionReader
    from molrec_raw.collection import CollectionWriter as CollectionWriter
    from molrec_raw.collection import read_collection as read_collection
    from molrec_raw.dataset import Dataset as Dataset
    from molrec_raw.dataset import open_dataset as open_dataset
    from molrec_raw.dataset import write_dataset as write_dataset
else:  # type checkers see the imports above; unknown names stay errors for them
    __getattr__, __dir__, __all__ = _lazy.attach(__name__, eager=("errors", "__version__"))
