"""Typed meta and typed JSON values (frame-and-types §4; checklist 15, 16, 26, 33, 36, 41, 44)."""
import json
import math
import struct

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from molrec_raw.errors import InvalidValueError, SpecViolationError
from molrec_raw.record.model import MetaValue
from molrec_raw.record.typed_json import (
    LEGACY_TAGS,
    TAGS,
    check_document,
    decode_document,
    decode_value,
    encode_document,
    encode_value,
    infer_tag,
    normalize_tag,
)

R15, R16, R33, R36, R41 = (f"frame-and-types#14.{n}" for n in (15, 16, 33, 36, 41))


def via_json(doc):
    return orjson.loads(orjson.dumps(doc))


def roundtrip(tag, value):
    return decode_value(tag, via_json(encode_value(tag, value, "/t")), "/t")


def bits(x):
    return struct.pack("<d", x)


def refused(rule, fn, *args):
    with pytest.raises(SpecViolationError) as info:
        fn(*args)
    assert info.value.rule == rule, info.value
    return info.value


# ------------------------------------------------------------------ tag set

def test_frame_and_types_14_15_closed_tag_set_and_legacy_only_when_allowed():
    assert len(TAGS) == 16 and len(set(TAGS)) == 16
    for tag in TAGS:
        assert normalize_tag(tag) == tag
    for legacy, tag in LEGACY_TAGS.items():
        assert normalize_tag(legacy, allow_legacy=True) == tag
        refused(R15, normalize_tag, legacy)
    for bad in ("f32", "i64x6", "c64", "F64", "", None, 3, ["f64"]):
        refused(R15, normalize_tag, bad)
        refused(R15, normalize_tag, bad, True)


# ------------------------------------------------------------------ round trips of all 16 tags

EXAMPLES = {
    "bool": [True, False],
    "i32": [0, -(2**31), 2**31 - 1],
    "i64": [-(2**63), 2**63 - 1, 2**53, -(2**53) - 1],
    "u32": [0, 2**32 - 1],
    "u64": [0, 2**53, 2**53 + 1, 2**64 - 1],
    "f64": [0.0, -0.0, 1.5, 5e-324, 1.7976931348623157e308, math.inf, -math.inf],
    "string": ["", "NaN", "héllo \u2603"],
    "json": [None, [1, "a", None], {"units": {"length": "angstrom"}, "x": [1.5, True]}, 3, "s"],
    "bool3": [(True, False, True)],
    "i32x3": [(-(2**31), 0, 2**31 - 1)],
    "i64x3": [(-(2**63), 2**53 + 1, 2**63 - 1)],
    "u32x3": [(0, 1, 2**32 - 1)],
    "u64x3": [(0, 2**63, 2**64 - 1)],
    "f64x3": [(0.0, 0.5, 1.0), (math.inf, -0.0, -math.inf)],
    "f64x6": [(1.0, 2.0, 3.0, 0.1, 0.2, 0.3)],
    "f64x9": [tuple(float(i) for i in range(9))],
}


@pytest.mark.parametrize("tag", TAGS)
def test_frame_and_types_14_44_every_tag_round_trips_through_json_text(tag):
    for value in EXAMPLES[tag]:
        back = roundtrip(tag, value)
        if tag == "json":
            assert back == (list(value) if isinstance(value, tuple) else value)
        else:
            assert back == value and type(back) is type(value)
        if isinstance(value, float):
            assert bits(back) == bits(value)


def test_frame_and_types_14_44_nan_round_trips_as_string_form():
    assert encode_value("f64", math.nan) == "NaN"
    assert encode_value("f64", np.float64("inf")) == "Infinity"
    assert encode_value("f64", -math.inf) == "-Infinity"
    assert math.isnan(roundtrip("f64", math.nan))
    back = roundtrip("f64x3", (math.nan, 1.0, -math.inf))
    assert math.isnan(back[0]) and back[1:] == (1.0, -math.inf)


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_frame_and_types_14_16_f64_round_trip_property(x):
    back = roundtrip("f64", x)
    assert type(back) is float
    assert (math.isnan(back) and math.isnan(x)) or bits(back) == bits(x)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.integers(0, 2**64 - 1), st.integers(2**53 - 5, 2**53 + 5),
                 st.integers(2**64 - 10, 2**64 - 1)))
