"""Frame bytes, MRF1 (lmdb.md "Frame bytes"): what this package encodes decodes back, bytes
built by hand from the grammar decode as the spec says, and every malformed value is refused
with its rule (lmdb#L9–#L17) — a MolrecError, never an IndexError or MemoryError."""
from __future__ import annotations

import json
import math
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collection_helpers import Columns, hand_block, hand_frame
from molrec_raw.collection.frame_bytes import ALIGN, EncodeCache, decode_frame, encode_frame, header_of
from molrec_raw.collection.layout_cache import LayoutCache
from molrec_raw.errors import CorruptDataError, MolrecError, SpecViolationError
from molrec_raw.record.model import Block, Box


def _entries(value: bytes) -> dict:
    header, _ = header_of(value, "")
    return header["blocks"]


# -- what we write -----------------------------------------------------------------------------
def test_lmdb_L10_every_buffer_is_8_aligned_little_endian_and_viewed_in_place() -> None:
    block = Block({"a": np.array([1, 2, 3], np.int8), "b": np.arange(3.0), "c": np.array([True, False, True]),
                   "d": np.array([1 + 2j, 3 - 4j, 0j], np.complex64), "e": np.arange(3, dtype=">i4")},
                  masks={"b": np.array([True, False, True])})
    value = encode_frame({"atoms": block})
    header, payload = header_of(value, "")
    assert payload % ALIGN == 0
    for name, entry in header["blocks"]["atoms"]["columns"].items():
        assert entry["offset"] % ALIGN == 0, name
    entry = header["blocks"]["atoms"]["columns"]["e"]
    assert value[payload + entry["offset"]:payload + entry["offset"] + 12] == np.arange(3, dtype="<i4").tobytes()
    complex_entry = header["blocks"]["atoms"]["columns"]["d"]
    raw = np.frombuffer(value, "<f4", 6, payload + complex_entry["offset"])
    assert raw.tolist() == [1, 2, 3, -4, 0, 0]  # c64: interleaved (re, im)
    assert header["blocks"]["atoms"]["columns"]["b"]["validity"] % ALIGN == 0
    decoded = decode_frame(value)
    assert decoded.blocks["atoms"].columns["b"].base is not None  # a view of the value, not a copy
    assert np.shares_memory(np.frombuffer(value, np.uint8), decoded.blocks["atoms"].columns["b"])
    assert decoded.blocks["atoms"].masks["b"].tolist() == [True, False, True]


def test_lmdb_L12_strings_are_in_the_header_row_major() -> None:
    value = encode_frame({"atoms": Block({"element": np.array([["C", "H"], ["O", "N"]], dtype=object)})})
    entry = _entries(value)["atoms"]["columns"]["element"]
    assert entry == {"dtype": "string", "shape": [2, 2], "values": ["C", "H", "O", "N"]}
    assert decode_frame(value).blocks["atoms"].columns["element"].tolist() == [["C", "H"], ["O", "N"]]


def test_lmdb_L14_precision_rides_in_the_column_entry() -> None:
    value = encode_frame({"atoms": Block({"x": np.array([0.5, 0.25])}, precision={"x": 0.001})})
    assert _entries(value)["atoms"]["columns"]["x"]["precision"] == 0.001
    assert decode_frame(value).blocks["atoms"].precision == {"x": 0.001}


def test_lmdb_L16_targets_attributes_box_step_time_in_the_header() -> None:
    box = Box(np.diag([10.0, 11.0, 12.0]), np.array([0.0, 1.0, 0.0]), (True, True, False))
    block = Block({"atomi": np.array([0, 1], np.uint64)}, targets={"atomi": "atoms"}, attrs={"note": "x"})
    value = encode_frame({"bonds": block}, meta={"pe": "NaN"}, step=7, time=0.5, box=box)
    header, _ = header_of(value, "")
    assert header["blocks"]["bonds"]["targets"] == {"atomi": "atoms"}
    assert header["blocks"]["bonds"]["attributes"] == {"note": "x"}
    assert header["box"] == {"vectors": [[10.0, 0.0, 0.0], [0.0, 11.0, 0.0], [0.0, 0.0, 12.0]],
                             "origin": [0.0, 1.0, 0.0], "boundary": [True, True, False]}
    decoded = decode_frame(value)
    assert (decoded.step, decoded.time, decoded.meta) == (7, 0.5, {"pe": "NaN"})
    assert decoded.box == box


