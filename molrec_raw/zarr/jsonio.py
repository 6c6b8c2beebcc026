"""JSON for zarr.json documents: orjson first, stdlib as the lenient fallback.

Write rule (zarr-v3-subset §3, §11.1): orjson turns NaN/Infinity into ``null``
silently, so non-finite floats are refused in documents we write; callers encode
them as the strings "NaN"/"Infinity"/"-Infinity" where the spec gives a form.
Read rule: other writers (zarr-python) emit bare ``NaN`` tokens in attributes,
which orjson refuses; such documents are re-parsed with ``json.loads``.
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson

from molrec_raw.errors import InvalidMetadataError

_DUMP_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY


def _find_non_finite(value: Any, path: str) -> str | None:
    if isinstance(value, (float, np.floating, np.complexfloating)):
        return None if np.isfinite(value) else path
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "fc" and not np.isfinite(value).all():
            return path
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            found = _find_non_finite(v, f"{path}/{k}")
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = _find_non_finite(v, f"{path}/{i}")
            if found:
                return found
    return None


def dumps(document: Any) -> bytes:
    """Serialise deterministically (insertion order kept); refuse non-finite floats."""
    try:
        out = orjson.dumps(document, option=_DUMP_OPTIONS)
    except TypeError as exc:
        raise InvalidMetadataError(f"value not representable as JSON: {exc}") from None
    if b"null" in out:  # orjson writes NaN/Infinity as null: only then look closer
        bad = _find_non_finite(document, "")
        if bad is not None:
            raise InvalidMetadataError(
                f"non-finite float at JSON path {bad or '/'}: JSON cannot hold NaN/Infinity",
                rule="zarr-v3-subset#3",
            )
    return out


def loads(data: bytes) -> Any:
    """Parse a JSON document; accept bare NaN/Infinity tokens written by other tools."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    text = ""
    try:
        text = bytes(data).decode("utf-8")
        return json.loads(text)
    except UnicodeDecodeError as exc:
        raise InvalidMetadataError(f"not a valid UTF-8 JSON document: {exc}", offset=exc.start,
                                   rule="zarr-v3-subset#2") from None
    except json.JSONDecodeError as exc:  # the byte offset of the fault (exc.pos counts characters)
        at = len(text[:exc.pos].encode("utf-8"))
        raise InvalidMetadataError(f"not a valid UTF-8 JSON document: {exc}", offset=at,
                                   rule="zarr-v3-subset#2") from None
    except (ValueError, RecursionError) as exc:
        raise InvalidMetadataError(f"not a valid UTF-8 JSON document: {exc}", rule="zarr-v3-subset#2") from None
