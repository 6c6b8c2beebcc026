"""Any collection file is safe to open (issue 34): the LMDB structure check that runs before
liblmdb maps a file (molrec_raw/collection/structure.py, lmdb#L18, lmdb#L19).

A copy cut short is refused, saying so, instead of killing the process with SIGBUS; a damaged
page is refused naming the page; the check agrees with liblmdb's own counts on files LMDB
wrote (small, deep, with overflow values, after deletes); read-only commands leave a file that
is not a collection untouched (no ``-lock`` file); ``check_structure=False`` is the explicit skip.
The fuzz campaign over damaged files is tests/fuzz (lmdb_file) and bench/fuzz.py."""
from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

pytest.importorskip("lmdb", reason="collections need py-lmdb (pip install 'molrec-raw[lmdb]')")

import lmdb  # noqa: E402

import molrec_raw as mr  # noqa: E402
from molrec_raw.cli import main  # noqa: E402
from molrec_raw.collection import structure  # noqa: E402
from molrec_raw.errors import CorruptDataError, MolrecError  # noqa: E402

from collection_helpers import UNITS, molecule, xyzf_schema  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
LAYOUT_64 = struct.calcsize("P") == 8 and sys.byteorder == "little"
needs_64 = pytest.mark.skipif(not LAYOUT_64, reason="the damaged pages below are written in the 64-bit little-endian layout")


def _collection(path: Path, records: int = 200) -> Path:
    with mr.CollectionWriter(path, units=UNITS, schema=xyzf_schema()) as w:
        for r in range(records):
            w.add_record(**molecule(r, n=4, frames=2))
    return path


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return _collection(tmp_path_factory.mktemp("coll") / "c.mrec.lmdb").read_bytes()


def _refused(path: Path, rule: str) -> CorruptDataError:
    with pytest.raises(CorruptDataError) as caught:
        mr.read_collection(path)
    assert caught.value.rule == rule, caught.value
    assert caught.value.message.startswith(str(path)) and caught.value.store == str(path)
    return caught.value