def test_frame_bytes_are_deterministic() -> None:
    block = Block({"x": np.arange(5.0), "s": np.array(list("abcde"), dtype=object)})
    assert encode_frame({"atoms": block}, meta={"a": 1}) == encode_frame({"atoms": block}, meta={"a": 1})


# -- bytes built by hand ------------------------------------------------------------------------
def test_hand_built_frame_reads_as_the_spec_says() -> None:
    cols = (Columns().numeric("x", "f64", [1.5, -2.0, 3.25]).numeric("id", "u64", [7, 8, 9])
            .numeric("free", "bool", [1, 0, 1]).numeric("q", "f64", [0.1, 0.2, 0.3], validity=[1, 0, 1])
            .strings("element", ["C", "H", "H"]).numeric("v", "i16", [[1, 2, 3], [4, 5, 6], [7, 8, 9]]))
    value = hand_frame({"blocks": {"atoms": hand_block(3, cols)}, "meta": {"pe": -1.5}, "step": 3}, cols.buffers)
    block = decode_frame(value).blocks["atoms"]
    assert block.columns["x"].tolist() == [1.5, -2.0, 3.25]
    assert block.columns["id"].dtype == np.dtype("<u8") and block.columns["id"].tolist() == [7, 8, 9]
    assert block.columns["free"].tolist() == [True, False, True]
    assert block.masks["q"].tolist() == [True, False, True]
    assert block.columns["element"].tolist() == ["C", "H", "H"]
    assert block.columns["v"].shape == (3, 3) and block.columns["v"][2].tolist() == [7, 8, 9]


def test_lmdb_L9_refuses_an_unknown_magic() -> None:
    value = bytearray(encode_frame({"a": Block({"x": np.arange(2.0)})}))
    value[:4] = b"MRF2"
    with pytest.raises(CorruptDataError) as caught:
        decode_frame(bytes(value))
    assert caught.value.rule == "lmdb#L9" and caught.value.offset == 0


@pytest.mark.parametrize("mangle", ["short", "length", "json", "padding", "not-object"])
def test_lmdb_L9_refuses_a_lying_prefix_header_or_padding(mangle: str) -> None:
    good = encode_frame({"a": Block({"x": np.arange(2.0)})}, meta={"k": 1})
    length = struct.unpack_from("<I", good, 4)[0]
    if mangle == "short":
        value = good[:5]
    elif mangle == "length":
        value = good[:4] + struct.pack("<I", 10**9) + good[8:]
    elif mangle == "json":
        value = good[:8] + b"\xff" + good[9:]
    elif mangle == "padding":
        value = hand_frame({"blocks": {}}, pad=b"\x01")
        if (8 + len(json.dumps({"blocks": {}}))) % 8 == 0:
            pytest.skip("this header needs no padding")
    else:
        text = b"[1, 2]"
        value = b"MRF1" + struct.pack("<I", len(text)) + text
    with pytest.raises(CorruptDataError) as caught:
        decode_frame(value)
    assert caught.value.rule in ("lmdb#L9", "lmdb#L17"), caught.value
    assert length > 0


@pytest.mark.parametrize("dtype", ["f32", "float", "f16", "json", "bytes", 3, None])
def test_lmdb_L11_refuses_a_dtype_outside_the_column_set(dtype: object) -> None:
    value = hand_frame({"blocks": {"a": {"count": 1, "structural_shape": None,
                                         "columns": {"x": {"dtype": dtype, "shape": [1], "offset": 0}}}}}, [(0, bytes(8))])
    with pytest.raises(SpecViolationError) as caught:
        decode_frame(value)
    assert caught.value.rule == "lmdb#L11" and caught.value.node == "/a/x"


