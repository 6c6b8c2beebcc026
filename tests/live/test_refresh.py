"""``MrecReader.refresh`` on a growing record (issue 12 §1): new frames become readable,
old ones read as before, and a reader never returns a wrong frame — not at any point of a
commit (a reader looks after every file operation of the writer, including between the two
halves of a torn index-page write), not with a torn shard index (checksum, read again),
not with arrays published past ``nstep``.  The chunk cache keeps whole chunks and drops
the tail chunk cut at the old length."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Callable, List, Optional

import numpy as np
import pytest

import molrec_raw as mr
from molrec_raw.errors import CorruptDataError, MolrecError, StoreError
from molrec_raw.record.trajectory import reader as reader_module
from molrec_raw.zarr import DirectoryStore, open_array
from molrec_raw.zarr.fileops import FileOps

from live_campaign import same


# ------------------------------------------------------------ a small run with every change
def appended(i: int) -> mr.Frame:
    """Frame i: coordinates every frame, bonds changing at 6, a cell changing at 8 and 14,
    a block that turns ragged at 15 (its index is born), per-step meta."""
    rng = np.random.default_rng(i)
    blocks = {"atoms": mr.Block({"x": rng.normal(size=4), "y": rng.normal(size=4)}),
              "waters": mr.Block({"q": rng.normal(size=2 if i < 15 else 1 + i % 3)})}
    if i in (0, 6):
        n = 2 if i == 0 else 1
        blocks["bonds"] = mr.Block({"atomi": np.arange(n, dtype=np.uint64), "atomj": np.arange(n, dtype=np.uint64) + 1})
    return mr.Frame({"pe": -1.0 * i, "tag": f"f{i}"}, blocks, mr.Box(np.eye(3) * (10.0 + (i >= 8) + (i >= 14))))


def expected(i: int) -> mr.Frame:
    f = appended(i)
    bonds = appended(0 if i < 6 else 6).blocks["bonds"]
    f.blocks = {"atoms": f.blocks["atoms"], "waters": f.blocks["waters"], "bonds": bonds}  # pin order
    return f


def step_of(i: int) -> int:
    return 5 * i if i < 11 else 5 * i + 2  # the step array is born at frame 11


def schema() -> mr.SequenceSchema:
    return mr.SequenceSchema.from_frames([appended(0)])


def check_frames(reader: mr.MrecReader, indices: List[int]) -> None:
    steps = reader.step
    for i in indices:
        assert same(reader.read_frame(i), expected(i)), f"frame {i} differs from what was appended"
        assert steps[i] == step_of(i)


# ------------------------------------------------------------ basic refresh
def test_refresh_makes_new_frames_readable_and_keeps_the_old_ones(tmp_path: Path) -> None:
    path = tmp_path / "r.mrec"
    w = mr.MrecWriter(path, schema(), flush_every=1)
    reader = mr.MrecReader(path)
    assert len(reader) == 0 and reader.refresh() == 0
    for i in range(20):
        w.append(appended(i), step=step_of(i))
        if i % 5 == 4:
            w.flush()
        before = [reader.read_frame(k) for k in range(len(reader))]
        assert reader.refresh() == i + 1 == len(reader)
        assert all(same(reader.read_frame(k), f) for k, f in enumerate(before))  # unchanged below the old length
        check_frames(reader, list(range(i + 1)))
    w.close()
    assert reader.refresh() == 20
    assert reader.has_block("waters") and reader.block_info("waters").kind == "indexed"
    reader.close()


def test_refresh_with_nothing_new_reads_only_the_marker(tmp_path: Path) -> None:
    path = tmp_path / "r.mrec"
    w = mr.MrecWriter(path, schema(), flush_every=1)
    for i in range(3):
        w.append(appended(i), step=step_of(i))
    store = CountingStore(path)
    reader = mr.MrecReader(store)
    store.reads.clear()
    assert reader.refresh() == 3
    assert store.reads == ["trajectory/zarr.json"]
    w.close()


class CountingStore(DirectoryStore):
    """A read-only directory store that lists the keys it reads (``get``, ``get_range``)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, read_only=True)
        self.reads: List[str] = []

    def get(self, key: str) -> Optional[bytes]:
        self.reads.append(key)
        return super().get(key)

    def get_range(self, key: str, start: int, length: Optional[int] = None) -> Optional[bytes]:
        self.reads.append(key)
        return super().get_range(key, start, length)


