"""The quick read path (a value whose header text matches a layout the reader has checked:
``LayoutCache.quick``, ``Layout.maker``, the string splitters) gives exactly what the general
path gives — the same arrays (values, dtypes, shapes, writability), masks, meta, cells, the
same batches — and, for a damaged value, the same refusal (error type, rule, node, key)
(lmdb#L9–#L17, collection#C2)."""
from __future__ import annotations

import json
import random
import shutil
import struct
from pathlib import Path
from typing import Any, Callable, Dict, List

import lmdb
import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import molrec_raw as mr
from collection_helpers import UNITS
from molrec_raw.collection.frame_bytes import decode_frame, encode_frame
from molrec_raw.collection.layout_cache import LayoutCache, joined_strings, string_list, string_lists
from molrec_raw.errors import MolrecError


# -- the string splitters against orjson ------------------------------------------------------
def _orjson_strings(text: bytes) -> Any:
    try:
        values = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return values if type(values) is list and all(type(v) is str for v in values) else None


_TRICKY = st.sampled_from(['"', "\\", "\x00", "\x1f", "\x7f", ",", '","', "]", "[", "é", "\u2028", "\U0001f600", " "])
_STRINGS = st.lists(st.one_of(st.text(max_size=4), _TRICKY), max_size=6)


def _texts(values: List[str]) -> List[bytes]:
    """A list of strings as a writer writes it and as others may (spaces, escapes)."""
    return [orjson.dumps(values), json.dumps(values).encode(), json.dumps(values, ensure_ascii=False).encode("utf-8",
                                                                                                                "surrogatepass")]


@settings(max_examples=300, deadline=None)
@given(_STRINGS, st.data())
def test_lmdb_L12_string_list_is_what_orjson_parses(values: List[str], data: st.DataObject) -> None:
    for text in _texts(values):
        assert string_list(text) == _orjson_strings(text)
    for text in [data.draw(st.text(alphabet='[]",a\\ ', max_size=12)).encode() for _ in range(3)]:
        assert string_list(text) == _orjson_strings(text)
        assert string_list(bytearray(text)) == _orjson_strings(text)
        damaged = bytearray(text)
        if damaged:  # one byte changed, cut or doubled: still exactly orjson's verdict
            at = data.draw(st.integers(0, len(damaged) - 1))
            kind = data.draw(st.sampled_from(["set", "cut", "double"]))
            if kind == "set":
                damaged[at] = data.draw(st.sampled_from(b'"\\,[] \x00\x01a\xc3\xa9\xff'))
            elif kind == "cut":
                del damaged[at]
            else:
                damaged[at:at] = damaged[at:at + 1]
            assert string_list(bytes(damaged)) == _orjson_strings(bytes(damaged))


@settings(max_examples=300, deadline=None)
@given(st.lists(_STRINGS, min_size=1, max_size=5), st.integers(0, 4), st.data())
def test_lmdb_L12_strings_of_many_texts_are_each_texts_own(lists: List[List[str]], count: int,
                                                           data: st.DataObject) -> None:
    """``joined_strings`` and ``string_lists`` over many texts: each text's strings, as orjson
    reads it, where it holds ``count`` strings; nothing else (a text of another count, a
    non-string, JSON that does not parse alone — also when the texts would parse joined)."""
    texts = [data.draw(st.sampled_from(_texts(values))) for values in lists]
    for at in range(len(texts)):  # and texts made of JSON's punctuation, mostly not JSON
        if data.draw(st.integers(0, 3)) == 0:
            texts[at] = data.draw(st.text(alphabet='[]",a\\ ', max_size=12)).encode()
    if data.draw(st.booleans()):  # pieces that are not JSON alone, but would be glued together
        cut = data.draw(st.integers(0, len(texts) - 1))
        texts[cut] = texts[cut][:-1] if len(texts[cut]) > 2 else texts[cut] + b'"'
    each = [_orjson_strings(t) for t in texts]
    expected = [v if v is not None and len(v) == count else None for v in each]
    assert string_lists(texts, count) == expected
    flat = joined_strings(texts, count)
    if flat is not None:
        assert all(v is not None for v in expected)
        assert flat == [s for v in expected for s in v]  # type: ignore[union-attr]


def test_lmdb_L12_joined_strings_keep_empty_strings_at_the_joins() -> None:
    texts = [orjson.dumps(["a", ""]), orjson.dumps(["", "b"]), orjson.dumps(["", ""])]
    assert joined_strings(texts, 2) == ["a", "", "", "b", "", ""]
    assert string_lists(texts, 2) == [["a", ""], ["", "b"], ["", ""]]


