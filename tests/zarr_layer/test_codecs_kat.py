"""Known-answer vectors for every codec (zarr-v3-subset §5, §7, §10)."""
import gzip
import struct
import zlib

import numpy as np
import pytest
import zstandard

from molrec_raw.errors import ChecksumMismatchError, CorruptDataError, InvalidMetadataError, UnsupportedFeatureError
from molrec_raw.zarr import ChunkSpec, CodecPipeline, MemoryStore, open_array
from molrec_raw.zarr.dtypes import data_type

LE = {"name": "bytes", "configuration": {"endian": "little"}}
BE = {"name": "bytes", "configuration": {"endian": "big"}}
CRC = {"name": "crc32c"}


def pipeline(codecs, shape, dtype, fill=None):
    dt = data_type(dtype)
    return CodecPipeline(codecs, ChunkSpec(tuple(shape), dt, dt.coerce_fill(fill)))


def test_crc32c_known_answer():
    out = bytes(pipeline([{"name": "bytes"}, CRC], [9], "uint8").encode(np.frombuffer(b"123456789", np.uint8)))
    assert out == b"123456789" + bytes.fromhex("839206e3")


def test_crc32c_mismatch_is_refused():
    p = pipeline([{"name": "bytes"}, CRC], [9], "uint8")
    with pytest.raises(ChecksumMismatchError):
        p.decode(b"123456780" + bytes.fromhex("839206e3"))


def test_bytes_little_and_big():
    data = np.array([1, 2, 258], dtype="<u2")
    assert bytes(pipeline([LE], [3], "uint16").encode(data)) == bytes.fromhex("010002000201")
    assert bytes(pipeline([BE], [3], "uint16").encode(data)) == bytes.fromhex("000100020102")
    decoded = pipeline([BE], [3], "uint16").decode(bytes.fromhex("000100020102"))
    assert decoded.dtype == np.dtype("<u2") and decoded.tolist() == [1, 2, 258]


def test_bytes_needs_endian_for_multibyte():
    with pytest.raises(InvalidMetadataError):
        pipeline([{"name": "bytes"}], [2], "float64")
    pipeline([{"name": "bytes"}], [2], "uint8")  # fine for 1-byte types


def test_bytes_complex_order_real_then_imag():
    data = np.array([1 + 2j], dtype="<c8")
    assert bytes(pipeline([LE], [1], "complex64").encode(data)) == struct.pack("<ff", 1, 2)


def test_shuffle_example():
    p = pipeline([LE, {"name": "numcodecs.shuffle", "configuration": {"elementsize": 2}}], [3], "uint16")
    assert bytes(p.encode(np.array([1, 2, 3], "<u2"))) == bytes.fromhex("010203000000")
    assert p.decode(bytes.fromhex("010203000000")).tolist() == [1, 2, 3]


def test_shuffle_elementsize_defaults_to_itemsize():
    p = pipeline([LE, {"name": "numcodecs.shuffle", "configuration": {}}], [3], "uint32")
    assert p.to_json()[1] == {"name": "numcodecs.shuffle", "configuration": {"elementsize": 4}}


def test_vlen_utf8_example():
    p = pipeline([{"name": "vlen-utf8"}], [3], "string")
    encoded = bytes(p.encode(np.array(["a", "", "héllo"], dtype=object)))
    assert encoded == bytes.fromhex("03000000" "01000000" "61" "00000000" "06000000" "68c3a96c6c6f")
    assert p.decode(encoded).tolist() == ["a", "", "héllo"]


def test_vlen_utf8_edge_chunk_counts_full_chunk():
    store = MemoryStore()
    a = open_array(store, "s", mode="w", shape=(3,), dtype=str, chunks=(2,), codecs=[{"name": "vlen-utf8"}])
    a[...] = np.array(["x", "y", "z"], dtype=object)
    assert store.get("s/c/1") == bytes.fromhex("02000000" "01000000" "7a" "00000000")


