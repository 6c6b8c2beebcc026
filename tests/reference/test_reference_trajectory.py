"""Trajectories written by one side and read by the other, whole and streaming (trajectory
§2–§15 and checklist §18): regular runs (progressions, elided blocks), irregular updates,
topology changes, zero-row updates, carried-forward blocks, a cell per frame, per-step meta
with fills, precision, masks, strings, frames larger than a chunk.

Both readers must hand back the same frames, value for value and floats bit for bit
(tests/reference/reference_helpers.py), and the same frames as were appended.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import pytest

molrs = pytest.importorskip("molrs", reason="molrs (molcrafts-molrs) ships wheels for CPython >= 3.12 only")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import molrec_raw as mr  # noqa: E402
from molrec_raw.conformance.canonical import first_difference  # noqa: E402
from molrec_raw.record.model import Block, Box, Frame, MetaValue  # noqa: E402
from reference_helpers import (EVERY_TAG, assert_same_reading, frame_doc, from_peer_box, from_peer_frame,  # noqa: E402
                               molrs_peer, ours_dump, peer_trajectory_doc, strip_attrs, to_peer_frame)

PEER = molrs_peer(molrs)
# NUL is left out of generated strings: molrs's Python hands string columns back as numpy
# fixed-width unicode, which drops a trailing NUL (test_reference_disagreements.py).
TEXT = st.characters(blacklist_characters="\x00")
Step = Tuple[Frame, Optional[int], Optional[float]]


def _atoms(n: int, seed: int, precision: bool = False, masked: bool = False) -> Block:
    rng = np.random.default_rng(seed)
    cols = {"x": rng.normal(size=n), "y": rng.normal(size=n), "z": rng.normal(size=n),
            "element": np.array([("C", "Hé", "O", "")[i % 4] for i in range(n)], dtype=object),
            "charge": rng.normal(size=n)}
    masks = {}
    if masked and n:
        masks["charge"] = np.arange(n) % 3 != 1
    return Block(columns=cols, masks=masks, precision={"x": 1e-3} if precision else {})


def _bonds(pairs: List[Tuple[int, int]]) -> Block:
    a = np.array([p[0] for p in pairs], dtype=np.uint64)
    b = np.array([p[1] for p in pairs], dtype=np.uint64)
    return Block(columns={"atomi": a, "atomj": b}, targets={"atomi": "atoms", "atomj": "atoms"})


def _regular() -> List[Step]:
    """6 frames of 4 atoms, constant bonds and cell: progressions and elided blocks (§10, §11)."""
    box = Box(vectors=np.diag([10.0, 11.0, 12.0]))
    bonds = _bonds([(0, 1), (1, 2), (2, 3)])
    return [(Frame(meta={}, blocks={"atoms": _atoms(4, k), "bonds": bonds}, box=box), 10 * k, 0.5 * k)
            for k in range(6)]


def _irregular() -> List[Step]:
    """Ragged atoms (3, 5, 5 carried, 4, 5000 — larger than an inner chunk), bonds changing,
    a zero-row bonds update, a carried-forward block, a cell per frame (triclinic, origins,
    partly and not periodic), per-step meta present and omitted (its fill), precision,
    masks and strings, irregular steps and times."""
    out: List[Step] = []
    sizes = [3, 5, None, 4, 5000, 4]
    bonds = [[(0, 1)], [(0, 1), (3, 4)], None, [], None, [(1, 2), (2, 3)]]
    for k, (n, pairs) in enumerate(zip(sizes, bonds)):
        blocks: Dict[str, Block] = {}
        if n is not None:
            blocks["atoms"] = _atoms(n, k, precision=True, masked=True)
        if pairs is not None:
            blocks["bonds"] = _bonds(pairs)
        if k == 4:  # one cell_defined flag per run (trajectory#W29): a free cell, still defined
            box = Box(vectors=np.diag([20.0, 20.0, 20.0]), origin=np.array([1.0, -2.0, 0.5]),
                      boundary=(False, False, False))
        else:
            box = Box(vectors=np.array([[10.0 + k, 1.0, 0.5], [0.0, 11.0, -0.25 * k], [0.0, 0.0, 12.0]]),
                      origin=np.array([0.1 * k, 0.0, -0.0]), boundary=(True, k % 2 == 0, True))
        meta = {"energy": MetaValue("f64", -1.5 * k if k != 2 else float("nan")),
                "nacc": MetaValue("u64", 2**64 - 1 - k)}
        if k % 2 == 0:
            meta["label"] = MetaValue("string", f"s{k}")
            meta["com"] = MetaValue("f64x3", (0.1 * k, -0.0, 1e300))
        out.append((Frame(meta=meta, blocks=blocks, box=box), [0, 1, 5, 6, 100, 101][k],
                    [0.0, 0.5, 1.25, -0.0, 1e-300, 2e300][k]))
    return out


def _shapes_and_tags() -> List[Step]:
    """Per-step meta of every tag (§5), a structurally shaped block, a block appearing late, a
    column-less block whose row count changes, and a string column with a mask, over 3 frames with a fixed cell given only on frame 0."""
    out: List[Step] = []
    for k in range(3):
        meta = {f"m_{tag}": MetaValue(tag, value) for tag, value in EVERY_TAG.items()}
        meta["m_f64"] = MetaValue("f64", [5e-324, float("inf"), -0.0][k])
        blocks = {"grid": Block(columns={"rho": np.arange(6, dtype=np.float64) * (k + 1)}, structural_shape=(2, 3)),
                  "atoms": Block(columns={"name": np.array(["a", "b", "c"][:k + 1], dtype=object),
                                          "q": np.arange(k + 1, dtype=np.int32)},
                                 masks={"name": np.arange(k + 1) != 1} if k else {})}
        if k == 2:
            blocks["late"] = Block(columns={"c": np.array([1 + 2j], dtype=np.complex128)})
        blocks["bare"] = Block(columns={}, count=5 + (k == 2))  # a column-less block: its row count alone
        out.append((Frame(meta=meta, blocks=blocks, box=Box(vectors=np.diag([3.0, 4.0, 5.0])) if k == 0 else None),
                    None, None))
    return out


NUMPY = {"i8": "i1", "i16": "i2", "i32": "i4", "i64": "i8", "u8": "u1", "u16": "u2", "u32": "u4", "u64": "u8",
         "bool": "?", "c64": "c8", "c128": "c16", "f64": "f8"}


def _dtypes_aligned() -> List[Step]:
    """Every column dtype with a trailing 3x3 axis and strings, growing each frame, with an
    aligned block (trajectory §8.7) restated as its target grows."""
    out: List[Step] = []
    for k in range(3):
        n = k + 2
        cols = {f"c_{d}": (np.arange(n) * 7 + 1).astype(t) for d, t in NUMPY.items()}
        cols["s"] = np.array(["x" * i for i in range(n)], dtype=object)
        cols["v"] = np.arange(n * 9, dtype=np.float64).reshape(n, 3, 3) / 3
        blocks = {"atoms": Block(columns=cols), "types": Block(columns={"t": np.arange(n, dtype=np.int64)})}
        out.append((Frame(meta={}, blocks=blocks, box=None), 2 * k, None))
    return out


FILLS = {"label": ("string", "none"), "com": ("f64x3", (float("nan"), 0.0, -1.0))}
SCENARIOS: Dict[str, Callable[[], List[Step]]] = {"regular": _regular, "irregular": _irregular,
                                                  "shapes-and-tags": _shapes_and_tags,
                                                  "dtypes-aligned": _dtypes_aligned}


def _frames_of(steps: List[Step]) -> List[Frame]:
    return [f for f, _, _ in steps]


def _our_schema(steps: List[Step]) -> mr.SequenceSchema:
    bare = [Frame(meta={k: v for k, v in f.meta.items() if k not in FILLS}, blocks=f.blocks, box=f.box)
            for f in _frames_of(steps)]
    schema = mr.SequenceSchema.from_frames(bare)
    if "types" in bare[0].blocks:
        schema.declare_aligned("types", "atoms")
    if any("label" in f.meta for f in _frames_of(steps)):
        for key, (tag, fill) in FILLS.items():
            schema.declare_meta_with_fill(key, fill, tag)
    return schema


def _peer_schema(steps: List[Step]):
    bare = []
    for f in _frames_of(steps):
        pf = to_peer_frame(PEER, Frame(meta={k: v for k, v in f.meta.items() if k not in FILLS},
                                       blocks=f.blocks, box=f.box))
        bare.append(pf)
    schema = PEER.mrec.SequenceSchema.from_frames(bare)
    if "types" in bare[0].keys():
        schema.declare_aligned("types", "atoms")
    if any("label" in f.meta for f in _frames_of(steps)):
        for key, (tag, fill) in FILLS.items():
            schema.declare_meta(key, tag, fill)
    return schema


def _write_ours(path: Path, steps: List[Step], flush_at: Optional[int] = None, **kw) -> Path:
    with mr.MrecWriter(path, _our_schema(steps), durable=False, **kw) as w:
        for i, (frame, step, time) in enumerate(steps):
            w.append(frame, step=step, time=time)
            if flush_at is not None and i + 1 == flush_at:
                w.flush()
    return path


def _write_theirs(path: Path, steps: List[Step], flush_at: Optional[int] = None, **kw) -> Path:
    with PEER.mrec.MrecWriter(path, _peer_schema(steps), durable=False, **kw) as w:
        for i, (frame, step, time) in enumerate(steps):
            w.append(to_peer_frame(PEER, frame), step=step, time=time)
            if flush_at is not None and i + 1 == flush_at:
                w.flush()
    return path


WRITERS = {"ours": _write_ours, "molrs": _write_theirs}


def _expected_frames(steps: List[Step]) -> List[Dict]:
    """The frames a reader must hand back: omitted blocks carried forward, omitted meta keys
    filled, precision applied (q = 2**-10 for p = 1e-3, frame-and-types §9)."""
    out, carried = [], {}
    q = 2.0 ** -10
    box = None
    for frame, _, _ in steps:
        box = frame.box if frame.box is not None else box  # the cell carries forward (§6)
        for name, block in frame.blocks.items():
            cols = dict(block.columns)
            if "x" in block.precision:
                cols["x"] = np.round(np.asarray(cols["x"]) / q) * q
            carried[name] = Block(columns=cols, masks=dict(block.masks), precision=dict(block.precision),
                                  targets=dict(block.targets), structural_shape=block.structural_shape,
                                  count=block.count)
        meta = dict(frame.meta)
        if any("label" in f.meta for f, _, _ in steps):
            for key, (tag, fill) in FILLS.items():
                meta.setdefault(key, MetaValue(tag, fill))
        out.append(frame_doc(Frame(meta=meta, blocks=dict(carried), box=box)))
    return out


@pytest.mark.parametrize("knobs", [{}, {"flush_every": 1}, {"compression": "gzip:3"},
                                   {"compression": "zstd:9", "flush_every": 2}])
@pytest.mark.parametrize("writer", WRITERS)
def test_trajectory_13_knobs_read_alike(tmp_path, writer, knobs):
    """Codecs and flush cadence knobs (§13, §14: a flush per frame leaves dead bytes) change
    the bytes, not the reading, for either writer."""
    path = WRITERS[writer](tmp_path / "knobs.mrec", _irregular(), **knobs)
    assert assert_same_reading(PEER, path)["trajectory"]["nstep"] == 6


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("writer", WRITERS)
def test_trajectory_18_whole_runs_read_alike(tmp_path, writer, scenario):
    """A whole run written by either side is read alike by both (steps, times, every frame's
    blocks, masks, precision, targets, cell and typed per-step meta), and is what was appended."""
    steps = SCENARIOS[scenario]()
    path = WRITERS[writer](tmp_path / "run.mrec", steps, compression="zstd:3" if scenario == "irregular" else None)
    doc = assert_same_reading(PEER, path)
    traj = doc["trajectory"]
    assert traj["nstep"] == len(steps)
    given = [s for _, s, _ in steps]
    assert traj["step"] == (list(range(len(steps))) if given[0] is None else given)  # no step: 0, 1, 2... (§2.8)
    difference = first_difference(_expected_frames(steps), traj["frames"])
    assert difference is None, difference
    assert mr.validate(path) == []  # the other writer's run validates clean here too


@pytest.mark.parametrize("writer", WRITERS)
def test_trajectory_18_regular_run_layout_agrees(tmp_path, writer):
    """trajectory §10/§11: both writers elide the regular run the same way (progressions, no
    step/time arrays, uniform_rows/dense_updates hints), so each reads the other's hints."""
    path = WRITERS[writer](tmp_path / "regular.mrec", _regular())
    import json
    attrs = json.loads((path / "trajectory" / "zarr.json").read_text())["attributes"]
    assert attrs["nstep"] == 6
    assert attrs["step_progression"] == {"start": 0, "stride": 10}
    assert attrs["time_progression"] == {"start": 0.0, "stride": 0.5}
    atoms = json.loads((path / "trajectory" / "atoms" / "zarr.json").read_text())["attributes"]
    assert atoms.get("uniform_rows") == 4 and atoms.get("dense_updates") is True
    bonds = json.loads((path / "trajectory" / "bonds" / "zarr.json").read_text())["attributes"]
    assert bonds.get("uniform_rows") == 3 and not (path / "trajectory" / "bonds" / "offset").exists()


