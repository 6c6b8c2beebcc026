"""MrecWriter / MrecReader: CSR blocks, step/time progressions, commit marker, reopen,
reader refusals (trajectory §3, §6, §8.1, §9–§11; checklist §18 W/R/N/I ids in the names)."""
import os
import zipfile

import numpy as np
import pytest

from molrec_raw.errors import InvalidValueError, SpecViolationError
from molrec_raw.record.model import Block
from molrec_raw.record.trajectory import extents as ext
from molrec_raw.record.trajectory import MrecReader, MrecWriter, read_mrec_trajectory, write_mrec_trajectory
from molrec_raw.record.trajectory.schema import SequenceSchema
from molrec_raw.zarr import open_group

from traj_helpers import rule, write, patch_attrs, atoms, frame, ragged, same_frame


def tattrs(path):
    return dict(open_group(path)["trajectory"].attrs)


def arr(path, name):
    return open_group(path)[f"trajectory/{name}"][...]


# ------------------------------------------------------------------ layout
def test_trajectory_I1_ragged_offsets_are_prefix_sums(path):
    frames = [ragged(i, n) for i, n in enumerate([3, 5, 4])]
    write(path, frames)
    assert arr(path, "atoms/offset").tolist() == [0, 3, 8, 12]
    assert arr(path, "atoms/step_index").tolist() == [0, 1, 2]
    a = tattrs(path)
    assert a["nstep"] == 3 and a["step_progression"] == {"start": 0, "stride": 1}
    assert "step" not in open_group(path)["trajectory"]
    with MrecReader(path) as r:
        assert len(r) == 3 and r.step == [0, 1, 2] and r.time is None
        for i, f in enumerate(frames):
            assert same_frame(r[i], f)
        assert same_frame(r[-1], frames[-1])
        assert [same_frame(x, f) for x, f in zip(r, frames)] == [True] * 3
        with pytest.raises(IndexError):
            r[3]


def test_trajectory_root_layout_and_meta(path, tmp_path):
    """Sections {meta, trajectory} as the reference writes them, plus the run's status
    document a streaming writer records (record/live.py); ``status=False`` and the
    whole-sequence door write exactly the reference's two."""
    write(path, [ragged(0, 2)], meta={"creator": {"name": "test"}, "molrec_version": 1})
    root = open_group(path)
    assert sorted(n for n, _ in root.members()) == ["meta", "status", "trajectory"]
    assert dict(root["status"].attrs) == {"state": "succeeded"}
    assert dict(root["meta"].attrs) == {"creator": {"name": "test"}, "molrec_version": 2}
    assert tattrs(path)["sequence_schema"] == SequenceSchema.from_frames([ragged(0, 2)]).to_json()
    write(tmp_path / "plain.mrec", [ragged(0, 2)], status=False)
    write_mrec_trajectory(tmp_path / "door.mrec", [ragged(0, 2)])
    for other in ("plain.mrec", "door.mrec"):
        assert sorted(n for n, _ in open_group(tmp_path / other).members()) == ["meta", "trajectory"]


def test_trajectory_I2_three_states_and_carry_forward(path):
    bonds2 = Block({"atomi": np.array([0, 1], np.uint64), "atomj": np.array([1, 2], np.uint64)})
    empty = Block({"atomi": np.zeros(0, np.uint64), "atomj": np.zeros(0, np.uint64)})
    frames = [frame(atoms=atoms([1.0, 2, 3])),
              frame(atoms=atoms([1.0, 2, 3]), bonds=bonds2),
              frame(atoms=atoms([1.0, 2, 3])),
              frame(atoms=atoms([1.0, 2, 3]), bonds=empty),
              frame(atoms=atoms([1.0, 2, 3]))]
    write(path, frames)
    assert arr(path, "bonds/step_index").tolist() == [1, 3]
    assert arr(path, "bonds/offset").tolist() == [0, 2, 2]
    atoms_group = open_group(path)["trajectory/atoms"]  # I15: identical content, no update
    assert dict(atoms_group.attrs) == {"uniform_rows": 3, "dense_updates": True}
    assert arr(path, "atoms/x").shape == (3,) and "step_index" not in atoms_group
    with MrecReader(path) as r:
        assert "bonds" not in r[0].blocks  # absent before its first update
        assert r[2]["bonds"]["atomi"].tolist() == [0, 1]  # carried forward
        assert r[3]["bonds"].nrows == 0 and set(r[3]["bonds"].columns) == {"atomi", "atomj"}
        assert r[4]["bonds"].nrows == 0
        assert [r.block_update_at("bonds", i) for i in range(5)] == [None, 0, 0, 1, 1]
        assert r.has_block("bonds") and r.block_names() == ["atoms", "bonds"]


