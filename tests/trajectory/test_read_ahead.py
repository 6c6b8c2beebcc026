"""Read-ahead in ``for frame in reader`` (issue 37; spec-notes/trajectory.md "Read-ahead"):
the next batch decoded on a thread while the caller works on the current one — identical
values, one batch ahead, no thread left behind however the iteration ends, damage refused
at the same frame with the same error, live readers bounded by the length they were given."""
from __future__ import annotations

import gc
import shutil
import threading
from pathlib import Path
from typing import Any, List

import numpy as np
import pytest

import molrec_raw as mr
from molrec_raw.demo import write_demo
from molrec_raw.errors import CorruptDataError, MolrecError
from molrec_raw.record.trajectory import engine as engine_module
from molrec_raw.record.trajectory import readahead

from traj_helpers import same_frame

AHEAD = "molrec-read-ahead"


def ahead_threads() -> List[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == AHEAD and t.is_alive()]


class Counted(readahead.ReadAhead):  # type: ignore[type-arg]
    """The engine's ReadAhead, counted (how many batches were read ahead)."""
    made: List[Any] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        Counted.made.append(self)
        super().__init__(*args, **kwargs)


class Inline:
    """A read-ahead that reads on the caller's thread when made (what iteration did before)."""

    def __init__(self, read: Any, pending: Any = None) -> None:
        self.value: Any = None
        self.error: Any = None
        try:
            self.value = read()
        except MolrecError as exc:
            self.error = exc

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value

    def wait(self, keep: bool = False) -> None:
        pass