@pytest.mark.parametrize("writer", WRITERS)
def test_trajectory_9_streaming_committed_prefix_read_alike(tmp_path, writer):
    """Streaming (§9 commit protocol): while the writer is still open after a flush, both
    readers see the same committed prefix; after close, the whole run."""
    steps = _irregular()
    path = tmp_path / "live.mrec"
    if writer == "ours":
        w = mr.MrecWriter(path, _our_schema(steps), durable=False, flush_every=100)
        append = lambda f, s, t: w.append(f, step=s, time=t)  # noqa: E731
    else:
        w = PEER.mrec.MrecWriter(path, _peer_schema(steps), durable=False, flush_every=100)
        append = lambda f, s, t: w.append(to_peer_frame(PEER, f), step=s, time=t)  # noqa: E731
    for frame, step, time in steps[:3]:
        append(frame, step, time)
    w.flush()
    append(*steps[3])  # appended, not committed
    ours = ours_dump(path)["trajectory"]
    theirs = peer_trajectory_doc(PEER, path)
    assert ours["nstep"] == theirs["nstep"] == 3
    difference = first_difference(strip_attrs(ours), strip_attrs(theirs))
    assert difference is None, difference
    for frame, step, time in steps[4:]:
        append(frame, step, time)
    w.close()
    doc = assert_same_reading(PEER, path)
    assert doc["trajectory"]["nstep"] == len(steps)


