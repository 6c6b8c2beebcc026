"""A zip archive read over HTTP by the same parser as a local one (zarr-v3-subset#9.2,
trajectory#15): the end record by one suffix range (ZIP64 too), the central directory once,
each entry by range — and hostile archives fail with the library's errors only."""
from __future__ import annotations

import random
import struct
import zipfile

import pytest

from molrec_raw.errors import CorruptDataError, MolrecError
from molrec_raw.zarr import ZipStore
from molrec_raw.zarr.httpstore import HttpFile
from molrec_raw.zarr.zipstore import write_zip
from remote_helpers import faulty_server

FILES = {"zarr.json": b"{}", "a/zarr.json": b'{"x": 1}', "a/c/0": bytes(range(256)) * 40,
         "a/c/1": b"", "b/deep/c/0/0": b"\x01" * 999}


def remote(server, name):
    return ZipStore(HttpFile(server.url_of(name), retries=0, timeout=5.0))


def every_value(store):
    out = {}
    for key in store.list():
        out[key] = (store.get(key), store.get_range(key, 3, 7), store.get_range(key, -5), store.size(key))
    return out


@pytest.fixture
def archive(tmp_path):
    with zipfile.ZipFile(tmp_path / "a.mrec.zip", "w") as zf:
        for name, data in FILES.items():
            zf.writestr(name, data)
    with faulty_server(tmp_path) as server:
        yield server, tmp_path / "a.mrec.zip"


def test_zarr_v3_subset_9_2_remote_zip_opens_with_one_suffix_range(archive):
    server, path = archive
    store = remote(server, path.name)
    assert server.log == [("GET", "/a.mrec.zip", "bytes=-65557")]  # end record + central directory
    assert list(store.list()) == list(ZipStore(path).list())
    assert store.list_dir("a/") == (["zarr.json"], ["c"])
    assert every_value(store) == every_value(ZipStore(path))


def test_zarr_v3_subset_9_2_first_read_of_an_entry_brings_its_local_header(tmp_path):
    with zipfile.ZipFile(tmp_path / "far.zip", "w") as zf:
        zf.writestr("a/c/0", FILES["a/c/0"])
        zf.writestr("padding", bytes(200_000))  # keeps a/c/0 out of the tail read at open
    server = faulty_server(tmp_path)
    store = remote(server, "far.zip")
    before = server.requests
    assert store.get_range("a/c/0", 100, 10) == FILES["a/c/0"][100:110]
    assert store.get_range("a/c/0", 5000, 10) == FILES["a/c/0"][5000:5010]
    assert server.requests - before == 2  # header + bytes in one request, then one per range
    assert store.get_ranges("a/c/0", [(0, 10), (10, 10), (30, 5)]) == [
        FILES["a/c/0"][0:10], FILES["a/c/0"][10:20], FILES["a/c/0"][30:35]]
    assert server.requests - before == 3  # three neighbouring ranges, one request
    server.close()


def test_zarr_v3_subset_9_2_zip64_archive_over_http(tmp_path):
    sources = []
    for name, data in FILES.items():
        source = tmp_path / "src" / name.replace("/", "_")
        source.parent.mkdir(exist_ok=True)
        source.write_bytes(data)
        sources.append((name, source))
    write_zip(tmp_path / "z.mrec.zip", sorted(sources), force_zip64=True)
    with faulty_server(tmp_path) as server:
        store = remote(server, "z.mrec.zip")
        assert server.requests == 1
        assert every_value(store) == every_value(ZipStore(tmp_path / "z.mrec.zip"))


def test_zarr_v3_subset_9_2_central_directory_beyond_the_tail_is_read_once(tmp_path):
    with zipfile.ZipFile(tmp_path / "big.zip", "w") as zf:
        for i in range(1500):
            zf.writestr(f"group/{'n' * 40}/{i:06d}", b"v%d" % i)
    with faulty_server(tmp_path) as server:
        store = remote(server, "big.zip")
        assert server.requests == 2  # the suffix, then the rest of the central directory
        assert len(list(store.list())) == 1500
        assert store.get(f"group/{'n' * 40}/000777") == b"v777"
        assert server.requests == 3


def test_zarr_v3_subset_9_2_lying_entry_size_is_refused_before_any_read(tmp_path):
    with zipfile.ZipFile(tmp_path / "lie.zip", "w") as zf:
        zf.writestr("k", b"0123456789")
    data = bytearray((tmp_path / "lie.zip").read_bytes())
    cen = data.find(b"PK\x01\x02")
    struct.pack_into("<II", data, cen + 20, 10**9, 10**9)
    (tmp_path / "lie.zip").write_bytes(bytes(data))
    with faulty_server(tmp_path) as server:
        store = remote(server, "lie.zip")
        before = server.requests
        with pytest.raises(CorruptDataError, match="past end"):
            store.get("k")
        assert server.requests == before


def test_zarr_v3_subset_9_2_hostile_remote_archives_raise_only_library_errors(tmp_path):
    with zipfile.ZipFile(tmp_path / "good.zip", "w") as zf:
        for name, data in FILES.items():
            zf.writestr(name, data)
    base = (tmp_path / "good.zip").read_bytes()
    rng = random.Random(15)
    variants = [base[:cut] for cut in range(0, len(base), 97)] + [b"", b"not a zip at all"]
    for _ in range(60):
        bad = bytearray(base)
        pos = rng.randrange(len(bad))
        bad[pos] = rng.choice([0x00, 0xFF, bad[pos] ^ 0x01])
        variants.append(bytes(bad))
    for i, variant in enumerate(variants):
        (tmp_path / f"v{i}.zip").write_bytes(variant)
    cuts = len(range(0, len(base), 97))
    with faulty_server(tmp_path) as server:
        verdicts = [_read_hostile(lambda: remote(server, f"v{i}.zip"), FILES) for i in range(len(variants))]
    assert verdicts[:cuts + 2] == ["refused at open"] * (cuts + 2)  # a cut archive has no end record
    flips = verdicts[cuts + 2:]
    assert flips.count("damage found") >= 50, flips  # a flipped data byte is found (CRC-32) by its read


def _read_hostile(open_store, files):
    """Every key of a damaged archive read whole and by range: a refusal is the library's
    (a MolrecError naming its rule); a whole
    read that succeeds gives exactly what was written there (the entry's CRC-32), a range the
    same bytes as the whole read.  The verdict: ``refused at open``, ``intact`` (every
    written key read back as written) or ``damage found`` (some read refused or a key lost)."""
    try:
        store = open_store()
    except MolrecError:
        return "refused at open"
    intact = set(store.list()) == set(files)
    for key in store.list():
        try:
            whole = store.get(key)
        except MolrecError as exc:
            assert exc.rule is not None, exc
            intact = False
            continue
        assert whole in files.values(), key  # never bytes nobody wrote
        if key in files:
            assert whole == files[key], key
        try:
            assert store.get_range(key, 1, 5) == whole[1:6], key  # (offset, length)
        except MolrecError:
            intact = False
    return "intact" if intact else "damage found"