def test_trajectory_I15_change_detection_is_bitwise(path):
    frames = [frame(atoms=atoms([0.0])), frame(atoms=atoms([-0.0])), frame(atoms=atoms([np.nan])),
              frame(atoms=atoms([np.nan]))]
    write(path, frames)
    assert arr(path, "atoms/x").shape == (3,)  # -0.0 after 0.0 is a change; NaN repeat is not
    assert [MrecReader(path).block_update_at("atoms", i) for i in range(4)] == [0, 1, 2, 2]


def test_trajectory_I5_step_array_when_not_a_progression(path):
    write(path, [ragged(i, 2) for i in range(3)], steps=[0, 1, 5])
    assert arr(path, "step").tolist() == [0, 1, 5]
    assert "step_progression" not in tattrs(path)
    assert MrecReader(path).step == [0, 1, 5]


def test_trajectory_I5_time_progression_and_array(path, tmp_path):
    write(path, [ragged(i, 2) for i in range(6)], steps=[10 * i for i in range(6)], times=[0.5 * i for i in range(6)])
    a = tattrs(path)
    assert a["step_progression"] == {"start": 0, "stride": 10}
    assert a["time_progression"] == {"start": 0.0, "stride": 0.5}
    assert MrecReader(path).time == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
    # value 1 is re-checked bitwise: 0.2, 0.9 -> stride 0.7 -> 0.8999999999999999 (§3.1, decision 7)
    p2 = tmp_path / "u.mrec"
    write(p2, [ragged(i, 2) for i in range(2)], times=[0.2, 0.9])
    assert "time_progression" not in tattrs(p2) and arr(p2, "time").tolist() == [0.2, 0.9]
    p3 = tmp_path / "v.mrec"
    write(p3, [ragged(i, 2) for i in range(3)], times=[0.0, 0.0, -0.0])  # -0.0 != 0.0
    assert arr(p3, "time").tobytes() == np.array([0.0, 0.0, -0.0]).tobytes()


def test_trajectory_time_without_step_keeps_auto_numbering(path):
    write(path, [ragged(i, 2) for i in range(2)], times=[0.5, 1.5])
    r = MrecReader(path)
    assert r.step == [0, 1] and r.time == [0.5, 1.5]


# ------------------------------------------------------------------ writer refusals
def make_writer(path, frames, **kw):
    return MrecWriter(path, SequenceSchema.from_frames(frames), **kw)


def test_trajectory_W16_step_must_increase(path):
    w = make_writer(path, [ragged(0, 2)])
    w.append(ragged(0, 2), step=5)
    for bad in (5, 4, 1.5, True):
        with pytest.raises((SpecViolationError, InvalidValueError)):
            w.append(ragged(1, 2), step=bad)
    w.append(ragged(1, 2))  # auto numbering: previous + 1
    w.close()
    assert MrecReader(path).step == [5, 6]


def test_trajectory_W17_time_is_all_or_nothing(path):
    w = make_writer(path, [ragged(0, 2)])
    w.append(ragged(0, 2), time=0.0)
    with pytest.raises(SpecViolationError, match="all-or-nothing") as e:
        w.append(ragged(1, 2))
    assert e.value.rule == rule("W17")
    w.close()
    w = MrecWriter(path.with_name("b.mrec"), SequenceSchema.from_frames([ragged(0, 2)]))
    w.append(ragged(0, 2))
    with pytest.raises(SpecViolationError) as e:
        w.append(ragged(1, 2), time=1.0)
    assert e.value.rule == rule("W17")