# -- LayoutCache.quick against a fresh decode ---------------------------------------------------
def _frame_value(rng: random.Random) -> bytes:
    n = rng.randint(0, 3)
    element = np.array([rng.choice(["C", "H", "Na", "é"]) for _ in range(2 * n)], dtype=object)
    columns = {"element": element[:n] if rng.random() < 0.7 else element.reshape(n, 2),
               "x": np.arange(float(n)), "y": np.ones(n)}
    if rng.random() < 0.5:  # a column of another dtype, one of trailing shape: views of other kinds
        columns.update(id=np.arange(n, dtype=np.int32), v=np.arange(3.0 * n).reshape(n, 3))
    blocks = {"atoms": mr.Block(columns), **({"bonds": mr.Block({"i": np.arange(2, dtype=np.uint64)})}
                                             if rng.random() < 0.3 else {})}
    return encode_frame(blocks, meta={"pe": rng.random()}, step=rng.randint(0, 9))


def _mutated(value: bytes, rng: random.Random) -> bytes:
    """The header text changed (re-framed with its true length and zero padding, so the
    change reaches the JSON), or the framing or payload itself."""
    length = struct.unpack_from("<I", value, 4)[0]
    text, payload = bytearray(value[8:8 + length]), value[(8 + length + 7) & ~7:]
    kind = rng.random()
    if kind < 0.1:
        return value[:rng.randrange(len(value))]
    if kind < 0.15:  # a padding byte not zero, or (no padding) a length that lies
        out = bytearray(value)
        pad = -(8 + length) % 8
        if pad:
            out[8 + length + rng.randrange(pad)] = 1
        else:
            out[4:8] = struct.pack("<I", length + rng.choice([-1, 1]))
        return bytes(out)
    if kind < 0.45:  # a digit or letter for another: often still a good value (another meta, string, count...)
        places = [i for i, ch in enumerate(text) if 48 <= ch <= 57 or 65 <= ch <= 90]
        at = rng.choice(places)
        text[at] = rng.choice(b"0123456789" if text[at] <= 57 else b"CHNOX")
    for _ in range(rng.randint(1, 3) if kind >= 0.45 else 0):
        at = rng.randrange(len(text) + 1)
        snippet = rng.choice([b'\\"', b"\\u0041", b"1", b",", b"}", b"]", b"[", b" ", b'"', b"\x01", b"null",
                              b',"x":1', b',}', b'"C",', b"7"])
        if rng.random() < 0.5 and at < len(text):
            text[at:at + len(snippet)] = snippet
        else:
            text[at:at] = snippet
    text = bytes(text)
    return b"MRF1" + struct.pack("<I", len(text)) + text + bytes(-(8 + len(text)) % 8) + payload


def _outcome(read: Callable[[], Any]) -> Any:
    try:
        return ("read", read())
    except MolrecError as exc:
        return ("refused", type(exc).__name__, exc.rule, exc.node, exc.key)


def _block_form(block: mr.Block) -> Any:
    def array(a: np.ndarray) -> Any:
        return (a.dtype.str, a.shape, a.tolist() if a.dtype == object else a.tobytes(), a.flags.writeable)
    return ({c: array(v) for c, v in block.columns.items()}, list(block.columns),
            {c: array(m) for c, m in block.masks.items()}, block.precision, block.targets, block.structural_shape,
            block.attrs, block.count, block.column_attrs)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_lmdb_L17_a_quick_match_is_exactly_the_decoded_value(seed: int) -> None:
    """A value ``LayoutCache.quick`` matches (after a good value of its shape taught the
    cache its text) decodes without a cache to the same blocks, meta and step; a value it
    does not match is left to the decoder (which reads or refuses it as without a cache)."""
    rng = random.Random(seed)
    cache = LayoutCache()
    good = _frame_value(rng)
    decode_frame(good, "/f", cache)
    value = _mutated(good, rng) if rng.random() < 0.8 else _frame_value(rng)
    fresh = _outcome(lambda: decode_frame(value, "/f"))
    hit = cache.quick(value)
    if hit is not None:
        layout, head, strings, payload = hit
        assert fresh[0] == "read", fresh
        decoded = fresh[1]
        assert (decoded.meta, decoded.meta_types, decoded.step, decoded.time) == (
            head.get("meta") or {}, head.get("meta_types"), head.get("step"), head.get("time"))
        made = layout.maker()(value, payload, strings)
        assert {n: _block_form(b) for n, b in made.items()} == {n: _block_form(b) for n, b in decoded.blocks.items()}
    cached = _outcome(lambda: decode_frame(value, "/f", cache))
    assert (cached[0], cached[2:]) == (fresh[0], fresh[2:])


