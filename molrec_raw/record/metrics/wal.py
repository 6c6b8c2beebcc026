"""The metrics WAL: line format, parsing into per-key columns, and the appending file.

documents §5.  One JSON object per line, UTF-8, ``\\n``-terminated, compact keys
``t,k,s,w,v,tags`` (§5.2; optional ``s``/``tags`` omitted, never null).  Readers take
complete lines only (an unterminated last fragment is a torn tail, ignored), skip blank
lines and refuse a complete line that is not exactly one well-formed event with the file,
line number and byte offset (README decision 9); host readers may opt into skipping such
lines (``lenient``), never by default.

Parsing is columnar: orjson turns each line into a dict, a few ``map`` passes pull the
fields out, numpy groups them per key.  Any check that fails on the fast path sends the
batch through a per-line path that names the first bad line exactly.
"""
from __future__ import annotations

import datetime as _dt
import gc
import math
import time
from dataclasses import dataclass, field
from itertools import repeat
from operator import itemgetter
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import orjson

from molrec_raw.errors import (
    CorruptDataError, InvalidValueError, SpecViolationError, StoreError, UnsupportedFeatureError,
)
from molrec_raw.record.documents import is_rfc3339
from molrec_raw.record.metrics.series import Series
from molrec_raw.zarr.store import Store

try:  # POSIX advisory locks; a platform without them cannot guarantee one writer per WAL
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "ParsedWal", "parse_wal", "complete_part", "wall_time_text", "value_text",
    "WalFile", "NONFINITE_TEXT", "LINE_RULE", "FORMAT_RULE",
]

LINE_RULE = "documents#9.15"  # readers: torn tail ignored, blank skipped, bad complete line refused
FORMAT_RULE = "documents#5.2"  # line format
APPEND_RULE = "documents#9.14"  # one appender, whole lines, torn tail truncated on reopen
NONFINITE_TEXT = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}  # decision 8
_I64_MIN, _I64_MAX = -(2 ** 63), 2 ** 63 - 1
_BATCH_BYTES = 1 << 20  # bytes of lines parsed per batch: bounds the dicts alive at once

_get_k, _get_t, _get_w, _get_v = itemgetter("k"), itemgetter("t"), itemgetter("w"), itemgetter("v")


# -- values and wall times --------------------------------------------------------------------