@pytest.mark.parametrize("bad, rid", [
    (frame(other=atoms([1.0])), "W18"),
    (frame(atoms=Block({"x": np.zeros(2), "y": np.zeros(2)})), "W18"),
    (frame(atoms=Block({"x": np.array(["a", "b"])})), "W19"),
    (frame(atoms=Block({"x": np.zeros((2, 3))})), "W19"),
    (frame(atoms=Block({"x": np.zeros(2)}, masks={"x": np.array([True, False])})), "W24"),
    (frame(atoms=Block({"x": np.zeros(2)}, precision={"x": 1e-3})), "W25"),
])
def test_trajectory_W18_W19_W24_W25_refused_frames_change_nothing(path, bad, rid):
    w = make_writer(path, [ragged(0, 2)], flush_every=1)
    w.append(ragged(0, 2))
    before = sorted((p, os.path.getsize(p)) for p in map(str, path.rglob("*")) if os.path.isfile(p))
    with pytest.raises(SpecViolationError) as e:
        w.append(bad)
    assert e.value.rule == rule(rid)
    after = sorted((p, os.path.getsize(p)) for p in map(str, path.rglob("*")) if os.path.isfile(p))
    assert before == after and w.committed == 1
    w.append(ragged(1, 3))
    w.close()
    assert len(MrecReader(path)) == 2


def test_trajectory_W20_present_block_misses_a_column(path):
    s = SequenceSchema().declare_column("atoms", "x", "f64").declare_column("atoms", "y", "f64")
    w = MrecWriter(path, s)
    with pytest.raises(SpecViolationError) as e:
        w.append(frame(atoms=atoms([1.0])))
    assert e.value.rule == rule("W20")


def test_trajectory_W21_structural_shape_row_count(path):
    s = SequenceSchema().declare_column("grid", "v", "f64").declare_structural_shape("grid", [2, 2])
    w = MrecWriter(path, s)
    with pytest.raises(SpecViolationError, match="4 rows") as e:
        w.append(frame(grid=Block({"v": np.zeros(3)})))
    assert e.value.rule == rule("W21")
    w.append(frame(grid=Block({"v": np.arange(4.0)})))
    w.close()
    assert MrecReader(path)[0]["grid"].structural_shape == (2, 2)


def test_trajectory_W15_flush_every_zero_and_bad_compression(path):
    s = SequenceSchema.from_frames([ragged(0, 2)])
    with pytest.raises(SpecViolationError) as e:
        MrecWriter(path, s, flush_every=0)
    assert e.value.rule == rule("W15")
    with pytest.raises(ValueError, match="compression"):
        MrecWriter(path, s, compression="lzma")


def test_trajectory_W30_calls_after_close(path):
    w = make_writer(path, [ragged(0, 2)])
    w.close()
    w.close()  # idempotent
    with pytest.raises(InvalidValueError, match="closed"):
        w.append(ragged(0, 2))
    with pytest.raises(InvalidValueError, match="closed"):
        w.flush()


def test_trajectory_W12_create_over_a_sequence_leaves_bytes_unchanged(path):
    write(path, [ragged(0, 2)])
    snapshot = {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}
    with pytest.raises(SpecViolationError, match="already exists") as e:
        make_writer(path, [ragged(0, 2)])
    assert e.value.rule == rule("W12")
    assert {p: p.read_bytes() for p in path.rglob("*") if p.is_file()} == snapshot


def test_trajectory_W14_reopen_refusals(path):
    write(path, [ragged(0, 2)])
    patch_attrs(path, "meta", molrec_version=1)
    with pytest.raises(SpecViolationError, match="molrec_version"):
        MrecWriter.open(path)
    patch_attrs(path, "meta", molrec_version=2)
    patch_attrs(path, "trajectory", sequence_schema=KeyError)
    with pytest.raises(SpecViolationError, match="sequence_schema") as e:
        MrecWriter.open(path)
    assert e.value.rule == rule("W14")


