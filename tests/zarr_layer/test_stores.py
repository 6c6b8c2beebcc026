"""Store interface: key validation, ranges, positional writes, atomic replace, listing, sync."""
import os

import pytest

from molrec_raw.errors import InvalidKeyError, ReadOnlyError, StoreError
from molrec_raw.zarr import DirectoryStore, MemoryStore


@pytest.fixture(params=["memory", "directory"])
def store(request, tmp_path):
    return MemoryStore() if request.param == "memory" else DirectoryStore(tmp_path / "root")


@pytest.mark.parametrize("key", ["/abs", "../x", "a/../../x", "a\\b", "a//b", "a/", "", "a\x00b", ".", "a/./b",
                                 "C:/x"])
def test_hostile_keys_refused_everywhere(store, key, tmp_path):
    for op in (lambda: store.get(key), lambda: store.set(key, b"x"), lambda: store.write_at(key, 0, b"x"),
               lambda: store.replace_atomic(key, b"x"), lambda: store.delete(key),
               lambda: store.get_range(key, 0, 1)):
        with pytest.raises(InvalidKeyError):
            op()
    assert not (tmp_path / "x").exists()


def test_get_set_range_delete(store):
    assert store.get("a/b") is None and store.get_range("a/b", 0, 1) is None
    store.set("a/b", b"0123456789")
    assert store.get("a/b") == b"0123456789"
    assert store.get_range("a/b", 2, 3) == b"234"
    assert store.get_range("a/b", -4, 4) == b"6789"
    assert store.get_range("a/b", 8, 10) == b"89"
    assert store.get_range("a/b", 20, 5) == b""
    assert store.size("a/b") == 10
    store.delete("a/b")
    store.delete("a/b")
    assert store.get("a/b") is None


def test_write_at_is_positional_and_never_truncates(store):
    store.write_at("f", 0, b"abcdef")
    store.write_at("f", 2, b"XY")
    assert store.get("f") == b"abXYef"
    store.write_at("f", 8, b"Z")
    assert store.get("f") == b"abXYef\x00\x00Z"


def test_replace_atomic_leaves_no_temp_files(store):
    store.replace_atomic("d/zarr.json", b"{}")
    store.replace_atomic("d/zarr.json", b"{1}")
    assert store.get("d/zarr.json") == b"{1}"
    assert list(store.list("")) == ["d/zarr.json"]


def test_list_and_list_dir(store):
    for key in ["zarr.json", "a/zarr.json", "a/c/0", "a/c/1", "b/x/zarr.json"]:
        store.set(key, b"1")
    assert list(store.list("")) == sorted(["zarr.json", "a/zarr.json", "a/c/0", "a/c/1", "b/x/zarr.json"])
    assert list(store.list("a/")) == ["a/c/0", "a/c/1", "a/zarr.json"]
    assert store.list_dir("") == (["zarr.json"], ["a", "b"])
    assert store.list_dir("a/c/") == (["0", "1"], [])


def test_listing_hides_stale_temp_files(tmp_path):
    s = DirectoryStore(tmp_path)
    s.set("k", b"1")
    (tmp_path / "k.molrec-tmp.123.1").write_bytes(b"partial")
    assert list(s.list("")) == ["k"]


def test_sync_fsyncs_files_and_directories(tmp_path, monkeypatch):
    s = DirectoryStore(tmp_path)
    s.set("a/b", b"1")
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd)))
    s.sync(["a/b", "missing"])
    assert str(tmp_path / "a" / "b") in synced and str(tmp_path / "a") in synced


def test_read_only_stores_refuse_writes(tmp_path):
    for s in (MemoryStore(read_only=True), DirectoryStore(tmp_path, read_only=True)):
        for op in (lambda: s.set("k", b""), lambda: s.write_at("k", 0, b""), lambda: s.delete("k"),
                   lambda: s.replace_atomic("k", b"")):
            with pytest.raises(ReadOnlyError):
                op()