@pytest.mark.parametrize("writer", WRITERS)
def test_trajectory_15_packed_run_read_alike(tmp_path, writer):
    """A run packed into a zip by the other side's ``pack_mrec_zip`` reads alike by both."""
    path = WRITERS[writer](tmp_path / "run.mrec", _irregular())
    packed = Path(molrs.io.mrec.pack_mrec_zip(path) if writer == "ours" else mr.pack_mrec_zip(path))
    doc = assert_same_reading(PEER, packed)
    assert doc["trajectory"]["nstep"] == 6


# -- property-based: random runs written by one side, read by the other ---------------------

@st.composite
def runs(draw):
    n_frames = draw(st.integers(1, 5))
    out: List[Step] = []
    step = draw(st.integers(0, 3))
    # one cell_defined flag per run (trajectory#W29; a mixed run is test_trajectory_w29_mixed_cell_defined)
    cells = draw(st.sampled_from([[None], [Box(vectors=np.diag([5.0, 6.0, 7.0])),
                                           Box(vectors=np.diag([5.0, 6.0, 7.5]), boundary=(True, False, True))],
                                  [Box.undefined(origin=(1.0, 2.0, 3.0)), Box.undefined()]]))
    for k in range(n_frames):
        blocks = {}
        if k == 0 or draw(st.booleans()):  # omitted: carried forward
            n = draw(st.integers(0, 6))
            x = np.array(draw(st.lists(st.floats(width=64), min_size=n, max_size=n)), dtype=np.float64)
            ids = np.array(draw(st.lists(st.integers(0, 2**64 - 1), min_size=n, max_size=n)), dtype=np.uint64)
            names = np.array(draw(st.lists(st.text(TEXT, max_size=3), min_size=n, max_size=n)), dtype=object).reshape(n)
            vel = np.array(draw(st.lists(st.floats(width=64), min_size=3 * n, max_size=3 * n))).reshape(n, 3)
            masks = {}
            if n and draw(st.booleans()):
                mask = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
                if not mask.all():
                    masks["name"] = mask
            blocks["atoms"] = Block(columns={"x": x, "tag": ids, "name": names, "vel": vel}, masks=masks, count=n)
        box = draw(st.sampled_from(cells))
        out.append((Frame(meta={"e": MetaValue("f64", draw(st.floats(width=64)))}, blocks=blocks, box=box), step,
                    None))
        step += draw(st.integers(1, 4))
    return out


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=runs(), writer=st.sampled_from(sorted(WRITERS)))
def test_trajectory_18_hypothesis_runs_read_alike(tmp_path_factory, steps, writer):
    """Random runs (ragged and zero-row updates, carried blocks, NaN/inf/-0.0, u64 extremes,
    strings with a validity mask, a trailing axis, a cell that appears, changes or is undefined)
    read alike by both readers and as appended."""
    path = WRITERS[writer](tmp_path_factory.mktemp("run") / "h.mrec", steps)
    doc = assert_same_reading(PEER, path)
    difference = first_difference(_expected_frames(steps), doc["trajectory"]["frames"])
    assert difference is None, difference
    assert mr.validate(path) == []