# ------------------------------------------------------------------ lifecycle, reopen
def test_trajectory_flush_cadence_and_explicit_flush(path):
    w = make_writer(path, [ragged(0, 2)], flush_every=2)
    for i in range(5):
        w.append(ragged(i, 2))
    assert w.committed == 4 and len(MrecReader(path)) == 4
    w.flush()
    assert w.committed == 5
    w.append(ragged(5, 2))  # appended after the last flush, lost without close
    del w
    assert len(MrecReader(path)) == 5


def test_trajectory_flush_every_derived_K(path, tmp_path):
    s = SequenceSchema().declare_block("atoms", rows=1000)
    for c in "xyz":
        s.declare_column("atoms", c, "f64")
    w = MrecWriter(path, s)
    assert w.flush_every == 174
    w.append(frame(atoms=Block({c: np.zeros(1000) for c in "xyz"})))
    assert w.committed == 0
    s2 = SequenceSchema().declare_block("atoms", rows=1000).declare_column("atoms", "x", "f64")
    assert MrecWriter(tmp_path / "b.mrec", s2).flush_every == 525


def test_trajectory_reopen_continues_numbering_and_content(path):
    write(path, [ragged(0, 2)], steps=[10])
    w = MrecWriter.open(path)
    assert w.committed == 1
    w.append(ragged(0, 2), step=20)  # unchanged content: no new update after reopen
    w.close()
    r = MrecReader(path)
    assert r.step == [10, 20] and same_frame(r[1], ragged(0, 2))
    assert arr(path, "atoms/x").shape == (2,) and r.block_update_at("atoms", 1) == 0


def test_trajectory_N6_created_never_appended_reads_empty_and_reopens(path):
    MrecWriter(path, SequenceSchema.from_frames([ragged(0, 2)])).close()
    assert len(MrecReader(path)) == 0 and MrecReader(path).step == []
    w = MrecWriter.open(path)
    assert w.committed == 0
    w.append(ragged(0, 2), time=1.0)
    w.close()
    r = MrecReader(path)
    assert len(r) == 1 and r.time == [1.0]


def test_trajectory_reopen_keeps_frozen_extents_across_chunks(path):
    s = SequenceSchema().declare_block("atoms", rows=1000).declare_column("atoms", "x", "f64")
    frames = [frame(atoms=atoms(np.arange(1000.0) + i)) for i in range(5)]
    with MrecWriter(path, s) as w:
        for f in frames[:2]:
            w.append(f)
    chunks = open_group(path)["trajectory/atoms/x"].chunks
    assert chunks == (3000,)
    with MrecWriter.open(path) as w:
        for f in frames[2:]:
            w.append(f)
    assert open_group(path)["trajectory/atoms/x"].chunks == chunks
    r = MrecReader(path)
    assert all(same_frame(r[i], f) for i, f in enumerate(frames))


def test_trajectory_N1_torn_commit_is_hidden_and_rolled_back(path):
    """§11: x has +7 rows, offset +1, step_index +1 (= 3) while nstep stays 3."""
    frames = [ragged(i, n) for i, n in enumerate([3, 5, 4])]
    write(path, frames)
    g = open_group(path, mode="r+")
    x, off, si = g["trajectory/atoms/x"], g["trajectory/atoms/offset"], g["trajectory/atoms/step_index"]
    x.land(slice(12, 19), np.full(7, -1.0), shape=(19,), positional=True)
    x.publish((19,))
    off.land(slice(4, 5), np.array([19], np.uint64), shape=(5,), positional=True)
    off.publish((5,))
    si.land(slice(3, 4), np.array([3], np.uint64), shape=(4,), positional=True)
    si.publish((4,))
    r = MrecReader(path)
    assert len(r) == 3 and all(same_frame(r[i], f) for i, f in enumerate(frames))
    with MrecWriter.open(path) as w:
        w.append(ragged(3, 2))
    assert arr(path, "atoms/offset").tolist() == [0, 3, 8, 12, 14]
    assert arr(path, "atoms/step_index").tolist() == [0, 1, 2, 3]
    r = MrecReader(path)
    assert len(r) == 4 and same_frame(r[3], ragged(3, 2))


