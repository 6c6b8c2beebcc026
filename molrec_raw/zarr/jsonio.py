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

    The lenient fallback refuses what orjson refuses besides those tokens, the same on every
    Python version: nesting deeper than orjson's 1024 levels (the stdlib parser reads deeper
    on Python 3.12 and raises RecursionError on 3.10), and an escaped unpaired surrogate
    (``"\\ud800"``), which cannot be UTF-8 (zarr-v3-subset#2) and would be handed on as a
    ``str`` that no writer, file name or store key can encode."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    text = ""
    try:
        text = bytes(data).decode("utf-8")
        document = json.loads(text)
    except RecursionError:
        raise _too_deep() from None
    except UnicodeDecodeError as exc:
        raise InvalidMetadataError(f"not a valid UTF-8 JSON document: {exc}", offset=exc.start,
                                   rule="zarr-v3-subset#2") from None
    except json.JSONDecodeError as exc:  # the byte offset of the fault (exc.pos counts characters)
        at = len(text[:exc.pos].encode("utf-8"))
        raise InvalidMetadataError(f"not a valid UTF-8 JSON document: {exc}", offset=at,
                                   rule="zarr-v3-subset#2") from None
    except ValueError as exc:
        raise InvalidMetadataError(f"not a valid UTF-8 JSON document: {exc}", rule="zarr-v3-subset#2") from None
    _check_fallback(document, _SURROGATE_ESCAPE.search(text) is not None)
    return document


MAX_DEPTH = 1024  # levels of arrays and objects in a document: orjson's limit, kept by the fallback
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _too_deep() -> InvalidMetadataError:
    return InvalidMetadataError(f"not a valid JSON document: nested too deeply (at most {MAX_DEPTH} levels)",
                                rule="zarr-v3-subset#2")


def _check_fallback(document: Any, surrogates: bool) -> None:
    """Walk a document the stdlib parsed (without recursion: it may be deep): refuse nesting
    beyond ``MAX_DEPTH`` and, when the text holds surrogate escapes, keys or strings that
    are not encodable as UTF-8."""
    stack = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        texts: Any = ()
        if isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                raise _too_deep()
            if isinstance(value, list):
                stack.extend((item, depth + 1) for item in value)
                continue
            stack.extend((item, depth + 1) for item in value.values())
            texts = value.keys()
        elif isinstance(value, str):
            texts = (value,)
        if not surrogates:
            continue
        for text in texts:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidMetadataError("not a valid UTF-8 JSON document: a string holds an escaped unpaired "
                                           "surrogate (\\ud800-\\udfff)", rule="zarr-v3-subset#2") from None
