"""Hostile and corrupt input: every case raises molrec_raw's own error, names where it
happened, never hangs, never allocates the declared size, never writes outside the store."""
import gzip
import json
import os
import struct
import warnings
import zipfile
import zlib

import crc32c
import numpy as np
import orjson
import pytest
import zstandard

from molrec_raw.errors import (
    ChecksumMismatchError, CorruptDataError, InvalidKeyError, InvalidMetadataError, MolrecError,
    ResourceLimitError, UnsupportedFeatureError,
)
from molrec_raw.zarr import DirectoryStore, Limits, MemoryStore, ZipStore, open_array, open_group

LE = {"name": "bytes", "configuration": {"endian": "little"}}


def make(codecs, *, shape=(8,), chunks=(8,), dtype="uint16", shards=None):
    store = MemoryStore()
    a = open_array(store, "a", mode="w", shape=shape, dtype=dtype, chunks=chunks, shards=shards, codecs=codecs)
    if dtype is str:
        a[...] = np.array([f"s{i}" for i in range(np.prod(shape))], dtype=object).reshape(shape)
    else:
        a[...] = np.arange(np.prod(shape)).reshape(shape).astype(a.dtype) + 1
    return store


def read(store, **kw):
    return open_array(store, "a", **kw)[...]


def corrupt(store, key, fn):
    store._values[key] = fn(store._values[key])


CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


@case
def truncated_chunk():
    s = make([LE])
    corrupt(s, "a/c/0", lambda b: b[:-3])
    return s, CorruptDataError


@case
def crc_mismatch():
    s = make([LE, {"name": "crc32c"}])
    corrupt(s, "a/c/0", lambda b: b"\xff" + b[1:])
    return s, ChecksumMismatchError


@case
def chunk_shorter_than_crc():
    s = make([LE, {"name": "crc32c"}])
    corrupt(s, "a/c/0", lambda b: b[:2])
    return s, CorruptDataError


@case
def gzip_garbage():
    s = make([LE, {"name": "gzip", "configuration": {"level": 1}}])
    corrupt(s, "a/c/0", lambda b: b[:12] + b"\x00garbage" * 3)
    return s, CorruptDataError


@case
def gzip_bomb():
    s = make([LE, {"name": "gzip", "configuration": {"level": 1}}])
    corrupt(s, "a/c/0", lambda b: gzip.compress(b"\x00" * (50 << 20)))
    return s, CorruptDataError


@case
def zstd_lying_content_size():
    s = make([LE, {"name": "zstd", "configuration": {}}])
    corrupt(s, "a/c/0", lambda b: zstandard.ZstdCompressor().compress(b"\x00" * (1 << 30 - 4))[:20])
    return s, CorruptDataError


@case
def zstd_bomb_without_content_size():
    s = make([LE, {"name": "zstd", "configuration": {}}])
    bomb = zstandard.ZstdCompressor(write_content_size=False).compress(b"\x00" * (64 << 20))
    corrupt(s, "a/c/0", lambda b: bomb)
    return s, CorruptDataError


@case
def zstd_garbage():
    s = make([LE, {"name": "zstd", "configuration": {}}])
    corrupt(s, "a/c/0", lambda b: b"\x28\xb5\x2f\xfd" + b"\xff" * 20)
    return s, CorruptDataError


@case
def shuffle_wrong_length():
    s = make([LE, {"name": "numcodecs.shuffle", "configuration": {"elementsize": 2}}])
    corrupt(s, "a/c/0", lambda b: b + b"\x00")
    return s, CorruptDataError


@case
def vlen_lying_length():
    s = make([{"name": "vlen-utf8"}], dtype=str, shape=(2,), chunks=(2,))
    corrupt(s, "a/c/0", lambda b: b[:4] + struct.pack("<I", 0xFFFFFFF0) + b[8:])
    return s, CorruptDataError


@case
def vlen_lying_count():
    s = make([{"name": "vlen-utf8"}], dtype=str, shape=(2,), chunks=(2,))
    corrupt(s, "a/c/0", lambda b: struct.pack("<I", 0x7FFFFFFF) + b[4:])
    return s, CorruptDataError