def test_trajectory_N1_nstep_rolled_back_hides_frames(path):
    write(path, [ragged(i, 2 + i) for i in range(5)])
    patch_attrs(path, "trajectory", nstep=3, step_progression={"start": 0, "stride": 1})
    r = MrecReader(path)
    assert len(r) == 3 and r.step == [0, 1, 2]
    assert r.block_update_at("atoms", 2) == 2


def test_trajectory_zero_committed_updates_keep_offset_zero(path):
    s = SequenceSchema().declare_column("atoms", "x", "f64").declare_column("late", "v", "f64")
    with MrecWriter(path, s) as w:
        w.append(frame(atoms=atoms([1.0])))
    assert "late" not in MrecReader(path)[0].blocks  # N2: declared, never updated
    late = open_group(path)["trajectory/late"]  # declared: group + zero-length columns, no index
    assert "offset" not in late and "uniform_rows" not in late.attrs and late["v"].shape == (0,)
    with MrecWriter.open(path) as w:
        w.append(frame(atoms=atoms([1.0]), late=Block({"v": np.array([2.0])})))
    assert arr(path, "late/offset").tolist() == [0, 1] and arr(path, "late/step_index").tolist() == [1]


# ------------------------------------------------------------------ reader refusals
def test_trajectory_R3_R4_markers(path):
    write(path, [ragged(0, 2)])
    patch_attrs(path, "trajectory", nstep=-1)
    with pytest.raises(SpecViolationError) as e:
        MrecReader(path)
    assert e.value.rule == rule("R3")
    patch_attrs(path, "trajectory", nstep=KeyError)
    with pytest.raises(SpecViolationError, match="nstep") as e:
        MrecReader(path)
    assert e.value.rule == rule("R4")


def test_trajectory_R5_malformed_progression(path):
    write(path, [ragged(i, 2) for i in range(3)])
    patch_attrs(path, "trajectory", step_progression={"start": 0})
    with pytest.raises(SpecViolationError) as e:
        MrecReader(path)
    assert e.value.rule == rule("R5")
    patch_attrs(path, "trajectory", step_progression={"begin": 0, "stride": 1})
    with pytest.raises(SpecViolationError):
        MrecReader(path)


def test_trajectory_R6_step_array_shorter_than_nstep(path):
    write(path, [ragged(i, 2) for i in range(3)], steps=[0, 1, 5])
    patch_attrs(path, "trajectory", nstep=4)
    with pytest.raises(SpecViolationError, match="carries 3 step") as e:
        MrecReader(path)
    assert e.value.rule == rule("R6")


def test_trajectory_R7_step_index_must_increase(path):
    write(path, [ragged(i, 2 + i) for i in range(3)])
    g = open_group(path, mode="r+")
    g["trajectory/atoms/step_index"][...] = np.array([0, 2, 1], np.uint64)
    patch_attrs(path, "trajectory", nstep=3)
    with pytest.raises(SpecViolationError) as e:
        MrecReader(path)
    assert e.value.rule == rule("R7")


def test_trajectory_R8_offset_must_not_decrease(path):
    write(path, [ragged(i, 2 + i) for i in range(3)])
    g = open_group(path, mode="r+")
    g["trajectory/atoms/offset"][...] = np.array([0, 5, 3, 9], np.uint64)
    with pytest.raises(SpecViolationError, match="non-monotonic") as e:
        MrecReader(path)
    assert e.value.rule == rule("R8")


def test_trajectory_R12_narrow_float_column_refused(path, tmp_path):
    write(path, [ragged(0, 2)])
    g = open_group(path, mode="r+")
    g["trajectory/atoms"].create_array("x", shape=(2,), dtype="float32", overwrite=True)
    with pytest.raises(SpecViolationError) as e:
        MrecReader(path)
    assert e.value.rule == rule("R12")


def test_trajectory_R2_legacy_layout_refused(path):
    write(path, [ragged(0, 2)])
    open_group(path, mode="r+")["trajectory"].create_group("frames")
    with pytest.raises(SpecViolationError, match="legacy") as e:
        MrecReader(path)
    assert e.value.rule == rule("R2")
    with pytest.raises(SpecViolationError, match="legacy"):
        MrecWriter.open(path)