def frame_of(i: int) -> mr.Frame:
    rng = np.random.default_rng(i)
    return mr.Frame({"pe": -1.0 * i}, {"atoms": mr.Block({"x": rng.normal(size=5), "y": rng.normal(size=5)})},
                    mr.Box(np.eye(3) * (10.0 + i // 7)))


def written(path: Path, n: int) -> Path:
    with mr.MrecWriter(path, mr.SequenceSchema.from_frames([frame_of(0)])) as w:
        for i in range(n):
            w.append(frame_of(i), step=i)
    return path


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of one frame: every frame after the first comes from a read-ahead."""
    monkeypatch.setattr(engine_module, "BATCH_BYTES", 1)
    Counted.made = []
    monkeypatch.setattr(engine_module, "ReadAhead", Counted)


def test_trajectory_9_iteration_read_ahead_gives_the_values_read_frames_gives(tmp_path: Path, small_batches: None) -> None:
    """Frames iterated in batches read ahead equal ``read_frames`` bit for bit (blocks, meta,
    cell), one read-ahead per batch after the first, none left running."""
    path = written(tmp_path / "r.mrec", 23)
    with mr.MrecReader(path) as reader:
        assert reader._engine.batch_frames() == 1
        seen = [(f.blocks["atoms"]["x"].copy(), f) for f in reader]
        whole = reader.read_frames(slice(None))
        assert len(seen) == 23 and len(Counted.made) == 22
        for (x, got), want in zip(seen, whole):
            assert same_frame(got, want) and np.array_equal(x, want.blocks["atoms"]["x"])
            assert got.meta["pe"] == want.meta["pe"] and got.box == want.box
        assert list(reader.iter_frames(5, 9))[-1].meta["pe"] == -8.0 and len(Counted.made) == 22 + 3
    assert ahead_threads() == []


@pytest.mark.parametrize("ending", ["break", "exception", "abandoned", "close", "exhausted"])
def test_trajectory_9_read_ahead_leaves_no_thread(tmp_path: Path, small_batches: None, ending: str) -> None:
    """However an iteration ends — a ``break``, an exception in the loop body, an iterator
    dropped half-way (garbage collected), the reader closed under it, or run to its end —
    the threads afterwards are the threads before."""
    path = written(tmp_path / "r.mrec", 12)
    before = set(threading.enumerate())
    reader = mr.MrecReader(path)
    if ending == "break":
        for k, _ in enumerate(reader):
            if k == 3:
                break
    elif ending == "exception":
        with pytest.raises(RuntimeError):
            for k, _ in enumerate(reader):
                if k == 3:
                    raise RuntimeError("the caller's own error")
    elif ending == "abandoned":
        it = iter(reader)
        next(it), next(it)
        del it
        gc.collect()
    elif ending == "close":
        it = iter(reader)
        next(it), next(it)
        reader.close()
        assert ahead_threads() == []  # close waited for the batch in flight
        del it
    else:
        assert sum(1 for _ in reader) == 12
    assert len(Counted.made) >= 2  # batches were read ahead
    reader.close()
    assert set(threading.enumerate()) == before


def test_zarr_v3_subset_7_read_ahead_refuses_damage_at_the_same_frame_with_the_same_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shard cut inside its inner chunk 2 (issue 36): iterating with read-ahead yields the
    same frames, the same values, then the same refusal (rule, key, node, message) as
    iterating with each batch read on the caller's thread when its turn comes."""
    record = write_demo(tmp_path / "long.mrec", frames=600, molecules=4)
    from molrec_raw.zarr import open_group

    codec = open_group(record)["trajectory/atoms/x"].pipeline.sharding
    shard = record / "trajectory/atoms/x/c/0"
    raw = shard.read_bytes()
    offset, nbytes = (int(v) for v in codec.decode_index(raw[:codec.index_size], len(raw))[2])
    shard.write_bytes(raw[:offset + nbytes // 2])
    monkeypatch.setattr(engine_module, "BATCH_BYTES", 40_000)  # several batches before the cut

    def run(kind: Any) -> Any:
        monkeypatch.setattr(engine_module, "ReadAhead", kind)
        got = []
        with mr.MrecReader(record) as reader:
            assert 1 < reader._engine.batch_frames() < 171
            with pytest.raises(CorruptDataError) as caught:
                for f in reader:
                    got.append(f.blocks["atoms"]["x"].copy())
        e = caught.value
        return got, (e.rule, e.key, e.node, e.message)

    Counted.made = []
    ahead, refused = run(Counted)
    inline, refused_inline = run(Inline)
    assert len(Counted.made) > 2
    assert refused == refused_inline and refused[0] == "zarr-v3-subset#7"
    assert 0 < len(ahead) == len(inline) <= 2 * 171
    assert all(np.array_equal(a, b) for a, b in zip(ahead, inline))
    assert ahead_threads() == []


def test_trajectory_10_read_ahead_stops_at_the_length_given_and_caches_nothing(
        tmp_path: Path, small_batches: None) -> None:
    """A live reader: an iteration begun at 8 committed frames yields those 8 (frames
    committed meanwhile, and a refresh in the middle of the loop, change nothing of it) and
    puts nothing in the reader's cache; the next iteration sees the new frames."""
    path = tmp_path / "live.mrec"
    w = mr.MrecWriter(path, mr.SequenceSchema.from_frames([frame_of(0)]), flush_every=1)
    for i in range(8):
        w.append(frame_of(i), step=i)
    w.flush()
    reader = mr.MrecReader(path)
    got = []
    for k, f in enumerate(reader):
        got.append(f.meta["pe"])
        if k == 2:
            for i in range(8, 12):
                w.append(frame_of(i), step=i)
            w.flush()
        if k == 4:
            assert reader.refresh() == 12
    assert got == [-1.0 * i for i in range(8)]
    assert reader._engine.cache._bytes == 0
    assert [f.meta["pe"] for f in reader] == [-1.0 * i for i in range(12)]
    w.close()
    reader.close()
    assert ahead_threads() == []


def test_trajectory_9_read_ahead_off_reads_the_same_frames_on_the_callers_thread(
        tmp_path: Path, small_batches: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """``iter_frames(read_ahead=False)`` reads every batch on the caller's thread (no
    read-ahead made) and gives the frames read-ahead gives; on a machine of one core that
    is the default."""
    path = written(tmp_path / "r.mrec", 9)
    with mr.MrecReader(path) as reader:
        ahead = [f.meta["pe"] for f in reader.iter_frames()]
        made = len(Counted.made)
        assert made == 8
        assert [f.meta["pe"] for f in reader.iter_frames(read_ahead=False)] == ahead
        assert len(Counted.made) == made
        monkeypatch.setattr(engine_module.os, "cpu_count", lambda: 1)
        assert [f.meta["pe"] for f in reader] == ahead
        assert len(Counted.made) == made
