"""Data types of the subset and their fill-value JSON forms (zarr-v3-subset §3, §8).

In memory every numeric type is the little-endian numpy dtype of the same
name; ``string`` is a numpy object array of Python ``str`` (works on numpy 1
and 2 alike).  Anything else (``r<N>``, ``fixed_length_utf32``, datetime, an
object-form data type) is refused with UnsupportedFeatureError.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any, Dict, Optional

import numpy as np

from molrec_raw.errors import InvalidMetadataError, UnsupportedFeatureError, brief

__all__ = ["DataType", "data_type", "data_type_for_numpy"]

_HEX_FORMATS = {4: ("<e", "<H"), 8: ("<f", "<I"), 16: ("<d", "<Q")}
_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


@dataclass(frozen=True)
class DataType:
    """One Zarr data type: its name, numpy dtype and fill-value rules."""

    name: str
    numpy: np.dtype

    @property
    def is_string(self) -> bool:
        return self.name == "string"

    @property
    def itemsize(self) -> Optional[int]:
        """Bytes per element, or None for variable-length strings."""
        return None if self.is_string else self.numpy.itemsize

    def default_fill(self) -> Any:
        return self.parse_fill(
            {"b": False, "c": [0.0, 0.0], "O": ""}.get(self.numpy.kind, 0)
        )

    # -- fill value: JSON -> value --------------------------------------
    def parse_fill(self, raw: Any) -> Any:
        """Decode a JSON fill value into a numpy scalar (or str for ``string``)."""
        kind = self.numpy.kind
        try:
            if kind == "O":
                if isinstance(raw, str):
                    return raw
                if isinstance(raw, (int, float)) and not isinstance(raw, bool):
                    return str(raw)
            elif kind == "b":
                if isinstance(raw, bool):
                    return np.bool_(raw)
                if raw in (0, 1) and isinstance(raw, int):
                    return np.bool_(bool(raw))
            elif kind in "iu":
                if isinstance(raw, float) and raw.is_integer():
                    raw = int(raw)
                if isinstance(raw, int) and not isinstance(raw, bool):
                    info = np.iinfo(self.numpy)
                    if info.min <= raw <= info.max:
                        return self.numpy.type(raw)
            elif kind == "f":
                value = _parse_float(raw)
                if value is not None:
                    with np.errstate(over="ignore"):  # beyond the type's range: ±inf (IEEE rounding, §3)
                        return value.astype(self.numpy)[()] if isinstance(value, np.ndarray) else self.numpy.type(value)
            elif kind == "c":
                if isinstance(raw, (list, tuple)) and len(raw) == 2:
                    parts = [_parse_float(part) for part in raw]
                    if all(p is not None for p in parts):
                        real, imag = (float(np.asarray(p)) for p in parts)
                        out = np.zeros((), self.numpy)
                        with np.errstate(over="ignore"):
                            out.real, out.imag = real, imag
                        return out[()]
        except (OverflowError, ValueError, TypeError):
            pass
        raise InvalidMetadataError(
            f"fill_value {brief(raw)} is not valid for data type {self.name}", rule="zarr-v3-subset#3"
        )

    # -- fill value: value -> JSON --------------------------------------
    def encode_fill(self, value: Any) -> Any:
        """The JSON form we write: ints as ints, non-finite floats as strings."""
        kind = self.numpy.kind
        if kind == "O":
            return str(value)
        if kind == "b":
            return bool(value)
        if kind in "iu":
            return int(value)
        if kind == "f":
            return _encode_float(self.numpy.type(value))
        if kind == "c":
            scalar = self.numpy.type(value)
            part = np.dtype(f"<f{self.numpy.itemsize // 2}").type
            return [_encode_float(part(scalar.real)), _encode_float(part(scalar.imag))]
        raise UnsupportedFeatureError(f"no fill encoding for {self.name}")  # pragma: no cover

    def coerce_fill(self, value: Any) -> Any:
        """Turn a caller's Python/numpy fill value into the stored scalar."""
        if value is None:
            return self.default_fill()
        if self.is_string:
            if not isinstance(value, str):
                raise InvalidMetadataError(f"fill_value for string must be str, got {value!r}")
            return value
        try:
            scalar = np.asarray(value)
            if scalar.shape != () or scalar.dtype.kind not in "biufc":
                raise ValueError
            if self.numpy.kind in "iu" and scalar.dtype.kind in "iu":
                return self.parse_fill(int(scalar))
            if self.numpy.kind in "iu" and scalar.dtype.kind == "f":
                return self.parse_fill(float(scalar))
            if self.numpy.kind == "b":
                return np.bool_(bool(scalar))
            if self.numpy.kind == "f" and scalar.dtype.kind == "c":
                raise ValueError
            return scalar.astype(self.numpy)[()]
        except (ValueError, TypeError, OverflowError):
            raise InvalidMetadataError(
                f"fill_value {value!r} cannot be stored as {self.name}"
            ) from None