def test_refresh_keeps_whole_cached_chunks_and_drops_the_tail_chunk(tmp_path: Path) -> None:
    """Inner chunks of ``x`` hold 512 frames of 4 rows; ``pe`` 1,024 frames.  After a
    refresh, a frame of the first (whole) chunk is served from the cache; a frame of the
    tail chunk cached at the old length is read again, and reads right."""
    path = tmp_path / "c.mrec"
    frame = lambda i: mr.Frame({"pe": float(i)}, {"atoms": mr.Block({"x": np.arange(4.0) + 10 * i})})  # noqa: E731
    w = mr.MrecWriter(path, mr.SequenceSchema.from_frames([frame(0)]), flush_every=600, durable=False)
    for i in range(600):
        w.append(frame(i))
    store = CountingStore(path)
    reader = mr.MrecReader(store)
    assert reader.block_info("atoms").columns["x"].chunk_rows == 2048
    assert reader[10].meta == {"pe": 10.0} and reader[590].meta == {"pe": 590.0}
    for i in range(600, 1100):
        w.append(frame(i))
    w.flush()
    assert reader.refresh() == 1100
    shard = "trajectory/atoms/x/c/0"
    store.reads.clear()
    assert np.array_equal(reader[10].blocks["atoms"].columns["x"], np.arange(4.0) + 100)
    assert shard not in store.reads  # a whole chunk: kept
    for i in (590, 600, 1023, 1024, 1099):  # the old tail chunks of x and pe: read again, completely
        got = reader[i]
        assert got.meta == {"pe": float(i)} and np.array_equal(got.blocks["atoms"].columns["x"], np.arange(4.0) + 10 * i)
    assert shard in store.reads
    w.close()


def test_refresh_on_an_archive_changes_nothing_and_follow_stops_at_once(tmp_path: Path) -> None:
    path = tmp_path / "z.mrec"
    with mr.MrecWriter(path, schema(), flush_every=4) as w:
        for i in range(6):
            w.append(appended(i), step=step_of(i))
    packed = mr.pack_mrec_zip(path)
    with mr.MrecReader(packed) as reader:
        assert reader.refresh() == 6
        assert [i for i, _ in reader.follow(poll=30.0)] == list(range(6))  # no wait: nothing can change
        assert list(reader.watch(poll=30.0)) == [6]


# ------------------------------------------------------------ a reader at every point of every commit
class Interleaved(FileOps):
    """The writer's file seam, calling ``look()`` after every write, rename and removal, and
    in the middle of every index-page write (the page half old, half new: torn)."""

    def __init__(self) -> None:
        super().__init__()
        self.look: Callable[[bool], None] = lambda torn: None

    def pwrite_all(self, fd: int, data: Any, offset: int) -> None:
        view = memoryview(data).cast("B")
        if offset == 0 and len(view) >= 1024:  # an index page rewritten in place
            half = len(view) // 2
            super().pwrite_all(fd, view[:half], 0)
            self.look(True)
            super().pwrite_all(fd, view[half:], half)
        else:
            super().pwrite_all(fd, view, offset)
        self.look(False)

    def replace(self, src: str, dst: str) -> None:
        super().replace(src, dst)
        self.look(False)

    def unlink(self, path: str) -> None:
        super().unlink(path)
        self.look(False)


