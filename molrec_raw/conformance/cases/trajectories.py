"""Valid cases: trajectories (trajectory §2–§11) and metrics (documents §4, §5)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from molrec_raw.conformance.cases.base import WALL, edit_attrs, store_of, strings, valid
from molrec_raw.record.metrics import MetricsWriter
from molrec_raw.record.model import Block, Box, Frame, MetaValue
from molrec_raw.record.molrec import MolRec, write_mrec
from molrec_raw.record.trajectory import MrecWriter, SequenceSchema


def xs(*rows: float) -> Block:
    return Block({"x": np.array(rows, dtype=np.float64)})


def run(rec: Path, schema: SequenceSchema, frames: Sequence[Frame], steps: Optional[Sequence[int]] = None,
        times: Optional[Sequence[float]] = None, flush_every: Optional[int] = None,
        compression: Optional[str] = "zstd:3") -> None:
    """Write ``frames`` through MrecWriter (non-durable: the same bytes, no fsyncs).  Float
    columns are compressed unless ``compression=None`` (the writer's default: raw), which
    keeps a small case small: an inner chunk holds at least 16 KiB of rows, mostly fill."""
    with MrecWriter(rec, schema, durable=False, flush_every=flush_every, compression=compression) as writer:
        for i, frame in enumerate(frames):
            writer.append(frame, step=None if steps is None else steps[i], time=None if times is None else times[i])


def x_schema(**columns: str) -> SequenceSchema:
    schema = SequenceSchema().declare_block("atoms")
    for name, dtype in (columns or {"x": "f64"}).items():
        schema.declare_column("atoms", name, dtype)
    return schema


CUBE = Box(np.eye(3) * 10.0)


@valid("traj-regular", "a regular trajectory: a constant atom count moving every frame — elision markers, no "
       "index arrays; fixed cell as attributes; steps and times as progressions; the writer's default raw float "
       "codecs (trajectory#2, #3.1, #8.3)")
def _regular(rec: Path) -> None:
    frames = [Frame({}, {"atoms": xs(0.5 * i, 1.0 + i, 2.0 - i)}, CUBE) for i in range(4)]
    run(rec, x_schema(), frames, steps=[0, 10, 20, 30], times=[0.0, 0.5, 1.0, 1.5], compression=None)


@valid("traj-ragged", "a ragged trajectory: the atom count changes (3, 5, 4, 4), so the block is indexed by "
       "step_index and CSR offsets (trajectory#8.1)")
def _ragged(rec: Path) -> None:
    sizes = [3, 5, 4, 4]
    frames = [Frame({}, {"atoms": xs(*(float(10 * i + k) for k in range(n)))}) for i, n in enumerate(sizes)]
    frames[3] = Frame({}, {"atoms": xs(*(float(30 + k) + 0.5 for k in range(4)))})
    run(rec, x_schema(), frames)


@valid("traj-topology-change", "a topology change: bonds stated at frame 0, carried forward, restated at frame "
       "2 with one bond less (trajectory#6, #8.1)")
def _topology(rec: Path) -> None:
    schema = x_schema().declare_column("bonds", "atomi", "u64").declare_column("bonds", "atomj", "u64")
    bonds3 = Block({"atomi": np.array([0, 0, 3], dtype=np.uint64), "atomj": np.array([1, 2, 4], dtype=np.uint64)})
    bonds2 = Block({"atomi": np.array([0, 3], dtype=np.uint64), "atomj": np.array([1, 4], dtype=np.uint64)})
    frames = []
    for i in range(4):
        blocks = {"atoms": xs(*(float(i + k) for k in range(5)))}
        if i == 0:
            blocks["bonds"] = bonds3
        if i == 2:
            blocks["bonds"] = bonds2
        frames.append(Frame({}, blocks))
    run(rec, schema, frames)


@valid("traj-cell-change", "the cell changes at frames 0, 2, 3 (array form: step_index, vectors; carried "
       "forward in between) (trajectory#7)")
def _cell_change(rec: Path) -> None:
    cells = [np.eye(3) * 10.0, np.eye(3) * 10.0, np.eye(3) * 10.5, np.diag([11.0, 10.5, 10.0])]
    run(rec, x_schema(), [Frame({}, {"atoms": xs(1.0)}, Box(c)) for c in cells])


@valid("traj-cell-origin-slab", "a fixed slab cell with an origin, in the attribute form (vectors, origin, "
       "boundary) (trajectory#7)")
def _cell_slab(rec: Path) -> None:
    box = Box(np.eye(3) * 8.0, np.array([0.0, 0.0, -4.0]), (True, True, False))
    run(rec, x_schema(), [Frame({}, {"atoms": xs(float(i))}, box) for i in range(3)])


@valid("traj-cell-undefined", "an undefined cell with an origin that moves: cell_defined false, arrays "
       "with explicit all-false boundary (trajectory#7)")
def _cell_undefined(rec: Path) -> None:
    frames = [Frame({}, {"atoms": xs(float(i))}, Box.undefined((float(i), 0.0, 0.0))) for i in range(3)]
    run(rec, x_schema(), frames)


@valid("traj-step-time-arrays", "steps 0, 5, 7, 20 and times that are no progression: both stored as arrays "
       "(trajectory#3)")
def _step_arrays(rec: Path) -> None:
    frames = [Frame({}, {"atoms": xs(float(i))}) for i in range(4)]
    run(rec, x_schema(), frames, steps=[0, 5, 7, 20], times=[0.0, 0.25, 0.3, 1.0])


@valid("traj-time-second-value", "times 0.2, 0.9, 1.6: 0.2 + 1.0 * (0.9 - 0.2) is not 0.9 in binary64, so time "
       "is an array from the second frame (trajectory#3.1, README#decision-7)")
def _time_second(rec: Path) -> None:
    run(rec, x_schema(), [Frame({}, {"atoms": xs(float(i))}) for i in range(3)], times=[0.2, 0.9, 1.6])


@valid("traj-meta-fills", "per-step meta with fills: keys omitted by some frames get the pinned fill (NaN, a "
       "u64 maximum, a json null) (trajectory#5.2, #5.3)")
def _meta_fills(rec: Path) -> None:
    schema = x_schema().declare_meta("pe", "f64").declare_meta_with_fill("temp", float("nan"), "f64")
    schema.declare_meta_with_fill("count", 2**64 - 1, "u64").declare_meta_with_fill("note", None, "json")
    metas: List[Dict[str, Any]] = [{"pe": -1.0, "temp": 300.0, "count": 3, "note": {"ok": True}},
                                   {"pe": -1.25}, {"pe": -0.5, "count": 1}]
    run(rec, schema, [Frame(m, {"atoms": xs(float(i))}) for i, m in enumerate(metas)])


_TAG_VALUES: Dict[str, List[Any]] = {
    "bool": [True, False], "i32": [-2**31, 5], "i64": [-2**63, 2**63 - 1], "u32": [0, 2**32 - 1],
    "u64": [2**53 + 1, 2**64 - 1], "f64": [float("-inf"), 0.1], "string": ["", "Ω"], "json": [[1, {"a": None}], "x"],
    "bool3": [(True, False, True), (False, False, False)], "i32x3": [(1, -2, 3), (0, 0, 0)],
    "i64x3": [(-2**63, 0, 1), (2, 3, 4)], "u32x3": [(0, 1, 2**32 - 1), (5, 6, 7)],
    "u64x3": [(2**64 - 1, 0, 1), (2, 3, 4)], "f64x3": [(0.5, -0.0, float("nan")), (1.0, 2.0, 3.0)],
    "f64x6": [(1.0, 2.0, 3.0, 4.0, 5.0, 6.0), (0.0,) * 6], "f64x9": [tuple(float(v) for v in range(9)), (1.0,) * 9],
}


@valid("traj-meta-tags", "per-step meta under every one of the 16 tags, each array tagged meta_dtype "
       "(trajectory#5.1)")
def _meta_tags(rec: Path) -> None:
    schema = x_schema()
    for tag in _TAG_VALUES:
        schema.declare_meta(f"m_{tag}", tag)
    frames = [Frame({f"m_{tag}": MetaValue(tag, values[i]) for tag, values in _TAG_VALUES.items()},
                    {"atoms": xs(float(i))}) for i in range(2)]
    run(rec, schema, frames)


@valid("traj-block-late", "a block that first appears at frame 2 is absent before it (trajectory#6)")
def _late(rec: Path) -> None:
    schema = x_schema().declare_column("ions", "q", "f64")
    frames = [Frame({}, {"atoms": xs(float(i))}) for i in range(4)]
    frames[2].blocks["ions"] = Block({"q": np.array([1.0, -1.0])})
    run(rec, schema, frames)


@valid("traj-zero-row-update", "a zero-row update: the block is present and empty (all declared columns, 0 rows) "
       "from frame 1, then present again (trajectory#6)")
def _zero_row(rec: Path) -> None:
    schema = x_schema().declare_column("ions", "q", "f64").declare_column("ions", "name", "string")
    ions = [Block({"q": np.array([1.0]), "name": strings("Na")}), Block({"q": np.zeros(0), "name": strings()}),
            None, Block({"q": np.array([-1.0]), "name": strings("Cl")})]
    frames = []
    for i, block in enumerate(ions):
        blocks = {"atoms": xs(float(i))}
        if block is not None:
            blocks["ions"] = block
        frames.append(Frame({}, blocks))
    run(rec, schema, frames)


@valid("traj-nullable", "a nullable column: masks per frame, an unmasked frame reads without a mask "
       "(trajectory#8.4)")
def _traj_nullable(rec: Path) -> None:
    schema = x_schema().declare_column("atoms", "q", "f64").declare_nullable("atoms", "q")
    frames = [Frame({}, {"atoms": Block({"x": np.array([0.0, 1.0]), "q": np.array([0.5, np.nan])},
                                        masks={"q": np.array([True, False])})}),
              Frame({}, {"atoms": Block({"x": np.array([0.0, 1.5]), "q": np.array([0.5, 0.25])})})]
    run(rec, schema, frames)


@valid("traj-precision", "a precision column in the pin: values rounded to 2^-10, stored with shuffle + zstd; "
       "a sub-quantum change carries forward (trajectory#8.5)")
def _traj_precision(rec: Path) -> None:
    schema = x_schema().declare_precision("atoms", "x", 1e-3)
    values = [(0.1234, 5.0), (0.1235, 5.0), (0.2, 5.5)]
    run(rec, schema, [Frame({}, {"atoms": xs(*v)}) for v in values])


@valid("traj-structural-shape", "a structural shape in the pin: every update has 2 x 2 rows (trajectory#8.2)")
def _traj_structural(rec: Path) -> None:
    schema = SequenceSchema().declare_column("grid", "rho", "f64").declare_structural_shape("grid", (2, 2))
    run(rec, schema, [Frame({}, {"grid": Block({"rho": np.arange(4.0) + i})}) for i in range(2)])


@valid("traj-targets", "a pinned row reference: members.ibead -> atoms, checked on every resolved frame "
       "(trajectory#8.6)")
def _traj_targets(rec: Path) -> None:
    schema = x_schema().declare_column("members", "ibead", "u64").declare_target("members", "ibead", "atoms")
    frames = [Frame({}, {"atoms": xs(0.0, 1.0, 2.0), "members": Block({"ibead": np.array([0, 2], dtype=np.uint64)})}),
              Frame({}, {"atoms": xs(0.5, 1.5, 2.5)})]
    run(rec, schema, frames)


@valid("traj-aligned", "an aligned block: atom_types carries forward while atoms moves, restated when atoms "
       "grows (trajectory#8.7)")
def _traj_aligned(rec: Path) -> None:
    schema = x_schema().declare_column("atom_types", "type", "string").declare_aligned("atom_types", "atoms")
    frames = [Frame({}, {"atoms": xs(0.0, 1.0), "atom_types": Block({"type": strings("O", "H")})}),
              Frame({}, {"atoms": xs(0.5, 1.5)}),
              Frame({}, {"atoms": xs(0.0, 1.0, 2.0), "atom_types": Block({"type": strings("O", "H", "H")})})]
    run(rec, schema, frames)


@valid("traj-string-columns", "string and integer columns in a trajectory block (trajectory#4)")
def _traj_strings(rec: Path) -> None:
    schema = x_schema(name="string", id="u64")
    frames = [Frame({}, {"atoms": Block({"name": strings("a", "bb"), "id": np.array([7, 8], dtype=np.uint64)})}),
              Frame({}, {"atoms": Block({"name": strings("Ω", ""), "id": np.array([7, 9], dtype=np.uint64)})})]
    run(rec, schema, frames)


@valid("traj-uncommitted-tail", "arrays hold 5 frames but nstep says 3 (a commit that never finished): readers "
       "see 3 frames (trajectory#N1, #R3)")
def _tail(rec: Path) -> None:
    run(rec, x_schema(), [Frame({}, {"atoms": xs(float(i), float(i))}) for i in range(5)], steps=[0, 1, 2, 3, 4])
    edit_attrs(rec, "trajectory", lambda a: a.update({"nstep": 3}))


@valid("traj-no-schema", "a trajectory without sequence_schema (an older or foreign writer): the declaration is "
       "derived from the groups (trajectory#N3)")
def _no_schema(rec: Path) -> None:
    run(rec, x_schema(), [Frame({}, {"atoms": xs(1.0, 2.0)}), Frame({}, {"atoms": xs(1.5, 2.5)})])
    edit_attrs(rec, "trajectory", lambda a: a.pop("sequence_schema"))


@valid("traj-empty", "a trajectory created and never appended to: 0 frames (trajectory#N6)")
def _empty(rec: Path) -> None:
    MrecWriter(rec, x_schema(), durable=False).close()


@valid("traj-unknown-child", "an unknown group under trajectory/ is not a block: preserved, not resolved into "
       "frames (trajectory#N5)")
def _unknown_child(rec: Path) -> None:
    run(rec, x_schema(), [Frame({}, {"atoms": xs(1.0)})])
    store_of(rec).create_group("trajectory/extras", attributes={"producer": "x"})


@valid("traj-with-system", "a trajectory in a record with a system section: the trajectory block atoms shares "
       "the system block's name and row count (trajectory#8.8)")
def _with_system(rec: Path) -> None:
    system = Frame({}, {"atoms": Block({"element": strings("O", "H", "H")})})
    write_mrec(rec, MolRec(system=system), durable=False)
    run(rec, x_schema(), [Frame({}, {"atoms": xs(0.0, 1.0, 2.0)}), Frame({}, {"atoms": xs(0.1, 1.1, 2.1)})])


@valid("traj-flushes", "a trajectory committed in several flushes (flush_every 2, 5 frames): the bytes of "
       "several positional landings, superseded inner chunks left as dead bytes (trajectory#10)")
def _flushes(rec: Path) -> None:
    run(rec, x_schema(), [Frame({}, {"atoms": xs(float(i), -float(i))}) for i in range(5)], flush_every=2)


# -- metrics (documents §4, §5) -----------------------------------------------------------------
def _run_record(rec: Path) -> None:
    write_mrec(rec, MolRec(status={"state": "running"}), durable=False)


@valid("metrics-dense", "metrics densified on close: series, steps and wall_time arrays, the catalog with a "
       "watermark covering the whole WAL (documents#4.2, #4.4)")
def _metrics_dense(rec: Path) -> None:
    _run_record(rec)
    with MetricsWriter(rec) as m:
        for step in range(3):
            m.log("train/loss", 1.0 / (step + 1), step=step, wall_time=WALL.format(step))
        m.log("train/loss", 0.4, step=2, wall_time=WALL.format(3))  # the same step again: the later event wins
        m.log("eval/MAE", 0.1, step=2, wall_time=WALL.format(4))


def compact_dense(rec: Path) -> None:
    """Re-lay each dense metrics array as one chunk of exactly its length (same codecs): a
    reader accepts any chunking, and the writer's 4096-point inner chunks would make a
    small case 30 KiB per series (metrics-dense keeps the writer's layout)."""
    from molrec_raw.conformance.cases.layouts import relay
    root = store_of(rec)
    for part in ("series", "steps", "wall_time"):
        group = root.get(f"metrics/{part}")
        if group is None:
            continue
        for name, array in list(group.arrays()):
            values = np.asarray(array[...])
            inner = array.pipeline.sharding.inner.to_json() if array.pipeline.sharding is not None else None
            relay(rec, f"metrics/{part}/{name}", values, chunks=[max(1, len(values))], codecs=inner)


@valid("metrics-wal-tail-torn", "dense series up to the watermark, then WAL lines past it (read on top, a re-logged "
       "step replacing its point), then a torn last line readers ignore (documents#5.5, README#decision-9)")
def _metrics_tail(rec: Path) -> None:
    _run_record(rec)
    m = MetricsWriter(rec)
    m.log("loss", 0.5, step=1, wall_time=WALL.format(1))
    m.log("loss", 0.25, step=2, wall_time=WALL.format(2))
    m.close(durable=False)
    compact_dense(rec)
    with open(rec / "metrics" / "metrics.jsonl", "ab") as wal:
        wal.write(b'{"t":"scalar","k":"loss","s":3,"w":"2026-08-04T00:00:03Z","v":0.125}\n')
        wal.write(b'{"t":"scalar","k":"loss","s":2,"w":"2026-08-04T00:00:04Z","v":0.3}\n')
        wal.write(b'{"t":"scalar","k":"lr","w":"2026-08-04T00:00:04Z","v":0.001}\n')
        wal.write(b'{"t":"scalar","k":"loss","s":4,"w":"2026-08-0')


@valid("metrics-wal-only", "a metrics group with a WAL and no dense series: the WAL alone is the record "
       "(documents#5.5)")
def _metrics_wal_only(rec: Path) -> None:
    _run_record(rec)
    store_of(rec).create_group("metrics")
    (rec / "metrics" / "metrics.jsonl").write_bytes(
        b'{"t":"scalar","k":"a b","s":1,"w":"2026-08-04T00:00:01Z","v":1.5}\n\n'
        b'{"t":"scalar","k":"a b","s":1,"w":"2026-08-04T00:00:02+00:00","v":2.5,"tags":{"phase":"x"}}\n'
        b'{"t":"scalar","k":"\xc3\xa9","w":"2026-08-04T00:00:03Z","v":"NaN"}\n')


@valid("metrics-stepless-nonfinite", "step-less series with non-finite values (\"NaN\", \"Infinity\") and tags; "
       "safe names with escapes (documents#4.3, README#decision-8)")
def _metrics_stepless(rec: Path) -> None:
    _run_record(rec)
    with MetricsWriter(rec) as m:
        m.log("throughput/it s", float("nan"), wall_time=WALL.format(1))
        m.log("throughput/it s", float("inf"), wall_time=WALL.format(2), tags={"gpu": 0})
        m.log("__private", -0.0, wall_time=WALL.format(3))
    compact_dense(rec)