def test_trajectory_R1_version_refused(path):
    write(path, [ragged(0, 2)])
    patch_attrs(path, "meta", molrec_version=99)
    with pytest.raises(SpecViolationError, match="molrec_version"):
        MrecReader(path)


def test_trajectory_N3_N4_store_without_pin_or_version_reads(path):
    frames = [ragged(i, n) for i, n in enumerate([3, 5])]
    write(path, frames)
    patch_attrs(path, "trajectory", sequence_schema=KeyError)
    patch_attrs(path, "meta", molrec_version=KeyError)
    r = MrecReader(path)
    assert len(r) == 2 and same_frame(r[1], frames[1])


def test_trajectory_N5_unknown_child_group_is_not_a_block(path):
    write(path, [ragged(0, 2)])
    open_group(path, mode="r+")["trajectory"].create_group("future")
    r = MrecReader(path)
    assert list(r[0].blocks) == ["atoms"]


# ------------------------------------------------------------------ reader API, doors, zip
def test_trajectory_read_columns_decodes_only_named_pairs(path):
    bonds = Block({"atomi": np.array([0], np.uint64)})
    write(path, [frame(atoms=Block({"x": np.zeros(2), "y": np.ones(2)}), bonds=bonds)])
    r = MrecReader(path)
    f = r.read_columns(0, [("atoms", "x")])
    assert list(f.blocks) == ["atoms"] and list(f["atoms"].columns) == ["x"]
    with pytest.raises(ValueError, match="nope"):
        r.read_columns(0, [("atoms", "nope")])


def test_trajectory_doors_and_zip(path, tmp_path):
    frames = [ragged(i, n) for i, n in enumerate([3, 5, 4])]
    write_mrec_trajectory(path, frames, steps=[0, 5, 10], times=[0.0, 0.5, 1.25], meta={"producer": "x"})
    write_mrec_trajectory(path, frames, steps=[7, 8, 9], overwrite=True)  # rewriting the record replaces it (asked for)
    t = read_mrec_trajectory(path)
    assert len(t) == 3 and t.step.tolist() == [7, 8, 9] and t.time is None
    assert all(same_frame(a, b) for a, b in zip(t.frames, frames))
    write_mrec_trajectory(tmp_path / "copy.mrec", t)  # a Trajectory carries its numbering
    assert read_mrec_trajectory(tmp_path / "copy.mrec").step.tolist() == [7, 8, 9]
    archive = tmp_path / "t.mrec.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as z:
        for p in sorted(path.rglob("*")):
            if p.is_file():
                z.write(p, p.relative_to(path).as_posix())
    with MrecReader(archive) as r:
        assert len(r) == 3 and all(same_frame(r[i], f) for i, f in enumerate(frames))


def test_trajectory_precision_columns_rounded_and_codecs(path):
    s = SequenceSchema().declare_column("atoms", "x", "f64").declare_precision("atoms", "x", 1e-3)
    q = 2.0 ** -10
    with MrecWriter(path, s) as w:
        w.append(frame(atoms=atoms([126.1 * q, 1.0])))
        w.append(frame(atoms=atoms([126.4 * q, 1.0])))  # sub-quantum change: no update
    x = open_group(path)["trajectory/atoms/x"]
    inner = [c["name"] for c in x.metadata.codecs[0]["configuration"]["codecs"]]
    assert inner == ["bytes", "numcodecs.shuffle", "zstd", "crc32c"] and "precision" not in x.attrs
    r = MrecReader(path)
    assert r[0]["atoms"]["x"][0] == 126 * q
    assert r[0]["atoms"].precision == {"x": 1e-3} and r.block_update_at("atoms", 1) == 0


