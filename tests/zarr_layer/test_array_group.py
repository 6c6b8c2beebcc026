"""Arrays and groups: indexing, partial writes, resize/append, missing chunks, hierarchy."""
import json
import math

import numpy as np
import pytest

from molrec_raw.errors import (
    InvalidKeyError, InvalidValueError, NodeExistsError, NodeNotFoundError, ReadOnlyError,
)
from molrec_raw.zarr import DirectoryStore, MemoryStore, open_array, open_group


@pytest.fixture(params=["memory", "directory"])
def store(request, tmp_path):
    return MemoryStore() if request.param == "memory" else DirectoryStore(tmp_path / "s.zarr")


SELECTIONS = [
    (), Ellipsis, 0, -1, slice(None), slice(2, 9), slice(None, None, 3), slice(9, 1, -2), slice(None, None, -1),
    (slice(1, 8, 2), -2), (Ellipsis, 1), (3, Ellipsis), (slice(100, 200),), (slice(7, 2),),
    (slice(None, None, 7), slice(None, None, 5)),
]


@pytest.mark.parametrize("sharded", [False, True])
@pytest.mark.parametrize("sel", SELECTIONS, ids=repr)
def test_read_selections_match_numpy(store, sel, sharded):
    ref = np.arange(110, dtype="<i4").reshape(11, 10)
    kw = {"chunks": (2, 3), "shards": (4, 6)} if sharded else {"chunks": (3, 4)}
    a = open_array(store, "a", mode="w", shape=ref.shape, dtype="int32", **kw)
    a[...] = ref
    np.testing.assert_array_equal(a[sel], ref[sel])


@pytest.mark.parametrize("sharded", [False, True])
@pytest.mark.parametrize("sel", SELECTIONS, ids=repr)
def test_write_selections_match_numpy(store, sel, sharded):
    ref = np.full((11, 10), 7, dtype="<f8")
    kw = {"chunks": (2, 3), "shards": (4, 6)} if sharded else {"chunks": (3, 4)}
    a = open_array(store, "a", mode="w", shape=ref.shape, dtype="float64", fill_value=7.0, **kw)
    value = np.arange(ref[sel].size, dtype="f8").reshape(np.shape(ref[sel])) + 100
    ref[sel] = value
    a[sel] = value
    np.testing.assert_array_equal(a[...], ref)


def test_scalar_broadcast_and_scalar_read(store):
    a = open_array(store, "a", mode="w", shape=(5, 5), dtype="uint8", chunks=(2, 2))
    a[1:4, 1:4] = 9
    assert a[2, 2] == 9 and isinstance(a[2, 2], np.uint8)
    assert a[...].sum() == 81


def test_missing_chunks_read_fill_nan(store):
    a = open_array(store, "a", mode="w", shape=(10,), dtype="float64", chunks=(3,), fill_value=math.nan)
    a[4] = 1.0
    out = a[...]
    assert out[4] == 1.0 and np.isnan(np.delete(out, 4)).all()
    assert sorted(k for k in store.list("a/") if "/c/" in k) == ["a/c/1"]


def test_all_fill_chunk_is_deleted(store):
    a = open_array(store, "a", mode="w", shape=(4,), dtype="int16", chunks=(2,), fill_value=5)
    a[...] = [1, 2, 3, 4]
    a[0:2] = 5
    assert [k for k in store.list("a/") if "/c/" in k] == ["a/c/1"]


def test_negative_zero_not_dropped_as_fill(store):
    a = open_array(store, "a", mode="w", shape=(2,), dtype="float64", chunks=(2,), fill_value=0.0)
    a[...] = -0.0
    assert math.copysign(1, a[0]) == -1


def test_zero_d_array(store):
    a = open_array(store, "z", mode="w", shape=(), dtype="complex128", chunks=())
    a[...] = 1 + 2j
    assert a[()] == 1 + 2j and a[...] == 1 + 2j
    assert store.get("z/c") is not None


def test_zero_length_axis(store):
    a = open_array(store, "e", mode="w", shape=(0, 3), dtype="int64", chunks=(4, 3))
    assert a[...].shape == (0, 3)
    a.append(np.ones((2, 3), "i8"))
    np.testing.assert_array_equal(a[...], np.ones((2, 3)))


def test_append_lands_chunks_before_metadata():
    class Recording(MemoryStore):
        log = []

        def set(self, key, value):
            self.log.append(key)
            super().set(key, value)

        replace_atomic = set

    store = Recording()
    a = open_array(store, "a", mode="w", shape=(0,), dtype="int32", chunks=(4,))
    Recording.log.clear()
    a.append(np.arange(10))
    assert Recording.log[-1] == "a/zarr.json" and Recording.log.count("a/zarr.json") == 1
    assert set(Recording.log[:-1]) == {"a/c/0", "a/c/1", "a/c/2"}
    assert open_array(store, "a").shape == (10,)


def test_append_other_axis(store):
    a = open_array(store, "a", mode="w", shape=(2, 3), dtype="int32", chunks=(2, 2))
    a[...] = np.arange(6).reshape(2, 3)
    a.append(np.full((2, 2), 9), axis=1)
    np.testing.assert_array_equal(a[...], np.hstack([np.arange(6).reshape(2, 3), np.full((2, 2), 9)]))
    with pytest.raises(InvalidValueError):
        a.append(np.ones((3, 3)), axis=1)


def test_resize_shrink_then_grow_shows_fill(store):
    a = open_array(store, "a", mode="w", shape=(10,), dtype="int32", chunks=(4,), fill_value=-1)
    a[...] = np.arange(10)
    a.resize((5,))
    assert [k for k in store.list("a/") if "/c/" in k] == ["a/c/0", "a/c/1"]
    a.resize((12,))
    np.testing.assert_array_equal(a[...], [0, 1, 2, 3, 4] + [-1] * 7)
    assert open_array(store, "a").shape == (12,)