def test_trajectory_w29_mixed_cell_defined(tmp_path):
    """Disagreement (spec-notes/conformance.md, "molrs writes a run whose cells disagree on
    cell_defined"): ``cell_defined`` is one flag for the whole box section (trajectory §7, I12);
    a run whose later cell is undefined cannot be stored.  We refuse it (trajectory#W29); molrs
    0.19 writes the undefined cell as a *defined* identity cell, not periodic, so the reading
    says a cell exists where the producer said none does.  Fails when either side changes."""
    steps = [(Frame(meta={}, blocks={"atoms": Block(columns={"x": np.zeros(1)})}, box=Box(vectors=np.diag([5.0, 6.0, 7.0]))),
              None, None),
             (Frame(meta={}, blocks={}, box=Box.undefined(origin=(1.0, 2.0, 3.0))), None, None)]
    with pytest.raises(mr.errors.SpecViolationError) as refused:
        _write_ours(tmp_path / "ours.mrec", steps)
    assert refused.value.rule == "trajectory#W29"
    path = _write_theirs(tmp_path / "theirs.mrec", steps)
    doc = assert_same_reading(PEER, path)
    second = doc["trajectory"]["frames"][1]["box"]
    assert second == {"vectors": [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], "origin": [1.0, 2.0, 3.0],
                      "boundary": [False, False, False], "defined": True}


