"""ZipStore: hand-rolled read-only zip reader (zarr-v3-subset#9.2)."""
from __future__ import annotations

import io
import struct
import threading
import warnings
import zipfile
import zlib

import pytest

from molrec_raw.errors import (
    ChecksumMismatchError,
    CorruptDataError,
    InvalidKeyError,
    MolrecError,
    ReadOnlyError,
    StoreError,
    UnsupportedFeatureError,
)
from molrec_raw.zarr.zipstore import ZipStore

FILES = {
    "zarr.json": b'{"zarr_format":3,"node_type":"group"}',
    "grp/zarr.json": b'{"zarr_format":3,"node_type":"group"}',
    "grp/arr/zarr.json": b"{}",
    "grp/arr/c/0/0": bytes(range(256)) * 3,
    "grp/arr/c/0/1": b"",
    "grp/données/zarr.json": b"accent",
    "日本/c/0": b"\x00\x01\x02",
}


def make_zip(path, files, compression=zipfile.ZIP_STORED, comment=b""):
    with zipfile.ZipFile(path, "w", compression=compression) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.comment = comment
    return path


def build_zip(entries, *, zip64=False, comment=b""):
    """Hand-built archive: entries are (name_bytes, data, flags).

    With ``zip64`` every 32-bit size/offset field and every EOCD field is a
    sentinel and the real values live in ZIP64 extras / the ZIP64 EOCD record.
    """
    out, central = bytearray(), bytearray()
    for name, data, flags in entries:
        off, crc, n = len(out), zlib.crc32(data), len(data)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, flags, 0, 0, 0, crc, n, n, len(name), 0) + name + data
        if zip64:
            extra = struct.pack("<HHQQQ", 1, 24, n, n, off)
            cs = us = lo = 0xFFFFFFFF
        else:
            extra, cs, us, lo = b"", n, n, off
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, flags, 0, 0, 0, crc, cs, us,
                               len(name), len(extra), 0, 0, 0, 0, lo) + name + extra
    cd_off, count = len(out), len(entries)
    out += central
    if zip64:
        z64 = len(out)
        out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, count, count, len(central), cd_off)
        out += struct.pack("<IIQI", 0x07064B50, 0, z64, 1)
        out += struct.pack("<IHHHHIIH", 0x06054B50, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF,
                           0xFFFFFFFF, 0xFFFFFFFF, len(comment))
    else:
        out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, len(central), cd_off, len(comment))
    return bytes(out + comment)


