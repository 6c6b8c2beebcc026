"""The read engine's caches under a live record (trajectory §10, spec-notes/trajectory.md
"Read engine"): a refresh keeps only rows no recovery can roll back, so frames a recovery
rolled back and a new writer rewrote are read again, never served from a cache; index pages
and chunks cached while a writer appends serve exactly the committed rows."""
from __future__ import annotations

from pathlib import Path
from typing import Dict

import numpy as np

import molrec_raw as mr

ROWS = 1024  # two frames per 2,048-row inner chunk of x: whole chunks hold committed frames


def _schema() -> mr.SequenceSchema:
    return mr.SequenceSchema().declare_block("atoms", rows=ROWS).declare_column("atoms", "x", "f64")


def _frame(i: int, run: int) -> mr.Frame:
    return mr.Frame({}, {"atoms": mr.Block({"x": np.full(ROWS, 1000.0 * run + i)})})


def _tear_tail_index(path: Path) -> None:
    """What a power cut may leave of the tail shard's index page rewritten in place: a byte
    changed (its checksum fails), so the live state cannot be proved."""
    shard = path / "trajectory" / "atoms" / "x" / "c" / "0"
    data = bytearray(shard.read_bytes())
    data[8] ^= 0xFF
    shard.write_bytes(bytes(data))


def _rolled_back(path: Path, trust_everything: bool) -> Dict[int, float]:
    """Run 1 commits 10 frames, durable at 4; a reader caches all 10 (whole chunks); the
    power goes (the tail index tears), recovery rolls back to the 4 durable frames and run 2
    commits 13 frames of other values; the reader refreshes and reads every frame.  Returns
    frame -> the value read.  ``trust_everything``: the negative control, a reader whose
    caches trust every committed row across the refresh (as if the live state's rows past
    the checkpoint were durable)."""
    first = mr.MrecWriter(path, _schema(), flush_every=1)
    for i in range(10):
        first.append(_frame(i, 1))
        if i == 3:
            first.flush()  # durable: frames 0-3 are in the checkpoint
    reader = mr.MrecReader(path)
    assert len(reader) == 10 and reader.source == "live"
    for i in range(10):
        assert reader[i].blocks["atoms"].columns["x"][0] == 1000.0 + i
    if trust_everything:
        state = reader._engine.state
        state.durable = dict(state.layout.logical)
    del first  # the power went: the writer is gone, its checkpoint stays
    _tear_tail_index(path)
    second = mr.MrecWriter.open(path)  # recovery: the checkpoint's 4 frames
    assert second.committed == 4
    for i in range(4, 13):
        second.append(_frame(i, 2))
    second.close()
    assert reader.refresh() == 13
    got = {i: float(reader[i].blocks["atoms"].columns["x"][0]) for i in range(13)}
    got.update({-1 - i: float(f.blocks["atoms"].columns["x"][0]) for i, f in enumerate(reader.read_frames(range(13)))})
    reader.close()
    return got


def test_trajectory_10_a_refresh_never_serves_a_rolled_back_frame_from_a_cache(tmp_path: Path) -> None:
    got = _rolled_back(tmp_path / "a.mrec", trust_everything=False)
    want = [1000.0 + i if i < 4 else 2000.0 + i for i in range(13)]
    assert [got[i] for i in range(13)] == want
    assert [got[-1 - i] for i in range(13)] == want
    control = _rolled_back(tmp_path / "b.mrec", trust_everything=True)  # the promise is what keeps it right
    stale = [i for i in range(13) if control[i] != want[i]]
    assert stale and all(4 <= i < 10 for i in stale), control


def test_trajectory_10_cached_pages_and_chunks_serve_only_committed_rows(tmp_path: Path) -> None:
    """A reader refreshes after every commit of a writer appending into the same tail inner
    chunk and shard (one index page rewritten each time): every frame, old and new, read one
    by one, in batches and iterated, is the one committed."""
    path = tmp_path / "l.mrec"
    schema = mr.SequenceSchema().declare_block("atoms", rows=7).declare_column("atoms", "x", "f64")
    schema.declare_meta("pe", "f64")
    w = mr.MrecWriter(path, schema, flush_every=1)
    reader, bare = mr.MrecReader(path), mr.MrecReader(path, cache_bytes=0)
    value = lambda i: np.arange(7.0) + 10.0 * i  # noqa: E731
    for i in range(60):
        w.append(mr.Frame({"pe": float(-i)}, {"atoms": mr.Block({"x": value(i)})}))
        if i % 17 == 16:
            w.flush()
        for r in (reader, bare):
            n = r.refresh()
            assert n == i + 1
            picks = [n - 1, 0, n // 2, n - 1]
            for f, k in zip(r.read_frames(picks), picks):
                assert np.array_equal(f.blocks["atoms"].columns["x"], value(k)) and f.meta == {"pe": float(-k)}
            assert np.array_equal(r[n - 1].blocks["atoms"].columns["x"], value(n - 1))
        if i % 9 == 0:
            for k, f in enumerate(reader):
                assert np.array_equal(f.blocks["atoms"].columns["x"], value(k))
    w.close()
    reader.close()
    bare.close()