def test_lmdb_L18_a_copy_cut_short_is_refused_not_a_sigbus(tmp_path: Path, written: bytes) -> None:
    """The issue's reproduction: 200 records, the first 30/50/70/90 % kept, read in a child
    process (a SIGBUS there would be exit -7): each is refused as cut short, naming the file."""
    paths = []
    for share in (30, 50, 70, 90):
        path = tmp_path / f"cut{share}.mrec.lmdb"
        path.write_bytes(written[:len(written) * share // 100])
        paths.append(str(path))
    code = ("import sys, molrec_raw as mr\nfrom molrec_raw.errors import CorruptDataError\n"
            "for p in sys.argv[1:]:\n"
            "    try:\n        mr.read_collection(p)\n    except CorruptDataError as e:\n"
            "        assert e.rule == 'lmdb#L18' and 'cut short' in e.message and e.message.startswith(p), e\n"
            "    else:\n        raise SystemExit('read ' + p)\n")
    done = subprocess.run([sys.executable, "-c", code, *paths], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "cut short" in str(_refused(Path(paths[0]), "lmdb#L18"))


def test_lmdb_L18_an_empty_file_and_random_bytes_are_not_collections(tmp_path: Path) -> None:
    empty = tmp_path / "e.mrec.lmdb"
    empty.write_bytes(b"")
    assert _refused(empty, "lmdb#L18").message == f"{empty}: not a collection (empty file)"
    noise = tmp_path / "n.mrec.lmdb"
    noise.write_bytes(bytes(range(256)) * 40)
    assert "not an LMDB data file" in _refused(noise, "lmdb#L18").message
    tiny = tmp_path / "t.mrec.lmdb"
    tiny.write_bytes(b"\x00" * 7)
    _refused(tiny, "lmdb#L18")


def test_lmdb_L1_a_missing_file_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "gone.mrec.lmdb"
    with pytest.raises(MolrecError) as caught:
        mr.read_collection(missing)
    assert caught.value.message.startswith(f"{missing}: no such file") and caught.value.rule == "lmdb#L1"


def _page_size(data: bytes) -> int:
    return struct.unpack_from("=I", data, structure.PAGE_HEADER.size + 24)[0]


def _tree_pages(data: bytes) -> List[int]:
    """Page numbers of every branch and leaf page (flags at offset 10 of the page header)."""
    size = _page_size(data)
    return [p for p in range(2, len(data) // size) if struct.unpack_from("=H", data, p * size + 10)[0] in (1, 2)]


@needs_64
@pytest.mark.parametrize("damage", ["child past the end", "leaf flags", "node pointer", "overflow past the end",
                                    "page number", "keys out of order", "child is a meta page"])
def test_lmdb_L19_a_damaged_page_is_refused_naming_the_page(tmp_path: Path, damage: str) -> None:
    """One page number, flag or node changed where a reader would follow it: refused under
    lmdb#L19 with the page named (never mapped)."""
    path = _collection(tmp_path / "c.mrec.lmdb", records=60)  # a branch root over leaves, frames in overflow
    data = bytearray(path.read_bytes())
    size = _page_size(data)
    pages = len(data) // size
    branches = [p for p in _tree_pages(data) if struct.unpack_from("=H", data, p * size + 10)[0] == 1]
    leaves = [p for p in _tree_pages(data) if struct.unpack_from("=H", data, p * size + 10)[0] == 2]
    assert branches and leaves

    def node(page: int, i: int) -> int:
        return page * size + struct.unpack_from("=H", data, page * size + 16 + 2 * i)[0]

    if damage == "child past the end":
        data[node(branches[0], 1):node(branches[0], 1) + 4] = struct.pack("=HH", pages & 0xFFFF, pages >> 16)
    elif damage == "child is a meta page":
        data[node(branches[0], 1):node(branches[0], 1) + 6] = struct.pack("=HHH", 1, 0, 0)
    elif damage == "leaf flags":
        data[leaves[0] * size + 10] = 0x20  # P_LEAF2
    elif damage == "node pointer":
        data[leaves[0] * size + 16:leaves[0] * size + 18] = struct.pack("=H", size - 2)
    elif damage == "page number":
        data[leaves[-1] * size:leaves[-1] * size + 8] = struct.pack("=Q", leaves[0])
    elif damage == "keys out of order":
        at = node(leaves[0], 0) + 8
        data[at] = 0xFF  # the first key of the first leaf now sorts after the rest
    else:
        for page in leaves:
            for i in range((struct.unpack_from("=H", data, page * size + 12)[0] - 16) // 2):
                at = node(page, i)
                lo, hi, flags, ksize = struct.unpack_from("=HHHH", data, at)
                if flags == 1:  # F_BIGDATA: an overflow page number follows the key
                    data[at + 8 + ksize:at + 16 + ksize] = struct.pack("=Q", pages + 5)
                    break
            else:
                continue
            break
    damaged = tmp_path / "d.mrec.lmdb"
    damaged.write_bytes(bytes(data))
    error = _refused(damaged, "lmdb#L19")
    assert "page " in error.message and error.offset is not None
    assert not Path(f"{damaged}-lock").exists()


def _stat_agrees(path: Path) -> structure.Structure:
    found = structure.check_file(str(path))
    env = lmdb.open(str(path), subdir=False, readonly=True, lock=False)
    try:
        stat = env.stat()
    finally:
        env.close()
    assert (found.branch_pages, found.leaf_pages, found.overflow_pages, found.entries) == \
        (stat["branch_pages"], stat["leaf_pages"], stat["overflow_pages"], stat["entries"])
    return found


def test_lmdb_L19_the_check_agrees_with_liblmdb_on_files_it_wrote(tmp_path: Path) -> None:
    """Differential: on files liblmdb wrote — a deep tree of small keys, overflow values, a
    tree after deletes and rewrites (separators that are no longer a child's first key, reused
    pages) — the check passes and counts the pages and entries liblmdb's ``stat`` counts."""
    path = tmp_path / "deep.mrec.lmdb"
    env = lmdb.open(str(path), subdir=False, map_size=1 << 28)
    with env.begin(write=True) as txn:
        for i in range(60000):
            txn.put(b"k" + i.to_bytes(8, "big"), i.to_bytes(4, "little") * (i % 7))
        for i in range(0, 300):
            txn.put(b"v" + i.to_bytes(8, "big"), bytes([i % 251]) * (3000 + 97 * i))
    with env.begin(write=True) as txn:
        for i in range(0, 60000, 3):
            txn.delete(b"k" + i.to_bytes(8, "big"))
        for i in range(0, 300, 2):
            txn.put(b"v" + i.to_bytes(8, "big"), b"short")
    with env.begin(write=True) as txn:
        for i in range(1, 300, 4):
            txn.put(b"v" + i.to_bytes(8, "big"), bytes(9000))
    env.close()
    found = _stat_agrees(path)
    assert found.branch_pages > 1 and found.overflow_pages > 0
    with pytest.raises(MolrecError):  # a valid LMDB file, but not a collection: refused after the check
        mr.read_collection(path)


def test_lmdb_L19_keys_in_the_file_s_last_bytes_are_read_whole(tmp_path: Path) -> None:
    """A leaf whose last key ends in the last bytes of the file (its last page): found by the
    suite's fuzz seed when keys were read eight bytes at a time past the file's end."""
    import numpy as np

    from molrec_raw import Block, CollectionWriter, Frame
    path = tmp_path / "tail.mrec.lmdb"
    with CollectionWriter(path, units={"length": "nm"}) as w:
        for r in range(24):
            frames = [Frame({}, {"atoms": Block({"x": np.full(120, float(r))})}) for _ in range(2)]
            w.add_record(system=Frame({}, {"atoms": Block({"element": np.array(["C", "O"] * 60, object)})}),
                         frames=frames)
    _stat_agrees(path)
    for size in range(1, 18):  # keys of every length up to 17 bytes, the first one in the file's last bytes
        env_path = tmp_path / f"k{size}.mrec.lmdb"
        env = lmdb.open(str(env_path), subdir=False, map_size=1 << 20)
        with env.begin(write=True) as txn:
            for i in range(40):
                txn.put(b"k" * (size - 1) + bytes([i]), b"")
        env.close()
        _stat_agrees(env_path)


@needs_64
@pytest.mark.parametrize("size", [24, 25, 40, 64])
def test_lmdb_L19_long_keys_are_read_past_the_node_s_first_bytes(tmp_path: Path, size: int) -> None:
    """Keys longer than the bytes read with each node's header (24) are read by a second pass:
    a tree of them passes with liblmdb's counts, and one key changed is refused naming its page."""
    path = tmp_path / f"long{size}.mrec.lmdb"
    env = lmdb.open(str(path), subdir=False, map_size=1 << 24)
    with env.begin(write=True) as txn:
        for i in range(1500):
            txn.put(b"p" * (size - 8) + i.to_bytes(8, "big"), b"v")
    env.close()
    assert _stat_agrees(path).branch_pages >= 1
    data = bytearray(path.read_bytes())
    page_size = _page_size(data)
    leaf = min(p for p in _tree_pages(data) if struct.unpack_from("=H", data, p * page_size + 10)[0] == 2)
    node = leaf * page_size + struct.unpack_from("=H", data, leaf * page_size + 16)[0]
    data[node + 8 + size - 1] = 0xFF  # the leaf's first key's last byte: now after its second key
    damaged = tmp_path / f"damaged{size}.mrec.lmdb"
    damaged.write_bytes(bytes(data))
    with pytest.raises(CorruptDataError) as caught:
        structure.check_file(str(damaged))
    assert caught.value.rule == "lmdb#L19" and f"page {leaf}: keys out of order" in caught.value.message


@needs_64
def test_lmdb_L19_two_values_sharing_an_overflow_page_are_refused(tmp_path: Path) -> None:
    """Two big values of different leaves given the same overflow run: refused under lmdb#L19
    as a page reached twice, naming a leaf that holds one of them."""
    path = tmp_path / "big.mrec.lmdb"
    env = lmdb.open(str(path), subdir=False, map_size=1 << 24)
    with env.begin(write=True) as txn:
        for i in range(400):
            txn.put(b"v" + i.to_bytes(8, "big"), bytes([i % 251]) * 5000)
    env.close()
    _stat_agrees(path)
    data = bytearray(path.read_bytes())
    size = _page_size(data)
    big = []  # (leaf, offset of the page number) of each leaf's first big value
    for page in _tree_pages(data):
        if struct.unpack_from("=H", data, page * size + 10)[0] == 2:
            at = page * size + struct.unpack_from("=H", data, page * size + 16)[0]
            big.append((page, at + 8 + struct.unpack_from("=H", data, at + 6)[0]))
    assert len(big) >= 2
    (_, first), (_, last) = big[0], big[-1]
    data[last:last + 8] = data[first:first + 8]
    damaged = tmp_path / "shared.mrec.lmdb"
    damaged.write_bytes(bytes(data))
    with pytest.raises(CorruptDataError) as caught:
        structure.check_file(str(damaged))
    assert caught.value.rule == "lmdb#L19" and "overlaps another run" in caught.value.message
    assert any(f"page {leaf}: " in caught.value.message for leaf, _ in (big[0], big[-1]))


def test_lmdb_L18_a_file_of_an_empty_database_passes(tmp_path: Path) -> None:
    path = tmp_path / "empty-db.mrec.lmdb"
    env = lmdb.open(str(path), subdir=False, map_size=1 << 20)
    with env.begin(write=True) as txn:
        txn.put(b"x", b"y")
        txn.delete(b"x")
    env.close()
    assert _stat_agrees(path).entries == 0


def test_lmdb_L18_the_skip_is_explicit(tmp_path: Path, written: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """``read_collection(path, check_structure=False)`` does not check (a file known good);
    the default does, and so does a reader unpickled from a checking one."""
    import pickle

    path = tmp_path / "c.mrec.lmdb"
    path.write_bytes(written)
    calls: List[str] = []
    real = structure.check_file
    monkeypatch.setattr(structure, "check_file", lambda where: calls.append(where) or real(where))
    with mr.read_collection(path, check_structure=False) as c:
        assert len(c) == 200 and calls == []
    with mr.read_collection(path) as c:
        assert calls == [str(path)]
        blob = pickle.dumps(c)
    with pickle.loads(blob) as again:
        assert len(again) == 200 and calls == [str(path)] * 2


READ_ONLY = [["validate"], ["inspect"], ["dump"], ["explain"], ["cat"]]


@pytest.mark.parametrize("content", [b"", bytes(range(251)) * 37], ids=["empty", "random"])
def test_lmdb_L18_read_only_commands_leave_a_non_collection_untouched(tmp_path: Path, content: bytes,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """validate, inspect, dump, explain, cat and read_collection on a 0-byte file and on random
    bytes named ``*.mrec.lmdb``: each refuses, and the directory is exactly as it was (no
    ``-lock`` file beside it)."""
    path = tmp_path / "x.mrec.lmdb"
    path.write_bytes(content)
    before = sorted(os.listdir(tmp_path))
    for command in READ_ONLY:
        assert main([*command, str(path)]) != 0
        said = capsys.readouterr()
        assert str(path) in said.out + said.err, command
        assert sorted(os.listdir(tmp_path)) == before, command
    with pytest.raises(CorruptDataError):
        mr.read_collection(path)
    assert sorted(os.listdir(tmp_path)) == before and path.read_bytes() == content
    if not content:
        assert "not a collection (empty file)" in str(pytest.raises(CorruptDataError, mr.read_collection, path).value)