def test_trajectory_codecs_index_at_start_and_compression_knob(path, tmp_path):
    # steps 0, 1, 7 force a step array; 4/5/6 rows force an index
    write(path, [frame(atoms=atoms(np.zeros(n)), bonds=Block({"atomi": np.array([0], np.uint64)})) for n in (4, 5, 6)],
          steps=[0, 1, 7])
    g = open_group(path)
    for name in ("step", "atoms/x", "atoms/offset", "atoms/step_index", "bonds/atomi"):
        top = g[f"trajectory/{name}"].metadata.codecs[0]
        assert top["name"] == "sharding_indexed" and top["configuration"]["index_location"] == "start"
        assert top["configuration"]["codecs"][-1]["name"] == "crc32c"
    names = lambda n: [c["name"] for c in g[f"trajectory/{n}"].metadata.codecs[0]["configuration"]["codecs"]]
    assert names("atoms/x") == ["bytes", "crc32c"] and names("bonds/atomi") == ["bytes", "gzip", "crc32c"]
    assert names("step") == ["bytes", "gzip", "crc32c"]
    assert g["trajectory/step"].chunks == (1024,) and g["trajectory/step"].shards == (1024 * 255,)
    assert g["trajectory/atoms/x"].shards[0] // g["trajectory/atoms/x"].chunks[0] <= 255  # index in one page
    p2 = tmp_path / "g.mrec"
    write(p2, [ragged(0, 2)], compression="gzip:3")
    codecs = open_group(p2)["trajectory/atoms/x"].metadata.codecs[0]["configuration"]["codecs"]
    assert [c["name"] for c in codecs] == ["bytes", "gzip", "crc32c"] and codecs[1]["configuration"]["level"] == 3


def test_trajectory_context_manager_keeps_committed_frames_on_exception(path):
    with pytest.raises(RuntimeError):
        with make_writer(path, [ragged(0, 2)], flush_every=100) as w:
            w.append(ragged(0, 2))
            w.flush()
            w.append(ragged(1, 2))
            raise RuntimeError("boom")
    assert len(MrecReader(path)) == 1


# ------------------------------------------------------------------ extents (§12, §14, decision 3)
def test_trajectory_extents_worked_examples():
    assert ext.block_rows_per_chunk(3000, [24]) == 3000
    assert ext.chunks_per_shard(3000, 24) == 3728
    assert ext.block_rows_per_chunk(100, [8]) == 2100
    assert ext.block_rows_per_chunk(1000, [8]) == 3000
    assert ext.flush_cadence([(1000, [8, 8, 8], 3000)]) == 174
    assert ext.flush_cadence([(1000, [8], 3000)]) == 525
    assert ext.DENSE_ROWS * ext.REFERENCE_DENSE_CHUNKS_PER_SHARD == 262144
    assert ext.safe_chunks_per_shard(3000, 24) == 255 and 255 * 16 + 4 <= 4096


def test_trajectory_I6_time_progression_breaks_midway_and_backfills(path):
    w = MrecWriter(path, SequenceSchema.from_frames([ragged(0, 2)]))
    for i, t in enumerate([0.0, 0.5, 1.0]):
        w.append(ragged(i, 2), time=t)
    w.flush()
    assert tattrs(path)["time_progression"] == {"start": 0.0, "stride": 0.5}
    w.append(ragged(3, 2), time=7.0)
    w.append(ragged(4, 2), time=float("inf"))  # non-finite: array form only
    w.close()
    a = tattrs(path)
    assert "time_progression" not in a and a["step_progression"] == {"start": 0, "stride": 1}
    assert arr(path, "time").tolist() == [0.0, 0.5, 1.0, 7.0, float("inf")]
    assert MrecReader(path).time == [0.0, 0.5, 1.0, 7.0, float("inf")]


def test_trajectory_I5_one_frame_progression_and_stale_series_array(path):
    write(path, [ragged(0, 2)], steps=[7], times=[0.25])
    a = tattrs(path)
    assert a["step_progression"] == {"start": 7} and a["time_progression"] == {"start": 0.25}
    # a step array left by an interrupted materialization (nstep still says progression)
    g = open_group(path, mode="r+")["trajectory"]
    g.create_array("step", shape=(3,), dtype="int64")
    assert MrecReader(path).step == [7]  # the attribute wins
    with MrecWriter.open(path) as w:
        w.append(ragged(1, 2), step=9, time=0.5)
    assert "step" not in open_group(path)["trajectory"]
    r = MrecReader(path)
    assert r.step == [7, 9] and r.time == [0.25, 0.5]


