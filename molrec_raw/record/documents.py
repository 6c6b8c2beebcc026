"""The JSON documents of a record — ``meta``, ``status``, ``method`` — as plain dicts.

Pure functions, no Zarr access (another module stores the dicts as group attributes).
Every ``check_*`` yields :class:`Violation` s; writers ``refuse`` them, ``validate`` collects.

Decisions (where the digests are silent or unclear):

- **Null on a named key** (documents#9.3, frame-and-types#14.49, documents §11 item 7):
  readers take ``null`` on an *optional* named key as absent; writers (``writing=True``)
  refuse it with a message telling the caller to omit the key, instead of silently
  dropping it. So there is no ``drop_unset`` helper. Producer keys may hold ``null``
  (documents#9.2). A ``null`` required key (``state``, ``type``…) is refused either way,
  and so is ``molrec_version: null`` (frame-and-types#14.23).
- **Finite JSON** (documents#9.4) is a separate check, :func:`check_finite_json`; the
  ``check_*`` of a document check key types only, so run both.
- **Node paths** name the document (``/status``; ``/method/stages/<id>`` for a workflow
  stage); the offending key is named in the message.
- **Integers**: Python ``int`` or numpy integer, never ``bool``/``numpy.bool_``; floats such
  as ``1.0`` are not integers.
- **method**: the custom-``type``-needs-a-module rule and ``order`` ↔ ``stages``
  consistency are not checked (the reference does neither); ``order``/``stages`` are only
  checked when ``type == "workflow"``.
"""
from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterable, Mapping
from typing import Any, Callable, Dict, Optional

import numpy as np

from molrec_raw.errors import SpecViolationError
from molrec_raw.record.violations import Checks, Violation, refuse

__all__ = [
    "CURRENT_VERSION",
    "SUPPORTED_VERSIONS",
    "SUBSTANTIVE_SECTIONS",
    "stamp_meta",
    "check_meta",
    "meta_version",
    "check_status",
    "check_method",
    "check_finite_json",
    "check_sections",
    "is_rfc3339",
]

CURRENT_VERSION = 2
SUPPORTED_VERSIONS = range(1, 3)
SUBSTANTIVE_SECTIONS = ("frame", "system", "trajectory", "forcefield", "status")

_META_RULE = "frame-and-types#14.21"
_VERSION_RULE = "frame-and-types#14.23"


# -- small predicates ---------------------------------------------------------------------

def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_number(v: Any) -> bool:
    return _is_int(v) or (isinstance(v, (float, np.floating)))


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
    r"(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))"
)


def is_rfc3339(text: Any) -> bool:
    """RFC 3339 ``date-time`` with explicit offset (README#decision-10, documents#9.7).

    Date AND time with seconds; separator ``T``/``t`` only (the RFC §5.6 note's space is
    an application agreement, not interchange, and the reference requires ``T``);
    fractional seconds optional; offset ``Z``/``z``/``±hh:mm`` required (``-00:00``
    allowed). Ranges are checked with :mod:`datetime`, so day 31 of April, hour 24 and the
    leap second ``:60`` are refused (the Python reference refuses them too).
    """
    if not isinstance(text, str):
        return False
    m = _RFC3339.fullmatch(text)
    if m is None:
        return False
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    try:
        _dt.datetime(y, mo, d, h, mi, s)
    except ValueError:
        return False
    return m.group(8) is None or (int(m.group(9)) <= 23 and int(m.group(10)) <= 59)


# -- shared key checks --------------------------------------------------------------------

def _not_object(doc: Any, what: str, rule: str, node: str) -> Optional[Violation]:
    if isinstance(doc, Mapping):
        return None
    return Violation(rule, node, f"the {what} document must be a JSON object, found {_show(doc)}")


