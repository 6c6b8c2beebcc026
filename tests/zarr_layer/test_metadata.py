"""zarr.json parsing and writing (zarr-v3-subset §2–§4, §8)."""
import json
import math

import numpy as np
import orjson
import pytest

from molrec_raw.errors import InvalidMetadataError, UnsupportedFeatureError
from molrec_raw.zarr import MemoryStore, open_array, open_group, parse_metadata
from molrec_raw.zarr.metadata import ArrayMetadata, ChunkKeyEncoding

BASE = {
    "zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "float64",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
    "fill_value": 0.0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
}


def doc(**changes):
    d = dict(BASE)
    d.update(changes)
    return orjson.dumps(d)


@pytest.mark.parametrize("raw,check", [
    ("NaN", math.isnan),
    ("Infinity", lambda v: v == math.inf),
    ("-Infinity", lambda v: v == -math.inf),
    ("0x7ff8000000000000", math.isnan),
    ("0x7e00", math.isnan),  # digit count selects the format (zarr-python behaviour)
    ("0x3ff0000000000000", lambda v: v == 1.0),
    (-0.0, lambda v: v == 0 and math.copysign(1, v) < 0),
    (1.5, lambda v: v == 1.5),
])
def test_float_fill_values_read(raw, check):
    assert check(float(parse_metadata(doc(fill_value=raw)).fill_value))


@pytest.mark.parametrize("dtype,raw,expected", [
    ("complex128", [1.0, 2.0], 1 + 2j),
    ("complex64", ["NaN", 1.0], None),
    ("complex128", ["Infinity", "-Infinity"], complex(math.inf, -math.inf)),
    ("uint64", 18446744073709551615, 18446744073709551615),
    ("int64", -9223372036854775808, -9223372036854775808),
    ("bool", True, True),
    ("string", "", ""),
    ("string", "héllo", "héllo"),
])
def test_typed_fill_values_read(dtype, raw, expected):
    codecs = [{"name": "vlen-utf8"}] if dtype == "string" else BASE["codecs"]
    value = parse_metadata(doc(data_type=dtype, fill_value=raw, codecs=codecs)).fill_value
    if expected is None:
        assert math.isnan(value.real) and value.imag == 1.0
    else:
        assert value == expected


@pytest.mark.parametrize("dtype,raw", [
    ("uint8", 256), ("int8", -129), ("int32", 1.5), ("float64", None), ("bool", "yes"),
    ("complex64", 0.0), ("float32", "0x12"),
])
def test_bad_fill_values_refused(dtype, raw):
    with pytest.raises(InvalidMetadataError):
        parse_metadata(doc(data_type=dtype, fill_value=raw))


@pytest.mark.parametrize("fill,expected", [
    (math.nan, '"NaN"'), (math.inf, '"Infinity"'), (-math.inf, '"-Infinity"'), (-0.0, "-0.0"), (2.5, "2.5"),
])
def test_float_fill_written_as_spec_forms(fill, expected):
    store = MemoryStore()
    open_array(store, "a", mode="w", shape=(2,), dtype="float32", chunks=(2,), fill_value=fill)
    written = json.loads(store.get("a/zarr.json"))
    assert json.dumps(written["fill_value"]) == expected


def test_nan_payload_survives_as_hex():
    m = parse_metadata(doc(fill_value="0x7ff8000000000001"))
    assert json.loads(m.to_json())["fill_value"] == "0x7ff8000000000001"


def test_complex_fill_written_as_pair():
    store = MemoryStore()
    open_array(store, "a", mode="w", shape=(2,), dtype="complex128", chunks=(2,), fill_value=complex(math.nan, 1))
    assert json.loads(store.get("a/zarr.json"))["fill_value"] == ["NaN", 1.0]


def test_unknown_field_must_understand_false_is_kept():
    extra = {"must_understand": False, "note": [1, 2]}
    m = parse_metadata(doc(my_extension=extra))
    assert json.loads(m.to_json())["my_extension"] == extra


@pytest.mark.parametrize("value", [1, {"note": 1}, {"must_understand": True}])
def test_unknown_required_field_refused(value):
    with pytest.raises(UnsupportedFeatureError):
        parse_metadata(doc(my_extension=value))


def test_storage_transformers_refused_unless_empty():
    parse_metadata(doc(storage_transformers=[]))
    with pytest.raises(UnsupportedFeatureError):
        parse_metadata(doc(storage_transformers=[{"name": "x"}]))


@pytest.mark.parametrize("dtype", ["r16", "fixed_length_utf32", {"name": "float64"}, "datetime64"])
def test_unsupported_data_types(dtype):
    with pytest.raises(UnsupportedFeatureError):
        parse_metadata(doc(data_type=dtype))


def test_attributes_kept_exactly_with_nulls_and_order():
    attrs = {"z": None, "a": {"nested": [1, None, "x"]}, "m": 1.5}
    m = parse_metadata(doc(attributes=attrs))
    assert list(json.loads(m.to_json())["attributes"].items()) == list(attrs.items())


def test_bare_nan_in_attributes_is_read():
    raw = json.dumps({**BASE, "attributes": {"x": math.nan, "y": math.inf}}).encode()
    assert b"NaN" in raw
    m = parse_metadata(raw)
    assert math.isnan(m.attributes["x"]) and m.attributes["y"] == math.inf