def test_trajectory_W12_create_over_a_store_with_only_a_step_array(path):
    write(path, [ragged(i, 2) for i in range(3)], steps=[0, 5, 6])
    patch_attrs(path, "trajectory", nstep=KeyError)
    assert len(MrecReader(path)) == 3  # no nstep: len(step)
    with pytest.raises(SpecViolationError) as e:
        make_writer(path, [ragged(0, 2)])
    assert e.value.rule == rule("W12")


def test_trajectory_W16_step_outside_i64_refused(path):
    w = make_writer(path, [ragged(0, 2)])
    with pytest.raises(SpecViolationError):
        w.append(ragged(0, 2), step=2 ** 63)
    w.append(ragged(0, 2), step=2 ** 63 - 2)
    w.append(ragged(1, 2))
    w.close()
    assert MrecReader(path).step == [2 ** 63 - 2, 2 ** 63 - 1]


def test_trajectory_record_without_trajectory_reads_empty(path):
    from molrec_raw.record.doors import write_mrec_frame
    write_mrec_frame(path, ragged(0, 2))
    t = read_mrec_trajectory(path)
    assert len(t) == 0 and t.step.tolist() == []


def test_trajectory_flush_dead_bytes_bounded_by_one_chunk_per_flush(tmp_path):
    lazy, eager = tmp_path / "lazy.mrec", tmp_path / "eager.mrec"
    s = SequenceSchema().declare_block("atoms", rows=8).declare_column("atoms", "x", "f64")
    frames = [frame(atoms=atoms(np.arange(8.0) * i)) for i in range(64)]
    for p, every in ((lazy, None), (eager, 1)):
        with MrecWriter(p, s, durable=False) as w:
            for f in frames:
                w.append(f)
                if every:
                    w.flush()
    size = lambda p: (p / "trajectory/atoms/x/c/0").stat().st_size
    chunk = open_group(eager)["trajectory/atoms/x"].chunks[0] * 8 + 4
    assert size(lazy) < size(eager) <= size(lazy) + 64 * chunk
    assert all(same_frame(a, b) for a, b in zip(MrecReader(lazy), MrecReader(eager)))


def test_trajectory_I13_pin_never_changes_across_commits_and_reopen(path):
    s = SequenceSchema().declare_block("atoms", rows=7).declare_column("atoms", "x", "f64").declare_block("late")
    pin = s.to_json()
    w = MrecWriter(path, s, flush_every=1)
    assert tattrs(path)["sequence_schema"] == pin  # written at creation, no nstep yet
    assert "nstep" not in tattrs(path)
    w.append(ragged(0, 3))
    w.close()
    with MrecWriter.open(path) as w:
        w.append(ragged(1, 4))
    assert tattrs(path)["sequence_schema"] == pin
    r = MrecReader(path)
    assert r.schema == s and not r.has_block("late") and r.has_block("atoms")
    assert r.block_update_at("late", 1) is None


def test_trajectory_every_shard_index_fits_one_page(path):
    """Crash safety: the in-place index rewrite (16 B per inner chunk + 4 B crc) stays inside
    the first 4 KiB page, so a SIGKILL cannot tear it (a 64 KiB index can be torn: observed)."""
    s = SequenceSchema().declare_block("atoms", rows=3).declare_column("atoms", "x", "f64")
    s.declare_column("atoms", "ok", "bool").declare_nullable("atoms", "ok").declare_meta("pe", "f64")
    frames = []
    for i, n in enumerate([3, 2, 3]):
        f = frame(atoms=Block({"x": np.zeros(n) + i, "ok": np.ones(n, bool)}, masks={"ok": np.ones(n, bool)}))
        f.meta = {"pe": 1.0}
        frames.append(f)
    write(path, frames, steps=[0, 2, 3], times=[0.0, 0.1, 0.7])
    root = open_group(path)
    arrays = [p.parent.relative_to(path).as_posix() for p in path.rglob("zarr.json") if p.parent != path]
    checked = 0
    for node in arrays:
        a = root[node]
        if hasattr(a, "shards") and a.shards is not None:
            per_shard = np.prod([s // c for s, c in zip(a.shards, a.chunks)])
            assert per_shard * 16 + 4 <= 4096, node
            checked += 1
    assert checked >= 7
