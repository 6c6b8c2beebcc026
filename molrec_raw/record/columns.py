"""The 13 column dtypes, their exact Zarr data types, and the canonical vocabulary.

frame-and-types §2 (dtypes) and §13.1 (canonical keys). The mapping is total and exact:
a column never changes dtype on a round trip; float16/float32, fixed-length strings and
raw bytes are refused in both directions.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

from molrec_raw.errors import SpecViolationError

__all__ = ["COLUMN_DTYPES", "COLUMN_NUMPY", "ZARR_TO_COLUMN", "VOCABULARY", "EXACT_U64_KEYS", "as_column", "column_dtype_of", "same_values"]

COLUMN_DTYPES: Dict[str, str] = {  # MolRec dtype -> Zarr data_type
    "f64": "float64", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "bool": "bool",
    "string": "string", "c64": "complex64", "c128": "complex128",
}
ZARR_TO_COLUMN = {zarr: col for col, zarr in COLUMN_DTYPES.items()}
# The numeric column dtypes as explicitly little-endian numpy dtypes (what a raw buffer holds:
# the Zarr ``bytes`` codec with ``endian: little``, a collection's frame bytes).
COLUMN_NUMPY: Dict[str, np.dtype] = {
    col: np.dtype(zarr).newbyteorder("<") for col, zarr in COLUMN_DTYPES.items() if col != "string"}

_F64 = "x y z vx vy vz fx fy fz charge mass quatw quati quatj quatk mux muy muz axis_x axis_y axis_z occupancy b_factor"
_U64 = "id atomic_number type_id mol_id res_id atom_map atomi atomj atomk atoml atomm ibead bond_type bond_number"
VOCABULARY: Dict[str, str] = {
    **{k: "f64" for k in _F64.split()},
    **{k: "u64" for k in _U64.split()},
    "formal_charge": "i64",
    **{k: "i32" for k in "ix iy iz".split()},
    **{k: "bool" for k in "free is_14 exclude_14".split()},
    **{k: "string" for k in "element type name res_name bead_type chain icode altloc style".split()},
}
# frame-and-types#14.3: these are refused on read at any other width or signedness.
EXACT_U64_KEYS = frozenset("id atomic_number type_id mol_id res_id atomi atomj atomk atoml atomm ibead bond_type bond_number".split())

_NUMPY_TO_COLUMN = {
    np.dtype("float64"): "f64", np.dtype("int8"): "i8", np.dtype("int16"): "i16",
    np.dtype("int32"): "i32", np.dtype("int64"): "i64", np.dtype("uint8"): "u8",
    np.dtype("uint16"): "u16", np.dtype("uint32"): "u32", np.dtype("uint64"): "u64",
    np.dtype("bool"): "bool", np.dtype("complex64"): "c64", np.dtype("complex128"): "c128",
}


def column_dtype_of(array: np.ndarray) -> Optional[str]:
    """The MolRec dtype of an in-memory array, or None when it is not a column dtype."""
    dtype = array.dtype
    if dtype.kind in "UT":
        return "string"
    if dtype.kind == "O":
        try:
            "".join(array.ravel().tolist())  # a C loop that fails on any non-str element
        except TypeError:
            return None
        return "string"
    return _NUMPY_TO_COLUMN.get(dtype.newbyteorder("=") if dtype.byteorder not in "=|" else dtype)



def same_values(a: Any, b: Any) -> bool:
    """Two arrays hold the same values of the same column dtype and shape; floats compare
    bitwise (-0.0 differs from 0.0, NaN payloads count), strings and integers by value."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or column_dtype_of(a) != column_dtype_of(b):
        return False
    if a.dtype.kind in "fc":
        return np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b.astype(a.dtype)).tobytes()
    return bool(a.tolist() == b.tolist())

def as_column(name: str, values: Any, node: str) -> np.ndarray:
    """A caller's column as a storable array (writer side, frame-and-types#14.37, #14.38).

    Strings become object arrays of str; canonical keys are converted to their vocabulary
    dtype when that is exact (unsigned widening to u64, in-range integer narrowing such as
    ix i64 → i32); anything else is refused.
    """
    array = np.asarray(values)
    if array.ndim == 0:
        raise SpecViolationError(f"column {name!r} needs at least one axis", node=node, rule="frame-and-types#6")
    dtype = column_dtype_of(array)
    if dtype is None:
        raise SpecViolationError(
            f"column {name!r} has dtype {array.dtype}, which is not one of the 13 column dtypes",
            node=node, rule="frame-and-types#14.37",
        )
    if dtype == "string":
        array = np.asarray(array.astype(object) if array.dtype.kind != "O" else array)
    canonical = VOCABULARY.get(name)
    if canonical is not None and canonical != dtype:
        array = _convert_canonical(name, array, dtype, canonical, node)
    elif canonical is not None and array.ndim != 1:
        raise SpecViolationError(
            f"canonical column {name!r} holds one value per row; got shape {array.shape}",
            node=node, rule="frame-and-types#14.38",
        )
    return array


def _convert_canonical(name: str, array: np.ndarray, have: str, want: str, node: str) -> np.ndarray:
    """Exact integer conversions only (decision recorded in spec-notes/record.md): any
    integer width or signedness whose values all fit, and integers to f64 when exact."""
    if array.ndim == 1 and have[0] in "iu":
        if want == "f64":
            converted = array.astype(np.float64)
            if np.array_equal(converted.astype(array.dtype), array):
                return converted
        elif want[0] in "iu":
            info = np.iinfo(np.dtype(COLUMN_DTYPES[want]))
            if array.size == 0 or (info.min <= int(array.min()) and int(array.max()) <= info.max):
                return array.astype(COLUMN_DTYPES[want])
    raise SpecViolationError(
        f"canonical column {name!r} must be {want}[N]; got {have} with shape {array.shape}, "
        "which cannot be converted exactly",
        node=node, rule="frame-and-types#14.38",
    )