def _parse_float(raw: Any) -> Any:
    """A float fill element: number, "NaN"/"Infinity"/"-Infinity", or hex bits."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, (int, float)):
        return float(raw)
    if isinstance(raw, str):
        if raw in _NONFINITE:
            return _NONFINITE[raw]
        if raw.startswith("0x") and len(raw) - 2 in _HEX_FORMATS:
            # zarr-v3-subset#3: the digit count alone selects the float format.
            float_fmt, int_fmt = _HEX_FORMATS[len(raw) - 2]
            bits = int(raw[2:], 16)
            # keep NaN payloads: return a 0-d array of the exact width
            return np.frombuffer(struct.pack(int_fmt, bits), float_fmt).reshape(())
        # zp also accepts "nan" and numeric strings; accept them on read only.
        try:
            return float(raw)
        except ValueError:
            return None
    return None


_CANONICAL_NAN_BITS = {2: 0x7E00, 4: 0x7FC00000, 8: 0x7FF8000000000000}
_UINT_OF_SIZE = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _encode_float(value: np.floating) -> Any:
    if math.isfinite(value):
        return float(value)
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    size = value.dtype.itemsize
    bits = int(np.asarray(value).view(_UINT_OF_SIZE[size])[()])
    if bits == _CANONICAL_NAN_BITS[size]:
        return "NaN"
    return f"0x{bits:0{size * 2}x}"  # a NaN payload survives only in hex


_TYPES: Dict[str, DataType] = {
    name: DataType(name, np.dtype(code))
    for name, code in [
        ("bool", "|b1"),
        ("int8", "|i1"), ("int16", "<i2"), ("int32", "<i4"), ("int64", "<i8"),
        ("uint8", "|u1"), ("uint16", "<u2"), ("uint32", "<u4"), ("uint64", "<u8"),
        ("float16", "<f2"), ("float32", "<f4"), ("float64", "<f8"),
        ("complex64", "<c8"), ("complex128", "<c16"),
        ("string", "O"),
    ]
}


def data_type(raw: Any) -> DataType:
    """Look up a ``data_type`` value from zarr.json (bare name only)."""
    if isinstance(raw, str) and raw in _TYPES:
        return _TYPES[raw]
    raise UnsupportedFeatureError(
        f"data type {brief(raw)} is not supported (supported: {', '.join(_TYPES)})",
        rule="zarr-v3-subset#8",
    )


def data_type_for_numpy(dtype: Any) -> DataType:
    """Map a caller's dtype (numpy dtype, type, ``str`` or a Zarr name) to a DataType."""
    if isinstance(dtype, str) and dtype in _TYPES:
        return _TYPES[dtype]
    if dtype is str:
        return _TYPES["string"]
    try:
        np_dtype = np.dtype(dtype)
    except TypeError:
        raise UnsupportedFeatureError(f"unsupported dtype {dtype!r}") from None
    if np_dtype.kind in "OUT" or getattr(np_dtype, "char", "") == "T":
        return _TYPES["string"]
    native = np_dtype.newbyteorder("<") if np_dtype.byteorder == ">" else np_dtype
    for candidate in _TYPES.values():
        if candidate.numpy.kind != "O" and candidate.numpy == native.newbyteorder("<"):
            return candidate
    raise UnsupportedFeatureError(f"unsupported dtype {np_dtype}", rule="zarr-v3-subset#8")