@case
def vlen_invalid_utf8():
    s = make([{"name": "vlen-utf8"}], dtype=str, shape=(1,), chunks=(1,))
    s._values["a/c/0"] = struct.pack("<II", 1, 2) + b"\xff\xfe"
    return s, CorruptDataError


def lying_shard_index(**entries):
    """A 4-inner-chunk shard whose index (at the end, CRC fixed up) has ``entries`` overwritten."""
    s = make([LE], shape=(8,), chunks=(2,), shards=(8,))

    def lie(b):
        index = np.frombuffer(b[-68:-4], "<u8").copy()
        for position, value in entries.items():
            index[int(position[1:])] = value
        return b[:-68] + index.tobytes() + struct.pack("<I", crc32c.crc32c(index.tobytes()))
    corrupt(s, "a/c/0", lie)
    return s


@case
def shard_index_past_end():
    return lying_shard_index(i1=10**12), CorruptDataError


@case
def shard_index_crc_mismatch():
    s = make([LE], shape=(8,), chunks=(2,), shards=(8,))
    corrupt(s, "a/c/0", lambda b: b[:-1] + bytes([b[-1] ^ 1]))
    return s, ChecksumMismatchError


@case
def shard_shorter_than_index():
    s = make([LE], shape=(8,), chunks=(2,), shards=(8,))
    corrupt(s, "a/c/0", lambda b: b[:10])
    return s, CorruptDataError


@case
def shard_offset_overflow():
    return lying_shard_index(i0=2**64 - 10, i1=20), CorruptDataError


@case
def huge_declared_chunk():
    s = MemoryStore()
    s.set("a/zarr.json", orjson.dumps({
        "zarr_format": 3, "node_type": "array", "shape": [2**62], "data_type": "float64",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2**60]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0.0, "codecs": [LE]}))
    return s, ResourceLimitError


@case
def huge_declared_shard_index():
    s = MemoryStore()
    s.set("a/zarr.json", orjson.dumps({
        "zarr_format": 3, "node_type": "array", "shape": [2**40], "data_type": "uint8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2**40]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": [1], "codecs": [LE]}}]}))
    s.set("a/c/0", b"\x00" * 100)
    return s, ResourceLimitError


@case
def metadata_not_json():
    s = make([LE])
    s._values["a/zarr.json"] = b"\xff\xfe{"
    return s, InvalidMetadataError


@case
def metadata_unknown_codec():
    s = make([LE])
    doc = json.loads(s._values["a/zarr.json"])
    doc["codecs"] = [{"name": "blosc", "configuration": {}}]
    s._values["a/zarr.json"] = json.dumps(doc).encode()
    return s, UnsupportedFeatureError


@case
def metadata_deeply_nested():
    s = make([LE])
    s._values["a/zarr.json"] = b"[" * 100000 + b"]" * 100000
    return s, InvalidMetadataError


@case
def gzip_shorter_than_the_chunk():  # zarr-v3-subset#5.3: an exact size is exact both ways
    s = make([LE, {"name": "gzip", "configuration": {"level": 1}}])
    corrupt(s, "a/c/0", lambda b: gzip.compress(b"\x00" * 15, mtime=0))
    return s, CorruptDataError


@case
def zstd_shorter_than_the_chunk():  # zarr-v3-subset#5.4
    s = make([LE, {"name": "zstd", "configuration": {}}, {"name": "crc32c"}])
    body = zstandard.ZstdCompressor(write_content_size=False).compress(b"\x00" * 15)
    corrupt(s, "a/c/0", lambda b: body + struct.pack("<I", crc32c.crc32c(body)))
    return s, CorruptDataError


@case
def sharding_nested_too_deep():  # zarr-v3-subset#7: at most 8 levels, refused before recursing
    s = make([LE])
    levels = 300  # 900 JSON levels: a document orjson reads, a pipeline Python could not build
    nested = '[{"name": "sharding_indexed", "configuration": {"chunk_shape": [8], "codecs": ' * levels
    codecs = nested + json.dumps([LE]) + "}}]" * levels
    doc = s._values["a/zarr.json"].decode()
    start = doc.index('"codecs"')
    end = doc.index('"attributes"')
    s._values["a/zarr.json"] = (doc[:start] + '"codecs": ' + codecs + ", " + doc[end:]).encode()
    return s, UnsupportedFeatureError


