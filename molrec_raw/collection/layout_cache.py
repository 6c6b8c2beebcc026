"""The layout cache and the quick decode of frame bytes (lmdb.md "Frame bytes"): a reader keeps
the layouts it has checked by the exact JSON text of a header's ``blocks``
(:meth:`LayoutCache.get`), and remembers the text a writer makes of them
(:meth:`LayoutCache.remember`) — whole for a layout without string columns, as a template around
the values of its one string column otherwise.  :meth:`LayoutCache.quick` then takes a value
whose header is such a text but for its other members without parsing the blocks again: every
rule :func:`~molrec_raw.collection.frame_bytes.frame_layout` checks still holds (``lmdb#L9``
magic, length, padding; ``lmdb#L10`` buffers inside the value; ``lmdb#L12`` the string values;
``lmdb#L17`` the header's shape), or it answers None and the caller decodes the value the
general way, which names what is wrong.  :func:`string_list` and friends split a compact JSON
array of plain strings without parsing it (the same list ``orjson`` gives).  Knows nothing of
LMDB.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import orjson

from molrec_raw.collection.frame_bytes import _TOP_KEYS, _UNPACK, MAGIC, Layout, compile_layout

__all__ = ["LayoutCache", "string_list", "string_lists", "joined_strings", "joined_text"]

_MARK = "\x00molrec-raw: a string column's values\x00"  # never a writer's value (a template's place holder)
_MARK_TEXT = orjson.dumps(_MARK)


_NOT_IN_PLAIN_STRINGS = bytes(range(0x20)) + b"\\"


def string_list(text: Any) -> Optional[List[str]]:
    """The strings of ``text`` when it is one JSON array of strings (what ``orjson.loads``
    gives), else None.  Strings without escapes or control characters written compactly
    (``["C","H"]``, how a writer writes them) are split out of the text — the same list,
    for less than parsing it; anything else is parsed by orjson."""
    if text.startswith(b'["') and text.endswith(b'"]') and len(text.translate(None, _NOT_IN_PLAIN_STRINGS)) == len(text):
        try:
            items: List[str] = text[2:-2].decode().split('","')
        except UnicodeDecodeError:
            return None
        if text.count(b'"') == 2 * len(items):  # no other quote: each item is one string's text
            return items
    try:
        values = orjson.loads(text)
        if type(values) is list and type("".join(values)) is str:
            return values
    except (orjson.JSONDecodeError, TypeError):  # (TypeError: a non-string among them)
        pass
    return None


def joined_strings(texts: List[Any], count: int) -> Optional[List[str]]:
    """The strings of many texts that hold ``count`` strings each, one list in their order —
    when every text is written compactly without escapes or control characters (checked by
    counting its quotes and separators; the texts are split out of one joined text), else
    None (:func:`string_list` them one by one)."""
    text = joined_text(texts, count)
    return None if text is None else text.split('","')  # count strings each, by the counts checked


def joined_text(texts: List[Any], count: int) -> Optional[str]:
    """:func:`joined_strings` before its split: the strings joined by ``","`` (or None)."""
    if not count:
        return None
    plain: List[Any] = []
    seps = count - 1
    for text in texts:  # '["' item '","' ... item '"]'
        inner = text[2:-2]
        if not (text.startswith(b'["') and text.endswith(b'"]') and inner.count(b'","') == seps and len(text) >= 4):
            return None
        plain.append(inner)
    joined = b'","'.join(plain)
    # every quote in a separator: each text has its 2 * (count - 1), so their sum is all there are
    if joined.count(b'"') != 2 * (seps * len(plain) + len(plain) - 1) or len(
            joined.translate(None, _NOT_IN_PLAIN_STRINGS)) != len(joined):
        return None
    try:
        return joined.decode()
    except UnicodeDecodeError:
        return None


def string_lists(texts: List[Any], count: int) -> List[Optional[List[str]]]:
    """:func:`string_list` of many texts that must hold ``count`` strings each (None for a
    text that does not), through :func:`joined_strings` where it can."""
    flat = joined_strings(texts, count)
    if flat is not None:
        return [flat[k:k + count] for k in range(0, len(flat), count)]
    out: List[Optional[List[str]]] = []
    for text in texts:
        values = string_list(text)
        out.append(values if values is not None and len(values) == count else None)
    return out


def _members(rest: Any) -> Optional[Dict[str, Any]]:
    """The members after a header's ``blocks``: ``rest`` is ``}`` or ``,`` then members then
    ``}`` (parsed alone; at least one member: ``,}`` is not JSON), ``blocks`` not among them.
    None otherwise."""
    if rest == b"}":
        return {}
    if rest[:1] != b",":
        return None
    try:
        head = orjson.loads(b"{" + rest[1:])
    except orjson.JSONDecodeError:
        return None
    if type(head) is not dict or not head or "blocks" in head:
        return None
    return head


class _Strung:
    """A header text of a layout with one string column: ``head`` is the text up to its
    ``values``, ``close`` the text of ``blocks`` after them, ``count`` how many."""

    __slots__ = ("head", "close", "layout", "count")

    def __init__(self, head: bytes, close: bytes, layout: Layout, count: int) -> None:
        self.head, self.close, self.layout, self.count = head, close, layout, count


class LayoutCache:
    """Checked layouts by the exact JSON text of a header's ``blocks`` (at most ``size``; the
    older half is dropped when full)."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self.layouts: Dict[bytes, Layout] = {}
        self.prefixes: List[Tuple[bytes, Dict[str, Any], Layout]] = []
        self.strung: List[_Strung] = []
        self._last: Tuple[Any, Dict[str, Any]] = (b"", {})  # (rest, members) of the last value: one attribute

    def by_prefix(self, text: bytes) -> Optional[Tuple[Dict[str, Any], Layout]]:
        """The header of ``text`` when it starts with the exact text of a remembered
        ``{"blocks": ...`` (the same bytes: the same checked blocks): the other members are
        parsed alone and the remembered blocks put beside them.  None (parse it whole) when no
        prefix matches or the rest is not one JSON object's members without ``blocks``."""
        for prefix, raw_blocks, layout in self.prefixes:
            if text.startswith(prefix):
                head = _members(text[len(prefix):])
                if head is None:
                    return None
                head["blocks"] = raw_blocks
                return head, layout
        return None

    def quick(self, value: Any, parse: bool = True) -> Optional[Tuple[Layout, Dict[str, Any], Any, int]]:
        """A value whose header is a remembered text but for its other members (the
        :meth:`by_prefix` texts) or but for the values of its one string column and its other
        members (:meth:`remember`'s templates): ``(layout, the header's members but blocks,
        the string column's values or None, the payload's offset; the members are shared with
        the next value of the same text: read them, never change them) — every rule
        :func:`frame_layout` checks holds (magic, length, zero padding, the JSON, its top
        keys, ``meta``/``meta_types`` objects, the buffers inside the value), the string
        values are ``count`` strings.  None whenever anything is otherwise: :func:`frame_layout`
        then reads it and names what is wrong.  (A ``memoryview``'s header is copied.)
        ``parse=False``: the string values are handed as their text, not yet parsed or
        checked — the caller's to check (:func:`string_lists`) before trusting the rest."""
        end = len(value)
        if end < 8:
            return None
        magic, length = _UNPACK(value, 0)
        stop = 8 + length
        payload = (stop + 7) & -8  # (8: the prefix's size and ALIGN)
        if magic != MAGIC or payload > end:
            return None
        if type(value) is memoryview:
            value = bytes(value[:payload])
        if payload != stop and value.count(0, stop, payload) != payload - stop:
            return None
        strings: Any = None
        for prefix, _, layout in self.prefixes:
            if value.startswith(prefix, 8, stop):
                at = 8 + len(prefix)
                break
        else:
            for strung in self.strung:
                if value.startswith(strung.head, 8, stop):
                    i = 8 + len(strung.head)
                    j = value.find(strung.close, i, stop)
                    if j < 0:
                        return None
                    # the text between is one JSON value (parsed alone): so the whole text is the
                    # template's with another value there (its end is where that value ends)
                    strings = value[i:j]
                    if parse:
                        strings = string_list(strings)
                        if strings is None or len(strings) != strung.count:
                            return None
                    layout = strung.layout
                    at = j + len(strung.close)
                    break
            else:
                return None
        rest = value[at:stop]
        last = self._last  # (one read: another thread may replace it)
        if rest == last[0]:  # the members of the value before (a system's ``"meta":{}``)
            head = last[1]
        else:
            found = _members(rest)
            if found is None or not found.keys() <= _TOP_KEYS or "meta" in found and type(found["meta"]) is not dict or (
                    found.get("meta_types") is not None and type(found["meta_types"]) is not dict):
                return None
            head = found
            self._last = (rest, head)
        if payload + layout.need > end:
            return None
        return layout, head, strings, payload

    def remember(self, text: bytes, raw_blocks: Dict[str, Any], layout: Layout) -> None:
        """Keep the text of ``{"blocks": ...`` that starts ``text`` for :meth:`by_prefix` and
        :meth:`quick`, tried once per layout: a layout without string columns whole; one with
        a single string column as a template, the text before and after its ``values`` (they
        differ from frame to frame).  Only a text this package's writer makes (orjson's
        compact form) is kept."""
        if layout.checked.get(LayoutCache) is not None:
            return
        layout.checked[LayoutCache] = False
        if not layout.texts:
            if len(self.prefixes) < 8:
                prefix = b'{"blocks":' + orjson.dumps(raw_blocks)
                layout.checked[LayoutCache] = text.startswith(prefix)
                if layout.checked[LayoutCache]:
                    self.prefixes.append((prefix, raw_blocks, layout))
            return
        found = [(b.name, col) for b in layout.blocks for col in b.columns if col.kind == "strings"]
        if len(found) != 1 or len(self.strung) >= 8:
            return
        name, col = found[0]
        entry = raw_blocks[name]["columns"][col.names[0]]
        values = entry["values"]
        entry["values"] = _MARK
        try:
            marked = b'{"blocks":' + orjson.dumps(raw_blocks)
        finally:
            entry["values"] = values
        if marked.count(_MARK_TEXT) != 1:
            return
        head, close = marked.split(_MARK_TEXT)
        if text.startswith(head + orjson.dumps(values) + close):
            layout.checked[LayoutCache] = True
            self.strung.append(_Strung(head, close, layout, col.count))

    def get(self, raw_blocks: Any, where: str, strings: bool = True) -> Layout:
        """The layout of ``raw_blocks``: kept, or compiled (checked) and kept.  The key is the
        JSON text of the blocks without their string columns' ``values`` (frames of one shape
        share a layout whatever their strings; :meth:`Layout.build` checks the values).
        ``strings=False`` (the header's text has no ``string``) skips looking for them: a
        layout never holds string values, so a key that has them is only a missed share."""
        held = []
        if strings and type(raw_blocks) is dict:
            for raw in raw_blocks.values():
                columns = raw.get("columns") if type(raw) is dict else None
                if type(columns) is dict:
                    for entry in columns.values():
                        if type(entry) is dict and entry.get("dtype") == "string" and "values" in entry:
                            held.append((entry, entry.pop("values")))
        try:
            text = orjson.dumps(raw_blocks)
        finally:
            for entry, values in held:
                entry["values"] = values
        layout = self.layouts.get(text)
        if layout is None:
            layout = compile_layout(raw_blocks, where)
            if len(self.layouts) >= self.size:
                for stale in list(self.layouts)[: self.size // 2]:
                    self.layouts.pop(stale, None)  # (another thread may have dropped it)
            self.layouts[text] = layout
        return layout