@pytest.mark.parametrize("writer", WRITERS)
def test_trajectory_8_empty_run_read_alike(tmp_path, writer):
    """A run created and closed with no frame (reference behaviour §2.8) reads as 0 frames in both."""
    steps = _regular()[:1]
    path = tmp_path / "empty.mrec"
    if writer == "ours":
        mr.MrecWriter(path, _our_schema(steps), durable=False).close()
    else:
        PEER.mrec.MrecWriter(path, _peer_schema(steps), durable=False).close()
    doc = assert_same_reading(PEER, path)
    assert doc["trajectory"]["nstep"] == 0 and doc["trajectory"]["frames"] == []


@pytest.mark.parametrize("writer", ["ours", "molrs"])
def test_trajectory_18_whole_trajectory_doors_read_alike(tmp_path, writer):
    """The whole-run doors: our ``write_mrec_trajectory`` and molrs's ``write_mrec(trajectory=)``
    (a ``Trajectory`` with step and time arrays) write runs both read alike."""
    steps = _irregular()
    frames = _frames_of(steps)
    step = np.array([s for _, s, _ in steps], dtype=np.int64)
    time = np.array([t for _, _, t in steps], dtype=np.float64)
    path = tmp_path / "whole.mrec"
    plain = [Frame(meta={k: v for k, v in f.meta.items() if k not in FILLS}, blocks=f.blocks, box=f.box) for f in frames]
    if writer == "ours":
        mr.write_mrec_trajectory(path, plain, steps=step.tolist(), times=time.tolist())
    else:
        molrs.io.write_mrec(path, trajectory=PEER.core.Trajectory([to_peer_frame(PEER, f) for f in plain], step, time))
    doc = assert_same_reading(PEER, path)
    assert doc["trajectory"]["step"] == step.tolist()
    assert first_difference([float(t) for t in time], doc["trajectory"]["time"]) is None


def _array_layouts(path: Path) -> Dict[str, Tuple[List[int], List[int], List[str]]]:
    import json
    out = {}
    for doc in sorted(path.rglob("zarr.json")):
        meta = json.loads(doc.read_text(encoding="utf-8"))
        if meta["node_type"] != "array":
            continue
        shard = meta["chunk_grid"]["configuration"]["chunk_shape"]
        inner = next(c["configuration"] for c in meta["codecs"] if c["name"] == "sharding_indexed")
        out[doc.parent.relative_to(path).as_posix()] = (shard, inner["chunk_shape"], [c["name"] for c in inner["codecs"]])
    return out


@pytest.mark.parametrize("atoms,columns,flush_every", [(1000, "xyz", 174), (1000, "x", 525), (64, "xyz", 2752),
                                                       (100, "x", 4116), (7, "x", 4102)])
