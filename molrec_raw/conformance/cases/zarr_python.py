"""Valid cases laid out by zarr-python 3.4.2: another writer's choices a reader must accept.

zarr-python writes ``zarr.json`` in its own key order with ``storage_transformers: []``,
``{"name": "bytes"}`` without configuration for 1-byte types, zstd level 0 without a
checksum and no crc32c, vlen-utf8 strings, sharding with the index at the end; its
``ZipStore`` writes timestamps and its own zip records.  These cases are **frozen**: laid
out once (``python -m molrec_raw.conformance freeze-zarr-python DIR``) and checked in,
because the zip holds the time of writing and zarr-python's version differs between the
Pythons the suite runs on.  ``build`` copies them from the checked-in corpus and verifies
them against the digests below; the suite re-lays the directories with zarr-python 3.4.2
when it is installed and checks that they are byte for byte what is checked in.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict

import numpy as np

from molrec_raw.conformance.cases.base import CASES, RECORD, ZIP, Case

ZARR_PYTHON_VERSION = "3.4.2"


def _frame(root: Any) -> None:
    root.create_group("meta", attributes={"molrec_version": 2, "creator": {"name": "zarr-python"}})
    frame = root.create_group("frame", attributes={"title": "laid out by zarr-python", "n": 3,
                                                   "_meta_types": {"title": "string", "n": "i32"}})
    atoms = frame.create_group("atoms", attributes={"count": 3})
    atoms.create_array("x", shape=(3,), dtype="float64", chunks=(2,))[:] = np.array([0.0, 0.96, -0.24])
    atoms.create_array("element", shape=(3,), dtype=str, chunks=(3,))[:] = np.array(["O", "H", "H"])
    atoms.create_array("charge", shape=(3,), dtype="float64", chunks=(3,), fill_value=np.nan)[:] = \
        np.array([-0.8, np.nan, 0.4])
    validity = atoms.create_group("_validity")
    validity.create_array("charge", shape=(3,), dtype="bool", chunks=(3,))[:] = np.array([True, False, True])
    box = frame.create_group("box")
    box.create_array("vectors", shape=(3, 3), dtype="float64", chunks=(3, 3))[:] = np.eye(3) * 12.0
    box.create_array("boundary", shape=(3,), dtype="bool", chunks=(3,))[:] = np.array([True, True, False])


def _sharded(root: Any) -> None:
    root.create_group("meta", attributes={"molrec_version": 2})
    system = root.create_group("system")
    grid = system.create_group("grid", attributes={"count": 8, "structural_shape": [2, 4]})
    grid.create_array("field", shape=(8, 4), dtype="float64", chunks=(2, 2), shards=(4, 4))[:] = \
        np.arange(32.0).reshape(8, 4) / 3
    grid.create_array("flag", shape=(8,), dtype="uint8", chunks=(2,), shards=(4,))[:] = \
        np.array([0, 1, 0, 0, 0, 0, 255, 7], dtype=np.uint8)
    grid.create_array("id", shape=(8,), dtype="uint64", chunks=(8,))[:] = np.arange(8, dtype=np.uint64) + 2**60


def _trajectory(root: Any) -> None:
    root.create_group("meta", attributes={"molrec_version": 2})
    schema = {"blocks": {"atoms": {"columns": {"x": {"dtype": "f64", "trailing": []}}}},
              "meta": {"pe": {"dtype": "f64"}}}
    traj = root.create_group("trajectory", attributes={
        "sequence_schema": schema, "nstep": 3, "step_progression": {"start": 100, "stride": 10},
        "time_progression": {"start": 0.0, "stride": 0.5}})
    atoms = traj.create_group("atoms", attributes={"uniform_rows": 2, "dense_updates": True})
    atoms.create_array("x", shape=(6,), dtype="float64", chunks=(4,))[:] = np.array([0.0, 1.0, 0.1, 1.1, 0.2, 1.2])
    meta = traj.create_group("meta")
    meta.create_array("pe", shape=(3,), dtype="float64", chunks=(3,), attributes={"meta_dtype": "f64"})[:] = \
        np.array([-1.0, -1.5, -1.25])
    traj.create_group("box", attributes={"vectors": [[9.0, 0.0, 0.0], [0.0, 9.0, 0.0], [0.0, 0.0, 9.0]]})


LAYOUTS: Dict[str, Callable[[Any], None]] = {
    "valid/zarr-python-frame": _frame,
    "valid/zarr-python-sharded": _sharded,
    "valid/zarr-python-trajectory": _trajectory,
}
_ABOUT = {
    "valid/zarr-python-frame": "a frame laid out by zarr-python 3.4.2: its key order, zstd level 0 without crc32c, "
                               "vlen-utf8 strings, a NaN fill value, its zip (timestamps, its own records)",
    "valid/zarr-python-sharded": "a system section laid out by zarr-python 3.4.2: sharded arrays (index at the end, "
                                 "Morton order of 2-D inner chunks), {\"name\": \"bytes\"} for uint8, u64 values past 2^53",
    "valid/zarr-python-trajectory": "a regular trajectory laid out by zarr-python 3.4.2: markers, progressions, "
                                    "per-step meta, a fixed cell as attributes",
}
# sha256 over the sorted (relative path, file sha256) lines of each frozen case (build verifies)
DIGESTS: Dict[str, str] = {
    "valid/zarr-python-frame": "ad620deabdf15e0201815ab4030b407e4310a5aff33320ddc3964d5c9169db44",
    "valid/zarr-python-sharded": "300ab1b79c80bde64831efab7b0eb3ecfa9bcea3f0de5b3b4418448450deeb41",
    "valid/zarr-python-trajectory": "2920b6a497dff7b48e7c50a4b5ca5e3058e70824efd5bcb9b0831c7692023ca3",
}


def lay_out(name: str, case_dir: Path) -> None:
    """Lay case ``name`` out with zarr-python (needs zarr-python 3.4.2): the directory
    ``record.mrec`` and the zip ``record.mrec.zip`` (zarr-python's ``ZipStore``)."""
    import zarr

    if zarr.__version__ != ZARR_PYTHON_VERSION:
        raise RuntimeError(f"the frozen cases are laid out by zarr-python {ZARR_PYTHON_VERSION}, not {zarr.__version__}")
    case_dir.mkdir(parents=True, exist_ok=True)
    LAYOUTS[name](zarr.open_group(zarr.storage.LocalStore(str(case_dir / RECORD)), mode="w"))
    store = zarr.storage.ZipStore(str(case_dir / ZIP), mode="w")
    try:
        LAYOUTS[name](zarr.open_group(store, mode="w"))
    finally:
        store.close()


def _not_rebuilt(case_dir: Path) -> None:
    raise RuntimeError("a frozen case is copied from the checked-in corpus, never built")


for _name in LAYOUTS:
    CASES.append(Case(_name, _ABOUT[_name], _not_rebuilt, frozen=True))