def test_frame_and_types_14_16_u64_round_trip_property(v):
    raw = encode_value("u64", v)
    assert raw == v if v <= 2**53 else raw == str(v)
    assert roundtrip("u64", v) == v


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from([-(2**63), 2**63 - 1])))
def test_frame_and_types_14_16_i64_round_trip_property(v):
    assert roundtrip("i64", v) == v
    assert roundtrip("i64x3", (v, -v if v > -(2**63) else 0, 0)) [0] == v


def test_frame_and_types_14_36_writer_accepts_numpy_and_exact_coercions():
    assert encode_value("f64", 3) == 3.0 and type(encode_value("f64", 3)) is float
    assert encode_value("f64", 2**60) == float(2**60)
    assert encode_value("f64", np.float32(0.5)) == 0.5
    assert encode_value("i32", np.int16(-4)) == -4
    assert encode_value("u64", np.uint64(2**64 - 1)) == "18446744073709551615"
    assert encode_value("bool", np.bool_(True)) is True
    assert encode_value("f64x3", np.array([1, 2, 3])) == [1.0, 2.0, 3.0]
    assert encode_value("bool3", np.array([True, False, True])) == [True, False, True]
    assert encode_value("f64x9", np.eye(3)) == [1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0]
    assert encode_value("f64x9", [[1, 2, 3], (4, 5, 6), np.array([7.0, 8, 9])]) == [
        float(i) for i in range(1, 10)]
    assert encode_value("json", (1, {"a": (2.5, None)})) == [1, {"a": [2.5, None]}]
    out = orjson.dumps(encode_value("json", {"k": [np.int64(3), np.float64(0.5), np.bool_(False)]}))
    assert json.loads(out) == {"k": [3, 0.5, False]}


# ------------------------------------------------------------------ writer refusals (checklist 36, 41)

@pytest.mark.parametrize("tag,value", [
    ("i32", 1.0),                      # real for an integer tag, even integral
    ("i64", np.float64(2.0)),
    ("u64", 1.5),
    ("i32", 2**31),                    # out of range
    ("i32", -(2**31) - 1),
    ("u32", -1),
    ("u64", 2**64),
    ("i64", 2**63),
    ("i32", True),                     # bool for a number
    ("f64", False),
    ("u64", np.bool_(True)),
    ("f64", 2**53 + 1),                # integer not exactly representable
    ("f64", 2**1100),
    ("f64", "1.5"),
    ("f64", None),
    ("bool", 1),
    ("bool", "true"),
    ("string", 3),
    ("string", b"abc"),
    ("string", "\ud800"),
    ("f64x3", (1.0, 2.0)),             # wrong width
    ("f64x3", [1.0, 2.0, 3.0, 4.0]),
    ("f64x3", np.zeros((3, 1))),
    ("f64x6", np.eye(3)),
    ("f64x9", [[1, 2, 3], [4, 5, 6]]),
    ("f64x3", "abc"),
    ("f64x3", 1.0),
    ("i32x3", (1, 2.0, 3)),
    ("u64x3", (0, -1, 0)),
    ("bool3", (True, 0, False)),
    ("json", {1: "a"}),
    ("json", {"a": b"x"}),
    ("json", {"a": {1, 2}}),
    ("json", np.array([1, 2])),
    ("json", [2**64]),
])
def test_frame_and_types_14_36_inexact_meta_values_refused(tag, value):
    refused(R36, encode_value, tag, value, "/frame")


@pytest.mark.parametrize("value", [math.nan, [1.0, math.inf], {"a": {"b": -math.inf}},
                                   [np.float64("nan")]])
def test_frame_and_types_14_41_non_finite_inside_json_refused(value):
    refused(R41, encode_value, "json", value)
    refused(R41, encode_document, {"k": MetaValue("json", value)})
    if not isinstance(value, float):
        refused(R41, encode_document, {"k": value})


def test_frame_and_types_14_36_cyclic_json_refused():
    cyc = []
    cyc.append(cyc)
    refused(R36, encode_value, "json", cyc)


# ------------------------------------------------------------------ reader refusals (checklist 16)

