"""An xarray backend for MolRec records (the optional extra ``molrec-raw[xarray]``),
registered under the ``xarray.backends`` entry point as ``mrec``::

    xr.open_dataset("run.mrec", engine="mrec", group="trajectory/atoms")

``filename_or_obj`` is a local ``*.mrec``/``*.mrec.zip`` path or a URL of one (as every
reading door takes).  ``group`` names one block:

- ``trajectory/<block>`` with a fixed row count: one variable per column with dimensions
  ``(frame, <block>[, <column>_dim<k>...])`` — a frame after the block's last update
  carries it (trajectory §9) — coordinates ``step`` and ``time`` (when the run has times)
  on ``frame``, and for a nullable column a bool variable ``<column>_valid``;
- ``trajectory/<block>`` that is ragged (CSR, §8.1): the stored rows, not a frame axis —
  one variable per column on ``<block>_row``, ``offset`` on ``update_edge`` (update j owns
  rows ``offset[j]:offset[j+1]``), ``step_index`` on ``update`` (the frame of each update)
  and ``update_of_frame`` on ``frame`` (the update in effect, -1 before the first);
- ``frame/<block>`` or ``system/<block>``: one variable per column on ``<block>``.

Values are as stored, in the units the record states (frame-and-types §13.5): a variable of a
canonical column (``x y z`` length, ``vx vy vz`` velocity, ``fx fy fz`` force, ``mass``,
``charge``) and the ``time`` coordinate carry a ``units`` attribute (``"nm"``,
``"kcal/mol/angstrom"``, mass and charge default to ``"dalton"``/``"e"``); a quantity the
record states no unit for gets none.  Each variable's attributes carry the column's ``dtype``
tag and, when declared, ``precision`` and ``target``.  Variables are lazy (a ``BackendArray`` reading only what is
indexed, through the record's chunk layout); ``chunks={}`` gives Dask arrays whose chunks
follow the stored inner chunks.  The arrays hold the record's location, not an open file:
they pickle to a Dask cluster, where each worker opens the record itself.
"""
from __future__ import annotations

import os
import threading
from math import gcd
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

import numpy as np

try:
    import xarray as xr
    from xarray.backends import BackendArray, BackendEntrypoint
    from xarray.core import indexing
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("molrec_raw.integrations.xarray needs xarray: pip install 'molrec-raw[xarray]'") from exc

from molrec_raw.errors import InvalidValueError
from molrec_raw.integrations.conventions import COLUMN_QUANTITIES
from molrec_raw.record.doors import open_record
from molrec_raw.record.sections import FRAME_SHAPED_SECTIONS, SectionBlock, open_section_block
from molrec_raw.record.trajectory import MrecReader
from molrec_raw.record.trajectory.reader import BlockInfo
from molrec_raw.record.units import declared_units, unit_of
from molrec_raw.zarr.remote import is_url

__all__ = ["MrecBackendEntrypoint", "open_block_dataset"]

Location = Union[str, "os.PathLike[str]"]


def _location(filename_or_obj: Any) -> str:
    if isinstance(filename_or_obj, (str, os.PathLike)):
        return str(os.fspath(filename_or_obj))
    raise InvalidValueError("engine='mrec' opens a record by local path or URL (so that Dask workers can open "
                            f"it too), not a {type(filename_or_obj).__name__}")


class _Record:
    """The record behind a dataset's variables: opened lazily, once per process; pickles as
    its location only."""

    def __init__(self, location: str) -> None:
        self.location = location
        self._lock = threading.Lock()
        self._reader: Optional[MrecReader] = None
        self._sections: Dict[Tuple[str, str], SectionBlock] = {}
        self._root: Any = None

    def __getstate__(self) -> Dict[str, Any]:
        return {"location": self.location}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(state["location"])  # type: ignore[misc]

    def reader(self) -> MrecReader:
        with self._lock:
            if self._reader is None:
                self._reader = MrecReader(self.location)
            return self._reader

    def units(self) -> Dict[str, str]:
        """Quantity -> unit the record states, with the spec's mass and charge defaults."""
        with self._lock:
            if self._root is None:
                self._root = open_record(self.location)
            return {"mass": "dalton", "charge": "e", **declared_units(self._root)}

    def section_block(self, section: str, block: str) -> SectionBlock:
        with self._lock:
            found = self._sections.get((section, block))
            if found is None:
                if self._root is None:
                    self._root = open_record(self.location)
                found = self._sections[(section, block)] = open_section_block(self._root, section, block)
            return found

    def close(self) -> None:
        with self._lock:
            reader, self._reader = self._reader, None
            root, self._root = self._root, None
            self._sections = {}
        if reader is not None:
            reader.close()
        if root is not None:
            root.store.close()


