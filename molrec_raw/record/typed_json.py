"""Typed meta: the 16 tags and their typed JSON forms (frame-and-types §4).

Shared by frame/system meta, trajectory per-step meta and meta fills.  Writers coerce
exactly or refuse (``frame-and-types#14.36``, ``#14.41``); readers accept exactly the typed
forms (``#14.16``), check ``_meta_types`` (``#14.15``) and infer untagged keys (``#14.26``).
"""
from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Tuple

import numpy as np

from molrec_raw.errors import InvalidValueError, MolrecError, SpecViolationError, brief
from molrec_raw.record.model import MetaValue
from molrec_raw.record.violations import Checks, Violation, refuse

__all__ = [
    "TAGS",
    "LEGACY_TAGS",
    "META_TYPES_KEY",
    "normalize_tag",
    "infer_tag",
    "encode_value",
    "decode_value",
    "encode_document",
    "decode_document",
    "check_document",
]

TAGS: Tuple[str, ...] = (
    "bool", "i32", "i64", "u32", "u64", "f64", "string", "json",
    "bool3", "i32x3", "i64x3", "u32x3", "u64x3", "f64x3", "f64x6", "f64x9",
)
LEGACY_TAGS: Dict[str, str] = {"float": "f64", "int": "i32", "uint": "u64"}  # decision 17
META_TYPES_KEY = "_meta_types"

R_TAGS = "frame-and-types#14.15"
R_READ = "frame-and-types#14.16"
R_KEY = "frame-and-types#14.33"
R_WRITE = "frame-and-types#14.36"
R_NONFINITE = "frame-and-types#14.41"

_INT_RANGE = {
    "i32": (-(2**31), 2**31 - 1),
    "i64": (-(2**63), 2**63 - 1),
    "u32": (0, 2**32 - 1),
    "u64": (0, 2**64 - 1),
}
INT_RANGES = _INT_RANGE  # the integer tags' inclusive bounds (read-only by convention)
_VECTORS = {
    "bool3": ("bool", 3), "i32x3": ("i32", 3), "i64x3": ("i64", 3), "u32x3": ("u32", 3),
    "u64x3": ("u64", 3), "f64x3": ("f64", 3), "f64x6": ("f64", 6), "f64x9": ("f64", 9),
}
_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_DECIMAL = re.compile(r"-?[0-9]+")
_EXACT_JSON_INT = 2**53
# Levels of arrays and objects in a ``json`` value: deeper is refused on write and on read, so
# that every value read can be written back (orjson writes at most 254 levels in a document,
# and a pin or a meta group nests the value a few levels down) and nothing recurses deeply.
MAX_JSON_DEPTH = 128


def _fail(rule: str, where: str, message: str) -> SpecViolationError:
    return SpecViolationError(message, node=where or None, rule=rule)


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_real(v: Any) -> bool:
    return isinstance(v, (float, np.floating))


def normalize_tag(
    tag: Any, allow_legacy: bool = False, *, where: str = "", rule: str = R_TAGS
) -> str:
    """Return ``tag`` if it is one of the 16 (§4.1); legacy ``float/int/uint`` only with
    ``allow_legacy`` (decision 17, pinned trajectory schema on read).  Else refuse."""
    if isinstance(tag, str):
        if tag in TAGS:
            return tag
        if allow_legacy and tag in LEGACY_TAGS:
            return LEGACY_TAGS[tag]
    raise _fail(rule, where, f"{brief(tag)} is not one of the 16 meta tags")


def infer_tag(value: Any) -> str:
    """The tag a caller's untagged value gets (§4.3 via §4.4; decision 18)."""
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if _is_int(value):
        v = int(value)
        if -(2**63) <= v < 2**63:
            return "i64"
        if 2**63 <= v < 2**64:
            return "u64"
        raise _fail(R_WRITE, "", f"integer {v} is outside [-2^63, 2^64): give a MetaValue tag")
    if _is_real(value):
        return "f64"
    if isinstance(value, str):
        return "string"
    if value is None or isinstance(value, (list, tuple, dict)):
        return "json"
    raise InvalidValueError(f"cannot store a {type(value).__name__} as a meta value")