def test_lmdb_L17_members_after_blocks_are_one_json_object() -> None:
    """``,}`` after a remembered blocks text is not JSON: refused as without a cache."""
    cache = LayoutCache()
    good = encode_frame({"a": mr.Block({"x": np.arange(2.0)})}, meta={"pe": 1.0}, step=1)
    decode_frame(good, "", cache)
    length = struct.unpack_from("<I", good, 4)[0]
    text = good[8:8 + length]
    bad = text[:text.index(b',"meta"')] + b",}"
    value = b"MRF1" + struct.pack("<I", len(bad)) + bad + bytes(-(8 + len(bad)) % 8) + good[-16:]
    assert cache.quick(value) is None and cache.by_prefix(bad) is None
    for use in (None, cache):
        with pytest.raises(MolrecError) as caught:
            decode_frame(value, "", use)
        assert caught.value.rule == "lmdb#L9"


# -- a reader with the quick path against one without ---------------------------------------------
def _write(path: Path, n: int = 14) -> None:
    rng = np.random.default_rng(3)
    with mr.CollectionWriter(path, units=UNITS) as w:
        for r in range(n):
            atoms = 1 + r % 3
            meta = {"smiles": "C"} if r % 5 == 1 else {}
            system = mr.Frame(meta, {"atoms": mr.Block({
                "element": np.array(["C", "H", "O"] * atoms, dtype=object)[:atoms], "mass": rng.normal(size=atoms)})})
            frames = [mr.Frame({"pe": float(r) + k}, {"atoms": mr.Block({c: rng.normal(size=atoms) for c in "xyz"})},
                               mr.Box(np.eye(3) * (r + 1)) if r % 4 == 2 else None) for k in range(1 + r % 2)]
            w.add_record(system=system, frames=frames)


def _general(c: Any) -> Any:
    """``c`` with its quick path shut: every value read the general way."""
    for cache in (c._layouts, c._frame_layouts):
        cache.quick = lambda value, parse=True: None
    return c


def _frame_form(frame: Any) -> Any:
    if frame is None:
        return None
    return frame.meta, frame.box, {n: _block_form(b) for n, b in frame.blocks.items()}, list(frame.blocks)


def _batch_form(batch: Dict[str, np.ndarray]) -> Any:
    return [(k, v.dtype.str, v.shape, v.tolist()) for k, v in batch.items()]


def _reads(c: Any, records: List[int]) -> List[Any]:
    out = []
    for r in records:
        out.append(_outcome(lambda: _frame_form(c[r].system)))
        out.append(_outcome(lambda: _frame_form(c[r].trajectory[0])))
        with c.view() as v:
            out.append(_outcome(lambda: (_frame_form(v[r].system), _frame_form(v[r].trajectory[0]))))
    out.append(_outcome(lambda: _batch_form(c.batch(records))))
    out.append(_outcome(lambda: _batch_form(c.batch(records, frame=None))))
    return out


def test_lmdb_L17_quick_reads_are_the_general_reads(path: Path) -> None:
    _write(path)
    quick, general = mr.read_collection(path), _general(mr.read_collection(path))
    records = list(range(14))
    for order in (records, records[::-1], [2, 5, 8, 11]):
        assert _reads(quick, order) == _reads(general, order)  # twice: the second through checked layouts
        assert _reads(quick, order) == _reads(general, order)
    assert quick._layouts.strung and quick._frame_layouts.prefixes  # the quick path was taken
    quick.close(), general.close()


def test_lmdb_L17_quick_reads_refuse_damage_as_the_general_reads(tmp_path: Path) -> None:
    """One record's system or first frame changed (its header text, framing or payload), 40
    seeded times: single reads, views and batches with and without the quick path read the
    same or refuse with the same error, rule, node and key — also when good records taught
    the reader the layout's text first.  Both outcomes happen."""
    base = tmp_path / "base.mrec.lmdb"
    _write(base)
    outcomes = {"read": 0, "refused": 0}
    for seed in range(40):
        path = tmp_path / f"damaged{seed}.mrec.lmdb"
        shutil.copyfile(base, path)
        rng = random.Random(seed)
        victim = rng.randrange(14)
        env = lmdb.open(str(path), subdir=False, map_size=1 << 26)
        with env.begin(write=True) as txn:  # (the readers open the file after: py-lmdb opens a file once)
            if rng.random() < 0.5:
                k = b"s" + victim.to_bytes(8, "big")
            else:  # the record's first frame: its ordinal counts the frames before it
                k = b"f" + sum(1 + r % 2 for r in range(victim)).to_bytes(8, "big")
            txn.put(k, _mutated(bytes(txn.get(k)), rng))
        env.close()
        quick, general = mr.read_collection(path), _general(mr.read_collection(path))
        teach = [r for r in range(14) if r % 3 == victim % 3 and r != victim]  # same layouts, good values
        order = teach + [victim]
        got = _reads(quick, order)
        assert got == _reads(general, order), seed
        outcomes["refused" if any(g[0] == "refused" for g in got) else "read"] += 1
        quick.close(), general.close()
    assert outcomes["read"] and outcomes["refused"], outcomes