def _outer(data: np.ndarray, key: Tuple[Any, ...]) -> np.ndarray:
    """Apply an outer-indexing key (ints, slices, 1-D integer arrays) axis by axis."""
    axis = 0
    for k in key:
        if isinstance(k, (int, np.integer)):
            data = np.take(data, int(k), axis=axis)
            continue
        if isinstance(k, slice):
            data = data[(slice(None),) * axis + (k,)]
        else:
            data = np.take(data, np.asarray(k, dtype=np.intp), axis=axis)
        axis += 1
    return data


class _FrameColumn(BackendArray):
    """One column of a fixed-row trajectory block as (frame, rows, trailing...) (or its mask)."""

    def __init__(self, record: _Record, block: str, column: str, shape: Tuple[int, ...], dtype: np.dtype,
                 mask: bool = False) -> None:
        self.record, self.block, self.column, self.mask = record, block, column, mask
        self.shape, self.dtype = shape, dtype

    def __getitem__(self, key: Any) -> Any:
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.OUTER, self._read)

    def _read(self, key: Tuple[Any, ...]) -> np.ndarray:
        first = key[0]
        frames: Any = [int(first)] if isinstance(first, (int, np.integer)) else first
        reader = self.record.reader()
        if self.mask:
            data = reader.mask_array(self.block, self.column, frames)
        else:
            data = reader.column_array(self.block, self.column, frames)
        if isinstance(first, (int, np.integer)):
            return _outer(data[0], key[1:])
        return _outer(data, (slice(None),) + tuple(key[1:]))


class _RowColumn(BackendArray):
    """The committed rows of a column (a ragged block's CSR values, or a section's column)."""

    def __init__(self, record: _Record, where: Tuple[str, str, str], shape: Tuple[int, ...], dtype: np.dtype) -> None:
        self.record, self.where = record, where
        self.shape, self.dtype = shape, dtype

    def __getitem__(self, key: Any) -> Any:
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.OUTER, self._read)

    def _read(self, key: Tuple[Any, ...]) -> np.ndarray:
        first = key[0]
        pick: Any
        if isinstance(first, slice):
            start, stop, step = first.indices(self.shape[0])
            lo, hi, pick = (start, max(stop, start), slice(None, None, step)) if step > 0 else (0, self.shape[0], first)
        elif isinstance(first, (int, np.integer)):
            lo, hi, pick = int(first), int(first) + 1, 0
        else:
            wanted = np.asarray(first, dtype=np.intp)
            lo, hi = (int(wanted.min()), int(wanted.max()) + 1) if wanted.size else (0, 0)
            pick = wanted - lo
        data = self._rows(lo, hi)
        return _outer(data, (pick,) + tuple(key[1:]))

    def _rows(self, lo: int, hi: int) -> np.ndarray:
        kind, block, column = self.where
        if kind == "trajectory":
            return self.record.reader().column_rows(block, column, lo, hi)
        if kind == "trajectory-mask":
            found = self.record.reader().column_mask_rows(block, column, lo, hi)
            assert found is not None  # only declared for columns with a mask
            return found
        section_block = self.record.section_block(kind, block)
        arrays = section_block.masks if column.endswith("_valid") and column[:-6] in section_block.masks else None
        arr = arrays[column[:-6]] if arrays is not None else section_block.columns[column]
        return np.asarray(arr[lo:hi])


