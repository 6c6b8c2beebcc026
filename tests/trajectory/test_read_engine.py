"""The read engine's fetch/decode part (zarr/chunkread.py, zarr/handles.py) and its bounds
(spec-notes/trajectory.md "Read engine"): chunks read in bulk equal the Zarr layer's own
reads for every geometry a reader must accept; hostile bytes give a MolrecError naming the
key, never another exception; descriptors and shard indexes stay within their bounds."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, List

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import molrec_raw as mr
from molrec_raw.errors import ChecksumMismatchError, CorruptDataError, MolrecError
from molrec_raw.record.model import Block, Frame
from molrec_raw.record.trajectory import MrecReader, MrecWriter, SequenceSchema
from molrec_raw.zarr import DirectoryStore, open_group
from molrec_raw.zarr.chunkread import FirstAxis, ShardIndexes, check_landed, read_chunks
from molrec_raw.zarr.handles import FileRanges, StoreRanges, range_reader

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from shard_bytes import end_of_chunks  # noqa: E402

CRC = {"name": "crc32c"}
BYTES = {"name": "bytes", "configuration": {"endian": "little"}}


def _sharded(inner: List[int], codecs: List[Any], location: str) -> List[Any]:
    return [{"name": "sharding_indexed", "configuration": {
        "chunk_shape": inner, "codecs": codecs, "index_codecs": [BYTES, CRC], "index_location": location}}]


GEOMETRIES = {
    "sharded, index at the start, plain bytes": dict(shape=(97,), chunks=(40,), codecs=_sharded([8], [BYTES, CRC], "start")),
    "sharded, index at the end, zstd": dict(shape=(97,), chunks=(40,), codecs=_sharded(
        [8], [BYTES, {"name": "zstd", "configuration": {"level": 1, "checksum": False}}, CRC], "end")),
    "trailing axes, shuffle + gzip": dict(shape=(61, 3), chunks=(20, 3), codecs=_sharded(
        [5, 3], [BYTES, {"name": "numcodecs.shuffle", "configuration": {"elementsize": 8}},
                 {"name": "gzip", "configuration": {"level": 1}}, CRC], "start")),
    "chunked along the trailing axis": dict(shape=(30, 4), chunks=(10, 2), codecs=None),
    "not sharded": dict(shape=(50,), chunks=(7,), codecs=None),
}


@pytest.fixture(scope="module")
def arrays(tmp_path_factory):
    root = open_group(tmp_path_factory.mktemp("arrays") / "a.zarr", mode="w")
    made = {}
    for k, (name, geo) in enumerate(GEOMETRIES.items()):
        arr = root.create_array(f"a{k}", shape=geo["shape"], dtype="float64", chunks=geo["chunks"],
                                codecs=geo["codecs"], fill_value=-1.0)
        values = np.arange(np.prod(geo["shape"]), dtype=np.float64).reshape(geo["shape"]) * 0.5
        values[5:9] = -1.0  # a run of fill values: chunks that are not stored
        arr[...] = values
        made[name] = arr
    return made


@settings(max_examples=40, deadline=None)
@given(which=st.sampled_from(sorted(GEOMETRIES)), picks=st.lists(st.integers(0, 12), max_size=10, unique=True),
       trusted=st.integers(0, 200), strided=st.booleans())
def test_zarr_7_read_chunks_equals_the_arrays_own_reads(arrays, which, picks, trusted, strided):
    """Whole inner chunks along the first axis, read in one call (into given strided targets
    or new arrays), equal ``Array[...]`` of their rows; past the array's end: fill values."""
    arr = arrays[which]
    axis = FirstAxis(arr)
    chunks = sorted(c for c in picks if c * axis.rows < arr.shape[0])
    targets = None
    if strided:
        holders = [np.empty((2,) + axis.chunk_shape)[1] for _ in chunks]
        targets = [holders]
    with _closing(range_reader(arr.store)) as ranges:
        got = read_chunks([(axis, chunks, trusted)], ranges, ShardIndexes(), targets=targets)[0]
    for c, chunk in zip(chunks, got):
        lo = c * axis.rows
        hi = min(arr.shape[0], lo + axis.rows)
        np.testing.assert_array_equal(chunk[:hi - lo], arr[lo:hi])
        assert np.all(chunk[hi - lo:] == -1.0)


class _closing:
    def __init__(self, thing):
        self.thing = thing

    def __enter__(self):
        return self.thing

    def __exit__(self, *exc):
        self.thing.close()


def _record(path: Path, frames: int = 30, precision: bool = False) -> Path:
    schema = SequenceSchema().declare_block("atoms", rows=300).declare_column("atoms", "x", "f64")
    if precision:
        schema.declare_precision("atoms", "x", 1e-3)
    schema.declare_meta("pe", "f64")
    with MrecWriter(path, schema, durable=False) as w:
        for i in range(frames):
            w.append(Frame({"pe": float(i)}, {"atoms": Block({"x": np.arange(300.0) + i})}))
    return path


def _read_everything(path: Path) -> None:
    with MrecReader(path) as reader:
        n = len(reader)
        for i in range(n):
            reader[i]
        reader.read_frames(list(range(n))[::-1])
        for _ in reader:
            pass
        reader.block_array("atoms")