def test_lmdb_L16_quick_reads_of_updates_without_meta_keep_their_cell(path: Path) -> None:
    """A declaration without per-step meta keys: an update's header is its step and its cell
    (two members, as a meta and a step are) — the quick path reads the cell too."""
    with mr.CollectionWriter(path, units=UNITS) as w:
        for r in range(4):
            w.add_record(system=mr.Frame({}, {"atoms": mr.Block({"element": np.array(["C", "O"], dtype=object)})}),
                         frames=[mr.Frame({}, {"atoms": mr.Block({"x": np.arange(2.0) + r})},
                                          mr.Box(np.eye(3) * (r + 2)) if r % 2 else None)])
    env = lmdb.open(str(path), subdir=False, map_size=1 << 26)
    with env.begin(write=True) as txn:  # headers of a step and a cell alone (another writer leaves meta out)
        for k in range(4):
            value = bytes(txn.get(b"f" + k.to_bytes(8, "big")))
            length = struct.unpack_from("<I", value, 4)[0]
            text = value[8:8 + length].replace(b'"meta":{},', b"")
            txn.put(b"f" + k.to_bytes(8, "big"), b"MRF1" + struct.pack("<I", len(text)) + text
                    + bytes(-(8 + len(text)) % 8) + value[(8 + length + 7) & ~7:])
    env.close()
    quick, general = mr.read_collection(path), _general(mr.read_collection(path))
    for _ in range(2):
        assert _reads(quick, [0, 1, 2, 3]) == _reads(general, [0, 1, 2, 3])
    assert np.array_equal(quick[3].trajectory[0].box.vectors, np.eye(3) * 5) and quick[2].trajectory[0].box is None
    quick.close(), general.close()


# -- one check each of the quick path, proved by a value that breaks it alone -----------------------
def _reframed(value: bytes, old: bytes, new: bytes) -> bytes:
    """``value`` with ``old`` in its header text (once) replaced by ``new``, re-framed with the
    text's true length and zero padding: only the JSON changes."""
    length = struct.unpack_from("<I", value, 4)[0]
    text = value[8:8 + length]
    assert text.count(old) == 1, (old, text)
    text = text.replace(old, new)
    return b"MRF1" + struct.pack("<I", len(text)) + text + bytes(-(8 + len(text)) % 8) + value[(8 + length + 7) & ~7:]


def _write_three(path: Path) -> None:
    """Three records of one layout (three atoms, named; x per frame, a per-step pe)."""
    with mr.CollectionWriter(path, units=UNITS) as w:
        for r in range(3):
            w.add_record(system=mr.Frame({}, {"atoms": mr.Block({"element": np.array(["C", "H", "O"], dtype=object)})}),
                         frames=[mr.Frame({"pe": float(r)}, {"atoms": mr.Block({"x": np.arange(3.0) + r})})])


def _damage(path: Path, key: bytes, old: bytes, new: bytes) -> None:
    env = lmdb.open(str(path), subdir=False, map_size=1 << 26)
    with env.begin(write=True) as txn:
        txn.put(key, _reframed(bytes(txn.get(key)), old, new))
    env.close()


def _quick_refusals(path: Path, read: Callable[[Any], Any]) -> List[Any]:
    """Record 2 read by ``read`` after records 0 and 1 taught the reader their layout's text
    (the quick path), by a view, and without the quick path: each outcome."""
    out = []
    for make in (lambda: mr.read_collection(path), lambda: _general(mr.read_collection(path))):
        c = make()
        read(c[0]), read(c[1])
        out.append(_outcome(lambda: read(c[2])))
        with c.view() as v:
            read(v[0]), read(v[1])
            out.append(_outcome(lambda: read(v[2])))
        c.close()
    return out