def test_strings_with_empty_and_non_ascii(store):
    values = np.array(["", "héllo", "日本", "🙂", "x" * 1000], dtype=object)
    a = open_array(store, "s", mode="w", shape=(5,), dtype=str, chunks=(2,))
    a[...] = values
    assert a[...].tolist() == values.tolist()
    assert a[::-2].tolist() == values[::-2].tolist()
    with pytest.raises(InvalidValueError):
        a[0] = 5


def test_out_of_bounds_and_bad_index(store):
    a = open_array(store, "a", mode="w", shape=(4,), dtype="int8", chunks=(2,))
    for bad in (4, -5, (0, 0), [0, 1], 1.5, (Ellipsis, Ellipsis)):
        with pytest.raises(InvalidValueError):
            a[bad]
    with pytest.raises(InvalidValueError):
        a[0:2] = [1, 2, 3]


def test_group_hierarchy_and_members(store):
    g = open_group(store, "w", attributes={"title": "t"})
    sub = g.create_group("a/b", attributes={"x": None})
    assert json.loads(store.get("a/zarr.json"))["node_type"] == "group"
    g.create_array("a/arr", shape=(2,), dtype="int8", chunks=(2,))
    assert [n for n, _ in g["a"].members()] == ["arr", "b"]
    assert sub.attrs["x"] is None
    assert "a/b" in g and "nope" not in g
    with pytest.raises(NodeNotFoundError):
        g["nope"]
    with pytest.raises(NodeExistsError):
        g.create_group("a")
    assert g.require_group("a").path == "a"
    assert g.require_group("new").path == "new"
    with pytest.raises(NodeExistsError):
        g.require_group("a/arr")


@pytest.mark.parametrize("name", ["", ".", "..", "__x", "zarr.json", "a//b", "../x"])
def test_bad_node_names_refused(store, name):
    g = open_group(store, "w")
    with pytest.raises(InvalidKeyError):
        g.create_group(name)


def test_attrs_persist_atomically(store):
    g = open_group(store, "w")
    g.attrs["a"] = 1
    g.attrs.update({"b": [1, 2], "c": None})
    del g.attrs["a"]
    reopened = open_group(store, "r")
    assert dict(reopened.attrs) == {"b": [1, 2], "c": None}
    with pytest.raises(ReadOnlyError):
        reopened.attrs["x"] = 1


def test_modes(tmp_path):
    path = tmp_path / "m.zarr"
    with pytest.raises(NodeNotFoundError):
        open_group(path, "r")
    with pytest.raises(NodeNotFoundError):
        open_group(path, "r+")
    g = open_group(path, "a", attributes={"v": 1})
    g.create_array("x", shape=(3,), dtype="int8", chunks=(3,))[...] = 1
    assert open_group(path, "a").attrs["v"] == 1
    g2 = open_group(path, "w")
    assert list(g2) == [] and dict(g2.attrs) == {}
    with pytest.raises(ReadOnlyError):
        open_group(path, "r").create_group("y")
    a = open_array(path, "arr", mode="w", shape=(2,), dtype="int8", chunks=(1,))
    a[...] = [1, 2]
    with pytest.raises(ReadOnlyError):
        open_array(path, "arr", mode="r")[0] = 3
    assert open_array(path, "arr", mode="a").shape == (2,)


def test_big_endian_arrays_read_native(store):
    a = open_array(store, "b", mode="w", shape=(3,), dtype="float64", chunks=(2,),
                   codecs=[{"name": "bytes", "configuration": {"endian": "big"}}])
    a[...] = [1.5, -2.0, 3.25]
    assert store.get("b/c/0") == np.array([1.5, -2.0], ">f8").tobytes()
    out = a[...]
    assert out.dtype == np.dtype("<f8") and out.tolist() == [1.5, -2.0, 3.25]


def test_partial_shard_read_touches_only_needed_ranges():
    class Counting(MemoryStore):
        def __init__(self):
            super().__init__()
            self.ranges = []
            self.whole = []

        def get(self, key):
            self.whole.append(key)
            return super().get(key)

        def get_range(self, key, start, length=None):
            self.ranges.append((key, start, length))
            return super().get_range(key, start, length)

    store = Counting()
    a = open_array(store, "a", mode="w", shape=(64,), dtype="float64", chunks=(4,), shards=(64,))
    a[...] = np.arange(64.0)
    store.ranges.clear()
    store.whole.clear()
    assert a[9] == 9.0
    assert store.whole == []
    assert len(store.ranges) == 2  # the index, then one inner chunk
    index_read, chunk_read = store.ranges
    assert index_read[1] < 0 and chunk_read[2] < 64  # a suffix, then one small range


def test_whole_chunk_read_through_two_compressors(store):
    """Two size-changing bytes->bytes codecs in a row (zstd then gzip): the whole-chunk
    fast path cannot reuse a scratch buffer of unknown size (a crash found by the type check)."""
    codecs = [{"name": "bytes", "configuration": {"endian": "little"}},
              {"name": "zstd", "configuration": {"level": 1, "checksum": False}},
              {"name": "gzip", "configuration": {"level": 1}}, {"name": "crc32c"}]
    a = open_group(store, mode="w").create_array("z", shape=(100,), dtype="float64", chunks=(25,), codecs=codecs)
    data = np.linspace(0.0, 1.0, 100)
    a[...] = data
    assert np.array_equal(open_group(store)["z"][...], data)
    assert np.array_equal(open_group(store)["z"][30:40], data[30:40])