def test_lmdb_L10_refuses_an_offset_that_is_not_a_multiple_of_8() -> None:
    value = hand_frame({"blocks": {"a": {"count": 1, "structural_shape": None,
                                         "columns": {"x": {"dtype": "f64", "shape": [1], "offset": 4}}}}}, [(0, bytes(16))])
    with pytest.raises(CorruptDataError) as caught:
        decode_frame(value)
    assert caught.value.rule == "lmdb#L10"


@pytest.mark.parametrize("what", ["offset", "shape", "validity", "trailing"])
def test_lmdb_L10_refuses_a_buffer_that_runs_past_the_value(what: str) -> None:
    entry = {"dtype": "f64", "shape": [2], "offset": 0}
    if what == "offset":
        entry["offset"] = 8
    elif what == "validity":
        entry["validity"] = 16
    elif what == "trailing":
        entry["shape"] = [2, 2**40]
    header = {"blocks": {"a": {"count": 2, "structural_shape": None, "columns": {"x": entry}}}}
    if what == "shape":
        header["blocks"]["a"]["count"] = 3
        entry["shape"] = [3]
    value = hand_frame(header, [(0, np.arange(2.0).tobytes())])
    with pytest.raises(CorruptDataError) as caught:
        decode_frame(value)
    assert caught.value.rule == "lmdb#L10", caught.value


def test_lmdb_L10_a_cached_layout_still_checks_each_value_fits() -> None:
    cache = LayoutCache()
    good = encode_frame({"a": Block({"x": np.arange(4.0)})})
    assert decode_frame(good, "", cache).blocks["a"].columns["x"].tolist() == [0, 1, 2, 3]
    with pytest.raises(CorruptDataError) as caught:
        decode_frame(good[:-8], "", cache)  # the same header, a value too short for it
    assert caught.value.rule == "lmdb#L10"


def _header_bytes(text: bytes, payload: bytes = b"") -> bytes:
    pad = -(8 + len(text)) % 8
    return b"MRF1" + struct.pack("<I", len(text)) + text + bytes(pad) + payload


@pytest.mark.parametrize("rest,outcome", [
    (b',"meta":{"pe":2.5},"step":7}', "read"),
    (b"}", "read"),
    (b',"blocks":{},"step":7}', "read"),      # a second 'blocks': parsed whole, as without a cache
    (b',"step":7,"extra":1}', "lmdb#L17"),    # an unknown top key, named as without a cache
    (b',"meta":[1],"step":7}', "lmdb#L17"),   # meta not an object
    (b',"step":7', "lmdb#L9"),                # the JSON does not close
    (b' ,"step":7}', "read"),                 # other spacing: parsed whole
])
def test_lmdb_L17_a_header_sharing_a_remembered_blocks_text_reads_as_parsed_whole(rest: bytes, outcome: str) -> None:
    """A header whose text starts with the exact text of blocks a cache has checked gets the
    cached layout and its other members parsed alone: what it reads, or the rule it breaks,
    is what a fresh decode says."""
    cache = LayoutCache()
    good = encode_frame({"a": Block({"x": np.arange(4.0)})}, meta={"pe": 1.0}, step=1)
    decode_frame(good, "", cache)
    payload = good[-32:]
    blocks = json.dumps(_entries(good), separators=(",", ":")).encode()
    assert cache.prefixes and cache.prefixes[0][0] == b'{"blocks":' + blocks
    value = _header_bytes(b'{"blocks":' + blocks + rest, payload)
    results = []
    for use in (None, cache):
        try:
            got = decode_frame(value, "/f", use)
            results.append(("read", got.meta, got.step, got.blocks["a"].columns["x"].tolist() if got.blocks else None))
        except MolrecError as exc:
            results.append((exc.rule, exc.node))
    assert results[0] == results[1]
    assert results[0][0] == outcome