def write(tmp_path, data, name="x.zip"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def read_everything(path, written=None):
    """Open and read every key, whole and by range; the store may only raise its own errors,
    and a whole read that succeeds gives what ``written`` holds there (its CRC-32 checked),
    a range the same bytes.  The verdict: ``refused at open``, ``intact`` (every written key
    read back as written, no other key) or ``damage found``."""
    try:
        store = ZipStore(path)
    except MolrecError:
        return "refused at open"
    with store:
        intact = written is None or set(store.list()) == set(written)
        for key in store.list():
            store.size(key)
            try:
                whole = store.get(key)
            except MolrecError:
                intact = False
                continue
            if written is not None:
                assert whole in written.values(), key  # never bytes nobody wrote
                assert key not in written or whole == written[key], key
            try:
                assert store.get_range(key, 1, 5) == whole[1:6], key  # (offset, length)
            except MolrecError:
                intact = False
        store.list_dir("")
    return "intact" if intact else "damage found"


@pytest.fixture
def archive(tmp_path):
    return make_zip(tmp_path / "a.zip", FILES)


# -- reading ---------------------------------------------------------------

def test_reads_zipfile_archive(archive):
    with ZipStore(archive) as store:
        assert store.read_only is True
        assert store.describe() == str(archive)
        for key, value in FILES.items():
            assert store.get(key) == value
            assert store.size(key) == len(value)
        assert store.get("missing") is None
        assert store.get_range("missing", 0) is None
        assert store.size("missing") is None


def test_non_ascii_names_utf8_and_cp437(tmp_path):
    with ZipStore(make_zip(tmp_path / "u.zip", FILES)) as store:
        assert store.get("grp/données/zarr.json") == b"accent"
        assert store.get("日本/c/0") == b"\x00\x01\x02"
    # No flag bit 11: the name is cp437 (0x82 == 'é').
    path = write(tmp_path, build_zip([(b"caf\x82/zarr.json", b"x", 0)]))
    with ZipStore(path) as store:
        assert list(store.list()) == ["café/zarr.json"]
    path = write(tmp_path, build_zip([("café/zarr.json".encode(), b"y", 0x800)]), "u8.zip")
    with ZipStore(path) as store:
        assert store.get("café/zarr.json") == b"y"


def test_byte_ranges(archive):
    value = FILES["grp/arr/c/0/0"]
    with ZipStore(archive) as store:
        key = "grp/arr/c/0/0"
        assert store.get_range(key, 0) == value
        assert store.get_range(key, 10, 20) == value[10:30]
        assert store.get_range(key, -16) == value[-16:]
        assert store.get_range(key, -16, 4) == value[-16:-12]
        assert store.get_range(key, -10_000) == value
        assert store.get_range(key, len(value) - 3, 100) == value[-3:]
        assert store.get_range(key, len(value) + 5, 10) == b""
        assert store.get_range("grp/arr/c/0/1", 0, 10) == b""


def test_list_and_list_dir(archive):
    with ZipStore(archive) as store:
        assert list(store.list()) == sorted(FILES)
        assert list(store.list("grp/arr/")) == ["grp/arr/c/0/0", "grp/arr/c/0/1", "grp/arr/zarr.json"]
        assert list(store.list("nope/")) == []
        assert store.list_dir("") == (["zarr.json"], ["grp", "日本"])
        assert store.list_dir("grp/") == (["zarr.json"], ["arr", "données"])
        assert store.list_dir("grp/arr/c/0/") == (["0", "1"], [])
        with pytest.raises(InvalidKeyError):
            store.list_dir("grp")
        with pytest.raises(InvalidKeyError):
            list(store.list("../"))
        with pytest.raises(InvalidKeyError):
            store.get("../x")


def test_directory_entries_ignored(tmp_path):
    path = tmp_path / "d.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("grp/", b"")
        zf.writestr("grp/sub/", b"")
        zf.writestr("grp/zarr.json", b"{}")
    with ZipStore(path) as store:
        assert list(store.list()) == ["grp/zarr.json"]
        assert store.get("grp") is None and store.size("grp") is None
        assert store.list_dir("") == ([], ["grp"])
        assert store.list_dir("grp/") == (["zarr.json"], [])  # 'sub/' holds no file


def test_duplicate_names_last_wins(tmp_path):
    path = tmp_path / "dup.zip"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("a/c/0", b"first")
            zf.writestr("a/c/1", b"one")
            zf.writestr("a/c/0", b"second write")
    with ZipStore(path) as store:
        assert store.get("a/c/0") == b"second write"
        assert store.size("a/c/0") == len(b"second write")
        assert list(store.list()) == ["a/c/0", "a/c/1"]
    with zipfile.ZipFile(path) as zf:  # same answer as Python's zipfile
        assert zf.read("a/c/0") == b"second write"


def test_archive_with_comment(tmp_path):
    comment = b"PK\x05\x06 looks like an EOCD but is comment " + b"z" * 3000
    path = make_zip(tmp_path / "c.zip", FILES, comment=comment)
    with ZipStore(path) as store:
        assert store.get("grp/arr/c/0/0") == FILES["grp/arr/c/0/0"]
    path = make_zip(tmp_path / "big.zip", {"k": b"v"}, comment=b"c" * 0xFFFF)
    with ZipStore(path) as store:
        assert store.get("k") == b"v"


def test_force_zip64_entries(tmp_path):
    path = tmp_path / "z64.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in FILES.items():
            with zf.open(name, "w", force_zip64=True) as fh:
                fh.write(data)
    with ZipStore(path) as store:
        for key, value in FILES.items():
            assert store.get(key) == value  # local extra differs from central one
        assert store.get_range("grp/arr/c/0/0", -5) == FILES["grp/arr/c/0/0"][-5:]


def test_hand_built_zip64_archive(tmp_path):
    entries = [(b"zarr.json", b"{}", 0), (b"a/c/0", b"chunk-bytes", 0), ("é/x".encode(), b"u", 0x800)]
    data = build_zip(entries, zip64=True, comment=b"hi")
    path = write(tmp_path, data)
    with zipfile.ZipFile(path) as zf:  # the crafted archive is valid for Python's zipfile too
        assert zf.read("a/c/0") == b"chunk-bytes"
    with ZipStore(path) as store:
        assert list(store.list()) == ["a/c/0", "zarr.json", "é/x"]
        assert store.get("a/c/0") == b"chunk-bytes"
        assert store.get_range("a/c/0", -5, 3) == b"byt"
        assert store.get("é/x") == b"u"
    # ZIP64 record lying about the entry count.
    bad = bytearray(data)
    z64 = data.rfind(struct.pack("<I", 0x06064B50))
    struct.pack_into("<QQ", bad, z64 + 24, 9, 9)
    with pytest.raises(CorruptDataError):
        ZipStore(write(tmp_path, bytes(bad), "bad.zip"))
    # ZIP64 locator pointing past the archive.
    bad = bytearray(data)
    loc = data.rfind(struct.pack("<I", 0x07064B50))
    struct.pack_into("<Q", bad, loc + 8, len(data) * 10)
    with pytest.raises(CorruptDataError):
        ZipStore(write(tmp_path, bytes(bad), "bad2.zip"))


# -- hostile input ---------------------------------------------------------

def test_truncated_archive(tmp_path, archive):
    data = archive.read_bytes()
    cuts = set(range(0, len(data), 7)) | {len(data) - 1, len(data) - 21, len(data) - 22, 30, 1}
    for cut in sorted(cuts):
        path = write(tmp_path, data[:cut], "cut.zip")
        with pytest.raises(CorruptDataError):
            ZipStore(path)


def test_not_a_zip(tmp_path):
    for i, content in enumerate([b"", b"hello world", b"\x00" * 100, b"PK\x05\x06", b"PK\x03\x04" + b"\x00" * 40]):
        with pytest.raises(CorruptDataError) as info:
            ZipStore(write(tmp_path, content, f"n{i}.zip"))
        assert str(tmp_path) in str(info.value)
    with pytest.raises(StoreError):
        ZipStore(tmp_path / "does-not-exist.zip")


def _eocd(data):
    return data.rfind(b"PK\x05\x06")


def test_bad_central_directory_offset(tmp_path, archive):
    data = archive.read_bytes()
    for value in (len(data) + 10, 0xFFFFFFF0, len(data) - 10):
        bad = bytearray(data)
        struct.pack_into("<I", bad, _eocd(data) + 16, value)
        with pytest.raises(CorruptDataError):
            ZipStore(write(tmp_path, bytes(bad)))
    bad = bytearray(data)  # size running over the EOCD
    struct.pack_into("<I", bad, _eocd(data) + 12, 0xFFFFFF)
    with pytest.raises(CorruptDataError):
        ZipStore(write(tmp_path, bytes(bad)))


def test_lying_entry_count_and_multi_disk(tmp_path, archive):
    data = archive.read_bytes()
    bad = bytearray(data)
    struct.pack_into("<HH", bad, _eocd(data) + 8, 3, 3)
    with pytest.raises(CorruptDataError, match="records"):
        ZipStore(write(tmp_path, bytes(bad)))
    bad = bytearray(data)
    struct.pack_into("<H", bad, _eocd(data) + 4, 2)
    with pytest.raises(UnsupportedFeatureError):
        ZipStore(write(tmp_path, bytes(bad)))


def test_lying_name_length(tmp_path, archive):
    data = archive.read_bytes()
    cen = data.rfind(b"PK\x01\x02")  # last central record
    for field in (28, 30, 32):  # name, extra, comment length
        bad = bytearray(data)
        struct.pack_into("<H", bad, cen + field, 0xFFFF)
        with pytest.raises(CorruptDataError):
            ZipStore(write(tmp_path, bytes(bad)))
    bad = bytearray(data)  # first record's name length too long: next record misparsed
    struct.pack_into("<H", bad, data.find(b"PK\x01\x02") + 28, 40)
    with pytest.raises(CorruptDataError):
        ZipStore(write(tmp_path, bytes(bad)))


def test_entry_past_end_of_file(tmp_path):
    data = build_zip([(b"k", b"0123456789", 0)])
    cen = data.find(b"PK\x01\x02")
    bad = bytearray(data)
    struct.pack_into("<II", bad, cen + 20, 10_000, 10_000)
    with ZipStore(write(tmp_path, bytes(bad))) as store:
        assert store.size("k") == 10_000
        with pytest.raises(CorruptDataError, match="past end"):
            store.get("k")
        with pytest.raises(CorruptDataError, match="past end"):
            store.get_range("k", 0, 1)
    bad = bytearray(data)  # local header offset past the end / not a local header
    for offset in (len(data) + 5, 3):
        struct.pack_into("<I", bad, cen + 42, offset)
        with ZipStore(write(tmp_path, bytes(bad))) as store:
            with pytest.raises(CorruptDataError):
                store.get("k")


def test_compressed_entry_unsupported(tmp_path):
    path = make_zip(tmp_path / "def.zip", {"zarr.json": b"{}" * 100, "a/b": b"x" * 500}, zipfile.ZIP_DEFLATED)
    with ZipStore(path) as store:
        assert list(store.list()) == ["a/b", "zarr.json"]
        assert store.size("a/b") == 500
        with pytest.raises(UnsupportedFeatureError, match="STORED"):
            store.get("a/b")
        with pytest.raises(UnsupportedFeatureError, match="STORED"):
            store.get_range("a/b", 0, 2)


def test_encrypted_entry_unsupported(tmp_path):
    with ZipStore(write(tmp_path, build_zip([(b"k", b"v", 0x1)]))) as store:
        with pytest.raises(UnsupportedFeatureError, match="encrypted"):
            store.get("k")


def test_crc_mismatch(tmp_path, archive):
    data = bytearray(archive.read_bytes())
    payload = FILES["grp/arr/c/0/0"]
    at = bytes(data).find(payload)
    data[at + 100] ^= 0xFF
    with ZipStore(write(tmp_path, bytes(data))) as store:
        with pytest.raises(ChecksumMismatchError) as info:
            store.get("grp/arr/c/0/0")
        assert isinstance(info.value, CorruptDataError)
        assert info.value.key == "grp/arr/c/0/0"
        assert store.get_range("grp/arr/c/0/0", 99, 3) == payload[99:100] + bytes([payload[100] ^ 0xFF]) + payload[101:102]
        assert store.get("zarr.json") == FILES["zarr.json"]


@pytest.mark.parametrize("name", ["../evil", "/abs", "a\\b", "a//b", "a/./b", "a/../../b", "C:/x", "../"])
def test_hostile_names_refused_at_open(tmp_path, name):
    path = tmp_path / "evil.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("zarr.json", b"{}")
        zf.writestr(zipfile.ZipInfo(name), b"pwned")
    with pytest.raises(CorruptDataError) as info:
        ZipStore(path)
    assert str(path) in str(info.value) and repr(name) in str(info.value)


def test_nul_and_empty_names_refused(tmp_path):
    for name in (b"a\x00b", b"", b"/"):
        with pytest.raises(CorruptDataError):
            ZipStore(write(tmp_path, build_zip([(name, b"x", 0)])))
    with pytest.raises(CorruptDataError):  # flagged UTF-8 but not UTF-8
        ZipStore(write(tmp_path, build_zip([(b"\xff\xfe", b"x", 0x800)])))


def test_every_truncation_and_byte_flip_raises_only_own_errors(tmp_path):
    """Every cut of an archive (ZIP64 and plain) is refused at open (its end record is gone);
    every byte set to 0x00, 0xFF or flipped is refused (at open, or by the read of the entry
    it damages) or, where the byte is one no reader needs (a time stamp, a version), reads
    exactly what was written — only the library's errors, and never other bytes."""
    written = {"zarr.json": b"{}", "a/c/0": b"abcdef"}
    data = build_zip([(b"zarr.json", b"{}", 0), (b"a/c/0", b"abcdef", 0)], zip64=True)
    data2 = build_zip([(b"zarr.json", b"{}", 0), (b"a/c/0", b"abcdef", 0)])
    for base in (data, data2):
        cuts = [read_everything(write(tmp_path, base[:cut], "fuzz.zip"), written) for cut in range(len(base))]
        assert cuts == ["refused at open"] * len(base)
        stored = [base.index(b"zarr.json{}") + 9, base.index(b"a/c/0abcdef") + 5]  # (local name, then data)
        data_bytes = set(range(stored[0], stored[0] + 2)) | set(range(stored[1], stored[1] + 6))
        verdicts = {}
        for pos in range(len(base)):
            for value in (0x00, 0xFF, base[pos] ^ 0x01):
                bad = bytearray(base)
                bad[pos] = value
                if bad == base:
                    continue
                verdict = read_everything(write(tmp_path, bytes(bad), "fuzz.zip"), written)
                verdicts[verdict] = verdicts.get(verdict, 0) + 1
                if pos in data_bytes:  # a changed stored byte: its entry's read refuses (CRC-32)
                    assert verdict == "damage found", (pos, value)
        assert verdicts["intact"] and verdicts["damage found"] >= 3 * len(data_bytes) - 2 and \
            verdicts["refused at open"], verdicts


# -- store behaviour -------------------------------------------------------

def test_writes_raise_read_only(archive):
    with ZipStore(archive) as store:
        with pytest.raises(ReadOnlyError):
            store.set("zarr.json", b"x")
        with pytest.raises(ReadOnlyError):
            store.write_at("new", 0, b"x")
        with pytest.raises(ReadOnlyError):
            store.replace_atomic("zarr.json", b"x")
        with pytest.raises(ReadOnlyError):
            store.delete("zarr.json")
        store.sync(["zarr.json"])
        assert store.get("zarr.json") == FILES["zarr.json"]


def test_close_and_reads_after_close(archive):
    store = ZipStore(archive)
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        store.get("zarr.json")
    assert list(store.list()) == sorted(FILES)  # listing needs no file access


def test_concurrent_range_reads(archive):
    value = FILES["grp/arr/c/0/0"]
    errors = []
    with ZipStore(archive) as store:
        def worker(seed):
            try:
                for i in range(200):
                    start = (seed * 31 + i * 7) % len(value)
                    assert store.get_range("grp/arr/c/0/0", start, 13) == value[start:start + 13]
                    assert store.get("grp/zarr.json") == FILES["grp/zarr.json"]
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)
        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []


def test_bytesio_roundtrip_matches_zipfile(tmp_path):
    buf = io.BytesIO()
    make_zip(buf, FILES)
    path = write(tmp_path, buf.getvalue())
    with ZipStore(path) as store, zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            assert store.get(info.filename) == zf.read(info.filename)
