"""The canonical JSON form of a record's decoded content (``molrec-raw dump``, the corpus).

The form is documented for implementers in ``molrec_raw/conformance/README.md``; in short:

- **floats** (f64, the parts of c64/c128, meta f64 values) are JSON numbers spelled in the
  shortest form that reads back to the same binary64 value; NaN and the infinities are the
  strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (the typed-JSON f64 form of MolRec);
  ``-0.0`` keeps its sign;
- **integers** of a column or a typed meta value are JSON integers when
  ``|v| <= 2^53``, else decimal strings (``"18446744073709551615"``), as MolRec's typed
  JSON writes them; integers inside JSON documents stay JSON integers, in full;
- **byte strings** (files a reader preserves without interpreting) are lowercase hex;
- column values are flat lists in C order beside their ``shape``;
- the bytes (:func:`canonical_bytes`): UTF-8, object keys sorted by code point, one
  member per line indented by one space per level, a list of scalars on one line
  (``[1, 2.5, "NaN"]``), a final newline.

Two documents are *the same* when :func:`first_difference` finds none: objects compare as
maps (key order is irrelevant), lists element by element, numbers by value — two integers
exactly, otherwise as binary64 bit patterns (so ``1``, ``1.0`` and ``1e0`` agree, ``0.0``
and ``-0.0`` do not) — and strings, booleans and null by equality.
"""
from __future__ import annotations

import json
import math
import struct
from typing import Any, List, Optional

import numpy as np

__all__ = ["FORMAT", "EXACT_INT", "encode_float", "encode_int", "values_of", "canonical_bytes",
           "first_difference", "json_document"]

FORMAT = 1  # the value of "molrec_dump" in every dump
EXACT_INT = 2**53
_NONFINITE = {"NaN", "Infinity", "-Infinity"}


def encode_float(value: float) -> Any:
    """A binary64 in the canonical form: a JSON number, or "NaN"/"Infinity"/"-Infinity"."""
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def encode_int(value: int) -> Any:
    """An integer of a column or typed value: a JSON integer up to 2^53 in magnitude, else a
    decimal string."""
    value = int(value)
    return value if abs(value) <= EXACT_INT else str(value)


def values_of(array: np.ndarray) -> List[Any]:
    """An array's values as a flat C-order list in the canonical form (by numpy kind:
    floats widened exactly to binary64, complex as [re, im], integers, booleans, strings)."""
    flat = np.asarray(array).reshape(-1)
    kind = flat.dtype.kind
    if kind == "f":
        return [encode_float(v) for v in flat.astype(np.float64).tolist()]
    if kind == "c":
        pairs = flat.astype(np.complex128)
        return [[encode_float(v.real), encode_float(v.imag)] for v in pairs.tolist()]
    if kind in "iu":
        return [encode_int(v) for v in flat.tolist()]
    if kind == "b":
        return [bool(v) for v in flat.tolist()]
    return [str(v) for v in flat.tolist()]


def json_document(value: Any) -> Any:
    """A JSON document (meta, status, attributes...) in the canonical form: as parsed, with
    numpy scalars as Python values and any non-finite float (which a document should not
    hold) spelled as its string."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        return encode_float(value)
    if isinstance(value, dict):
        return {str(k): json_document(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_document(v) for v in value]
    return value


def _scalar(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def _lines(value: Any, depth: int, out: List[str]) -> None:
    """Append ``value`` to ``out`` (the text after an opening key or at the top)."""
    pad = " " * (depth + 1)
    if isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        out.append("{\n")
        for n, key in enumerate(sorted(value)):
            out.append(f"{pad}{_scalar(str(key))}: ")
            _lines(value[key], depth + 1, out)
            out.append(",\n" if n + 1 < len(value) else "\n")
        out.append(" " * depth + "}")
    elif isinstance(value, list):
        if all(not isinstance(v, (dict, list)) for v in value):
            out.append("[" + ", ".join(_scalar(v) for v in value) + "]")
            return
        out.append("[\n")
        for n, item in enumerate(value):
            out.append(pad)
            _lines(item, depth + 1, out)
            out.append(",\n" if n + 1 < len(value) else "\n")
        out.append(" " * depth + "]")
    else:
        out.append(_scalar(value))


def canonical_bytes(document: Any) -> bytes:
    """The canonical bytes of a document (see the module docstring); refuses a non-finite
    float (the canonical form spells them as strings)."""
    out: List[str] = []
    _lines(document, 0, out)
    return ("".join(out) + "\n").encode("utf-8")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _same_number(a: Any, b: Any) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    try:
        return struct.pack("<d", float(a)) == struct.pack("<d", float(b))
    except OverflowError:
        return False


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, allow_nan=True)
    return text if len(text) <= 80 else text[:77] + "..."


def first_difference(expected: Any, actual: Any, path: str = "$") -> Optional[str]:
    """Where ``actual`` first differs from ``expected`` (a JSON path and both values), or
    None when they are the same document (see the module docstring)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{path}: expected an object, got {_show(actual)}"
        for key in sorted(set(expected) | set(actual)):
            where = f"{path}.{key}" if key.isidentifier() else f"{path}[{json.dumps(key, ensure_ascii=False)}]"
            if key not in actual:
                return f"{where}: missing (expected {_show(expected[key])})"
            if key not in expected:
                return f"{where}: unexpected key (got {_show(actual[key])})"
            found = first_difference(expected[key], actual[key], where)
            if found is not None:
                return found
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return f"{path}: expected a list, got {_show(actual)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            found = first_difference(e, a, f"{path}[{i}]")
            if found is not None:
                return found
        if len(expected) != len(actual):
            return f"{path}: expected {len(expected)} items, got {len(actual)}"
        return None
    if _is_number(expected):
        if _is_number(actual) and _same_number(expected, actual):
            return None
        return f"{path}: expected {_show(expected)}, got {_show(actual)}"
    if expected is None or isinstance(expected, (bool, str)):
        if type(actual) is type(expected) and actual == expected:
            return None
        return f"{path}: expected {_show(expected)}, got {_show(actual)}"
    return f"{path}: not a JSON value in the expected document: {expected!r}"