@pytest.mark.parametrize("tag,raw", [
    ("f64", None),                     # null for a number
    ("f64", True),                     # bool for a number
    ("f64", "nan"),                    # bad non-finite spellings
    ("f64", "Inf"),
    ("f64", "+Infinity"),
    ("f64", "infinity"),
    ("f64", " NaN"),
    ("f64", "1.5"),
    ("f64", math.nan),                 # bare NaN token (lenient parse)
    ("f64", math.inf),
    ("f64", [1.0]),
    ("f64", 2**53 + 1),                # integer not exactly an f64
    ("i32", 1.0),                      # real for an integer tag
    ("i64", 1e3),
    ("u64", 0.0),
    ("i32", 2**31),                    # out of range
    ("u32", 2**32),
    ("u32", -1),
    ("u64", 2**64),
    ("i64", -(2**63) - 1),
    ("i32", True),                     # bool for a number
    ("u64", False),
    ("i64", None),
    ("i32", "+1"),                     # non-decimal integer strings
    ("i32", "1e3"),
    ("i32", "1.0"),
    ("i32", " 1"),
    ("i32", "1 "),
    ("i32", "1\n"),
    ("i32", "0x10"),
    ("i32", ""),
    ("i32", "-"),
    ("i32", "\u0661"),                 # non-ASCII digit
    ("u64", "-1"),                     # out of range as a string
    ("u64", "18446744073709551616"),
    ("i64", "9" * 5000),
    ("bool", 1),
    ("bool", "true"),
    ("bool", None),
    ("string", 1),
    ("string", None),
    ("string", ["a"]),
    ("json", math.nan),                # non-finite inside json (lenient parse)
    ("json", {"a": [1, math.inf]}),
    ("json", (1, 2)),                  # not a parsed JSON value
    ("bool3", [True, False]),          # wrong vector length
    ("f64x3", [1.0, 2.0, 3.0, 4.0]),
    ("f64x9", [[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]]),
    ("f64x3", "1,2,3"),
    ("f64x3", None),
    ("f64x3", [1.0, None, 2.0]),
    ("f64x6", [1.0, 2.0, 3.0, 4.0, 5.0, "nan"]),
    ("i32x3", [1, 2, 3.0]),
    ("u32x3", [1, 2, -3]),
    ("u64x3", [0, 1, 2**64]),
    ("i64x3", [0, True, 1]),
])
def test_frame_and_types_14_16_malformed_typed_values_refused(tag, raw):
    refused(R16, decode_value, tag, raw, "/frame")
    refused(R16, decode_document, {"k": raw, "_meta_types": {"k": tag}}, "/frame")


def test_frame_and_types_14_16_decimal_strings_accepted_at_any_magnitude():
    assert decode_value("u64", "18446744073709551615") == 2**64 - 1
    assert decode_value("i64", "-9223372036854775808") == -(2**63)
    assert decode_value("i32", "7") == 7          # decision 19: small strings tolerated
    assert decode_value("i32", "-0") == 0
    assert decode_value("u64", "000000000000000000000000018446744073709551615") == 2**64 - 1
    assert decode_value("u64", 2**60) == 2**60     # exact JSON integer beyond 2^53
    assert decode_value("u64x3", ["1", 2, "18446744073709551615"]) == (1, 2, 2**64 - 1)


def test_frame_and_types_14_16_real_for_integer_tag_refused():
    for text in (b"1.0", b"1e3", b"-0.0"):
        refused(R16, decode_value, "i64", orjson.loads(text))
        refused(R16, decode_value, "i64", json.loads(text))
    assert decode_value("i64", orjson.loads(b"1")) == 1


def test_frame_and_types_14_16_f64_accepts_integers_and_keeps_negative_zero():
    assert decode_value("f64", 1) == 1.0 and type(decode_value("f64", 1)) is float
    assert decode_value("f64", 2**60) == float(2**60)
    assert bits(decode_value("f64", orjson.loads(b"-0.0"))) == bits(-0.0)
    assert bits(decode_value("f64", json.loads("-0.0"))) == bits(-0.0)
    assert math.isnan(decode_value("f64", "NaN"))
    assert decode_value("f64", "-Infinity") == -math.inf


# ------------------------------------------------------------------ documents