@case
def metadata_nested_beyond_orjson_with_nan():  # zarr-v3-subset#2: the fallback keeps orjson's 1024 levels
    s = make([LE])
    s._values["a/zarr.json"] = s._values["a/zarr.json"].replace(
        b'"attributes": {}', b'"attributes": {"x": [NaN, ' + b"[" * 1100 + b"]" * 1100 + b"]}")
    return s, InvalidMetadataError


@case
def transpose_order_of_floats():  # zarr-v3-subset#5.2: 1.0 == 1, but an order holds integers
    s = make([LE], shape=(2, 4), chunks=(2, 4))
    doc = json.loads(s._values["a/zarr.json"])
    doc["codecs"] = [{"name": "transpose", "configuration": {"order": [1.0, 0]}}, LE]
    s._values["a/zarr.json"] = json.dumps(doc).encode()
    return s, InvalidMetadataError


@case
def metadata_unpaired_surrogate_escape():  # zarr-v3-subset#2: a zarr.json is UTF-8
    s = make([LE])
    s._values["a/zarr.json"] = s._values["a/zarr.json"].replace(b'"attributes": {}', b'"attributes": {"\\ud800": NaN}')
    assert b"ud800" in s._values["a/zarr.json"]
    return s, InvalidMetadataError


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_case_raises_library_error_with_location(name):
    store, error = CASES[name]()
    with pytest.raises(error) as info:
        read(store, limits=Limits(max_chunk_bytes=1 << 24, max_read_bytes=1 << 26))
    assert isinstance(info.value, MolrecError)
    text = str(info.value)
    assert "store=<memory>" in text and "node=a" in text


def test_zarr_v3_subset_7_a_shard_index_entry_past_the_end_is_refused_by_the_index_check():
    """An index entry (its checksum fixed up) whose bytes end past the shard: refused when the
    index is read, naming the entry and where it lies — not left to the chunk read (which a
    shorter lie would pass) (zarr-v3-subset#7)."""
    for entries in ({"i1": 10**12}, {"i0": 2**64 - 10, "i1": 20}):
        with pytest.raises(CorruptDataError, match="shard index points past the end of the shard") as info:
            read(lying_shard_index(**entries))
        assert info.value.rule == "zarr-v3-subset#7" and info.value.key == "a/c/0", info.value


def test_errors_name_the_chunk_key():
    store, _ = CASES["crc_mismatch"]()
    with pytest.raises(ChecksumMismatchError) as info:
        read(store)
    assert info.value.key == "a/c/0" and "key=a/c/0" in str(info.value)


def test_huge_selection_refused_before_allocation():
    store = MemoryStore()
    a = open_array(store, "a", mode="w", shape=(2**40,), dtype="float64", chunks=(2**20,))
    with pytest.raises(ResourceLimitError):
        a[...]
    assert a[5] == 0.0


def test_hostile_zip_names_never_escape(tmp_path):
    path = tmp_path / "evil.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("zarr.json", b'{"zarr_format":3,"node_type":"group"}')
        zf.writestr("../escape", b"x")
    with pytest.raises(CorruptDataError):
        open_group(path)
    assert not (tmp_path / "escape").exists()


def test_directory_store_never_writes_outside(tmp_path):
    root = tmp_path / "root"
    g = open_group(DirectoryStore(root), "w")
    for name in ["../out", "a/../../out", "..\\out", "a/./b"]:
        with pytest.raises(InvalidKeyError):
            g.create_group(name)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root"]


def test_zip_array_corruption_names_store(tmp_path):
    store = make([LE, {"name": "crc32c"}])
    path = tmp_path / "a.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for key in store.list(""):
            data = store.get(key)
            if key == "a/c/0":
                data = b"\x00" + data[1:]
            zf.writestr(key, data)
    with pytest.raises(ChecksumMismatchError) as info:
        open_array(ZipStore(path), "a")[...]
    assert str(path) in str(info.value)