@pytest.mark.parametrize("entry,rule", [
    ({"dtype": "f64", "shape": [3], "offset": 0}, "lmdb#L17"),          # shape disagrees with count
    ({"dtype": "f64", "shape": 2, "offset": 0}, "lmdb#L17"),            # shape not a list
    ({"dtype": "f64", "shape": [2.0], "offset": 0}, "lmdb#L17"),        # a real where an integer is
    ({"dtype": "f64", "shape": [True, True], "offset": 0}, "lmdb#L17"),
    ({"dtype": "f64", "shape": [2], "offset": 0, "codec": "zstd"}, "lmdb#L17"),  # unknown key
    ({"dtype": "f64", "shape": [2], "offset": "0"}, "lmdb#L10"),
    ({"dtype": "f64", "shape": [2], "offset": -8}, "lmdb#L10"),
    ({"dtype": "string", "shape": [2], "values": ["a", 1]}, "lmdb#L12"),
    ({"dtype": "string", "shape": [2], "values": ["a"]}, "lmdb#L12"),
    ({"dtype": "string", "shape": [2], "values": "ab"}, "lmdb#L12"),
    ({"dtype": "i64", "shape": [2], "offset": 0, "precision": 0.1}, "lmdb#L14"),
    ({"dtype": "f64", "shape": [2], "offset": 0, "precision": 0}, "lmdb#L14"),
    ({"dtype": "f64", "shape": [2], "offset": 0, "validity": 3}, "lmdb#L10"),
])
def test_refuses_a_malformed_column_entry(entry: dict, rule: str) -> None:
    value = hand_frame({"blocks": {"a": {"count": 2, "structural_shape": None, "columns": {"x": entry}}}},
                       [(0, bytes(64))])
    with pytest.raises(MolrecError) as caught:
        decode_frame(value)
    assert caught.value.rule == rule, caught.value


@pytest.mark.parametrize("column,flags", [("b", [0, 2]), ("q", None)])
def test_lmdb_L11_L13_refuses_a_bool_buffer_that_is_not_0_or_1(column: str, flags: object) -> None:
    if column == "b":
        value = hand_frame({"blocks": {"a": {"count": 2, "structural_shape": None, "columns": {
            "b": {"dtype": "bool", "shape": [2], "offset": 0}}}}}, [(0, bytes([0, 2]))])
        rule = "lmdb#L11"
    else:
        value = hand_frame({"blocks": {"a": {"count": 2, "structural_shape": None, "columns": {
            "q": {"dtype": "f64", "shape": [2], "offset": 0, "validity": 16}}}}},
                           [(0, np.zeros(2).tobytes()), (16, bytes([1, 5]))])
        rule = "lmdb#L13"
    with pytest.raises(CorruptDataError) as caught:
        decode_frame(value)
    assert caught.value.rule == rule and caught.value.offset is not None


@pytest.mark.parametrize("header", [
    {"blocks": [], "meta": {}},
    {"blocks": {}, "meta": []},
    {"blocks": {}, "extra": 1},
    {"blocks": {"a": {"count": -1, "columns": {}}}},
    {"blocks": {"a": {"count": 1.0, "columns": {}}}},
    {"blocks": {"a": {"count": 0, "columns": {}, "targets": {"x": 3}}}},
    {"blocks": {"a": {"count": 0, "columns": {}, "attributes": [1]}}},
    {"blocks": {"a": {"count": 0, "columns": {}, "structural_shape": [1.5]}}},
    {"blocks": {}, "box": {"vectors": [[1, 0, 0]]}},
    {"blocks": {}, "box": {"vectors": [[1, 0, 0], [0, 1, 0], [0, 0, 1]], "cell_defined": "no"}},
    {"blocks": {}, "meta_types": "x"},
])
def test_lmdb_L17_refuses_a_header_that_is_not_the_documented_json(header: dict) -> None:
    with pytest.raises(MolrecError) as caught:
        decode_frame(hand_frame(header))
    assert caught.value.rule in ("lmdb#L17", "frame-and-types#14.18"), caught.value


