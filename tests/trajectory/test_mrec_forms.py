"""Regular-block elision (§8.3), the cell's attribute and array forms (§7), per-step meta
(§5), nullable columns (§8.4); checklist §18 ids in the names."""
import math

import numpy as np
import pytest

from molrec_raw.errors import SpecViolationError
from molrec_raw.record.model import Block, Box, MetaValue
from molrec_raw.record.typed_json import TAGS
from molrec_raw.record.trajectory import MrecReader, MrecWriter
from molrec_raw.record.trajectory.schema import SequenceSchema
from molrec_raw.zarr import open_group

from traj_helpers import rule, write, patch_attrs, atoms, frame, ragged, same_frame


def group(path, node):
    return open_group(path)[f"trajectory/{node}"]


def cube(a=10.0, origin=(0.0, 0.0, 0.0)):
    return Box(np.eye(3) * a, np.asarray(origin, dtype=float))


# ------------------------------------------------------------------ regular blocks (§8.3)
def test_trajectory_I4_regular_run_costs_one_array_per_column(path):
    bonds = Block({"atomi": np.array([0, 1], np.uint64), "atomj": np.array([1, 2], np.uint64)})
    frames = []
    for i in range(6):
        f = frame(atoms=Block({c: np.arange(4.0) + i + k for k, c in enumerate("xyz")}), bonds=bonds)
        f.box = cube()
        frames.append(f)
    write(path, frames, steps=[10 * i for i in range(6)], times=[0.5 * i for i in range(6)])
    files = sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())
    # the reference's 16 files, and the run's status document (a streaming writer's, record/live.py)
    assert len(files) == 17 and "status/zarr.json" in files, files
    plain = path.with_name("plain.mrec")
    write(plain, frames, steps=[10 * i for i in range(6)], times=[0.5 * i for i in range(6)], status=False)
    assert len([p for p in plain.rglob("*") if p.is_file()]) == 16
    attrs = dict(open_group(path)["trajectory"].attrs)
    assert attrs["nstep"] == 6 and attrs["step_progression"] == {"start": 0, "stride": 10}
    assert attrs["time_progression"] == {"start": 0.0, "stride": 0.5}
    assert dict(group(path, "atoms").attrs) == {"uniform_rows": 4, "dense_updates": True}
    assert dict(group(path, "bonds").attrs) == {"uniform_rows": 2, "dense_updates": True}
    assert group(path, "bonds/atomi").shape == (2,)  # constant topology: one update
    assert group(path, "box").attrs["vectors"][0][0] == 10.0
    r = MrecReader(path)
    assert r.step == [0, 10, 20, 30, 40, 50] and r.time == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
    assert r[5]["atoms"].nrows == 4 and r.box_at(5) == cube()
    assert [r.block_update_at("atoms", i) for i in range(6)] == list(range(6))
    assert [r.block_update_at("bonds", i) for i in range(6)] == [0] * 6
    assert all(same_frame(r[i], f) and r[i].box == cube() for i, f in enumerate(frames))


def test_trajectory_I4_first_irregular_update_materializes_the_index(path):
    frames = [ragged(0, 2), ragged(1, 2), ragged(1, 2), ragged(3, 1), ragged(4, 1)]
    with MrecWriter(path, SequenceSchema.from_frames(frames)) as w:
        for f in frames[:3]:
            w.append(f)
        w.flush()
        assert dict(group(path, "atoms").attrs) == {"uniform_rows": 2, "dense_updates": True}
        for f in frames[3:]:
            w.append(f)
    g = group(path, "atoms")
    assert dict(g.attrs) == {}  # withdrawn for good
    assert g["step_index"][...].tolist() == [0, 1, 3, 4]
    assert g["offset"][...].tolist() == [0, 2, 4, 5, 6]
    r = MrecReader(path)
    assert same_frame(r[2], frames[1]) and r.block_update_at("atoms", 2) == 1
    assert all(same_frame(r[i], f) for i, f in enumerate(frames))
    with MrecWriter.open(path) as w:  # never back to the markers
        w.append(ragged(5, 1))
    assert dict(group(path, "atoms").attrs) == {} and len(MrecReader(path)) == 6