# ---------------------------------------------------------------- writer (§4.2, §4.3)

def _enc_f64(v: Any, where: str) -> Any:
    if _is_int(v):
        v = int(v)
        try:
            f = float(v)
        except OverflowError:
            f = math.inf
        if math.isinf(f) or int(f) != v:
            raise _fail(R_WRITE, where, f"integer {v} is not exactly representable as f64")
        return f
    if not _is_real(v):
        raise _fail(R_WRITE, where, f"f64 needs a real number, got {type(v).__name__}")
    f = float(v)
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    if f != v:  # e.g. np.longdouble
        raise _fail(R_WRITE, where, f"{v!r} is not exactly representable as f64")
    return f


def _enc_int(tag: str, v: Any, where: str) -> Any:
    if not _is_int(v):
        raise _fail(R_WRITE, where, f"{tag} needs an integer, got {type(v).__name__} {v!r}")
    v = int(v)
    lo, hi = _INT_RANGE[tag]
    if not lo <= v <= hi:
        raise _fail(R_WRITE, where, f"integer {v} is out of range for {tag}")
    return v if abs(v) <= _EXACT_JSON_INT else str(v)


def _enc_str(v: Any, where: str, rule: str = R_WRITE) -> str:
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise _fail(rule, where, "string is not valid Unicode (lone surrogate)") from None
    return str(v)


def _enc_json(v: Any, where: str, depth: int = 0) -> Any:
    """A finite JSON value, as plain Python (tuples → lists, numpy scalars → Python), nested
    at most ``MAX_JSON_DEPTH`` levels (a cyclic value is refused by the same rule)."""
    if depth > MAX_JSON_DEPTH:
        raise _fail(R_WRITE, where[:60] + "/...", f"json value is nested more than {MAX_JSON_DEPTH} levels deep (or cyclic)")
    if v is None or isinstance(v, (bool, np.bool_)):
        return None if v is None else bool(v)
    if isinstance(v, str):
        return _enc_str(v, where)
    if _is_int(v):
        v = int(v)
        if not -(2**63) <= v < 2**64:
            raise _fail(R_WRITE, where, f"integer {v} inside json is outside [-2^63, 2^64)")
        return v
    if _is_real(v):
        f = float(v)
        if not math.isfinite(f):
            raise _fail(R_NONFINITE, where, "json value holds a non-finite number")
        return f
    if isinstance(v, (list, tuple)):
        return [_enc_json(x, f"{where}/{i}", depth + 1) for i, x in enumerate(v)]
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if not isinstance(k, str):
                raise _fail(R_WRITE, where, f"json object key {k!r} is not a string")
            out[_enc_str(k, where)] = _enc_json(x, f"{where}/{k}", depth + 1)
        return out
    raise _fail(R_WRITE, where, f"a {type(v).__name__} is not a JSON value")


def _enc_scalar(tag: str, v: Any, where: str) -> Any:
    if tag == "f64":
        return _enc_f64(v, where)
    if tag in _INT_RANGE:
        return _enc_int(tag, v, where)
    if tag == "bool":
        if not isinstance(v, (bool, np.bool_)):
            raise _fail(R_WRITE, where, f"bool needs True/False, got {type(v).__name__}")
        return bool(v)
    if tag == "string":
        if not isinstance(v, str):
            raise _fail(R_WRITE, where, f"string needs a str, got {type(v).__name__}")
        return _enc_str(v, where)
    return _enc_json(v, where)


def _vector_items(tag: str, n: int, v: Any, where: str) -> List[Any]:
    if isinstance(v, np.ndarray):
        if tag == "f64x9" and v.shape == (3, 3):
            v = v.reshape(9)
        if v.shape != (n,):
            raise _fail(R_WRITE, where, f"{tag} needs shape ({n},), got {v.shape}")
        return list(v)
    if not isinstance(v, (list, tuple)):
        raise _fail(R_WRITE, where, f"{tag} needs a sequence of {n}, got {type(v).__name__}")
    if tag == "f64x9" and len(v) == 3 and all(
        isinstance(r, (list, tuple, np.ndarray)) and len(r) == 3 for r in v
    ):
        v = [x for row in v for x in row]
    if len(v) != n:
        raise _fail(R_WRITE, where, f"{tag} needs {n} elements, got {len(v)}")
    return list(v)