def _column_attrs(dtype: str, precision: Optional[float], target: Optional[str],
                  unit: Optional[str] = None) -> Dict[str, Any]:
    attrs: Dict[str, Any] = {"dtype": dtype}
    if unit is not None:
        attrs["units"] = unit
    if precision is not None:
        attrs["precision"] = precision
    if target is not None:
        attrs["target"] = target
    return attrs


def _lazy(array: BackendArray) -> Any:
    return indexing.LazilyIndexedArray(array)


def _unit(units: Dict[str, str], block: str, column: str) -> Optional[str]:
    """The unit of a canonical ``atoms`` column in the record's stated units, or None."""
    quantity = COLUMN_QUANTITIES.get(column) if block == "atoms" else None
    return None if quantity is None else unit_of(quantity, units)


def _trajectory_dataset(record: _Record, reader: MrecReader, info: BlockInfo) -> "xr.Dataset":
    block = info.name
    n = len(reader)
    units = record.units()
    coords: Dict[str, Any] = {"step": ("frame", np.asarray(reader.step, dtype=np.int64))}
    if reader.time is not None:
        time_unit = units.get("time")
        coords["time"] = xr.Variable(("frame",), np.asarray(reader.time, dtype=np.float64),
                                     {} if time_unit is None else {"units": time_unit})
    variables: Dict[str, Any] = {}
    attrs = {"record": record.location, "group": f"trajectory/{block}", "layout": info.kind}
    if info.fixed_rows is not None and info.ordinals.size and int(info.ordinals[0]) == 0:
        rows = info.fixed_rows
        for column, c in info.columns.items():
            dtype = c.numpy_dtype
            trailing_dims = tuple(f"{column}_dim{k}" for k in range(len(c.trailing)))
            dims = ("frame", block) + trailing_dims
            shape = (n, rows) + tuple(c.trailing)
            chunks = {"frame": _frames_per_chunk(c.chunk_rows, rows), block: rows,
                      **{d: s for d, s in zip(trailing_dims, c.trailing)}}
            variables[column] = xr.Variable(dims, _lazy(_FrameColumn(record, block, column, shape, dtype)),
                                            _column_attrs(c.dtype, c.precision, c.target, _unit(units, block, column)),
                                            encoding={"preferred_chunks": chunks})
            if c.has_mask:
                variables[f"{column}_valid"] = xr.Variable(
                    ("frame", block), _lazy(_FrameColumn(record, block, column, (n, rows), np.dtype(bool), mask=True)),
                    {"dtype": "bool", "validity_of": column},
                    encoding={"preferred_chunks": {"frame": chunks["frame"], block: rows}})
        return xr.Dataset(variables, coords, attrs)
    # ragged, or absent at the first frames (CSR, trajectory §8.1): the stored rows, the
    # offsets and the update in effect at each frame
    total = int(info.offsets[-1])
    row_dim = f"{block}_row"
    for column, c in info.columns.items():
        if c.chunk_rows is None:
            continue
        dtype = c.numpy_dtype
        trailing_dims = tuple(f"{column}_dim{k}" for k in range(len(c.trailing)))
        variables[column] = xr.Variable(
            (row_dim,) + trailing_dims, _lazy(_RowColumn(record, ("trajectory", block, column),
                                                         (total,) + tuple(c.trailing), dtype)),
            _column_attrs(c.dtype, c.precision, c.target, _unit(units, block, column)),
            encoding={"preferred_chunks": {row_dim: c.chunk_rows, **dict(zip(trailing_dims, c.trailing))}})
        if c.has_mask:
            variables[f"{column}_valid"] = xr.Variable(
                (row_dim,), _lazy(_RowColumn(record, ("trajectory-mask", block, column), (total,), np.dtype(bool))),
                {"dtype": "bool", "validity_of": column})
    frames = np.arange(n)
    variables["offset"] = xr.Variable(("update_edge",), info.offsets.astype(np.int64),
                                      {"meaning": "update j owns rows offset[j]:offset[j+1]"})
    variables["step_index"] = xr.Variable(("update",), info.ordinals.astype(np.int64),
                                          {"meaning": "the frame of each update"})
    variables["update_of_frame"] = xr.Variable(
        ("frame",), (np.searchsorted(info.ordinals, frames, side="right") - 1).astype(np.int64),
        {"meaning": "the update in effect at each frame (-1: the block is absent)"})
    return xr.Dataset(variables, coords, attrs)