def test_trajectory_regular_block_reopen_and_first_zero_row_update(path, tmp_path):
    write(path, [ragged(i, 3) for i in range(4)])
    with MrecWriter.open(path) as w:
        w.append(ragged(4, 3))
        w.append(ragged(5, 3))
    assert dict(group(path, "atoms").attrs) == {"uniform_rows": 3, "dense_updates": True}
    r = MrecReader(path)
    assert len(r) == 6 and all(same_frame(r[i], ragged(i, 3)) for i in range(6))
    p2 = tmp_path / "z.mrec"
    write(p2, [ragged(0, 0), ragged(1, 0)])  # a first update with 0 rows is never regular
    assert group(p2, "atoms/offset")[...].tolist() == [0, 0]


@pytest.mark.parametrize("attrs", [
    {"uniform_rows": 2},
    {"dense_updates": True},
    {"uniform_rows": 0, "dense_updates": True},
    {"uniform_rows": 2, "dense_updates": False},
])
def test_trajectory_R9_malformed_elision_markers(path, attrs):
    write(path, [ragged(i, 2) for i in range(3)])
    open_group(path, mode="r+")["trajectory/atoms"].attrs.put(attrs)
    with pytest.raises(SpecViolationError, match="atoms") as e:
        MrecReader(path)
    assert e.value.rule == rule("R9")
    with pytest.raises(SpecViolationError, match="atoms"):
        MrecWriter.open(path)


def test_trajectory_R9_markers_on_a_column_less_block(path):
    s = SequenceSchema().declare_column("atoms", "x", "f64").declare_block("bare")
    write(path, [frame(atoms=atoms([1.0]))], schema=s)
    assert "bare" not in MrecReader(path)[0].blocks  # a bare declared block reads absent
    open_group(path, mode="r+")["trajectory/bare"].attrs.put({"uniform_rows": 1, "dense_updates": True})
    with pytest.raises(SpecViolationError, match="no columns") as e:
        MrecReader(path)
    assert e.value.rule == rule("R9")


def test_trajectory_N7_markers_and_index_both_present_use_the_index(path):
    frames = [ragged(i, n) for i, n in enumerate([3, 5, 4])]
    write(path, frames)
    open_group(path, mode="r+")["trajectory/atoms"].attrs.put({"uniform_rows": 3, "dense_updates": True})
    r = MrecReader(path)
    assert all(same_frame(r[i], f) for i, f in enumerate(frames))
    with MrecWriter.open(path) as w:  # the reopening writer drops the stale markers
        w.append(ragged(3, 2))
    assert dict(group(path, "atoms").attrs) == {}
    assert group(path, "atoms/offset")[...].tolist() == [0, 3, 8, 12, 14]


def test_trajectory_I4_regular_uses_the_shortest_column(path):
    frames = [frame(atoms=Block({"x": np.arange(2.0) + i, "y": np.arange(2.0) - i})) for i in range(3)]
    write(path, frames)
    g = open_group(path, mode="r+")["trajectory/atoms/y"]
    g.resize((4,), reset_stale=False)  # y lost its last update: only 2 updates are whole
    r = MrecReader(path)
    assert r.block_update_at("atoms", 2) == 1 and same_frame(r[2], frames[1])


# ------------------------------------------------------------------ the cell (§7)
def test_trajectory_I11_fixed_cell_is_attributes_only(path):
    frames = [ragged(i, 2) for i in range(20)]
    for f in frames:
        f.box = cube(10.0)
    write(path, frames)
    box = group(path, "box")
    assert dict(box.attrs) == {"vectors": [[10.0, 0, 0], [0, 10.0, 0], [0, 0, 10.0]]}
    assert list(box) == []  # no arrays
    r = MrecReader(path)
    assert r[19].box == cube(10.0) and r[19].box.boundary == (True, True, True)


def test_trajectory_I11_cell_change_migrates_attributes_to_arrays(path):
    frames = [ragged(0, 2), ragged(1, 2), ragged(2, 2)]
    frames[0].box = cube(10.0, (1.0, 2.0, 3.0))
    frames[1].box = cube(11.0, (1.0, 2.0, 3.0))
    # frame 2 drops its cell: carried forward
    with MrecWriter(path, SequenceSchema.from_frames(frames)) as w:
        w.append(frames[0])
        w.flush()
        assert group(path, "box").attrs["origin"] == [1.0, 2.0, 3.0]
        w.append(frames[1])
        w.append(frames[2])
    box = group(path, "box")
    assert dict(box.attrs) == {}
    assert box["origin"][...].ravel().tolist() == [1, 2, 3, 1, 2, 3]
    assert box["step_index"][...].tolist() == [0, 1] and "boundary" not in box
    r = MrecReader(path)
    assert r.box_at(0) == frames[0].box and r.box_at(2) == frames[1].box and r[2].box == frames[1].box
    assert r.box_at(3) is None and r.box_at(-1) == frames[1].box