def test_readme_decision_3_cadence_and_inner_chunks_are_the_references(tmp_path, atoms, columns, flush_every):
    """README#decision-3 (trajectory §12, §14): the auto-flush K and the inner chunk extents and
    codecs are the reference writer's.  The shard extent is not: our shard index holds at most
    255 inner chunks (spec-notes/trajectory.md, "Shard indexes are capped at 255 inner chunks";
    molrs 0.19 puts up to 4096 in one shard), a layout choice every reader accepts."""
    frame = Frame(meta={}, blocks={"atoms": Block(columns={c: np.zeros(atoms) for c in columns})}, box=None)
    ours, theirs = tmp_path / "ours.mrec", tmp_path / "theirs.mrec"
    w = mr.MrecWriter(ours, mr.SequenceSchema.from_frames([frame]), durable=False)
    w.append(frame)
    assert w.flush_every == flush_every
    w.close()
    pf = to_peer_frame(PEER, frame)
    w = PEER.mrec.MrecWriter(theirs, PEER.mrec.SequenceSchema.from_frames([pf]), durable=False)
    w.append(pf)
    assert w.flush_every == flush_every
    w.close()
    mine, reference = _array_layouts(ours), _array_layouts(theirs)
    assert sorted(mine) == sorted(reference)
    for name in mine:
        (shard, inner, codecs), (their_shard, their_inner, their_codecs) = mine[name], reference[name]
        assert inner == their_inner and codecs == their_codecs, name
        assert shard[0] == inner[0] * min(255, their_shard[0] // their_inner[0]), name


def _whole_record(writer: str, path: Path, steps: List[Step], system: Frame) -> Path:
    """A record with meta, frame, system and a trajectory, written by ``writer`` in one go
    (molrs: ``write_mrec``) or as we do it (``write_mrec`` then an ``MrecWriter`` on the record)."""
    frames = _frames_of(steps)
    if writer == "ours":
        mr.write_mrec(path, mr.MolRec(meta={"creator": {"name": "molrec_raw"}}, frame=frames[0], system=system))
        _write_ours(path, steps)
    else:
        molrs.io.write_mrec(path, meta={"creator": {"name": "molrs"}}, frame=to_peer_frame(PEER, frames[0]),
                            system=to_peer_frame(PEER, system),
                            trajectory=PEER.core.Trajectory([to_peer_frame(PEER, f) for f in frames],
                                                            np.array([s for _, s, _ in steps], dtype=np.int64),
                                                            np.array([t for _, _, t in steps], dtype=np.float64)))
    return path


def _system(atoms: int, bonds: int) -> Frame:
    return Frame(meta={"name": "water"}, blocks={
        "atoms": Block(columns={"mass": np.linspace(1.0, 16.0, atoms), "type": np.array(["O"] * atoms, dtype=object)}),
        "bonds": Block(columns={"order": np.ones(bonds, dtype=np.int8)})}, box=None)


@pytest.mark.parametrize("writer", WRITERS)
def test_trajectory_8_8_whole_record_with_system_read_alike(tmp_path, writer):
    """A whole record — meta, frame, system and a trajectory whose blocks hold the system's
    rows (trajectory §8.8) — read alike by both and valid here."""
    path = _whole_record(writer, tmp_path / "whole.mrec", _regular(), _system(4, 3))
    doc = assert_same_reading(PEER, path)
    assert {"meta", "frame", "system", "trajectory"} <= set(doc["sections"])
    assert doc["trajectory"]["nstep"] == 6 and doc["system"]["blocks"]["atoms"]["count"] == 4
    assert mr.validate(path) == []


def test_trajectory_8_8_molrs_writes_trajectory_blocks_ragged_against_the_system(tmp_path):
    """trajectory §8.8 / frame-and-types §12: a trajectory block named like a system block
    holds exactly the system block's rows, and a ragged one MUST NOT share its name.  molrs
    0.19 writes such a record (it enforces only declared alignment) and reads it; we refuse to
    append such a frame and ``validate`` reports the record under trajectory#8.8."""
    steps = _irregular()
    plain = [(Frame(meta={k: v for k, v in f.meta.items() if k not in FILLS}, blocks=f.blocks, box=f.box), s, t)
             for f, s, t in steps]
    theirs = _whole_record("molrs", tmp_path / "theirs.mrec", plain, _system(4, 3))
    doc = assert_same_reading(PEER, theirs)
    assert doc["trajectory"]["frames"][0]["blocks"]["atoms"]["count"] == 3
    assert {v.rule for v in mr.validate(theirs)} >= {"trajectory#8.8"}
    with pytest.raises(mr.errors.SpecViolationError) as refused:
        _whole_record("ours", tmp_path / "ours.mrec", steps, _system(4, 3))
    assert refused.value.rule == "trajectory#8.8"


def _cell_run(cells: List[Optional[Box]]) -> List[Step]:
    return [(Frame(meta={}, blocks={"atoms": Block(columns={"x": np.arange(k + 1, dtype=np.float64)})}, box=cell), None,
             None) for k, cell in enumerate(cells)]


CELL_RUNS = {
    "undefined-fixed": [Box.undefined(origin=(1.0, 2.0, 3.0))] * 3,
    "undefined-moving": [Box.undefined(origin=(1.0 + k, 2.0, 3.0)) for k in range(3)],
    "late-cell": [None, None, Box(vectors=np.diag([4.0, 5.0, 6.0])), None],
    "slab-fixed": [Box(vectors=np.diag([4.0, 5.0, 6.0]), origin=np.array([1.0, -1.0, 0.0]),
                       boundary=(True, True, False))] * 3,
    "no-cell": [None] * 2,
}


@pytest.mark.parametrize("cells", CELL_RUNS)
@pytest.mark.parametrize("writer", WRITERS)
def test_trajectory_7_every_cell_form_read_alike(tmp_path, writer, cells):
    """trajectory §7: a fixed undefined cell (attribute form with ``cell_defined: false``), a
    moving undefined one, a cell first given at frame 2 (carried forward after), a fixed slab
    with an origin, no cell at all — read alike, and valid here."""
    steps = _cell_run(CELL_RUNS[cells])
    path = WRITERS[writer](tmp_path / "cells.mrec", steps)
    doc = assert_same_reading(PEER, path)
    assert first_difference(_expected_frames(steps), doc["trajectory"]["frames"]) is None
    assert mr.validate(path) == []


@pytest.mark.parametrize("writer", WRITERS)
def test_trajectory_8_5_change_detection_after_rounding_and_absolute_targets(tmp_path, writer):
    """trajectory §8.5: change detection compares values after rounding to the declared grid —
    a move of 0.3q is no update, 0.6q is one — in both writers alike; a row reference into
    ``/system/atoms`` with a null row rides along (§8.6)."""
    q = 2.0 ** -7
    steps = [(Frame(meta={}, blocks={
        "atoms": Block(columns={"x": np.array([1.0, 2.0]) + d}, precision={"x": 0.01}),
        "refs": Block(columns={"site": np.array([0, 5], dtype=np.uint64)}, masks={"site": np.array([True, False])},
                      targets={"site": "/system/atoms"})}, box=None), None, None) for d in (0.0, 0.3 * q, 0.6 * q)]
    system = Frame(meta={}, blocks={"atoms": Block(columns={"m": np.ones(2)})}, box=None)
    path = tmp_path / "rounded.mrec"
    if writer == "ours":
        mr.write_mrec(path, mr.MolRec(meta={}, system=system))
        _write_ours(path, steps)
    else:
        molrs.io.write_mrec(path, system=to_peer_frame(PEER, system),
                            trajectory=PEER.core.Trajectory([to_peer_frame(PEER, f) for f, _, _ in steps]))
    doc = assert_same_reading(PEER, path)
    assert [f["blocks"]["atoms"]["columns"]["x"]["values"] for f in doc["trajectory"]["frames"]] == [
        [1.0, 2.0], [1.0, 2.0], [1.0078125, 2.0078125]]
    with PEER.mrec.MrecReader(path) as reader:
        assert [reader.block_update_at("atoms", i) for i in range(3)] == [0, 0, 1]
    with mr.MrecReader(path) as reader:
        assert [reader.block_update_at("atoms", i) for i in range(3)] == [0, 0, 1]
    assert mr.validate(path) == []


def _first() -> Frame:
    return Frame(meta={"e": MetaValue("f64", 1.0)}, blocks={"atoms": Block(columns={"x": np.array([1.0, 2.0])})}, box=None)


def _next(blocks: Dict[str, Block], meta: Optional[Dict] = None) -> Frame:
    return Frame(meta={"e": MetaValue("f64", 1.0)} if meta is None else meta, blocks=blocks, box=None)


APPEND_REFUSED = {  # frame appended after _first(), its append keywords, the rule we refuse it under
    "undeclared-block": (_next({"atoms": Block(columns={"x": np.zeros(1)}), "new": Block(columns={"x": np.zeros(1)})}),
                         {}, "trajectory#W18"),
    "undeclared-column": (_next({"atoms": Block(columns={"x": np.zeros(1), "y": np.zeros(1)})}), {}, "trajectory#W18"),
    "present-block-omits-a-column": (_next({"atoms": Block(columns={}, count=1)}), {}, "trajectory#W20"),
    "step-not-increasing": (_first(), {"step": 0}, "trajectory#W16"),
    "time-gained": (_first(), {"time": 1.0}, "trajectory#W17"),
    "meta-omitted-without-fill": (_next({"atoms": Block(columns={"x": np.zeros(1)})}, meta={}), {}, "trajectory#W22"),
    "meta-undeclared": (_next({"atoms": Block(columns={"x": np.zeros(1)})}, meta={"e": MetaValue("f64", 1.0), "z": 1.0}),
                        {}, "trajectory#W18"),
    "mask-on-non-nullable": (_next({"atoms": Block(columns={"x": np.zeros(2)}, masks={"x": np.array([True, False])})}),
                             {}, "trajectory#W24"),
    "precision-not-pinned": (_next({"atoms": Block(columns={"x": np.zeros(1)}, precision={"x": 0.1})}), {},
                             "trajectory#W25"),
}


@pytest.mark.parametrize("case", APPEND_REFUSED)
def test_trajectory_w16_w25_both_writers_refuse_the_same_appends(tmp_path, case):
    """The append refusals (trajectory W16–W25): both writers refuse the same frames, and a
    refused frame leaves the committed run as it was (the run still reads its first frame)."""
    frame, keywords, rule = APPEND_REFUSED[case]
    first = _first()
    ours, theirs = tmp_path / "ours.mrec", tmp_path / "theirs.mrec"
    with mr.MrecWriter(ours, mr.SequenceSchema.from_frames([first]), durable=False) as w:
        w.append(first, step=0)
        with pytest.raises(mr.errors.SpecViolationError) as refused:
            w.append(frame, **keywords)
        assert refused.value.rule == rule
    pf = to_peer_frame(PEER, first)
    with PEER.mrec.MrecWriter(theirs, PEER.mrec.SequenceSchema.from_frames([pf]), durable=False) as w:
        w.append(pf, step=0)
        with pytest.raises(ValueError):
            w.append(to_peer_frame(PEER, frame), **keywords)
    for path in (ours, theirs):
        assert assert_same_reading(PEER, path)["trajectory"]["nstep"] == 1


@pytest.mark.parametrize("writer", WRITERS)
def test_trajectory_5_2_meta_value_under_another_tag_reread_through_the_pin(tmp_path, writer):
    """trajectory §5.2: a per-step value given under another tag is re-read through the pinned
    tag where exact — an ``i64`` 3 under an ``f64`` key is stored as 3.0 — by both writers."""
    steps = [(_first(), 0, None), (_next({"atoms": Block(columns={"x": np.zeros(2)})}, meta={"e": MetaValue("i64", 3)}),
                                   1, None)]
    path = tmp_path / "retag.mrec"
    if writer == "ours":
        with mr.MrecWriter(path, mr.SequenceSchema.from_frames([steps[0][0]]), durable=False) as w:
            for f, s, _ in steps:
                w.append(f, step=s)
    else:
        with PEER.mrec.MrecWriter(path, PEER.mrec.SequenceSchema.from_frames([to_peer_frame(PEER, steps[0][0])]),
                                  durable=False) as w:
            for f, s, _ in steps:
                w.append(to_peer_frame(PEER, f), step=s)
    doc = assert_same_reading(PEER, path)
    assert doc["trajectory"]["frames"][1]["meta"]["e"] == {"tag": "f64", "value": 3.0}


def test_trajectory_9_our_reader_follows_a_molrs_run_as_it_flushes(tmp_path):
    """Streaming across implementations (§9 commit protocol, §11 reopen rule for readers): our
    reader opened on a molrs run after its first flush sees each later flush through
    ``refresh()``, never a frame past molrs's ``committed``, and the frames are molrs's own;
    ``read_columns`` and ``box_at`` agree with molrs's ``frame_columns`` and ``box_at``."""
    steps = _irregular()
    path = tmp_path / "live.mrec"
    w = PEER.mrec.MrecWriter(path, _peer_schema(steps), durable=False, flush_every=1000)
    w.append(to_peer_frame(PEER, steps[0][0]), step=steps[0][1], time=steps[0][2])
    w.flush()
    reader = mr.MrecReader(path)
    try:
        assert len(reader) == 1
        for frame, step, time in steps[1:]:
            w.append(to_peer_frame(PEER, frame), step=step, time=time)
            assert reader.refresh() == len(reader) == w.committed  # appended, not yet committed
            w.flush()
            reader.refresh()
            assert len(reader) == w.committed
        w.close()
        reader.refresh()
        assert len(reader) == len(steps)
        with PEER.mrec.MrecReader(path) as theirs:
            for i in range(len(steps)):
                assert first_difference(frame_doc(from_peer_frame(theirs[i])),
                                        frame_doc(reader.read_frame(i))) is None
                mine = reader.read_columns(i, [("atoms", "x")])
                their = from_peer_frame(theirs.frame_columns(i, [("atoms", "x")]))
                assert first_difference(frame_doc(their), frame_doc(mine)) is None
                assert first_difference(frame_doc(Frame(meta={}, blocks={}, box=from_peer_box(theirs.box_at(i)))),
                                        frame_doc(Frame(meta={}, blocks={}, box=reader.box_at(i)))) is None
    finally:
        reader.close()