def encode_value(tag: str, value: Any, where: str = "") -> Any:
    """Coerce ``value`` exactly into the typed JSON form of ``tag`` (§4.2/§4.3) or refuse
    (``#14.36``; non-finite inside ``json``: ``#14.41``)."""
    tag = normalize_tag(tag, where=where)
    if tag in _VECTORS:
        elem, n = _VECTORS[tag]
        items = _vector_items(tag, n, value, where)
        return [_enc_scalar(elem, x, f"{where}[{i}]") for i, x in enumerate(items)]
    return _enc_scalar(tag, value, where)


# ---------------------------------------------------------------- reader (§4.2, §4.4)

def _dec_int(tag: str, raw: Any, where: str) -> int:
    if type(raw) is int:
        v = raw
    elif type(raw) is str and _DECIMAL.fullmatch(raw):  # decision 19: any magnitude
        if len(raw.lstrip("-").lstrip("0")) > 20:
            raise _fail(R_READ, where, f"decimal string {raw[:40]!r} is out of range for {tag}")
        v = int(raw)
    else:
        raise _fail(R_READ, where, f"{tag} needs a JSON integer or decimal string, got {brief(raw)}")
    lo, hi = _INT_RANGE[tag]
    if not lo <= v <= hi:
        raise _fail(R_READ, where, f"integer {v} is out of range for {tag}")
    return v


def _dec_f64(raw: Any, where: str) -> float:
    if type(raw) is float:
        if not math.isfinite(raw):
            raise _fail(R_READ, where, "a bare non-finite number is not JSON (use \"NaN\" etc.)")
        return raw
    if type(raw) is int:
        try:
            f = float(raw)
        except OverflowError:
            f = math.inf
        if math.isinf(f) or int(f) != raw:
            raise _fail(R_READ, where, f"integer {raw} is not exactly representable as f64")
        return f
    if type(raw) is str and raw in _NONFINITE:
        return _NONFINITE[raw]
    raise _fail(R_READ, where, f'f64 needs a number or "NaN"/"Infinity"/"-Infinity", not {brief(raw)}')


def _check_json(raw: Any, where: str) -> None:
    """A stored ``json`` value: JSON types only, finite numbers, string keys, nested at most
    ``MAX_JSON_DEPTH`` levels — walked without recursion (the value may be hostile)."""
    stack = [(raw, where, 0)]
    while stack:
        value, at, depth = stack.pop()
        if value is None or type(value) in (bool, int, str):
            continue
        if type(value) is float:
            if not math.isfinite(value):
                raise _fail(R_READ, at, "json value holds a non-finite number")
            continue
        if type(value) not in (list, dict):
            raise _fail(R_READ, at, f"a {type(value).__name__} is not a JSON value")
        if depth >= MAX_JSON_DEPTH:
            raise _fail(R_READ, where, f"json value is nested more than {MAX_JSON_DEPTH} levels deep")
        if type(value) is list:
            stack.extend((x, f"{at}/{i}", depth + 1) for i, x in enumerate(value))
            continue
        for k, x in value.items():
            if type(k) is not str:
                raise _fail(R_READ, at, f"json object key {brief(k)} is not a string")
            stack.append((x, f"{at}/{k}", depth + 1))


def _dec_scalar(tag: str, raw: Any, where: str) -> Any:
    if tag == "f64":
        return _dec_f64(raw, where)
    if tag in _INT_RANGE:
        return _dec_int(tag, raw, where)
    if tag == "bool":
        if type(raw) is not bool:
            raise _fail(R_READ, where, f"bool needs true/false, got {brief(raw)}")
        return raw
    if tag == "string":
        if type(raw) is not str:
            raise _fail(R_READ, where, f"string needs a JSON string, got {brief(raw)}")
        return raw
    _check_json(raw, where)
    return raw