# -- properties ----------------------------------------------------------------------------------
NUMERIC = ["f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool", "c64", "c128"]
NUMPY = {"f64": "<f8", "i8": "i1", "i16": "<i2", "i32": "<i4", "i64": "<i8", "u8": "u1", "u16": "<u2", "u32": "<u4",
         "u64": "<u8", "bool": "?", "c64": "<c8", "c128": "<c16"}


@st.composite
def blocks(draw: st.DrawFn) -> dict:
    out = {}
    for b in range(draw(st.integers(0, 3))):
        count = draw(st.integers(0, 6))
        columns, masks = {}, {}
        for c in range(draw(st.integers(0, 4))):
            trailing = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
            dtype = draw(st.sampled_from(NUMERIC + ["string"]))
            shape = (count,) + trailing
            size = math.prod(shape)
            if dtype == "string":
                values = np.array(draw(st.lists(st.text(max_size=4), min_size=size, max_size=size)), dtype=object)
                values = values.reshape(shape) if size else np.empty(shape, object)
            else:
                raw = draw(st.binary(min_size=size * np.dtype(NUMPY[dtype]).itemsize,
                                     max_size=size * np.dtype(NUMPY[dtype]).itemsize))
                values = np.frombuffer(raw, NUMPY[dtype]).reshape(shape) if dtype != "bool" else \
                    (np.frombuffer(raw, np.uint8) % 2).astype(bool).reshape(shape)
            columns[f"c{c}"] = values
            if draw(st.booleans()):
                masks[f"c{c}"] = np.array(draw(st.lists(st.booleans(), min_size=count, max_size=count)), bool)
        out[f"b{b}"] = Block(columns, masks, count=count)
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blocks(), st.integers(-(2**63), 2**63 - 1))
def test_property_encode_then_decode_is_the_identity_bit_for_bit(given_blocks: dict, step: int) -> None:
    value = encode_frame(given_blocks, meta={"k": [1, "a"]}, step=step)
    for cache in (None, LayoutCache()):
        for _ in range(2):  # the second decode through a cache reuses the checked layout
            decoded = decode_frame(value, "", cache)
            assert decoded.step == step and decoded.meta == {"k": [1, "a"]}
            assert decoded.blocks.keys() == given_blocks.keys()
            for name, block in given_blocks.items():
                got = decoded.blocks[name]
                assert got.count == block.count
                for column, values in block.columns.items():
                    back = got.columns[column]
                    assert back.shape == values.shape
                    if values.dtype == object:
                        assert back.tolist() == values.tolist()
                    else:
                        assert back.dtype.newbyteorder("<") == values.dtype.newbyteorder("<")
                        assert back.tobytes() == np.ascontiguousarray(values).tobytes()
                for column, mask in block.masks.items():
                    assert got.masks[column].tolist() == mask.tolist()


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_property_any_mutation_of_valid_bytes_is_read_or_refused_with_a_molrec_error(data: st.DataObject) -> None:
    """Flipped, cut, grown or re-digited bytes of a good value: refused under a frame-bytes
    rule (lmdb#L9–#L17) naming the value's node, or read as a value whose every column
    has ``count`` rows and which encodes back to what was read — the same verdict with a
    layout cache, cold and warm."""
    block = Block({"x": np.arange(4.0), "s": np.array(list("abcd"), dtype=object), "b": np.array([1, 0, 1, 1], bool),
                   "m": np.arange(8, dtype=np.int16).reshape(4, 2)}, masks={"x": np.array([1, 1, 0, 1], bool)})
    original = encode_frame({"atoms": block}, meta={"pe": 1.5}, step=3, box=Box())
    value = bytearray(original)
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["flip", "cut", "grow", "digit"]))
        if kind == "flip" and value:
            i = data.draw(st.integers(0, len(value) - 1))
            value[i] ^= 1 << data.draw(st.integers(0, 7))
        elif kind == "cut":
            del value[data.draw(st.integers(0, len(value))):]
        elif kind == "grow":
            value += bytes(data.draw(st.integers(1, 64)))
        else:
            digits = [i for i, ch in enumerate(value) if 48 <= ch <= 57]
            if digits:
                value[data.draw(st.sampled_from(digits))] = data.draw(st.integers(48, 57))
    value = bytes(value)
    cache = LayoutCache()
    outcomes = [_read_or_refusal(value, use) for use in (None, cache, cache)]
    assert outcomes[1] == outcomes[0] and outcomes[2] == outcomes[0]  # a cache changes no verdict
    if outcomes[0][0] == "refused":  # under the frame-bytes rules, at the value's node
        assert outcomes[0][1] in _FRAME_BYTES_RULES, outcomes[0]
        assert outcomes[0][2] is not None and outcomes[0][2].startswith("/records/0/system"), outcomes[0]
        return
    decoded = decode_frame(value, "/records/0/system")
    if value == original:
        assert outcomes[0] == _read_or_refusal(original, None)
    for name, got in decoded.blocks.items():  # every column is ``count`` rows; strings are str
        for column, values in got.columns.items():
            assert values.shape[:1] == (got.count,), (name, column, values.shape, got.count)
            if values.dtype == object:
                assert all(type(v) is str for v in values.ravel())
        for column, mask in got.masks.items():
            assert mask.shape == (got.count,) and mask.dtype == bool
    again = encode_frame(decoded.blocks, meta=decoded.meta, meta_types=decoded.meta_types, step=decoded.step,
                         time=decoded.time, box=decoded.box)
    assert _read_or_refusal(again, None) == outcomes[0]  # what was read is a value: it round-trips