def _peak_growth_mib(body: str) -> float:
    """Run ``body`` (which defines ``run()``) in a fresh Python and return the growth of its
    peak RSS during ``run()``, in MiB: a fresh heap, so the figure does not depend on what
    earlier tests left in this process's allocator (glibc raises its mmap threshold as large
    blocks are freed, after which the same allocation pattern can cost twice as much)."""
    import subprocess
    import sys
    import textwrap

    if not os.path.exists("/proc/self/clear_refs"):
        pytest.skip("needs Linux /proc/self/clear_refs to measure the peak RSS")
    script = textwrap.dedent(body) + textwrap.dedent("""
        def _kib(name):
            with open("/proc/self/status") as status:
                return next(int(line.split()[1]) for line in status if line.startswith(name + ":"))
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        _before = _kib("VmRSS")
        run()
        print((_kib("VmHWM") - _before) / 1024)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return float(done.stdout.split()[-1])


def test_zarr_v3_subset_5_3_a_gzip_bomb_in_a_string_chunk_costs_about_its_bound():
    """A variable-size chain inflates up to Limits.max_chunk_bytes before refusing; the peak
    memory is about that bound, not twice it (gzip inflates in steps into one buffer)."""
    growth = _peak_growth_mib("""
        import zlib
        import pytest
        from molrec_raw.errors import CorruptDataError
        from molrec_raw.zarr import Limits, MemoryStore, open_array

        store = MemoryStore()
        open_array(store, "a", mode="w", shape=(4,), chunks=(4,), dtype=str,
                   codecs=[{"name": "vlen-utf8"}, {"name": "gzip", "configuration": {"level": 1}}])
        deflate = zlib.compressobj(1, zlib.DEFLATED, 31)
        zeros = bytes(1 << 20)
        bomb = b"".join([deflate.compress(zeros) for _ in range(64)] + [deflate.flush()])
        store.set("a/c/0", bomb)

        def run():
            with pytest.raises(CorruptDataError, match="more than the 33554432 bytes"):
                open_array(store, "a", limits=Limits(max_chunk_bytes=32 << 20))[...]
    """)
    assert growth < 1.5 * 32


def test_zarr_v3_subset_5_4_a_hostile_zstd_window_is_not_kept_by_the_codec():
    """A frame without a content size is decoded by the bounded streaming reader, whose
    decompressor keeps a window-sized buffer; a frame declaring a large window (here 128 MiB,
    48 MiB of content) gets a decompressor of its own, freed after the call, so an array
    kept open does not hold the hostile window (found by bench/fuzz.py's vlen_utf8 target)."""
    retained = _peak_growth_mib("""
        import gc
        import zstandard
        from molrec_raw.zarr.codecs.zstd_codec import REUSED_WINDOW_BYTES, ZstdCodec

        params = zstandard.ZstdCompressionParameters.from_level(1, window_log=27, write_content_size=0)
        streamer = zstandard.ZstdCompressor(compression_params=params).compressobj()
        frame = streamer.compress(b"x" * (48 << 20)) + streamer.flush()
        assert zstandard.get_frame_parameters(frame).window_size > REUSED_WINDOW_BYTES
        codec = ZstdCodec(3, False)

        def run():
            out = codec.decode(frame, None, 64 << 20)
            assert len(out) == 48 << 20
            del out
            gc.collect()
            with open("/proc/self/clear_refs", "w") as refs:
                refs.write("5")  # from here: what stays with the codec alive
    """)
    assert retained < 16


def test_zarr_v3_subset_3_a_float_fill_beyond_the_type_reads_as_infinity_silently():
    from molrec_raw.zarr.dtypes import data_type

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert data_type("float32").parse_fill(1e300) == np.inf
        assert data_type("float16").parse_fill("0x7fefffffffffffff") == np.inf
        assert data_type("complex64").parse_fill([-1e300, 0.0]) == complex(-np.inf, 0.0)


def test_error_messages_show_a_hostile_value_briefly():
    from molrec_raw.errors import brief

    deep = []
    for _ in range(5000):
        deep = [deep]
    assert len(brief(deep)) < 40 and len(brief(list(range(10**6)))) < 100
    s = make([LE])
    doc = json.loads(s._values["a/zarr.json"])
    doc["fill_value"] = ["x" * 1000] * 1000
    s._values["a/zarr.json"] = json.dumps(doc).encode()
    with pytest.raises(InvalidMetadataError) as info:
        read(s)
    assert len(info.value.message) < 300


def _snapshot_of(body: bytes) -> bytes:
    """Snapshot bytes around ``body`` with a valid checksum (what a hostile checkpoint can be)."""
    import zstandard

    from molrec_raw.zarr.codecs.crc32c_codec import crc32c_of
    from molrec_raw.zarr.snapshot import _MAGIC

    packed = zstandard.ZstdCompressor(level=3, write_content_size=True).compress(body)
    return _MAGIC + crc32c_of(packed).to_bytes(4, "little") + packed


def test_zarr_v3_subset_7_a_checkpoint_directory_beyond_its_bound_is_refused_before_parsing():
    """Parsed JSON costs ~20x its size in Python objects: a checkpoint whose directory line is
    longer than 1 MiB (a wide trajectory's is ~50 bytes per file) is refused unparsed, so a
    hostile one cannot make a reader allocate a few hundred MiB (found by bench/fuzz.py's
    checkpoint target: +142 MiB RSS from a 32 MiB directory of empty entries)."""
    from molrec_raw.zarr.snapshot import _MAX_DIRECTORY_BYTES, Snapshot

    entries = b",".join([b'["",0]'] * (_MAX_DIRECTORY_BYTES // 6 + 1))
    with pytest.raises(CorruptDataError, match="directory is longer") as caught:
        Snapshot.from_bytes(_snapshot_of(b'{"metadata":[' + entries + b'],"shards":[]}\n'), "ckpt")
    assert caught.value.rule == "zarr-v3-subset#7" and caught.value.key == "ckpt"


def test_zarr_v3_subset_7_a_snapshot_too_large_for_a_reader_is_refused_when_written():
    """The writer never leaves a checkpoint its own reader would refuse: beyond the bounds,
    taking the snapshot fails with ResourceLimitError (a clear error at the flush)."""
    from molrec_raw.errors import ResourceLimitError
    from molrec_raw.zarr.snapshot import _MAX_BYTES, Snapshot

    small = Snapshot({"a/zarr.json": b"{}"})
    assert Snapshot.from_bytes(small.to_bytes()) == small
    with pytest.raises(ResourceLimitError, match="more than a reader accepts"):
        Snapshot({"a/zarr.json": bytes(_MAX_BYTES)}).to_bytes()
    wide = {f"n{i:07d}/zarr.json": b"" for i in range(50_000)}  # a directory line over 1 MiB
    with pytest.raises(ResourceLimitError):
        Snapshot(wide).to_bytes()


class _ImmutableMemoryStore(MemoryStore):
    immutable = True  # an archive's or a URL's reads: the shard index kept, checked once against the size


@pytest.mark.parametrize("entries", [{"i1": 10**12}, {"i0": 2**64 - 10, "i1": 20}, {"i0": 2**63 - 1}])
@pytest.mark.parametrize("immutable", [False, True])
def test_zarr_v3_subset_7_an_entry_past_the_end_costs_only_its_inner_chunk(entries, immutable):
    """issue 36: a shard index that decodes (its crc32c holds) with one entry past the end of
    the shard — inner chunk 0 is refused under zarr-v3-subset#7 whenever a read needs it (the
    whole array, or that chunk), the other inner chunks read; through a store that keeps the
    checked index (immutable) and one that does not."""
    lying = lying_shard_index(**entries)
    store = _ImmutableMemoryStore() if immutable else MemoryStore()
    store._values.update(lying._values)
    a = open_array(store, "a")
    np.testing.assert_array_equal(a[2:8], np.arange(3, 9, dtype="uint16"))
    for selection in (slice(0, 8), slice(0, 2), slice(1, 3)):
        with pytest.raises(CorruptDataError) as caught:
            a[selection]
        assert caught.value.rule == "zarr-v3-subset#7" and caught.value.key == "a/c/0"
    np.testing.assert_array_equal(a[4:8], np.arange(5, 9, dtype="uint16"))  # and again, after the refusals