def test_non_finite_attribute_refused_on_write():
    g = open_group(MemoryStore(), "w")
    with pytest.raises(InvalidMetadataError):
        g.attrs["bad"] = float("nan")


def test_dimension_names_written_only_when_given():
    store = MemoryStore()
    g = open_group(store, "w")
    g.create_array("a", shape=(2, 3), dtype="int8", chunks=(2, 3))
    g.create_array("b", shape=(2, 3), dtype="int8", chunks=(2, 3), dimension_names=["x", None])
    assert "dimension_names" not in json.loads(store.get("a/zarr.json"))
    assert json.loads(store.get("b/zarr.json"))["dimension_names"] == ["x", None]
    assert parse_metadata(doc(dimension_names=None)).dimension_names is None


def test_chunk_key_encodings():
    assert ChunkKeyEncoding("default", "/").encode((1, 0)) == "c/1/0"
    assert ChunkKeyEncoding("default", ".").encode((1, 0)) == "c.1.0"
    assert ChunkKeyEncoding("v2", ".").encode((1, 0)) == "1.0"
    assert ChunkKeyEncoding("v2", "/").encode((1, 0)) == "1/0"
    assert ChunkKeyEncoding("default", "/").encode(()) == "c"
    assert ChunkKeyEncoding("v2", ".").encode(()) == "0"
    assert ChunkKeyEncoding.from_json({"name": "v2"}).separator == "."
    assert ChunkKeyEncoding.from_json({"name": "default"}).separator == "/"
    assert ChunkKeyEncoding.from_json("default").separator == "/"


@pytest.mark.parametrize("sep,encoding,keys", [
    (".", "default", {"a/c.0.0", "a/c.1.0"}),
    ("/", "v2", {"a/0/0", "a/1/0"}),
    (".", "v2", {"a/0.0", "a/1.0"}),
])
def test_chunk_key_encodings_in_store(sep, encoding, keys):
    store = MemoryStore()
    a = open_array(store, "a", mode="w", shape=(4, 2), dtype="int16", chunks=(2, 2),
                   chunk_key_encoding={"name": encoding, "configuration": {"separator": sep}})
    a[...] = np.arange(8).reshape(4, 2) + 1
    assert set(store.list("a/")) - {"a/zarr.json"} == keys
    np.testing.assert_array_equal(open_array(store, "a")[...], np.arange(8).reshape(4, 2) + 1)


def test_canonical_array_document():
    store = MemoryStore()
    open_array(store, "", mode="w", shape=(4,), dtype="uint8", chunks=(2,))
    d = json.loads(store.get("zarr.json"))
    assert list(d) == ["zarr_format", "node_type", "shape", "data_type", "chunk_grid", "chunk_key_encoding",
                       "fill_value", "codecs", "attributes"]
    assert d["codecs"][0] == {"name": "bytes", "configuration": {"endian": "little"}}
    assert d["codecs"][-1] == {"name": "crc32c"}


def test_canonical_group_document():
    store = MemoryStore()
    open_group(store, "w", attributes={"k": 1})
    assert json.loads(store.get("zarr.json")) == {"zarr_format": 3, "node_type": "group", "attributes": {"k": 1}}


def test_consolidated_metadata_ignored():
    raw = orjson.dumps({"zarr_format": 3, "node_type": "group", "consolidated_metadata": {
        "kind": "inline", "must_understand": False, "metadata": {}}})
    assert parse_metadata(raw).attributes == {}


@pytest.mark.parametrize("raw", [
    b"not json", b"[1]", orjson.dumps({"zarr_format": 2}), orjson.dumps({"zarr_format": 3, "node_type": "x"}),
    doc(shape=[-1]), doc(shape=[1.5]), doc(chunk_grid={"name": "regular", "configuration": {"chunk_shape": [0]}}),
    doc(chunk_grid={"name": "rectilinear", "configuration": {}}), doc(chunk_grid="regular"),
])
def test_invalid_documents_refused(raw):
    from molrec_raw.errors import MolrecError
    with pytest.raises(MolrecError):
        parse_metadata(raw)


def test_writer_is_deterministic(tmp_path):
    def build(path):
        g = open_group(path, "w", attributes={"b": 1, "a": [1, 2]})
        a = g.create_array("x", shape=(100,), dtype="float64", chunks=(10,), shards=(50,))
        a[...] = np.linspace(0, 1, 100)
        g.create_array("s", shape=(3,), dtype=str, chunks=(2,))[...] = np.array(["a", "é", ""], object)
        g.create_array("z", shape=(10,), dtype="int32", chunks=(5,),
                       codecs=[{"name": "bytes", "configuration": {"endian": "little"}},
                               {"name": "gzip", "configuration": {"level": 1}}])[...] = np.arange(10)
    build(tmp_path / "one")
    build(tmp_path / "two")
    files = sorted(p.relative_to(tmp_path / "one") for p in (tmp_path / "one").rglob("*") if p.is_file())
    assert files
    for f in files:
        assert (tmp_path / "one" / f).read_bytes() == (tmp_path / "two" / f).read_bytes()