def test_sync_covers_directories_created_since_the_last_sync(tmp_path, monkeypatch):
    """A durable commit that creates nested nodes makes their directory entries durable:
    every directory created since the last sync and the directory it was created in are
    fsynced, even when no synced key lives directly in them (a new group's chunk keys)."""
    s = DirectoryStore(tmp_path / "r")
    s.set("zarr.json", b"{}")
    s.sync(["zarr.json"])
    s.set("g/h/arr/c/0/0", b"chunk")
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd)))
    s.sync(["g/h/arr/c/0/0"])
    for d in ("r", "r/g", "r/g/h", "r/g/h/arr", "r/g/h/arr/c", "r/g/h/arr/c/0"):
        assert str(tmp_path / d) in synced, d
    synced.clear()
    s.set("g/h/arr/c/0/1", b"chunk")  # nothing new created: only the key and its directory
    s.sync(["g/h/arr/c/0/1"])
    assert synced == [str(tmp_path / "r/g/h/arr/c/0/1"), str(tmp_path / "r/g/h/arr/c/0")]


def test_no_write_or_delete_through_a_symlink_leaving_the_store(tmp_path):
    """A symbolic link placed inside a store (by someone else) never carries a write or a
    delete outside it: a linked directory is refused, a linked file is not followed."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_bytes(b"keep")
    root = tmp_path / "store"
    s = DirectoryStore(root)
    s.set("a/zarr.json", b"{}")
    os.symlink(outside, root / "evil")
    for call in (lambda: s.set("evil/x", b"1"), lambda: s.write_at("evil/victim", 0, b"XXXX"),
                 lambda: s.delete("evil/victim"), lambda: s.set("evil/deeper/x", b"1")):
        with pytest.raises(StoreError, match="symbolic link"):
            call()
    os.symlink(outside / "victim", root / "a" / "c")  # a file link inside a real directory
    with pytest.raises(StoreError):
        s.write_at("a/c", 0, b"XXXX")  # O_NOFOLLOW: refused
    s.set("a/c", b"new")  # an atomic replace swaps the link itself
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]
    assert (outside / "victim").read_bytes() == b"keep" and (root / "a" / "c").read_bytes() == b"new"
    inside = root / "a" / "sub"
    inside.mkdir()
    os.symlink(inside, root / "alias")  # a link that stays inside the store is fine
    s.set("alias/k", b"v")
    assert (inside / "k").read_bytes() == b"v"


def test_zarr_durable_replace_fsyncs_the_new_bytes_before_the_rename_and_the_directory_after(tmp_path, monkeypatch):
    """``replace_durable``: the temporary file holding the new bytes is fsynced before it is
    renamed over the key (a power cut leaves the old or the new value, never an empty one),
    and ``sync`` then fsyncs the key's directory, so that the rename itself lasts."""
    from molrec_raw.zarr.fileops import FileOps

    events = []
    real_fsync = os.fsync

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    class Recording(FileOps):
        def replace(self, src, dst):
            events.append(("replace", src, dst))
            super().replace(src, dst)

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc/self/fd to name an fsynced descriptor")
    store = DirectoryStore(tmp_path / "s", fileops=Recording())
    store.set("a/zarr.json", b"old")
    store.sync_all()
    monkeypatch.setattr(os, "fsync", fsync)
    events.clear()
    store.replace_durable("a/zarr.json", b"new")
    store.sync(["a/zarr.json"])
    renames = [i for i, e in enumerate(events) if e[0] == "replace"]
    assert len(renames) == 1, events
    src = events[renames[0]][1]
    assert ("fsync", src) in events[:renames[0]], events       # the new bytes, before the rename
    assert ("fsync", str(tmp_path / "s" / "a")) in events[renames[0]:], events  # the directory, after
    assert (tmp_path / "s" / "a" / "zarr.json").read_bytes() == b"new"
