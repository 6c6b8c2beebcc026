"""The append fast paths write the bytes of the general path (issue 29; writers are
deterministic, trajectory §10): a commit's byte shuffles into the writer's reused
``EncodeScratch``, chunk bytes landed by ``pwritev`` without a joined copy
(``FileOps.pwrite_parts``), positional landings of whole inner chunks planned by arithmetic
(``ShardingCodec._run_slots``).  Each store is written twice — fast paths on, and all three
off (the general path: a shuffle into a new array, one joined ``pwrite``, the projection of
every inner chunk) — and compared file by file.  The golden digests of test_store_bytes.py
tie the general path to main's bytes."""
from contextlib import ExitStack
from pathlib import Path
from typing import Dict, List, Optional
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from molrec_raw import MrecWriter, SequenceSchema
from molrec_raw.record.model import Block, Frame
from molrec_raw.record.trajectory import writer as writer_module
from molrec_raw.zarr import fileops
from molrec_raw.zarr.codecs.sharding import ShardingCodec, _local_dims
from molrec_raw.zarr.indexing import covers, project
from molrec_raw.zarr.store import DirectoryStore, Store
from file_trees import files_under


def _general_paths() -> ExitStack:
    """Every append fast path off: what the writer did before them."""
    stack = ExitStack()
    stack.enter_context(mock.patch.object(ShardingCodec, "_run_slots", lambda self, local: None))
    stack.enter_context(mock.patch.object(DirectoryStore, "write_parts_at", Store.write_parts_at))
    stack.enter_context(mock.patch.object(writer_module, "EncodeScratch", lambda: None))
    return stack


def _write(path: Path, atoms: int, sizes: List[int], flush_every: Optional[int], durable: bool,
           masked: bool, seed: int, extra: bool = True) -> None:
    schema = SequenceSchema().declare_block("atoms", rows=atoms)  # chunks of whole frames (W1)
    for c in "xyz":
        schema.declare_column("atoms", c, "f64").declare_precision("atoms", c, 1e-3)
    if extra:  # narrower columns: inner chunks of several frames
        schema.declare_column("atoms", "q", "u16").declare_column("atoms", "kind", "i32")
    if masked:
        schema.declare_column("atoms", "v", "f64").declare_nullable("atoms", "v")
    rng = np.random.default_rng(seed)
    base = rng.uniform(0, 50, size=(3, max(sizes)))
    with MrecWriter(path, schema, flush_every=flush_every, durable=durable) as w:
        for i, n in enumerate(sizes):
            values: Dict[str, np.ndarray] = {c: base[k, :n] + 0.01 * i for k, c in enumerate("xyz")}
            if extra:
                values["q"] = rng.integers(0, 2**16, size=n, dtype=np.uint16)
                values["kind"] = (np.arange(n, dtype=np.int32) + i) % 5
            masks = {}
            if masked:
                values["v"] = rng.normal(size=n)
                masks["v"] = rng.random(n) > 0.3
            w.append(Frame(blocks={"atoms": Block(values, masks=masks)}), step=2 * i)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(atoms=st.sampled_from([3, 64, 1024, 2048, 2500]), frames=st.integers(1, 24),
       ragged=st.booleans(), flush_every=st.one_of(st.none(), st.integers(1, 9)), durable=st.booleans(),
       masked=st.booleans(), seed=st.integers(0, 2**16), extra=st.booleans())