def decode_value(tag: str, raw: Any, where: str = "") -> Any:
    """Decode a parsed typed JSON value strictly (§4.2, §4.4, ``#14.16``).

    ``tag`` must be one of the 16 (normalize legacy tags first).  Vector tags give tuples.
    """
    tag = normalize_tag(tag, where=where)
    if tag in _VECTORS:
        elem, n = _VECTORS[tag]
        if type(raw) is not list or len(raw) != n:
            got = f"{len(raw)} elements" if type(raw) is list else brief(raw)
            raise _fail(R_READ, where, f"{tag} needs a JSON array of {n}, got {got}")
        return tuple(_dec_scalar(elem, x, f"{where}[{i}]") for i, x in enumerate(raw))
    return _dec_scalar(tag, raw, where)


def _infer_raw(raw: Any, where: str) -> Tuple[str, Any]:
    """§4.4 inference for an untagged stored value: (tag, raw value to decode)."""
    if type(raw) is bool:
        return "bool", raw
    if type(raw) is int:
        if -(2**63) <= raw < 2**63:
            return "i64", raw
        if 2**63 <= raw < 2**64:
            return "u64", raw
        try:  # beyond both ranges: f64, rounded to nearest (spec §16.11)
            return "f64", float(raw)
        except OverflowError:
            raise _fail(R_READ, where, f"untagged integer {raw} overflows f64") from None
    if type(raw) is float:
        return "f64", raw
    if type(raw) is str:
        return "string", raw
    return "json", raw


def _is_plain(tag: str, value: Any) -> bool:
    try:
        return infer_tag(value) == tag
    except MolrecError:
        return False


def _decode_into(attrs: Dict[str, Any], where: str, out: Dict[str, Any]) -> Checks:
    types = attrs.get(META_TYPES_KEY, {})
    if not isinstance(types, dict):
        yield Violation(R_TAGS, where, f"{META_TYPES_KEY} is not a JSON object: {brief(types)}")
        types = {}
    for key, raw in attrs.items():
        if key == META_TYPES_KEY:
            continue
        label = f"{where}:{key}" if where else key
        try:
            if key in types:
                tag = normalize_tag(types[key], where=label)
            else:
                tag, raw = _infer_raw(raw, label)
            value = decode_value(tag, raw, label)
        except SpecViolationError as exc:
            message = f"meta key {key!r}: {exc.message}"
            yield Violation(exc.rule or R_READ, exc.node or label, message)
            continue
        out[key] = value if _is_plain(tag, value) else MetaValue(tag, value)


def check_document(attrs: Dict[str, Any], where: str = "") -> Checks:
    """Yield every violation of a stored typed meta document (§4.4, ``#14.15``, ``#14.16``)."""
    return _decode_into(attrs, where, {})


def decode_document(attrs: Dict[str, Any], where: str = "") -> Dict[str, Any]:
    """Read a typed meta document (§4.4): ``_meta_types`` removed, tagged keys decoded, untagged
    keys inferred, stale tags ignored (``#14.26``).  A value whose tag is what ``infer_tag``
    would give comes back plain, any other as ``MetaValue(tag, value)``: write→read→write is
    lossless."""
    out: Dict[str, Any] = {}
    refuse(_decode_into(attrs, where, out))
    return out


def encode_document(
    meta: Dict[str, Any], where: str = ""
) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """Writer (§4.3, ``#14.44``): (attributes in typed JSON form, ``_meta_types`` with an entry
    for every key).  The caller omits ``_meta_types`` when ``meta`` is empty."""
    attrs: Dict[str, Any] = {}
    types: Dict[str, str] = {}
    for key, value in meta.items():
        if not isinstance(key, str):
            raise InvalidValueError(f"meta key {key!r} is not a string", node=where)
        if key == META_TYPES_KEY:
            raise _fail(R_KEY, where, f"a meta key may not be named {META_TYPES_KEY!r}")
        label = f"{where}:{key}" if where else key
        try:
            if isinstance(value, MetaValue):
                tag = normalize_tag(value.tag, where=label, rule=R_WRITE)
                value = value.value
            else:
                tag = infer_tag(value)
            attrs[key] = encode_value(tag, value, label)
        except MolrecError as exc:
            exc.message = f"meta key {key!r}: {exc.message}"
            raise exc.add_context(node=label)
        types[key] = tag
    return attrs, types