def test_a_reader_never_returns_a_wrong_frame_at_any_point_of_a_commit(tmp_path: Path, monkeypatch: Any) -> None:
    """Automatic commits every frame, a durable flush every 5, a topology change, two cell
    changes, a block whose index is born, a step array born mid-run: after each of the
    writer's file operations two readers refresh (one with a chunk cache, one without, so
    it reads every index page) and read the newest, the first and a middle frame; in the
    middle of an index-page write a third reader opens afresh (it may start from the last
    durable commit when the live one cannot be proved at that instant).  Every answer is
    right or a MolrecError (a page that stays torn while the writer is paused); lengths
    never go back."""
    monkeypatch.setattr(reader_module, "_retry_pause", lambda attempt: 0.0)  # the writer is paused anyway
    path = tmp_path / "i.mrec"
    ops = Interleaved()
    w = mr.MrecWriter(path, schema(), flush_every=1, fileops=ops)
    readers = [mr.MrecReader(path), mr.MrecReader(path, cache_bytes=0)]
    seen = {"looks": 0, "refresh_errors": 0, "read_errors": 0, "open_errors": 0, "grew": 0}
    last = [0, 0]
    durable = [0]  # frames of the last durable point

    def read(reader: mr.MrecReader, n: int) -> None:
        for i in sorted({0, n // 2, n - 1} if n else set()):
            try:
                check_frames(reader, [i])
            except MolrecError:
                seen["read_errors"] += 1

    def look(torn: bool) -> None:
        seen["looks"] += 1
        for k, reader in enumerate(readers):
            try:
                n = reader.refresh()
            except MolrecError:
                seen["refresh_errors"] += 1
                n = len(reader)  # the old state stays in use
            assert n >= last[k], "the committed length went back"
            seen["grew"] += k == 0 and n > last[k]
            last[k] = n
            read(reader, n)
        if torn:
            try:
                fresh = mr.MrecReader(path, cache_bytes=0)
            except MolrecError:
                seen["open_errors"] += 1
                return
            with fresh:
                assert len(fresh) >= durable[0]
                read(fresh, len(fresh))
    ops.look = look
    for i in range(22):
        w.append(appended(i), step=step_of(i))
        if i % 5 == 4:
            w.flush()
            durable[0] = i + 1
    w.close()
    ops.look = lambda torn: None
    for reader in readers:
        assert reader.refresh() == 22
        check_frames(reader, list(range(22)))
        reader.close()
    print(seen)
    assert seen["grew"] == 22 and seen["looks"] > 400, seen
    assert seen["read_errors"] > 0, seen  # torn pages were met, and refused


# ------------------------------------------------------------ torn shard index
class TornStore(DirectoryStore):
    """A read-only directory store whose next ``tears`` reads of the first bytes of ``key``
    come back with one byte flipped (what a reader sees of an index page being rewritten)."""

    def __init__(self, root: Path, key: str) -> None:
        super().__init__(root, read_only=True)
        self.key, self.tears = key, 0

    def get_range(self, key: str, start: int, length: Optional[int] = None) -> Optional[bytes]:
        data = super().get_range(key, start, length)
        if key == self.key and start == 0 and data and self.tears > 0:
            self.tears -= 1
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        return data


def _record(path: Path, n: int, durable_at: int) -> mr.MrecWriter:
    w = mr.MrecWriter(path, schema(), flush_every=1)
    for i in range(n):
        w.append(appended(i), step=step_of(i))
        if i + 1 == durable_at:
            w.flush()
    return w


def test_a_torn_shard_index_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "t.mrec"
    w = _record(path, 8, 4)
    store = TornStore(path, "trajectory/atoms/x/c/0")
    reader = mr.MrecReader(store, cache_bytes=0)  # every read reads the index page
    store.tears = 2
    check_frames(reader, [7])  # the checksum fails twice, the third read is whole
    assert store.tears == 0
    store.tears = 100  # a page that stays torn: a clear error naming the chunk, after a bounded number of reads
    with pytest.raises(CorruptDataError) as info:
        reader.read_frame(6)
    assert info.value.key == "trajectory/atoms/x/c/0" and "(read 5 times)" in info.value.message
    assert store.tears == 100 - 5
    w.close()


def test_a_refresh_that_meets_a_torn_index_reads_again_and_never_goes_back(tmp_path: Path) -> None:
    """The live state past the checkpoint cannot be proved while the page is torn, and the
    checkpoint is older than what the reader already read: the refresh reads again, then
    gives up with the node named, keeping its state."""
    path = tmp_path / "t.mrec"
    w = _record(path, 8, 4)  # durable at 4, automatic commits to 8
    store = TornStore(path, "trajectory/atoms/x/c/0")
    reader = mr.MrecReader(store)
    assert len(reader) == 8 and reader.source == "live"
    w.append(appended(8), step=step_of(8))
    store.tears = 2
    assert reader.refresh() == 9 and reader.source == "live"
    w.append(appended(9), step=step_of(9))
    store.tears = 10 ** 6
    with pytest.raises(CorruptDataError) as info:
        reader.refresh()
    assert info.value.node == "/trajectory" and "read 5 times while it changed" in info.value.message
    assert len(reader) == 9  # the state it had
    store.tears = 0
    assert reader.refresh() == 10
    check_frames(reader, list(range(10)))
    w.close()


# ------------------------------------------------------------ arrays longer than nstep
def test_arrays_published_past_nstep_are_not_read(tmp_path: Path) -> None:
    """Between an array's new zarr.json and the marker (a commit in progress, or one a
    crash interrupted) arrays are longer than ``nstep``: a refresh there reads exactly the
    committed frames."""
    path = tmp_path / "l.mrec"
    ops = Interleaved()
    w = mr.MrecWriter(path, schema(), flush_every=1, fileops=ops)
    reader = mr.MrecReader(path)
    longer: List[int] = []

    def look(torn: bool) -> None:
        rows = open_array(DirectoryStore(path, read_only=True), "trajectory/atoms/x").shape[0]
        n = reader.refresh()
        if rows > 4 * n:
            longer.append(n)
            assert n == 5
            check_frames(reader, list(range(n)))
            with pytest.raises(IndexError):
                reader.read_frame(n)
    for i in range(6):
        if i == 5:
            ops.look = look
        w.append(appended(i), step=step_of(i))
    ops.look = lambda torn: None
    assert longer  # the reader did meet x longer than its nstep
    assert reader.refresh() == 6
    check_frames(reader, list(range(6)))
    w.close()


# ------------------------------------------------------------ a record replaced under the reader
def test_a_record_that_shrinks_or_changes_its_pin_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.mrec"
    with mr.MrecWriter(path, schema()) as w:
        for i in range(5):
            w.append(appended(i), step=step_of(i))
    reader = mr.MrecReader(path)
    other = tmp_path / "other.mrec"
    with mr.MrecWriter(other, schema()) as w:
        for i in range(3):
            w.append(appended(i), step=step_of(i))
    shutil.rmtree(path)
    os.rename(other, path)
    with pytest.raises(StoreError, match="went from 5 to 3"):
        reader.refresh()
    shutil.rmtree(path)
    frame = mr.Frame({}, {"atoms": mr.Block({"z": np.zeros(2)})})
    with mr.MrecWriter(path, mr.SequenceSchema.from_frames([frame])) as w:
        for i in range(7):
            w.append(frame)
    with pytest.raises(StoreError, match="sequence_schema changed"):
        reader.refresh()
    assert len(reader) == 5
    reader.close()


def test_a_reader_opened_before_the_first_commit_sees_it(tmp_path: Path) -> None:
    """A record created but not yet committed to (or a trajectory section that does not
    exist yet) reads as 0 frames, then grows."""
    path = tmp_path / "e.mrec"
    mr.write_mrec_frame(path, mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(2)})}))
    reader = mr.MrecReader(path)
    assert len(reader) == 0 and reader.refresh() == 0
    w = mr.MrecWriter(path, schema(), flush_every=1)
    assert reader.refresh() == 0
    w.append(appended(0), step=step_of(0))
    assert reader.refresh() == 1
    check_frames(reader, [0])
    w.close()
    reader.close()