def test_trajectory_cell_first_seen_late_and_box_at_none_before(path):
    frames = [ragged(0, 2), ragged(1, 2), ragged(2, 2)]
    frames[2].box = cube(5.0)
    write(path, frames)
    assert group(path, "box/step_index")[...].tolist() == [2]
    r = MrecReader(path)
    assert r.box_at(0) is None and r[1].box is None and r.box_at(2) == cube(5.0)
    with MrecWriter.open(path) as w:  # reopen: an unchanged cell is no new update
        f = ragged(3, 2)
        f.box = cube(5.0)
        w.append(f)
    assert group(path, "box/vectors").shape == (1, 3, 3)


def test_trajectory_W29_undefined_cell(path):
    frames = [ragged(0, 2), ragged(1, 2)]
    frames[0].box = Box.undefined((0.5, 0.0, 0.0))
    frames[1].box = Box.undefined((0.5, 0.0, 0.0))
    w = MrecWriter(path, SequenceSchema.from_frames(frames))
    w.append(frames[0])
    bad = ragged(1, 2)
    bad.box = Box(np.zeros((3, 3)), np.zeros(3), (True, False, False), False)
    with pytest.raises(SpecViolationError, match="undefined") as e:
        w.append(bad)
    assert e.value.rule == rule("W29")
    mixed = ragged(1, 2)
    mixed.box = cube()
    with pytest.raises(SpecViolationError, match="cell_defined"):
        w.append(mixed)
    w.append(frames[1])
    w.close()
    attrs = dict(group(path, "box").attrs)
    assert attrs["cell_defined"] is False and attrs["boundary"] == [False, False, False]
    assert attrs["vectors"] == np.eye(3).tolist() and attrs["origin"] == [0.5, 0.0, 0.0]
    r = MrecReader(path)
    assert r[1].box == Box.undefined((0.5, 0.0, 0.0))
    patch_attrs(path, "trajectory/box", vectors=[[0, 0, 0], [0, 0, 0], [0, 0, 0]], boundary=KeyError)
    assert MrecReader(path)[0].box == Box.undefined((0.5, 0.0, 0.0))  # vectors ignored, boundary all-false


def test_trajectory_R15_malformed_box(path):
    frames = [ragged(0, 2)]
    frames[0].box = Box.undefined()
    write(path, frames)
    patch_attrs(path, "trajectory/box", boundary=[True, False, False])
    with pytest.raises(SpecViolationError, match="undefined") as e:
        MrecReader(path)
    assert e.value.rule == rule("R15")
    patch_attrs(path, "trajectory/box", boundary=KeyError, vectors=[[1, 0], [0, 1]])
    with pytest.raises(SpecViolationError) as e:
        MrecReader(path)
    assert e.value.rule == rule("R15")
    patch_attrs(path, "trajectory/box", vectors=np.eye(3).tolist(), cell_defined="no")
    with pytest.raises(SpecViolationError, match="cell_defined"):
        MrecReader(path)


# ------------------------------------------------------------------ per-step meta (§5)
VALUES = {
    "bool": True, "i32": -(2 ** 31), "i64": -(2 ** 63), "u32": 2 ** 32 - 1, "u64": 2 ** 64 - 1,
    "f64": 2.2250738585072014e-308, "string": "Ω", "json": {"a": [1, 2.5, None]},
    "bool3": (True, False, True), "i32x3": (1, -2, 3), "i64x3": (-(2 ** 63), 0, 1), "u32x3": (0, 1, 2 ** 32 - 1),
    "u64x3": (2 ** 64 - 1, 0, 5), "f64x3": (1.7976931348623157e308, -0.0, 1.5),
    "f64x6": (1.0, 2.0, 3.0, 4.0, 5.0, 6.0), "f64x9": tuple(float(i) for i in range(9)),
}