def value_text(value: Any) -> str:
    """The JSON text of a scalar value: shortest round-trip float, or a non-finite string."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InvalidValueError(f"a scalar metric value is a real number, not {type(value).__name__} {value!r}")
    try:
        number = float(value)
    except OverflowError:
        raise InvalidValueError(f"metric value {value!r} does not fit a float64") from None
    if number - number == 0.0:
        return orjson.dumps(number).decode()  # shortest round-trip text, as the writer's hot path
    if number != number:
        return '"NaN"'
    return '"Infinity"' if number > 0 else '"-Infinity"'


_second_cache: List[Any] = [None, ""]


def utc_text(t: float) -> str:
    """``t`` (seconds since the epoch) as RFC 3339 UTC with microseconds: fixed width, ``Z``."""
    sec = math.floor(t)
    if sec != _second_cache[0]:
        _second_cache[1] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
        _second_cache[0] = sec
    return f"{_second_cache[1]}.{min(int((t - sec) * 1e6), 999999):06d}Z"


def wall_time_text(wall_time: Any) -> str:
    """A caller's wall time: an RFC 3339 string with offset (kept as given), an aware
    ``datetime`` (converted to UTC) or seconds since the epoch (README decision 10)."""
    if isinstance(wall_time, str):
        if not is_rfc3339(wall_time):
            raise InvalidValueError(
                f"wall_time {wall_time!r} is not an RFC 3339 date-time with an explicit offset "
                "(e.g. 2026-08-04T12:00:00Z)", rule="README#decision-10",
            )
        return wall_time
    if isinstance(wall_time, _dt.datetime):
        if wall_time.tzinfo is None or wall_time.utcoffset() is None:
            raise InvalidValueError("wall_time datetime must be timezone-aware", rule="README#decision-10")
        utc = wall_time.astimezone(_dt.timezone.utc)
        return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(wall_time, (int, float, np.integer, np.floating)) and not isinstance(wall_time, (bool, np.bool_)):
        t = float(wall_time)
        if not math.isfinite(t):
            raise InvalidValueError(f"wall_time {wall_time!r} is not a finite time")
        return utc_text(t)
    raise InvalidValueError(
        f"wall_time must be an RFC 3339 string, an aware datetime or epoch seconds, not {type(wall_time).__name__}"
    )


# -- parsed events ------------------------------------------------------------------------

@dataclass
class ParsedWal:
    """Events of a run of complete lines: per key (first-seen order), with the number of
    complete lines consumed (blank ones included) and the lines skipped in lenient mode."""

    series: Dict[str, Series]
    lines: int
    skipped: List[Tuple[int, int, str]] = field(default_factory=list)  # (line, offset, reason)


def complete_part(data: bytes) -> bytes:
    """``data`` up to and including its last ``\\n`` before any NUL byte (the torn tail,
    if any, cut off).  A NUL is never written by a WAL writer (JSON escapes it): it is
    what a power cut leaves in an append whose length persisted but whose bytes did not,
    so nothing from it on was ever a written line (README decision 9, spec-notes/metrics.md)."""
    zero = data.find(b"\x00")
    end = data.rfind(b"\n", 0, zero if zero >= 0 else len(data))
    return data[:end + 1] if end >= 0 else b""


class _Bad(Exception):
    def __init__(self, index: int, reason: str, spec: bool = False) -> None:
        super().__init__(reason)
        self.index, self.reason, self.spec = index, reason, spec


def _event_problem(obj: Any) -> Optional[str]:
    """Why one parsed line is not a well-formed event, or None (documents §4.1, §5.2)."""
    if type(obj) is not dict:
        return f"not a JSON object but a JSON {type(obj).__name__}"
    key = obj.get("k")
    if type(key) is not str or not key:
        return "'k' (series key) must be a non-empty string"
    kind = obj.get("t")
    if type(kind) is not str or not kind:
        return "'t' (event type) must be a non-empty string"
    if type(obj.get("w")) is not str:
        return "'w' (wall time) must be a string"
    if "v" not in obj:
        return "'v' (value) is missing"
    value = obj["v"]
    if type(value) is str:
        if value not in NONFINITE_TEXT:
            return f"'v' must be a JSON number or one of \"NaN\", \"Infinity\", \"-Infinity\", not {value!r}"
    elif type(value) not in (int, float):
        return (f"'v' must be a JSON number (or a non-finite string), not {_json_kind(value)}"
                + ("" if kind == "scalar" else f" (custom type {kind!r} with non-numeric values is not supported)"))
    step = obj.get("s")
    if step is not None and (type(step) is not int or not _I64_MIN <= step <= _I64_MAX):
        return f"'s' (step) must be an integer in the int64 range, not {step!r}"
    tags = obj.get("tags")
    if tags is not None and type(tags) is not dict:
        return f"'tags' must be a JSON object, not {_json_kind(tags)}"
    return None


def _json_kind(value: Any) -> str:
    return {bool: "a boolean", type(None): "null", list: "an array", dict: "an object",
            str: "a string", int: "an integer", float: "a number"}.get(type(value), type(value).__name__)


class _Columns:
    """Field columns of a run of events, accumulated batch by batch (first-seen key order).

    ``add`` raises _Bad at the first problem it notices cheaply; the caller then re-reads the
    lines one by one to name the exact line (or skip it, in lenient mode)."""

    def __init__(self) -> None:
        self.ids: Dict[str, int] = {}  # key -> id, first-seen order
        self.kind: List[str] = []  # by id: the series' type
        self.stepped: List[bool] = []  # by id: events carry a step
        self.key_parts: List[np.ndarray] = []
        self.value_parts: List[np.ndarray] = []
        self.step_parts: List[np.ndarray] = []
        self.walls: List[Any] = []

    def _learn(self, keys: List[Any], kinds: List[Any], steps: List[Any]) -> None:
        """Give new keys an id, a type and a stepped flag (from their first event here)."""
        for key in dict.fromkeys(keys):
            if key not in self.ids:
                if type(key) is not str or not key:
                    raise _Bad(0, "key")
                first = keys.index(key)
                self.ids[key] = len(self.ids)
                self.kind.append(kinds[first] if len(kinds) > 1 else kinds[0])
                self.stepped.append(steps[first] is not None)

    def add(self, objs: List[Any]) -> None:
        n = len(objs)
        if n == 0:
            return
        try:
            keys = list(map(_get_k, objs))
            walls = list(map(_get_w, objs))
            values = list(map(_get_v, objs))
            kinds = list(dict.fromkeys(map(_get_t, objs)))
        except (KeyError, TypeError):  # a missing field, a non-object line, an unhashable type
            raise _Bad(0, "field") from None
        steps = list(map(dict.get, objs, repeat("s")))
        nones = steps.count(None)
        if sum(map(len, objs)) != 4 * n + n - nones:  # extra keys: tags, a null "s", producer keys
            if not set(map(type, map(dict.get, objs, repeat("tags")))) <= {dict, type(None)}:
                raise _Bad(0, "tags")
        if set(map(type, walls)) != {str} or not all(type(t) is str and t for t in kinds):
            raise _Bad(0, "wall time or type")
        vtypes = set(map(type, values))
        if not vtypes <= {float, int, str}:
            raise _Bad(0, "value")
        if str in vtypes and not {v for v in values if type(v) is str} <= NONFINITE_TEXT.keys():
            raise _Bad(0, "value string")
        if not set(map(type, steps)) <= {int, type(None)}:
            raise _Bad(0, "step")
        if len(kinds) > 1:
            kinds = list(map(_get_t, objs))
        try:
            self._learn(keys, kinds, steps)
        except TypeError:  # an unhashable key (a JSON array or object)
            raise _Bad(0, "key") from None
        ids = self.ids
        code = np.uint16 if len(ids) <= 0xFFFF else np.int64
        kid = np.fromiter(map(ids.__getitem__, keys), dtype=code, count=n)
        if len(kinds) > 1:  # rare: several types in one batch, check each event
            kind = self.kind
            if any(kind[ids[k]] != t for k, t in zip(keys, kinds)):
                raise _Bad(0, "mixed types", spec=True)
        else:
            lut = np.array([t == kinds[0] for t in self.kind])
            if not lut[kid].all():
                raise _Bad(0, "mixed types", spec=True)
        stepped = np.array(self.stepped)
        try:
            if nones == 0:
                if not stepped[kid].all():
                    raise _Bad(0, "mixed steps", spec=True)
                step_array = np.array(steps, dtype=np.int64)
            elif nones == n:
                if stepped[kid].any():
                    raise _Bad(0, "mixed steps", spec=True)
                step_array = np.zeros(n, dtype=np.int64)
            else:
                objects = np.array(steps, dtype=object)
                missing = np.equal(objects, None)  # type: ignore[call-overload]  # stubs reject None
                if not np.array_equal(missing, ~stepped[kid]):
                    raise _Bad(0, "mixed steps", spec=True)
                objects[missing] = 0
                step_array = objects.astype(np.int64)
            value_array = np.array(values, dtype=np.float64)
        except (OverflowError, ValueError):
            raise _Bad(0, "range") from None
        self.key_parts.append(kid)
        self.value_parts.append(value_array)
        self.step_parts.append(step_array)
        self.walls += walls

    def group(self) -> Dict[str, Series]:
        """The events per key (log order within each key)."""
        if not self.ids:
            return {}
        return group_events(list(self.ids), self.kind, self.stepped, _join(self.key_parts),
                            _join(self.value_parts), _join(self.step_parts), np.array(self.walls, dtype=object))


def group_events(keys: List[str], kinds: List[str], stepped: List[bool], kid: np.ndarray, values: np.ndarray,
                 steps: np.ndarray, walls: np.ndarray) -> Dict[str, Series]:
    """Split event columns per key: ``kid[i]`` indexes ``keys``/``kinds``/``stepped``;
    ``steps`` holds anything for step-less keys.  Key order is that of ``keys``."""
    if len(keys) == 1:
        return {keys[0]: Series(keys[0], kinds[0], steps if stepped[0] else None, values, walls)}
    order = np.argsort(kid, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(kid, minlength=len(keys)))))
    out: Dict[str, Series] = {}
    for number, key in enumerate(keys):
        index = order[bounds[number]:bounds[number + 1]]
        if index.shape[0]:
            out[key] = Series(key, kinds[number], steps[index] if stepped[number] else None,
                              values[index], walls[index])
    return out


def steps_column(steps: List[Any]) -> np.ndarray:
    """int64 steps from a list of int or None (None → 0, for step-less keys)."""
    try:
        return np.array(steps, dtype=np.int64)  # no None (the common case); ints checked by the caller
    except TypeError:
        pass
    objects = np.array(steps, dtype=object)
    objects[np.equal(objects, None)] = 0  # type: ignore[call-overload]  # stubs reject None
    return objects.astype(np.int64)


def _join(parts: List[np.ndarray]) -> np.ndarray:
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def parse_wal(data: bytes, *, source: str, first_line: int = 1, first_offset: int = 0,
              lenient: bool = False) -> ParsedWal:
    """Parse complete lines (``data`` ends with ``\\n`` or is empty) into per-key events.

    ``first_line``/``first_offset`` locate ``data`` in the file, for messages.  A bad line
    raises CorruptDataError (SpecViolationError for a key mixing types or stepped and
    step-less events) naming ``source``, the line number and the byte offset; with
    ``lenient`` it is skipped and listed in ``skipped``.
    """
    if data and not data.endswith(b"\n"):
        raise ValueError("parse_wal needs complete lines")  # internal misuse
    total = data.count(b"\n")
    enabled = gc.isenabled()
    gc.disable()  # the dicts of a batch would otherwise trigger collections for nothing
    try:
        try:
            columns = _Columns()
            loads = orjson.loads
            blank = b"\n\n" in data or data[:1] == b"\n"
            pos, size = 0, len(data)
            while pos < size:  # batches of about _BATCH_BYTES, cut after a newline
                end = data.rfind(b"\n", pos, pos + _BATCH_BYTES) + 1 or data.find(b"\n", pos) + 1
                lines = data[pos:end].split(b"\n")
                lines.pop()
                if blank:
                    lines = list(filter(None, lines))
                columns.add(list(map(loads, lines)))
                pos = end
            return ParsedWal(columns.group(), total)
        except (orjson.JSONDecodeError, _Bad):
            pass
        return _parse_slowly(data.split(b"\n")[:-1], source, first_line, first_offset, lenient)
    finally:
        if enabled:
            gc.enable()


def _parse_slowly(pieces: List[bytes], source: str, first_line: int, first_offset: int,
                  lenient: bool) -> ParsedWal:
    """Line by line: find (and refuse, or in lenient mode skip) every bad line exactly."""
    good: List[Any] = []
    skipped: List[Tuple[int, int, str]] = []
    shape: Dict[str, Tuple[str, bool]] = {}  # key -> (type, stepped) of its first event
    offset = first_offset
    for number, piece in enumerate(pieces, start=first_line):
        here, offset = offset, offset + len(piece) + 1
        if not piece.strip():
            continue  # blank line (documents §5.4)
        spec = False
        try:
            obj = orjson.loads(piece)
        except orjson.JSONDecodeError as exc:
            problem: Optional[str] = f"not valid UTF-8 JSON ({exc})"
        else:
            problem = _event_problem(obj)
            if problem is None:
                key, kind, stepped = obj["k"], obj["t"], obj.get("s") is not None
                first = shape.setdefault(key, (kind, stepped))
                if first[0] != kind:
                    problem, spec = f"series {key!r} has type {first[0]!r}, this event {kind!r}", True
                elif first[1] != stepped:
                    problem, spec = (f"series {key!r} mixes events with and without a step "
                                     "(its steps array could not hold 'no step')"), True
        if problem is None:
            good.append(obj)
            continue
        if lenient:
            skipped.append((number, here, problem))
            continue
        message = f"{source}: line {number} (byte offset {here}): {problem}"
        if spec:
            raise SpecViolationError(message, rule="documents#4.1")
        raise CorruptDataError(message, rule=LINE_RULE)
    columns = _Columns()
    columns.add(good)
    return ParsedWal(columns.group(), len(pieces), skipped)


# -- the appending file -------------------------------------------------------------------

class WalFile:
    """A WAL file opened for appending by its one writer (documents#9.14), through the
    store that holds it (every mutation goes through the store's file seam).

    The exclusive advisory lock (``flock``) is taken before anything is read or changed;
    a second writer gets StoreError.  ``O_APPEND`` makes every write land at the end.
    """

    def __init__(self, store: Store, key: str) -> None:
        if fcntl is None:  # pragma: no cover - not POSIX
            raise UnsupportedFeatureError("WAL writers need POSIX advisory locks (fcntl)")
        self.path = f"{store.describe()}/{key}"
        self._file = store.open_append(key)  # StoreError names the file when it cannot
        try:
            locked = self._file.lock()
        except OSError as exc:
            self._file.close()
            raise StoreError(f"cannot lock the metrics WAL {self.path}: {exc.strerror or exc}") from None
        if not locked:
            self._file.close()
            raise StoreError(
                f"the metrics WAL {self.path} is already open by another writer (its advisory lock is "
                "held); a WAL has exactly one appending writer at a time", rule=APPEND_RULE,
            )

    def size(self) -> int:
        return self._file.size()

    def read(self, start: int, end: int) -> bytes:
        parts = []
        while start < end:
            part = self._file.read(start, min(end - start, 1 << 30))
            if not part:
                raise StoreError(f"the metrics WAL {self.path} shrank while being read")
            parts.append(part)
            start += len(part)
        return b"".join(parts)

    def truncate_torn_tail(self, floor: int = 0) -> int:
        """Cut an unterminated last fragment (documents#9.14), and everything from the first
        NUL byte past ``floor`` on (see ``complete_part``); return the new size."""
        size = self.size()
        zero, start = -1, floor
        while start < size and zero < 0:  # bounded pieces: a long tail is not read at once
            piece = self.read(start, min(size, start + (1 << 24)))
            found = piece.find(b"\x00")
            zero = start + found if found >= 0 else -1
            start += len(piece)
        if zero >= 0:
            size = zero
        elif size == 0 or self.read(size - 1, size) == b"\n":
            return size
        end = size
        while end > floor:
            start = max(floor, end - (1 << 16))
            found = self.read(start, end).rfind(b"\n")
            if found >= 0:
                return self._truncate(start + found + 1)
            end = start
        return self._truncate(floor)

    def cut(self, size: int) -> int:
        """Cut the WAL to ``size`` bytes (``repair``: a damaged tail past the watermark) and
        fsync it; return the new size."""
        return self._truncate(size)

    def _truncate(self, size: int) -> int:
        try:
            self._file.truncate(size)
            self._file.sync()
        except OSError as exc:
            raise StoreError(f"cannot truncate the torn tail of {self.path}: {exc.strerror or exc}") from None
        return size

    def write(self, data: bytes) -> None:
        try:
            self._file.write(data)
        except OSError as exc:
            raise StoreError(f"cannot append to the metrics WAL {self.path}: {exc.strerror or exc}") from None

    def sync(self) -> None:
        try:
            self._file.sync()
        except OSError as exc:
            raise StoreError(f"cannot fsync the metrics WAL {self.path}: {exc.strerror or exc}") from None

    def close(self) -> None:
        self._file.close()