def test_append_fast_paths_write_the_general_paths_bytes(tmp_path_factory: pytest.TempPathFactory, atoms: int,
                                                         frames: int, ragged: bool, flush_every: Optional[int],
                                                         durable: bool, masked: bool, seed: int,
                                                         extra: bool) -> None:
    """Deterministic writers (trajectory §10, ``trajectory#I14``: the extents and codecs of
    the first append, every commit after): fast and general paths, byte for byte."""
    sizes = [atoms + (i % 3 if ragged and i >= frames // 2 else 0) for i in range(frames)]
    work = tmp_path_factory.mktemp("fast")
    _write(work / "fast.mrec", atoms, sizes, flush_every, durable, masked, seed, extra)
    with _general_paths():
        _write(work / "general.mrec", atoms, sizes, flush_every, durable, masked, seed, extra)
    fast, general = files_under(work / "fast.mrec"), files_under(work / "general.mrec")
    assert sorted(fast) == sorted(general)
    assert [name for name in fast if fast[name] != general[name]] == []


def test_run_slots_are_those_of_the_projection() -> None:
    """The arithmetic of ``_run_slots`` against ``project`` + ``covers``: aligned runs of
    whole inner chunks give their slots; a partial or misaligned one, a step or an int
    index gives None (the general path)."""
    codec = ShardingCodec.from_config({"chunk_shape": [4, 3], "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]},
                                      _spec((16, 3)))
    assert codec._run_slots((slice(0, 16, 1), slice(0, 3, 1))) == [0, 1, 2, 3]
    assert codec._run_slots((slice(4, 12, 1), slice(0, 3, 1))) == [1, 2]
    assert codec._run_slots((slice(4, 10, 1), slice(0, 3, 1))) is None  # ends inside a chunk
    assert codec._run_slots((slice(2, 8, 1), slice(0, 3, 1))) is None  # starts inside one
    assert codec._run_slots((slice(0, 8, 2), slice(0, 3, 1))) is None  # a step
    assert codec._run_slots((slice(0, 8, 1), slice(0, 2, 1))) is None  # part of the rows
    assert codec._run_slots((4, slice(0, 3, 1))) is None
    for start in range(0, 16):  # every run it accepts is what the projection finds, all covered
        for stop in range(start + 1, 17):
            local = (slice(start, stop, 1), slice(0, 3, 1))
            found = codec._run_slots(local)
            touched = list(project(_local_dims(local), codec.chunk_shape))
            whole = all(covers(inner, codec.chunk_shape) for _, inner, _ in touched)
            assert (found is not None) == whole
            if found is not None:
                assert found == [coords[0] for coords, _, _ in touched]


def _spec(shape: tuple) -> object:
    from molrec_raw.zarr.codecs import ChunkSpec
    from molrec_raw.zarr.dtypes import data_type
    return ChunkSpec(shape, data_type("float64"), 0.0)


def test_pwrite_parts_is_one_pwrite_of_the_joined_bytes_for_a_seam(tmp_path: Path) -> None:
    """The one seam for file mutations (zarr/fileops.py; the power-cut recorder and the fault
    injector of spec-notes/safety.md): a FileOps whose ``pwrite`` verb is overridden sees the
    parts as one ``pwrite`` of their concatenation; the system's verb writes them by
    ``pwritev`` — the same bytes either way."""
    seen: List[bytes] = []

    class Recorder(fileops.FileOps):
        def pwrite(self, fd: int, data: fileops.Buffer, offset: int) -> int:
            seen.append(bytes(data))
            return super().pwrite(fd, data, offset)

    parts = [b"abc", memoryview(b"defg"), b"", bytearray(b"hij")]
    for name, ops in (("plain", fileops.FileOps()), ("seam", Recorder())):
        fd = ops.open(str(tmp_path / name), fileops.os.O_WRONLY | fileops.os.O_CREAT)
        try:
            ops.pwrite_parts(fd, parts, 5)
        finally:
            ops.close(fd)
        assert (tmp_path / name).read_bytes() == b"\0" * 5 + b"abcdefghij"
    assert seen == [b"abcdefghij"]


def test_streaming_commits_take_the_run_path(tmp_path: Path) -> None:
    """The property above compares something: a streaming writer of one-frame inner chunks
    (x, y, z of 2,500 atoms) lands every commit after a shard's first through
    ``_run_slots`` (12 frames, commits of 3: the first creates the shards, the other three
    append to them: 3 arrays x 3 commits)."""
    taken: List[Optional[List[int]]] = []
    real = ShardingCodec._run_slots

    def counted(self: ShardingCodec, local: tuple) -> Optional[List[int]]:
        slots = real(self, local)
        taken.append(slots)
        return slots

    with mock.patch.object(ShardingCodec, "_run_slots", counted):
        _write(tmp_path / "s.mrec", 2500, [2500] * 12, 3, False, False, 1, extra=False)
    assert len([s for s in taken if s is not None]) == 9