def test_frame_and_types_14_44_writer_tags_every_key_in_order():
    meta = {
        "title": "water", "n": MetaValue("i32", 3), "charge": 0, "big": 2**63,
        "e": 1.5, "nan": math.nan, "flag": True, "units": {"length": "angstrom"},
        "none": None, "com": MetaValue("f64x3", (0, 0.5, 1)), "huge": MetaValue("f64", 2**70),
        "tup": (1, 2),
    }
    attrs, types = encode_document(meta, "/frame")
    assert list(attrs) == list(meta) == list(types)
    assert types == {
        "title": "string", "n": "i32", "charge": "i64", "big": "u64", "e": "f64", "nan": "f64",
        "flag": "bool", "units": "json", "none": "json", "com": "f64x3", "huge": "f64",
        "tup": "json",
    }
    assert attrs["nan"] == "NaN" and attrs["big"] == str(2**63) and attrs["com"] == [0.0, 0.5, 1.0]
    assert attrs["tup"] == [1, 2]
    orjson.dumps(attrs)  # plain JSON, no NaN
    assert encode_document({}) == ({}, {})


def test_frame_and_types_14_33_meta_key_named_meta_types_refused():
    refused(R33, encode_document, {"a": 1, "_meta_types": {"a": "i64"}})


def test_frame_and_types_14_36_document_refusals():
    refused(R36, encode_document, {"n": 2**64})         # decision 18: untagged out of range
    refused(R36, encode_document, {"n": -(2**63) - 1})
    refused(R36, encode_document, {"n": MetaValue("i32", 2**31)})
    refused(R36, encode_document, {"n": MetaValue("f32", 1.5)})
    refused(R36, encode_document, {"n": MetaValue("float", 1.5)})  # legacy never written
    assert encode_document({"n": MetaValue("f64", 2**64)})[0]["n"] == float(2**64)
    with pytest.raises(InvalidValueError):
        encode_document({1: "a"})
    with pytest.raises(InvalidValueError):
        encode_document({"a": b"bytes"})
    with pytest.raises(InvalidValueError):
        encode_document({"a": np.zeros(3)})
    with pytest.raises(InvalidValueError):
        encode_document({"a": {1, 2}})
    err = refused(R36, encode_document, {"n": MetaValue("i32", 1.0)}, "/frame")
    assert "'n'" in str(err) and "/frame" in str(err)


def test_frame_and_types_14_36_infer_tag():
    assert infer_tag(True) == infer_tag(np.bool_(False)) == "bool"
    assert infer_tag(0) == infer_tag(np.int8(3)) == infer_tag(-(2**63)) == "i64"
    assert infer_tag(2**63 - 1) == "i64" and infer_tag(2**63) == infer_tag(np.uint64(2**64 - 1)) == "u64"
    assert infer_tag(1.0) == infer_tag(np.float32(1)) == infer_tag(math.nan) == "f64"
    assert infer_tag("x") == infer_tag(np.str_("x")) == "string"
    for v in (None, [], (), {}):
        assert infer_tag(v) == "json"
    for v in (2**64, -(2**63) - 1):
        refused(R36, infer_tag, v)
    for v in (b"x", np.zeros(2), {1}, object(), 1j):
        with pytest.raises(InvalidValueError):
            infer_tag(v)


def test_frame_and_types_14_26_untagged_keys_inferred_and_stale_tags_ignored():
    text = (b'{"b": true, "i": 3, "big": 9223372036854775808, "f": 1.0, "e": 1e3,'
            b' "s": "NaN", "n": null, "l": [1, 2], "o": {"a": 1}, "t": "x",'
            b' "_meta_types": {"t": "string", "gone": "f32", "gone2": 7}}')
    for parse in (orjson.loads, json.loads):
        out = decode_document(parse(text), "/frame")
        assert "_meta_types" not in out
        assert out == {"b": True, "i": 3, "big": 2**63, "f": 1.0, "e": 1000.0, "s": "NaN",
                       "n": None, "l": [1, 2], "o": {"a": 1}, "t": "x"}
        assert type(out["f"]) is float and type(out["i"]) is int
        assert list(check_document(parse(text), "/frame")) == []
    # 2^64 and beyond: f64 (orjson already parses it as a float; stdlib as an int)
    for parse in (orjson.loads, json.loads):
        out = decode_document(parse(b'{"x": 18446744073709551616, "y": -9223372036854775809}'))
        assert out == {"x": 2.0**64, "y": -(2.0**63)} and type(out["x"]) is float
    assert decode_document({"x": -(2**63)}) == {"x": -(2**63)}
    refused(R16, decode_document, {"x": 10**400})       # overflows f64
    refused(R16, decode_document, {"x": math.nan})      # bare NaN token, untagged
    refused(R16, decode_document, {"x": [math.nan]})