def test_trajectory_I9_every_meta_tag_round_trips_bit_exact(path):
    s = SequenceSchema().declare_column("atoms", "x", "f64")
    for tag in TAGS:
        s.declare_meta(f"k_{tag}", tag)
    frames = []
    for i in range(2):
        f = ragged(i, 2)
        f.meta = {f"k_{t}": MetaValue(t, v) for t, v in VALUES.items()}
        f.meta["step"] = 99  # the sequence's own: never a meta array
        frames.append(f)
    write(path, frames, schema=s)
    mg = group(path, "meta")
    assert sorted(n for n, _ in mg.members()) == sorted(f"k_{t}" for t in TAGS)
    for tag in TAGS:
        assert mg[f"k_{tag}"].attrs["meta_dtype"] == tag and dict(mg[f"k_{tag}"].attrs) == {"meta_dtype": tag}
    r = MrecReader(path)
    meta = r[1].meta
    assert list(meta) == [f"k_{t}" for t in TAGS]
    for tag, v in VALUES.items():
        got = meta[f"k_{tag}"]
        got = got.value if isinstance(got, MetaValue) else got
        if tag.startswith("f64"):
            assert np.asarray(got, float).tobytes() == np.asarray(v, float).tobytes(), tag
        else:
            assert got == v, tag
    assert isinstance(meta["k_i32"], MetaValue) and meta["k_i32"].tag == "i32"
    assert meta["k_f64"] == VALUES["f64"] and meta["k_json"] == {"a": [1, 2.5, None]}


def test_trajectory_W22_omitted_meta_key_and_fills(path):
    s = SequenceSchema().declare_column("atoms", "x", "f64").declare_meta("pe", "f64")
    s.declare_meta_with_fill("temp", math.nan).declare_meta_with_fill("note", None, "json")
    s.declare_meta_with_fill("count", 2 ** 64 - 1, "u64")
    w = MrecWriter(path, s)
    with pytest.raises(SpecViolationError, match="'pe'") as e:
        w.append(ragged(0, 1))
    assert e.value.rule == rule("W22")
    f = ragged(0, 1)
    f.meta = {"pe": 1.5, "temp": 300.0}
    w.append(f)
    f = ragged(1, 1)
    f.meta = {"pe": 2}  # an integer given for f64 is exact
    w.append(f)
    w.close()
    pin = dict(open_group(path)["trajectory"].attrs)["sequence_schema"]["meta"]
    assert pin["temp"] == {"dtype": "f64", "fill": "NaN"} and pin["count"]["fill"] == "18446744073709551615"
    assert pin["note"] == {"dtype": "json", "fill": None}
    r = MrecReader(path)
    assert r[0].meta["temp"] == 300.0 and math.isnan(r[1].meta["temp"]) and r[1].meta["pe"] == 2.0
    assert r[1].meta["note"] is None and r[1].meta["count"] == 2 ** 64 - 1
    assert list(r[0].meta) == ["pe", "temp", "note", "count"]
    with MrecWriter.open(path) as w:  # the reopened writer honours the pinned fills
        f = ragged(2, 1)
        f.meta = {"pe": 3.0}
        w.append(f)
    assert math.isnan(MrecReader(path)[2].meta["temp"])


@pytest.mark.parametrize("key, tag, value", [
    ("com", "f64x3", [1.0, 2.0]), ("count", "i64", 0.5), ("flag", "bool", 1), ("n", "u32", -1),
    ("doc", "json", {"x": math.nan}),
])
def test_trajectory_W23_meta_value_not_exact_in_its_tag(path, key, tag, value):
    s = SequenceSchema().declare_column("atoms", "x", "f64").declare_meta(key, tag)
    w = MrecWriter(path, s)
    f = ragged(0, 1)
    f.meta = {key: value}
    with pytest.raises(SpecViolationError, match=key) as e:
        w.append(f)
    assert e.value.rule == rule("W23") and tag in e.value.message
    assert w.committed == 0


def test_trajectory_meta_coercion_and_undeclared_key(path):
    s = SequenceSchema().declare_column("atoms", "x", "f64").declare_meta("com", "f64x3")
    w = MrecWriter(path, s)
    f = ragged(0, 1)
    f.meta = {"com": [1, 2, 3]}
    w.append(f)
    f = ragged(1, 1)
    f.meta = {"com": [1.0, 2.0, 3.0], "other": 1}
    with pytest.raises(SpecViolationError, match="other") as e:
        w.append(f)
    assert e.value.rule == rule("W18")
    w.close()
    assert MrecReader(path)[0].meta["com"] == MetaValue("f64x3", (1.0, 2.0, 3.0))


