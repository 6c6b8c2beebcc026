"""Series key ↔ array name: the safe-name percent codec (documents §4.3, checklist #9.10).

Encode: the key's UTF-8 bytes; bytes in ``[A-Za-z0-9._-]`` stay, every other byte becomes
``%`` + two UPPERCASE hex digits.  A result that is exactly ``.`` or ``..`` or starts with
``__`` has its first character escaped too (``.``→``%2E``, ``..``→``%2E.``, ``__x``→``%5F_x``)
so the name is a valid Zarr node name.  Decode: ``%XX`` (uppercase hex only) is one byte,
any other character must be an unreserved ASCII byte; anything else is refused.  Needless
escapes of unreserved bytes are accepted (the leading-byte rule produces them).
"""
from __future__ import annotations

import re

from molrec_raw.errors import SpecViolationError

__all__ = ["encode_safe_name", "decode_safe_name", "UNRESERVED"]

RULE = "documents#9.10"
UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_BYTE_TEXT = tuple(chr(b) if b in UNRESERVED else f"%{b:02X}" for b in range(256))
_TOKEN = re.compile(r"%[0-9A-F]{2}|[A-Za-z0-9._-]+")
_PLAIN = re.compile(r"[A-Za-z0-9._-]+")


def encode_safe_name(key: str) -> str:
    """The array name of series ``key`` (documents#9.10: an empty key has no safe name)."""
    if not isinstance(key, str):
        raise SpecViolationError(f"a series key is a string, not {type(key).__name__}", rule=RULE)
    if not key:
        raise SpecViolationError("empty series key: an empty string is not a series key", rule=RULE)
    try:
        raw = key.encode("utf-8")
    except UnicodeEncodeError as exc:  # lone surrogates
        raise SpecViolationError(f"series key {key!r} is not valid Unicode text: {exc}", rule=RULE) from None
    name = key if _PLAIN.fullmatch(key) else "".join(_BYTE_TEXT[b] for b in raw)
    if name == ".":
        return "%2E"
    if name == "..":
        return "%2E."
    if name.startswith("__"):
        return "%5F" + name[1:]
    return name


def decode_safe_name(name: str) -> str:
    """The series key of array ``name``; a malformed escape or reserved character is refused."""
    if not isinstance(name, str) or not name:
        raise SpecViolationError(f"empty or non-string safe name {name!r}", rule=RULE)
    if _PLAIN.fullmatch(name):
        return name
    out = bytearray()
    pos = 0
    for match in _TOKEN.finditer(name):
        if match.start() != pos:
            break
        token = match.group()
        if token[0] == "%":
            out.append(int(token[1:], 16))
        else:
            out += token.encode("ascii")
        pos = match.end()
    if pos != len(name):
        bad = name[pos:pos + 3]
        raise SpecViolationError(
            f"safe name {name!r}: {bad!r} at position {pos} is neither %XX (uppercase hex) "
            "nor an unreserved character [A-Za-z0-9._-]", rule=RULE,
        )
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecViolationError(f"safe name {name!r} does not decode to UTF-8: {exc}", rule=RULE) from None
