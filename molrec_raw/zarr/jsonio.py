"""JSON for zarr.json documents: orjson first, stdlib as the lenient fallback.

Write rule (zarr-v3-subset §3, §11.1): orjson turns NaN/Infinity into ``null``
silently, so non-finite floats are refused in documents we write; callers encode
them as the strings "NaN"/"Infinity"/"-Infinity" where the spec gives a form.
Read rule: other writers (zarr-python) emit bare ``NaN`` tokens in attributes,
which orjson refuses; such documents are re-parsed with ``json.loads``.
"""
from __future__ import annotations

import json
import re
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
    """Parse a JSON document; accept bare NaN/Infinity tokens written by other tools.

    The lenient fallback is as strict as orjson on text: an escaped unpaired surrogate
    (``"\\ud800"``) cannot be UTF-8 (zarr-v3-subset#2), so it is refused rather than handed
    on as a ``str`` that no writer, file name or store key can encode."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        text = bytes(data).decode("utf-8")
        document = json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InvalidMetadataError(f"not a valid UTF-8 JSON document: {exc}", rule="zarr-v3-subset#2") from None
    if _SURROGATE_ESCAPE.search(text) and _holds_unpaired_surrogate(document):
        raise InvalidMetadataError("not a valid UTF-8 JSON document: a string holds an escaped unpaired "
                                   "surrogate (\\ud800-\\udfff)", rule="zarr-v3-subset#2")
    return document


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _holds_unpaired_surrogate(document: Any) -> bool:
    """True when a key or string of the parsed document is not encodable as UTF-8 (walked
    without recursion: the document may be deep)."""
    stack = [document]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
            texts: Any = value.keys()
        elif isinstance(value, list):
            stack.extend(value)
            continue
        elif isinstance(value, str):
            texts = (value,)
        else:
            continue
        for text in texts:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                return True
    return False