def _nulls(doc: Mapping[str, Any], names: Iterable[str], where: str, rule: str, node: str) -> Checks:
    """Writer side of documents#9.3 / frame-and-types#14.49: a named key set to None."""
    for name in names:
        if name in doc and doc[name] is None:
            yield Violation(rule, node, f"{where}{name!r} is None: a named key that is unset "
                                        "must be omitted from the document, not set to null")


def _opt_str(doc: Mapping[str, Any], name: str, where: str, rule: str, node: str) -> Checks:
    v = doc.get(name)
    if v is not None and not isinstance(v, str):
        yield Violation(rule, node, f"{where}{name!r} must be a string, found {_show(v)}")


def _req_str(doc: Mapping[str, Any], name: str, where: str, rule: str, node: str) -> Checks:
    v = doc.get(name)
    if v is None:
        yield Violation(rule, node, f"{where}{name!r} is required (a string)")
    elif not isinstance(v, str):
        yield Violation(rule, node, f"{where}{name!r} must be a string, found {_show(v)}")


# -- meta ---------------------------------------------------------------------------------

def stamp_meta(doc: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """A new meta document: the caller's, with ``molrec_version: 2`` over any caller value
    (README#decision-1, frame-and-types#14.50). Key order is the caller's; the version sits
    where the caller had it, else last. Unknown and null-valued keys are kept (documents#9.2).
    """
    if doc is None:
        doc = {}
    if not isinstance(doc, Mapping):
        raise SpecViolationError(f"the meta document must be a JSON object, found {_show(doc)}",
                                 node="/meta", rule="frame-and-types#11.1")
    out = dict(doc)
    out["molrec_version"] = CURRENT_VERSION
    return out


def _check_version(doc: Mapping[str, Any], node: str) -> Checks:
    if "molrec_version" not in doc:  # unstamped: a current store, nothing to check (frame-and-types#14.30)
        return
    v = doc["molrec_version"]
    if not _is_int(v):
        yield Violation(_VERSION_RULE, node,
                        f"molrec_version must be a positive integer, found {_show(v)}")
    elif int(v) not in SUPPORTED_VERSIONS:
        yield Violation(_VERSION_RULE, node, f"unsupported molrec_version {int(v)}; this reader "
                        f"supports {SUPPORTED_VERSIONS.start}..={SUPPORTED_VERSIONS.stop - 1}")


def check_meta(doc: Optional[Mapping[str, Any]], node: str = "/meta", *,
               writing: bool = False) -> Checks:
    """The ``meta`` document (frame-and-types §11, #14.21, #14.23, #14.30).

    ``None`` (no ``meta/`` group) is the empty document (frame-and-types#14.24).
    ``molrec_version`` when present: integer 1..=2; ``creator``/``author``: objects with a
    string ``name`` (optional string ``version``/``email``); ``created_at``: RFC 3339 with
    offset; ``source``/``record_id``/``content_hash``: strings; ``modules``: object of
    objects. Unknown keys are never checked.
    """
    if doc is None:
        return
    bad = _not_object(doc, "meta", _META_RULE, node)
    if bad:
        yield bad
        return
    yield from _check_version(doc, node)
    if writing:
        yield from _nulls(doc, ("creator", "author", "created_at", "source", "record_id",
                                "content_hash", "modules"), "", "frame-and-types#14.49", node)
    for name, extra in (("creator", "version"), ("author", "email")):
        sub = doc.get(name)
        if sub is None:
            continue
        if not isinstance(sub, Mapping):
            yield Violation(_META_RULE, node, f"{name!r} must be an object, found {_show(sub)}")
            continue
        yield from _req_str(sub, "name", f"{name}.", _META_RULE, node)
        yield from _opt_str(sub, extra, f"{name}.", _META_RULE, node)
        if writing:
            yield from _nulls(sub, (extra,), f"{name}.", "frame-and-types#14.49", node)
    created = doc.get("created_at")
    if created is not None and not is_rfc3339(created):
        yield Violation(_META_RULE, node, "'created_at' must be an RFC 3339 date-time with an "
                        f"explicit offset (Z or ±hh:mm), found {_show(created)}")
    for name in ("source", "record_id", "content_hash"):
        yield from _opt_str(doc, name, "", "frame-and-types#11.1", node)
    yield from _object_of(doc, "modules", lambda entry: isinstance(entry, Mapping), "an object",
                          "frame-and-types#11.1", node)


def _object_of(doc: Mapping[str, Any], name: str, entry_ok: Callable[[Any], bool], entry_kind: str,
               rule: str, node: str, what: str = "an object") -> Checks:
    """An optional key (None = absent) holding an object whose every entry passes ``entry_ok``."""
    value = doc.get(name)
    if value is None:
        return
    if not isinstance(value, Mapping):
        yield Violation(rule, node, f"{name!r} must be {what}, found {_show(value)}")
        return
    for key, entry in value.items():
        if not entry_ok(entry):
            yield Violation(rule, node, f"{name}[{key!r}] must be {entry_kind}, found {_show(entry)}")


def meta_version(doc: Optional[Mapping[str, Any]]) -> Optional[int]:
    """The stored ``molrec_version`` (``None``: unstamped, a current store read by the current
    rules, README#decision-1); refuses a bad one with SpecViolationError
    (frame-and-types#14.23). A missing document is ``None``.
    """
    if doc is None:
        return None
    refuse(_check_version(doc, "/meta"))
    v = doc.get("molrec_version")
    return None if v is None else int(v)


# -- status -------------------------------------------------------------------------------

_STATUS_NAMED = ("state", "stage", "epoch", "global_step", "progress", "message",
                 "started_at", "updated_at", "finished_at", "error")


def check_status(doc: Mapping[str, Any], node: str = "/status", *, writing: bool = False) -> Checks:
    """The ``status`` document (documents §2, items 9.5–9.8).

    ``state`` required string (any value); ``stage``/``message`` strings;
    ``epoch``/``global_step`` non-negative integers; ``progress`` an object of numbers;
    ``*_at`` RFC 3339 with offset; ``error`` an object with string ``message`` and optional
    string ``type``/``traceback`` (other keys kept).
    """
    bad = _not_object(doc, "status", "documents#9.5", node)
    if bad:
        yield bad
        return
    if writing:
        yield from _nulls(doc, _STATUS_NAMED[1:], "", "documents#9.3", node)
    yield from _req_str(doc, "state", "", "documents#9.5", node)
    for name in ("stage", "message"):
        yield from _opt_str(doc, name, "", "documents#9.5", node)
    for name in ("epoch", "global_step"):
        v = doc.get(name)
        if v is not None and not (_is_int(v) and v >= 0):
            yield Violation("documents#9.6", node,
                            f"{name!r} must be a non-negative integer, found {_show(v)}")
    yield from _object_of(doc, "progress", _is_number, "a number", "documents#9.6", node,
                          what="an object of numbers")
    for name in ("started_at", "updated_at", "finished_at"):
        v = doc.get(name)
        if v is not None and not is_rfc3339(v):
            yield Violation("documents#9.7", node, f"{name!r} must be an RFC 3339 date-time with "
                            f"an explicit offset (Z or ±hh:mm), found {_show(v)}")
    error = doc.get("error")
    if error is not None:
        if not isinstance(error, Mapping):
            yield Violation("documents#9.8", node, f"'error' must be an object, found {_show(error)}")
        else:
            yield from _req_str(error, "message", "error.", "documents#9.8", node)
            for name in ("type", "traceback"):
                yield from _opt_str(error, name, "error.", "documents#9.8", node)
            if writing:
                yield from _nulls(error, ("type", "traceback"), "error.", "documents#9.3", node)


# -- method -------------------------------------------------------------------------------

def check_method(doc: Mapping[str, Any], node: str = "/method", *, writing: bool = False) -> Checks:
    """The ``method`` document (documents §3, item 9.9).

    ``type``, ``description`` required strings; ``engine`` required object with string
    ``name`` (optional string ``version``). A ``workflow`` also needs ``order`` (list of
    strings) and ``stages`` (object of full method documents, checked at
    ``<node>/stages/<id>``; iterative, so deep nesting cannot exhaust the stack).
    """
    rule = "documents#9.9"
    pending = [(doc, node)]
    while pending:
        doc, node = pending.pop()
        bad = _not_object(doc, "method", rule, node)
        if bad:
            yield bad
            continue
        if writing:
            yield from _nulls(doc, ("order", "stages"), "", "documents#9.3", node)
        yield from _req_str(doc, "type", "", rule, node)
        yield from _req_str(doc, "description", "", rule, node)
        engine = doc.get("engine")
        if engine is None:
            yield Violation(rule, node, "'engine' is required (an object with a string 'name')")
        elif not isinstance(engine, Mapping):
            yield Violation(rule, node, f"'engine' must be an object, found {_show(engine)}")
        else:
            yield from _req_str(engine, "name", "engine.", rule, node)
            yield from _opt_str(engine, "version", "engine.", rule, node)
            if writing:
                yield from _nulls(engine, ("version",), "engine.", "documents#9.3", node)
        if doc.get("type") != "workflow":
            continue
        order = doc.get("order")
        if not (isinstance(order, (list, tuple)) and all(isinstance(s, str) for s in order)):
            yield Violation(rule, node, "a workflow's 'order' must be a list of stage-id strings, "
                            f"found {_show(order)}")
        stages = doc.get("stages")
        if not isinstance(stages, Mapping):
            yield Violation(rule, node, "a workflow's 'stages' must be an object of method "
                            f"documents, found {_show(stages)}")
        else:
            pending.extend((sub, f"{node}/stages/{sid}") for sid, sub in reversed(list(stages.items())))


# -- finite JSON, sections ----------------------------------------------------------------

_SCALARS = (str, bool, int, float, type(None), np.bool_, np.integer, np.floating)


def check_finite_json(doc: Any, node: str, rule: str) -> Checks:
    """Only finite JSON (documents#9.4, frame-and-types#14.41): objects with string keys,
    lists/tuples, strings, numbers, booleans, null. NaN/±inf floats (numpy ones too) are
    refused; numpy scalars are accepted (the attribute writer serialises them); arrays,
    complex numbers and other objects are refused. The message gives the JSON path.
    """
    pending = [(doc, "")]
    while pending:
        value, path = pending.pop()
        where = path or "/"
        if isinstance(value, Mapping):
            for key, sub in reversed(list(value.items())):
                if isinstance(key, str):
                    pending.append((sub, f"{path}/{key}"))
                else:
                    yield Violation(rule, node, f"key {_show(key)} at {where} is not a string")
        elif isinstance(value, (list, tuple)):
            pending.extend((sub, f"{path}/{i}") for i, sub in reversed(list(enumerate(value))))
        elif not isinstance(value, _SCALARS):
            yield Violation(rule, node, f"{type(value).__name__} at {where} is not a JSON value")
        elif isinstance(value, (float, np.floating)) and not np.isfinite(value):
            yield Violation(rule, node, f"non-finite number {value!r} at {where}: "
                            "documents hold only finite JSON numbers")


def check_sections(names: Iterable[str], node: str = "/") -> Checks:
    """README#decision-2 / documents#9.1 / frame-and-types#14.22: besides ``meta`` a record
    needs one of :data:`SUBSTANTIVE_SECTIONS`. Writers refuse to finish; readers report only.
    """
    present = sorted(set(names))
    if not any(name in SUBSTANTIVE_SECTIONS for name in present):
        yield Violation("documents#9.1", node, "a record needs at least one of "
                        f"{', '.join(SUBSTANTIVE_SECTIONS)} (found: {', '.join(present) or 'none'})")