@pytest.mark.parametrize("values", [b'["C","H"]', b'["C","H","O","N"]', b"[]"])
def test_lmdb_L12_a_quick_read_refuses_a_string_column_of_another_count(path: Path, values: bytes) -> None:
    """A system whose ``element`` values are not ``count`` strings (one fewer, one more, none),
    its header otherwise the text of a checked layout: refused under lmdb#L12 by the quick
    path as by the general one — never a column cut to ``count`` or an IndexError."""
    _write_three(path)
    _damage(path, b"s" + (2).to_bytes(8, "big"), b'["C","H","O"]', values)
    got = _quick_refusals(path, lambda rec: rec.system["atoms"]["element"].tolist())
    assert [g[:3] for g in got] == [("refused", got[0][1], "lmdb#L12")] * 4, got
    assert len(set(got)) == 1, got  # the same error, rule, node and key on every path


@pytest.mark.parametrize("meta", [b'"meta":[1.0]', b'"meta":[]', b'"meta":"pe"', b'"meta":1'])
@pytest.mark.parametrize("where", ["system", "frame"])
def test_lmdb_L17_a_quick_read_refuses_a_meta_that_is_not_an_object(path: Path, meta: bytes, where: str) -> None:
    """A header whose ``meta`` is not a JSON object (an array, even an empty one; a string; a
    number), its blocks the text of a checked layout: refused under lmdb#L17 by the quick
    path as by the general one — never read as an empty meta."""
    _write_three(path)
    if where == "system":
        _damage(path, b"s" + (2).to_bytes(8, "big"), b'"meta":{}', meta)
        read: Callable[[Any], Any] = lambda rec: rec.system.meta
    else:
        _damage(path, b"f" + (2).to_bytes(8, "big"), b'"meta":{"pe":2.0}', meta)
        read = lambda rec: rec.trajectory[0].meta  # noqa: E731
    got = _quick_refusals(path, read)
    assert [g[:3] for g in got] == [("refused", got[0][1], "lmdb#L17")] * 4, got
    assert len(set(got)) == 1, got


@pytest.mark.parametrize("meta", [b'"meta":{"pf":2.0}', b'"meta":{"pe":2.0,"ke":1.0}'])
def test_lmdb_L15_a_quick_read_refuses_an_update_with_other_meta_keys(path: Path, meta: bytes) -> None:
    """A trajectory update whose meta keys are not the declared ones (one renamed, one
    more), its blocks the text of a checked layout: refused by the quick path as by the
    general one (lmdb#L15, collection#C2: every declared key and nothing else)."""
    _write_three(path)
    _damage(path, b"f" + (2).to_bytes(8, "big"), b'"meta":{"pe":2.0}', meta)
    got = _quick_refusals(path, lambda rec: rec.trajectory[0].meta)
    assert [g[0] for g in got] == ["refused"] * 4 and got[0][2] in ("lmdb#L15", "lmdb#L8", "collection#C2"), got
    assert len(set(got)) == 1, got


def test_lmdb_L8_a_missing_frame_is_refused_naming_its_key(path: Path) -> None:
    """A record whose frame value is gone (its key deleted): reading it is refused under
    lmdb#L8 naming the frame, the record and the key — by a single read, a view and a batch."""
    _write_three(path)
    env = lmdb.open(str(path), subdir=False, map_size=1 << 26)
    with env.begin(write=True) as txn:
        assert txn.delete(b"f" + (2).to_bytes(8, "big"))
    env.close()
    c = mr.read_collection(path)
    assert c[1].trajectory[0].meta == {"pe": 1.0}
    for read in (lambda: c[2].trajectory[0], lambda: c.batch([0, 2])):
        with pytest.raises(MolrecError) as caught:
            read()
        assert caught.value.rule == "lmdb#L8" and "frame 0 of record 2" in str(caught.value), caught.value
    c.close()


@pytest.mark.parametrize("where", ["system", "frame"])
def test_lmdb_L17_a_quick_read_refuses_an_unknown_top_key(path: Path, where: str) -> None:
    """A header with a top key lmdb.md does not define (``"extra"``), its blocks the text of a
    checked layout: refused under lmdb#L17 by the quick path as by the general one."""
    _write_three(path)
    if where == "system":
        _damage(path, b"s" + (2).to_bytes(8, "big"), b'"meta":{}', b'"meta":{},"extra":1')
        read: Callable[[Any], Any] = lambda rec: rec.system.meta
    else:
        _damage(path, b"f" + (2).to_bytes(8, "big"), b'"meta":{"pe":2.0}', b'"meta":{"pe":2.0},"extra":1')
        read = lambda rec: rec.trajectory[0].meta  # noqa: E731
    got = _quick_refusals(path, read)
    assert [g[:3] for g in got] == [("refused", got[0][1], "lmdb#L17")] * 4, got
    assert len(set(got)) == 1, got