_FRAME_BYTES_RULES = {f"lmdb#L{n}" for n in range(9, 18)} | {"frame-and-types#14.18"}


def _read_or_refusal(value: bytes, cache: object) -> tuple:
    """What ``decode_frame`` makes of ``value``: its blocks, meta, step and box as plain
    values, or the refusal's rule, node and message."""
    try:
        got = decode_frame(value, "/records/0/system", cache)  # type: ignore[arg-type]
    except MolrecError as exc:
        return ("refused", exc.rule, exc.node, str(exc))
    blocks = {name: (b.count, {c: (v.dtype.str, v.shape, v.tolist() if v.dtype == object else v.tobytes())
                               for c, v in b.columns.items()},
                     {c: m.tolist() for c, m in b.masks.items()}) for name, b in got.blocks.items()}
    box = None if got.box is None else (np.asarray(got.box.vectors).tobytes(), np.asarray(got.box.origin).tobytes(),
                                        tuple(got.box.boundary), got.box.defined)
    return ("read", blocks, repr(got.meta), repr(got.meta_types), got.step, got.time, box)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blocks(), st.integers(-(2**63), 2**63 - 1), st.sampled_from([None, {}, {"pe": 1.5}]))
def test_property_an_encoding_plan_writes_the_same_bytes(given_blocks: dict, step: int, meta: object) -> None:
    """Frames encoded through a cache of plans (one per shape of their blocks) are the bytes
    encoded without one — the first, which makes the plan, and every later one."""
    cache = EncodeCache()
    plain = encode_frame(given_blocks, meta=meta, step=step)
    for _ in range(3):
        assert encode_frame(given_blocks, meta=meta, step=step, cache=cache) == plain
    assert encode_frame(given_blocks, cache=cache) == encode_frame(given_blocks)


def test_lmdb_L12_a_planned_shape_still_refuses_a_string_column_holding_a_non_string() -> None:
    cache = EncodeCache()
    good = {"a": Block({"s": np.array(["x", "y"], dtype=object), "x": np.arange(2.0)})}
    encode_frame(good, cache=cache)
    bad = {"a": Block({"s": np.array(["x", 2], dtype=object), "x": np.arange(2.0)})}
    for use in (None, cache):
        with pytest.raises(MolrecError) as caught:
            encode_frame(bad, cache=use)
        assert caught.value.rule == "lmdb#L11"