def test_trajectory_R10_meta_array_checks(path):
    s = SequenceSchema().declare_column("atoms", "x", "f64").declare_meta("pe", "f64")
    f = ragged(0, 1)
    f.meta = {"pe": 1.0}
    write(path, [f], schema=s)
    patch_attrs(path, "trajectory/meta/pe", meta_dtype="i64")
    with pytest.raises(SpecViolationError) as e:
        MrecReader(path)
    assert e.value.rule == rule("R10")
    patch_attrs(path, "trajectory/meta/pe", meta_dtype=KeyError)
    with pytest.raises(SpecViolationError, match="meta_dtype") as e:
        MrecReader(path)
    assert e.value.rule == rule("R10")


def test_trajectory_N3_store_without_pin_derives_meta_keys(path):
    s = SequenceSchema().declare_column("atoms", "x", "f64").declare_meta("pe", "f64")
    f = ragged(0, 1)
    f.meta = {"pe": 1.0}
    write(path, [f], schema=s)
    patch_attrs(path, "trajectory", sequence_schema=KeyError)
    assert MrecReader(path)[0].meta == {"pe": 1.0}


# ------------------------------------------------------------------ nullable (§8.4)
def test_trajectory_I3_masks_per_frame_and_change_detection(path):
    def f(mask):
        b = Block({"q": np.array([1.0, 2.0, 3.0])}, masks={} if mask is None else {"q": np.array(mask)})
        return frame(atoms=b)
    frames = [f(None), f([True, False, True]), f([True, False, True]), f([False, True, True]), f(None)]
    write(path, frames)
    pin = dict(open_group(path)["trajectory"].attrs)["sequence_schema"]["blocks"]["atoms"]["columns"]["q"]
    assert pin.get("nullable") is True
    assert group(path, "atoms/_validity/q")[...].shape[0] == 12  # 4 updates x 3 rows
    r = MrecReader(path)
    assert r[0]["atoms"].masks == {} and r[1]["atoms"].masks["q"].tolist() == [True, False, True]
    assert [r.block_update_at("atoms", i) for i in range(5)] == [0, 1, 1, 2, 3]
    assert r[4]["atoms"].masks == {}
    assert all(same_frame(r[i], x) for i, x in enumerate(frames))


def test_trajectory_R14_mask_shorter_than_its_rows(path):
    frames = [frame(atoms=Block({"q": np.arange(3.0) + i}, masks={"q": np.array([True, False, True])})) for i in range(2)]
    write(path, frames)
    open_group(path, mode="r+")["trajectory/atoms/_validity/q"].resize((4,), reset_stale=False)
    with pytest.raises(SpecViolationError) as e:
        MrecReader(path)
    assert e.value.rule == rule("R14")


def test_trajectory_R11_null_fill_in_pin_refused_by_reader_and_reopen(path):
    s = SequenceSchema().declare_column("atoms", "x", "f64").declare_meta_with_fill("temp", math.nan)
    write(path, [ragged(0, 1)], schema=s)
    pin = dict(open_group(path)["trajectory"].attrs)["sequence_schema"]
    pin["meta"]["temp"]["fill"] = None  # NaN lost to null (old molrs) must not pass
    patch_attrs(path, "trajectory", sequence_schema=pin)
    with pytest.raises(SpecViolationError, match="temp") as e:
        MrecReader(path)
    assert e.value.rule == rule("R11")
    with pytest.raises(SpecViolationError, match="temp"):
        MrecWriter.open(path)
    patch_attrs(path, "trajectory", sequence_schema="not a schema")
    with pytest.raises(SpecViolationError) as e:
        MrecReader(path)
    assert e.value.rule == rule("R11")


def test_trajectory_W14_reopen_column_dtype_mismatch(path):
    write(path, [ragged(0, 2)])
    open_group(path, mode="r+")["trajectory/atoms"].create_array("x", shape=(2,), dtype="int64", overwrite=True)
    with pytest.raises(SpecViolationError, match="sequence schema mismatch") as e:
        MrecWriter.open(path)
    assert e.value.rule == rule("W14") and "expected" in e.value.message and "found" in e.value.message


def test_trajectory_R6_meta_array_shorter_than_nstep(path):
    s = SequenceSchema().declare_column("atoms", "x", "f64").declare_meta("pe", "f64")
    frames = []
    for i in range(3):
        f = ragged(i, 1)
        f.meta = {"pe": float(i)}
        frames.append(f)
    write(path, frames, schema=s)
    open_group(path, mode="r+")["trajectory/meta/pe"].resize((2,), reset_stale=False)
    with pytest.raises(SpecViolationError, match="pe") as e:
        MrecReader(path)
    assert e.value.rule == rule("R6")
