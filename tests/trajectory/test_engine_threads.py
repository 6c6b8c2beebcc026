"""The read engine's codec work on the reader's own ``CodecThreads`` (issue 37; spec-notes/
zarr.md "Threads for codec work"): ``read_frames`` ranges, whole-block reads and iteration of
1 MiB of chunks or more are decoded on the reader's threads (``MrecReader(threads=...)``,
default 2, 1: none) with the values of one thread; ``close`` leaves no helper alive; a damaged
chunk inside a threaded read is refused with the error of one thread (zarr-v3-subset#5, #7)."""
from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from typing import Any, Dict, List, Set, Tuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import molrec_raw as mr
from molrec_raw.errors import CorruptDataError, MolrecError
from molrec_raw.zarr import Array, open_group
from molrec_raw.zarr.codecs.threads import POOL_MIN_BYTES

from traj_helpers import same_frame

HELPER = "molrec-codec"
FRAMES = 24


def helpers() -> Set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == HELPER and t.is_alive()}


@pytest.fixture(autouse=True)
def two_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two threads usable whatever the runner's cores (usable_threads caps by os.cpu_count)."""
    monkeypatch.setattr(os, "cpu_count", lambda: 4)


def record(path: Path, atoms: int, one_frame_a_chunk: bool, frames: int = FRAMES) -> Path:
    """x, y, z f64 at precision 1e-3 (bytes + shuffle + zstd + crc32c), a per-step ``pe``;
    inner chunks of one frame (``rows`` declared) or of the writer's default rows."""
    schema = mr.SequenceSchema().declare_block("atoms", rows=atoms) if one_frame_a_chunk else mr.SequenceSchema()
    for c in "xyz":
        schema.declare_column("atoms", c, "f64").declare_precision("atoms", c, 1e-3)
    schema.declare_meta("pe", "f64")
    rng = np.random.default_rng(atoms)
    positions = rng.uniform(0.0, 50.0, size=(atoms, 3))
    with mr.MrecWriter(path, schema) as writer:
        for i in range(frames):
            positions += rng.normal(scale=0.05, size=positions.shape)
            block = mr.Block({c: positions[:, k].copy() for k, c in enumerate("xyz")})
            writer.append(mr.Frame({"pe": -1.0 * i}, {"atoms": block}), step=i)
    return path


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> Dict[Tuple[int, bool], Path]:
    base = tmp_path_factory.mktemp("engine-threads")
    return {(atoms, whole): record(base / f"r{atoms}-{int(whole)}.mrec", atoms, whole)
            for atoms in (6000, 11000) for whole in (True, False)}