def test_frame_and_types_14_15_meta_types_must_be_an_object_with_known_tags():
    for types in ([], "f64", None, 3, ["x", "f64"]):
        refused(R15, decode_document, {"x": 1.0, "_meta_types": types})
    for tag in ("f32", "float", "int", "uint", 3, None, ["f64"], "i64x6"):
        refused(R15, decode_document, {"x": 1.0, "_meta_types": {"x": tag}})
    assert decode_document({"_meta_types": {}}) == {}


def test_frame_and_types_14_15_check_document_collects_all_violations():
    attrs = {"a": 1.0, "b": "x", "c": [1, 2, 3], "_meta_types": {"a": "i32", "b": "f32", "c": "f64x3"}}
    vs = list(check_document(attrs, "/frame"))
    assert [(v.rule, v.node) for v in vs] == [(R16, "/frame:a"), (R15, "/frame:b")]
    assert list(check_document({"x": 1, "_meta_types": 5}))[0].rule == R15


def test_frame_and_types_14_26_values_come_back_at_their_tag():
    attrs = {"com": [0, 0.5, 1], "n": 3, "title": "w", "e": 1, "u": 5, "big": "18446744073709551615",
             "j": 3, "js": "s", "jl": [1], "jn": None, "nan": "NaN",
             "_meta_types": {"com": "f64x3", "n": "i32", "title": "string", "e": "f64", "u": "u64",
                             "big": "u64", "j": "json", "js": "json", "jl": "json", "jn": "json",
                             "nan": "f64"}}
    out = decode_document(via_json(attrs))
    assert out["com"] == MetaValue("f64x3", (0.0, 0.5, 1.0))
    assert out["n"] == MetaValue("i32", 3)
    assert out["title"] == "w"
    assert out["e"] == 1.0 and type(out["e"]) is float
    assert out["u"] == MetaValue("u64", 5)
    assert out["big"] == 2**64 - 1
    assert out["j"] == MetaValue("json", 3) and out["js"] == MetaValue("json", "s")
    assert out["jl"] == [1] and out["jn"] is None
    assert math.isnan(out["nan"])
    assert decode_document({"s": "NaN"}) == {"s": "NaN"}
    # frame fixture valid-typed-meta
    assert decode_document({"com": [0, 0.5, 1], "n": 3, "title": "t",
                            "_meta_types": {"com": "f64x3", "n": "i32", "title": "string"}}) == {
        "com": MetaValue("f64x3", (0.0, 0.5, 1.0)), "n": MetaValue("i32", 3), "title": "t"}


def test_frame_and_types_14_44_document_write_read_write_is_lossless():
    meta = {"n": MetaValue("i32", 3), "c": 3, "u": MetaValue("u64", 5), "f": 1.0, "s": "NaN",
            "x": math.nan, "v": MetaValue("f64x9", np.eye(3)), "j": MetaValue("json", 3),
            "l": [1, {"a": None}], "b3": MetaValue("bool3", [True, False, True]), "big": 2**64 - 1}
    attrs, types = encode_document(meta)
    stored = via_json({**attrs, "_meta_types": types})
    back = decode_document(stored)
    attrs2, types2 = encode_document(back)
    assert types2 == types and orjson.dumps(attrs2) == orjson.dumps(attrs)
    assert decode_document(via_json({**attrs2, "_meta_types": types2})).keys() == meta.keys()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=3), kids, max_size=3),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=6).filter(lambda k: k != "_meta_types"),
                       st.one_of(json_values, st.floats()), max_size=6))
def test_frame_and_types_14_26_untagged_writer_output_round_trips(meta):
    attrs, types = encode_document(meta)
    back = decode_document(via_json({**attrs, "_meta_types": types}))
    assert encode_document(back) == (attrs, types)
