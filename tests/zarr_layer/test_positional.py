"""Landing data without publishing, positional shard appends (index at the start), and the
metadata-only shrink that a reopening trajectory writer needs (trajectory §10–§11)."""
import numpy as np
import pytest

from molrec_raw.errors import InvalidValueError
from molrec_raw.zarr import DirectoryStore, MemoryStore, open_array

F64 = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]


class Recording(MemoryStore):
    """Logs every mutating call as (verb, key, offset)."""

    def __init__(self):
        super().__init__()
        self.log = []

    def set(self, key, value):
        self.log.append(("set", key, None))
        super().set(key, value)

    def replace_atomic(self, key, value):
        self.log.append(("replace", key, None))
        super().replace_atomic(key, value)

    def write_at(self, key, offset, value):
        self.log.append(("write_at", key, offset))
        super().write_at(key, offset, value)


def growing(store, location="start"):
    return open_array(store, "t", mode="w", shape=(0, 3), dtype="float64", chunks=(4, 3), shards=(16, 3),
                      codecs=F64, shard_index_location=location)


def test_positional_appends_match_numpy_and_never_rewrite_a_shard():
    store = Recording()
    a = growing(store)
    ref = np.empty((0, 3))
    rng = np.random.default_rng(1)
    for rows in [1, 2, 3, 4, 5, 1, 7, 9]:
        block = rng.normal(size=(rows, 3))
        n = len(ref)
        store.log.clear()
        keys = a.land(slice(n, n + rows), block, shape=(n + rows, 3), positional=True)
        a.publish((n + rows, 3))
        ref = np.vstack([ref, block])
        np.testing.assert_array_equal(a[...], ref)
        np.testing.assert_array_equal(open_array(store, "t")[...], ref)
        assert set(keys) <= {"t/c/0/0", "t/c/1/0", "t/c/2/0"}
        # data first, the index (offset 0) after the data of its shard, zarr.json last
        verbs = [(verb, offset) for verb, key, offset in store.log if key != "t/zarr.json"]
        assert store.log[-1] == ("replace", "t/zarr.json", None)
        for key in keys:
            writes = [offset for verb, k, offset in store.log if k == key and verb == "write_at"]
            if writes:  # an existing shard: tail appends, then the index in place
                assert writes[-1] == 0 and all(o > 0 for o in writes[:-1])
        assert all(verb in ("write_at", "set") for verb, _ in verbs)


def test_dead_bytes_are_bounded_by_one_chunk_per_flush():
    store = MemoryStore()
    a = growing(store)
    for n in range(16):  # one row at a time: the partial inner chunk is re-encoded each time
        a.land(slice(n, n + 1), np.full((1, 3), n, dtype=float), shape=(n + 1, 3), positional=True)
        a.publish((n + 1, 3))
    shard = store.get("t/c/0/0")
    page = 4096  # index and zeros: the index page's own sector (sharding.SECTOR_ALIGN)
    live = 4 * (4 * 3 * 8 + 4)  # four full inner chunks with their crc
    assert len(shard) <= page + live + 16 * (4 * 3 * 8 + 4)
    np.testing.assert_array_equal(a[...][:, 0], np.arange(16.0))


def test_landed_but_unpublished_rows_stay_invisible():
    store = MemoryStore()
    a = growing(store)
    a.land(slice(0, 4), np.ones((4, 3)), shape=(4, 3), positional=True)
    a.publish((4, 3))
    a.land(slice(4, 6), np.full((2, 3), 2.0), shape=(6, 3), positional=True)  # crash before publish
    reopened = open_array(store, "t", mode="r+")
    assert reopened.shape == (4, 3)
    np.testing.assert_array_equal(reopened[...], np.ones((4, 3)))
    reopened.resize((4, 3), reset_stale=False)
    reopened.land(slice(4, 5), np.full((1, 3), 3.0), shape=(5, 3), positional=True)
    reopened.publish((5, 3))
    np.testing.assert_array_equal(open_array(store, "t")[...], np.vstack([np.ones((4, 3)), np.full((1, 3), 3.0)]))


def test_metadata_only_shrink_writes_no_chunk():
    store = Recording()
    a = growing(store)
    a.land(slice(0, 10), np.ones((10, 3)), shape=(10, 3), positional=True)
    a.publish((10, 3))
    store.log.clear()
    a.resize((7, 3), reset_stale=False)
    assert store.log == [("replace", "t/zarr.json", None)]
    assert a[...].shape == (7, 3)


def test_positional_needs_the_index_at_the_start():
    a = growing(MemoryStore(), location="end")
    a.land(slice(0, 4), np.ones((4, 3)), shape=(4, 3))  # an ordinary write is fine
    with pytest.raises(InvalidValueError):
        a.land(slice(4, 5), np.ones((1, 3)), shape=(5, 3), positional=True)


def test_positional_appends_read_by_zarr_python(tmp_path):
    zarr = pytest.importorskip("zarr")
    if not getattr(zarr, "__version__", "0").startswith("3"):
        pytest.skip("zarr-python 3 needed")
    a = growing(DirectoryStore(tmp_path / "s.zarr"))
    ref = np.empty((0, 3))
    for rows in [3, 3, 5, 1, 20]:
        block = np.arange(rows * 3, dtype=float).reshape(rows, 3) + len(ref)
        a.land(slice(len(ref), len(ref) + rows), block, shape=(len(ref) + rows, 3), positional=True)
        ref = np.vstack([ref, block])
        a.publish(ref.shape)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "s.zarr" / "t"), mode="r")[...], ref)