def test_vlen_utf8_count_mismatch_refused():
    p = pipeline([{"name": "vlen-utf8"}], [3], "string")
    with pytest.raises(CorruptDataError):
        p.decode(bytes.fromhex("02000000" "01000000" "61" "00000000"))


def test_gzip_deterministic_header_and_roundtrip():
    p = pipeline([{"name": "bytes"}, {"name": "gzip", "configuration": {"level": 5}}], [64], "uint8")
    data = np.arange(64, dtype=np.uint8)
    out = bytes(p.encode(data))
    assert out[:10] == bytes.fromhex("1f8b0800000000000003")
    assert out == gzip.compress(data.tobytes(), compresslevel=5, mtime=0)[:9] + b"\x03" + gzip.compress(
        data.tobytes(), compresslevel=5, mtime=0)[10:]
    assert gzip.decompress(out) == data.tobytes()
    assert p.decode(out).tolist() == data.tolist()


def test_gzip_reads_two_members_and_foreign_mtime():
    p = pipeline([{"name": "bytes"}, {"name": "gzip", "configuration": {"level": 1}}], [4], "uint8")
    two = gzip.compress(b"\x01\x02", mtime=12345) + gzip.compress(b"\x03\x04", mtime=1)
    assert p.decode(two).tolist() == [1, 2, 3, 4]


def test_gzip_bomb_refused():
    p = pipeline([{"name": "bytes"}, {"name": "gzip", "configuration": {"level": 1}}], [4], "uint8")
    with pytest.raises(CorruptDataError):
        p.decode(gzip.compress(b"\x00" * 1_000_000))


def test_zstd_frame_matches_reference_vector():
    p = pipeline([LE, {"name": "zstd", "configuration": {"level": 0, "checksum": False}}], [16], "uint16")
    data = np.arange(16, dtype="<u2")
    out = bytes(p.encode(data))
    assert out[:4] == bytes.fromhex("28b52ffd")
    assert zstandard.frame_content_size(out) == 32
    assert p.decode(out).tolist() == data.tolist()


def test_zstd_reads_frames_without_content_size_and_concatenated():
    p = pipeline([{"name": "bytes"}, {"name": "zstd", "configuration": {"level": 1}}], [200], "uint8")
    raw = np.arange(200, dtype=np.uint8).tobytes()
    cctx = zstandard.ZstdCompressor(write_content_size=False)
    assert p.decode(cctx.compress(raw)).tobytes() == raw
    both = zstandard.ZstdCompressor().compress(raw[:50]) + cctx.compress(raw[50:])
    assert p.decode(both).tobytes() == raw


def test_zstd_lying_content_size_refused():
    p = pipeline([{"name": "bytes"}, {"name": "zstd", "configuration": {}}], [4], "uint8")
    with pytest.raises(CorruptDataError):
        p.decode(zstandard.ZstdCompressor().compress(b"\x00" * 10_000))
    with pytest.raises(CorruptDataError):
        p.decode(zstandard.ZstdCompressor(write_content_size=False).compress(b"\x00" * 10_000))


def test_transpose_non_involutive():
    p = pipeline([{"name": "transpose", "configuration": {"order": [1, 2, 0]}}, LE], [2, 3, 4], "int32")
    data = np.arange(24, dtype="<i4").reshape(2, 3, 4)
    out = bytes(p.encode(data))
    assert out == np.transpose(data, (1, 2, 0)).tobytes()
    np.testing.assert_array_equal(p.decode(out), data)


def test_transpose_bad_order_refused():
    with pytest.raises(InvalidMetadataError):
        pipeline([{"name": "transpose", "configuration": {"order": [0, 0]}}, LE], [2, 2], "int32")


def shard_pipeline(location, shape=(4,), inner=(2,)):
    return pipeline([{"name": "sharding_indexed", "configuration": {
        "chunk_shape": list(inner), "codecs": [LE], "index_codecs": [LE, CRC], "index_location": location}}],
        shape, "uint16")