def read_with(path: Path, threads: int, indices: Any) -> Tuple[List[mr.Frame], int]:
    with mr.MrecReader(path, threads=threads) as reader:
        frames = reader.read_frames(indices)
        return frames, reader._engine.codec_threads.handed


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.sampled_from([6000, 11000]), st.booleans(), st.data())
def test_zarr_v3_subset_5_read_frames_range_on_two_threads_gives_the_values_of_one(
        records: Dict[Tuple[int, bool], Path], atoms: int, whole: bool, data: st.DataObject) -> None:
    """A ``read_frames`` range (a slice with a step, or indices in any order) whose chunks hold
    at least 1 MiB: with threads=2 runs go to a helper, and the frames are those of threads=1."""
    need = -(-POOL_MIN_BYTES // (atoms * 24)) + 1  # frames whose x, y, z alone pass 1 MiB
    start = data.draw(st.integers(0, FRAMES - need), label="start")
    if data.draw(st.booleans(), label="slice"):
        step = data.draw(st.integers(1, max(1, (FRAMES - start) // need)), label="step")
        indices: Any = slice(start, FRAMES, step)
        count = len(range(start, FRAMES, step))
    else:
        indices = np.asarray(data.draw(st.permutations(range(start, FRAMES)), label="order"), np.int64)
        count = indices.size
    path = records[(atoms, whole)]
    one, handed_one = read_with(path, 1, indices)
    two, handed_two = read_with(path, 2, indices)
    assert count >= need and len(one) == len(two) == count
    assert all(same_frame(a, b) and a.meta == b.meta for a, b in zip(one, two))
    assert handed_one == 0 and handed_two >= 1


def test_zarr_v3_subset_5_threads_1_hands_nothing_to_a_helper(records: Dict[Tuple[int, bool], Path]) -> None:
    """threads=1: ranges, whole blocks and iteration are decoded with no helper started."""
    before = helpers()
    with mr.MrecReader(records[(11000, True)], threads=1) as reader:
        reader.read_frames(slice(0, FRAMES))
        reader.block_array("atoms")
        assert sum(1 for _ in reader) == FRAMES
        assert reader._engine.codec_threads.handed == 0
        assert reader._engine.codec_threads.threads == 1
        assert helpers() <= before


@pytest.mark.parametrize("whole", [True, False])
def test_zarr_v3_subset_5_whole_block_on_two_threads_gives_the_values_of_one(
        records: Dict[Tuple[int, bool], Path], whole: bool) -> None:
    """A whole-block read (``block_array``, ``column_array``: runs of 2 MiB of chunks) on
    threads=2 hands runs to a helper and returns the arrays of threads=1."""
    got: Dict[int, Any] = {}
    for threads in (1, 2):
        with mr.MrecReader(records[(11000, whole)], threads=threads) as reader:
            got[threads] = (reader.block_array("atoms"), reader.column_array("atoms", "y", slice(3, None, 2)),
                            reader._engine.codec_threads.handed)
    (block1, y1, handed1), (block2, y2, handed2) = got[1], got[2]
    assert block1.tobytes() == block2.tobytes() and y1.tobytes() == y2.tobytes()
    assert handed1 == 0 and handed2 >= 1


@pytest.mark.parametrize("ending", ["close", "with", "iteration"])
def test_trajectory_9_no_helper_of_the_engine_alive_after_close(
        records: Dict[Tuple[int, bool], Path], ending: str) -> None:
    """The engine's helpers start with a read of 1 MiB and are gone once the reader is closed
    (``close()``, leaving ``with``, after an iteration read ahead), not 1 s later."""
    path = records[(11000, True)]
    before = helpers()
    if ending == "with":
        with mr.MrecReader(path, threads=2) as reader:
            reader.read_frames(slice(0, FRAMES))
            started = helpers() - before
        engine = reader._engine
    else:
        reader = mr.MrecReader(path, threads=2)
        engine = reader._engine
        if ending == "close":
            reader.read_frames(slice(0, FRAMES))
        else:
            assert sum(1 for _ in reader) == FRAMES
        started = helpers() - before
        reader.close()
    assert engine.codec_threads.handed >= 1 and started
    assert not engine.codec_threads.started
    assert not any(t.is_alive() for t in started)
    assert helpers() <= before


def test_zarr_v3_subset_5_reader_usable_after_close_and_closes_again(records: Dict[Tuple[int, bool], Path]) -> None:
    """A read after ``close`` starts the helpers anew (the state stays readable); a second
    ``close`` stops them again."""
    path = records[(6000, True)]
    reader = mr.MrecReader(path, threads=2)
    first = reader.read_frames(slice(0, FRAMES))
    reader.close()
    again = reader.read_frames(slice(0, FRAMES))
    reader.close()
    assert all(same_frame(a, b) for a, b in zip(first, again))
    assert reader._engine.codec_threads.handed >= 2 and not reader._engine.codec_threads.started


def damaged_copy(source: Path, target: Path) -> Tuple[Path, int]:
    """A copy of ``source`` whose z chunk of the last frame but two has one byte flipped (its
    crc32c then refuses it; z's chunks are decoded last, in the helper's run); returns the
    copy and that frame."""
    shutil.copytree(source, target)
    z = open_group(target)["trajectory/atoms/z"]
    assert isinstance(z, Array) and z.pipeline.sharding is not None
    codec = z.pipeline.sharding
    shard = target / "trajectory/atoms/z/c/0"
    raw = bytearray(shard.read_bytes())
    index = codec.decode_index(bytes(raw[:codec.index_size]), len(raw))
    frame = FRAMES - 3
    offset, nbytes = (int(v) for v in index[frame])
    raw[offset + nbytes // 2] ^= 0xFF
    shard.write_bytes(bytes(raw))
    return target, frame


def refusal(path: Path, threads: int, read: str) -> Tuple[Any, ...]:
    with mr.MrecReader(path, threads=threads) as reader:
        with pytest.raises(MolrecError) as caught:
            if read == "range":
                reader.read_frames(slice(0, FRAMES))
            else:
                for _ in reader:
                    pass
        handed = reader._engine.codec_threads.handed
    e = caught.value
    return type(e), e.rule, e.key, e.node, e.message, handed


@pytest.mark.parametrize("read", ["range", "iteration"])
def test_zarr_v3_subset_7_damaged_chunk_in_a_threaded_read_is_refused_as_on_one_thread(
        records: Dict[Tuple[int, bool], Path], tmp_path: Path, read: str) -> None:
    """A flipped byte in the z chunk of a late frame (a helper's run): the read is refused
    with the same error class, rule, key, node and message as with threads=1."""
    path, _ = damaged_copy(records[(11000, True)], tmp_path / "damaged.mrec")
    *one, handed_one = refusal(path, 1, read)
    *two, handed_two = refusal(path, 2, read)
    assert one == two
    assert issubclass(one[0], CorruptDataError) and one[2] is not None and one[2].endswith("atoms/z/c/0")
    assert handed_one == 0 and handed_two >= 1
    assert not helpers() - set(threading.enumerate())