@pytest.mark.parametrize("precision", [False, True], ids=["plain bytes (read in place)", "shuffle + zstd"])
def test_zarr_7_hostile_shard_bytes_give_molrec_errors(tmp_path, precision):
    """Random byte flips, truncations and zero runs in the shard files of a record: every
    read the engine makes either returns or raises a MolrecError (checksums, lying index
    entries, short shards) — 120 mutated records."""
    source = _record(tmp_path / "r.mrec", precision=precision)
    shards = sorted(p.relative_to(source) for p in source.rglob("c/*") if p.is_file())
    rng = np.random.default_rng(21)
    outcomes = {"read": 0, "refused": 0}
    for trial in range(60):
        target = tmp_path / f"m{trial}.mrec"
        os.system(f"cp -r {source} {target}")
        victim = target / shards[int(rng.integers(len(shards)))]
        data = bytearray(victim.read_bytes())
        kind = trial % 3
        if kind == 0:
            for _ in range(int(rng.integers(1, 4))):
                data[int(rng.integers(len(data)))] ^= 1 << int(rng.integers(8))
        elif kind == 1:
            data = data[:int(rng.integers(len(data)))]
        else:
            at = int(rng.integers(len(data)))
            data[at:at + 64] = bytes(min(64, len(data) - at))
        victim.write_bytes(bytes(data))
        try:
            _read_everything(target)
            outcomes["read"] += 1
        except MolrecError:
            outcomes["refused"] += 1
    assert outcomes["refused"] > 20, outcomes  # most mutations are detected


def test_zarr_5_5_a_plain_chunk_read_in_place_checks_its_checksum(tmp_path):
    path = _record(tmp_path / "p.mrec")
    shard = path / "trajectory" / "atoms" / "x" / "c" / "0"
    data = bytearray(shard.read_bytes())
    end = end_of_chunks(bytes(data))  # the shard is padded to a sector boundary past its chunks
    data[end - 10] ^= 0x40  # inside the last chunk's values
    shard.write_bytes(bytes(data))
    with MrecReader(path) as reader:
        assert reader._engine.axis(reader._layout.blocks["atoms"].columns["x"]).plain == 4
        with pytest.raises(ChecksumMismatchError) as info:
            reader.block_array("atoms")
        assert info.value.key == "trajectory/atoms/x/c/0"
    shard.write_bytes(bytes(data[:end - 100]))  # cut inside the last chunk: the index lies
    with MrecReader(path) as reader:  # the tail shard's index is checked at open: x is damaged (issue 28)
        assert "past the end of the shard" in str(reader.damaged()["trajectory/atoms/x"])
        with pytest.raises(CorruptDataError, match="past the end of the shard"):  # ... and reads of that chunk refuse
            reader[-1]
        assert reader[0]["atoms"]["x"].shape == (300,)  # the chunks before the cut read (issue 36)


def test_trajectory_9_descriptors_stay_within_their_bound(tmp_path):
    """A reader over more shard files than it may keep open holds at most ``max_open``."""
    root = open_group(tmp_path / "many.zarr", mode="w")
    arr = root.create_array("x", shape=(400,), dtype="float64", chunks=(4,), codecs=None)
    arr[...] = np.arange(400.0)
    store = DirectoryStore(tmp_path / "many.zarr", read_only=True)
    ranges = FileRanges(store, max_open=8)
    axis = FirstAxis(open_group(store)["x"])
    before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    for c in range(0, 100, 3):
        got = read_chunks([(axis, [c], 400)], ranges, ShardIndexes())[0][0]
        np.testing.assert_array_equal(got, np.arange(4.0) + 4 * c)
        if before is not None:
            assert len(os.listdir("/proc/self/fd")) - before <= 8
        assert len(ranges._open) <= 8
    ranges.close()
    assert not ranges._open


def test_trajectory_9_shard_indexes_stay_within_their_budget_and_trust(tmp_path):
    path = _record(tmp_path / "i.mrec", frames=30)
    with MrecReader(path) as reader:
        reader.read_frames(range(30))
        indexes = reader._engine.indexes
        assert indexes.nbytes <= indexes.budget and len(indexes) >= 1
        x = reader._layout.blocks["atoms"].columns["x"]
        assert indexes.get(x.path, 0, 30 * 300) is not None  # trusted for the committed rows
        assert indexes.get(x.path, 0, 30 * 300 + 1) is None  # and for no row past them
    tiny = ShardIndexes(budget=0)
    tiny.put("a", 0, np.zeros((4, 2), np.uint64), 10)
    assert len(tiny) == 0


def test_zarr_7_check_landed_keeps_the_pages_it_checked(tmp_path):
    """The landed-index check of chosen shards only (opening checks the shards a commit since
    the last durable point landed in); the pages it reads are kept for reads, and an index
    ending before a recorded landing's, or a recorded shard not stored, is refused."""
    path = _record(tmp_path / "w.mrec", frames=30)
    x = open_group(path)["trajectory/atoms/x"]
    sharding = x.pipeline.sharding
    keys = [x.chunk_key((k,)) for k in range(x.metadata.grid_shape[0])]
    ends = {key: sharding.index_end(sharding.decode_index(x.store.get_range(key, 0, sharding.index_size), None))
            for key in keys}
    assert all(end > 0 for end in ends.values())
    indexes = ShardIndexes()
    check_landed(x, ends, StoreRanges(x.store), indexes, trusted=30 * 300)
    assert len(indexes) == len(keys) and indexes.get(x.path, 0, 30 * 300) is not None
    with pytest.raises(CorruptDataError, match="never written"):
        check_landed(x, {keys[-1]: ends[keys[-1]] + 1}, StoreRanges(x.store))
    grown = type(x)(x.store, x.path, x.metadata.with_shape((x.shape[0] + x.metadata.chunk_shape[0] * 2,)))
    missing = grown.chunk_key((grown.metadata.grid_shape[0] - 1,))
    with pytest.raises(CorruptDataError, match="not stored"):
        check_landed(grown, {missing: 0}, StoreRanges(x.store))