@pytest.mark.parametrize("location,data,expected", [
    ("end", [1, 2, 3, 4], "0100020003000400" "0000000000000000" "0400000000000000" "0400000000000000"
     "0400000000000000" "f6ff6f8f"),
    ("start", [1, 2, 3, 4], "2400000000000000" "0400000000000000" "2800000000000000" "0400000000000000"
     "df3706b7" "0100020003000400"),
    ("end", [1, 2, 0, 0], "01000200" "0000000000000000" "0400000000000000" "ffffffffffffffff"
     "ffffffffffffffff" "8a0729c5"),
    ("start", [1, 2, 0, 0], "2400000000000000" "0400000000000000" "ffffffffffffffff" "ffffffffffffffff"
     "111ded9e" "01000200"),
])
def test_sharding_vectors(location, data, expected):
    p = shard_pipeline(location)
    out = bytes(p.encode(np.array(data, dtype="<u2")))
    assert out.hex() == expected
    assert p.decode(bytes.fromhex(expected)).tolist() == data


def test_sharding_0d_vector():
    p = pipeline([{"name": "sharding_indexed", "configuration": {
        "chunk_shape": [], "codecs": [LE], "index_codecs": [LE, CRC], "index_location": "end"}}], (), "uint16")
    out = bytes(p.encode(np.array(9, dtype="<u2")))
    assert out.hex() == "0900" "0000000000000000" "0200000000000000" "a46008d0"


def test_sharding_edge_shard_vector():
    store = MemoryStore()
    a = open_array(store, "a", mode="w", shape=(3,), dtype="uint16", chunks=(1,), shards=(4,), codecs=[LE])
    a[...] = [1, 2, 3]
    expected = ("010002000300" "0000000000000000" "0200000000000000" "0200000000000000" "0200000000000000"
                "0400000000000000" "0200000000000000" "ffffffffffffffff" "ffffffffffffffff" "f2263896")
    assert store.get("a/c/0").hex() == expected


def test_sharding_index_codecs_must_be_fixed_size():
    with pytest.raises(InvalidMetadataError):
        pipeline([{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [2], "codecs": [LE], "index_codecs": [LE, {"name": "zstd", "configuration": {}}]}}],
            (4,), "uint16")


def test_sharding_inner_shape_must_divide():
    with pytest.raises(InvalidMetadataError):
        shard_pipeline("end", shape=(6,), inner=(4,))


def test_index_location_defaults_to_end():
    p = pipeline([{"name": "sharding_indexed", "configuration": {"chunk_shape": [2], "codecs": [LE]}}],
                 (4,), "uint16")
    assert p.to_json()[0]["configuration"]["index_location"] == "end"
    assert p.to_json()[0]["configuration"]["index_codecs"] == [LE, CRC]


def test_nested_sharding_roundtrip():
    inner_shard = {"name": "sharding_indexed", "configuration": {"chunk_shape": [2], "codecs": [LE, CRC]}}
    p = pipeline([{"name": "sharding_indexed", "configuration": {"chunk_shape": [4], "codecs": [inner_shard]}}],
                 (8,), "uint16")
    data = np.arange(8, dtype="<u2")
    np.testing.assert_array_equal(p.decode(p.encode(data)), data)


@pytest.mark.parametrize("codecs,error", [
    ([{"name": "blosc", "configuration": {}}], UnsupportedFeatureError),
    ([LE, LE], InvalidMetadataError),
    ([CRC, LE], InvalidMetadataError),
    ([{"name": "crc32c"}], InvalidMetadataError),
    ([LE, {"name": "transpose", "configuration": {"order": [0]}}], InvalidMetadataError),
    ([{"name": "bytes", "configuration": {"endian": "little", "extra": 1}}], InvalidMetadataError),
    ([{"name": "gzip", "configuration": {"level": 12}}], InvalidMetadataError),
    ([], InvalidMetadataError),
])
def test_bad_pipelines_refused(codecs, error):
    with pytest.raises(error):
        pipeline(codecs, [4], "uint16")


def test_shorthand_codec_names_are_read():
    p = pipeline([{"name": "bytes", "configuration": {"endian": "little"}}, "crc32c"], [2], "uint16")
    assert p.to_json()[1] == CRC