def _section_dataset(record: _Record, section: str, block: str) -> "xr.Dataset":
    found = record.section_block(section, block)
    units = record.units()
    variables: Dict[str, Any] = {}
    from molrec_raw.record.columns import ZARR_TO_COLUMN

    for column, arr in found.columns.items():
        trailing_dims = tuple(f"{column}_dim{k}" for k in range(arr.ndim - 1))
        variables[column] = xr.Variable(
            (block,) + trailing_dims, _lazy(_RowColumn(record, (section, block, column), arr.shape, arr.dtype)),
            _column_attrs(ZARR_TO_COLUMN[arr.metadata.dtype.name], found.precision.get(column),
                          found.targets.get(column), _unit(units, block, column)),
            encoding={"preferred_chunks": {block: arr.chunks[0], **dict(zip(trailing_dims, arr.shape[1:]))}})
        if column in found.masks:
            variables[f"{column}_valid"] = xr.Variable(
                (block,), _lazy(_RowColumn(record, (section, block, f"{column}_valid"), (found.count,), np.dtype(bool))),
                {"dtype": "bool", "validity_of": column})
    attrs: Dict[str, Any] = {"record": record.location, "group": f"{section}/{block}", "count": found.count}
    if found.structural_shape is not None:
        attrs["structural_shape"] = list(found.structural_shape)
    return xr.Dataset(variables, attrs=attrs)


def _frames_per_chunk(chunk_rows: Optional[int], rows: int) -> int:
    """The fewest frames whose rows end on an inner-chunk boundary (one frame when the
    rows of a chunk are not known)."""
    if not chunk_rows or not rows:
        return 1
    return chunk_rows // gcd(chunk_rows, rows)


def open_block_dataset(location: Location, group: str, drop_variables: Iterable[str] = ()) -> "xr.Dataset":
    """The dataset of one block (see the module); what ``engine="mrec"`` calls."""
    parts = [p for p in str(group).strip("/").split("/") if p]
    record = _Record(_location(location))
    try:
        if len(parts) != 2:
            raise InvalidValueError(f"group must name one block: 'trajectory/<block>', 'frame/<block>' or "
                                    f"'system/<block>', got {group!r}")
        section, block = parts
        if section == "trajectory":
            reader = record.reader()
            dataset = _trajectory_dataset(record, reader, reader.block_info(block))
        elif section in FRAME_SHAPED_SECTIONS:
            dataset = _section_dataset(record, section, block)
        else:
            raise InvalidValueError(f"group {group!r}: the section must be trajectory, frame or system")
    except BaseException:
        record.close()
        raise
    dropped = [name for name in drop_variables if name in dataset.variables]
    dataset = dataset.drop_vars(dropped)
    dataset.set_close(record.close)
    return dataset


class MrecBackendEntrypoint(BackendEntrypoint):
    """``engine="mrec"``: open one block of a MolRec record as a lazy dataset."""

    description = "MolRec records (*.mrec, *.mrec.zip, URLs) with molrec_raw: one block as a dataset"
    url = "https://github.com/molrec/molrec_raw"
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "group")

    def open_dataset(self, filename_or_obj: Any, *, drop_variables: Union[str, Iterable[str], None] = None,
                     group: Optional[str] = None) -> "xr.Dataset":
        if group is None:
            raise InvalidValueError("engine='mrec' needs group='trajectory/<block>', 'frame/<block>' or "
                                    "'system/<block>'")
        names: List[str] = [drop_variables] if isinstance(drop_variables, str) else list(drop_variables or ())
        return open_block_dataset(filename_or_obj, group, names)

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        if not isinstance(filename_or_obj, (str, os.PathLike)):
            return False
        name = str(os.fspath(filename_or_obj)).rstrip("/").lower()
        if is_url(name):
            name = name.split("?")[0]
        return name.endswith(".mrec") or name.endswith(".mrec.zip")
