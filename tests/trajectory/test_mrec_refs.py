"""Row references (§8.6: W26, W27, R17) and aligned blocks (§8.7: W13, W28, R16) on resolved
frames; canonical widths on read (R13); zarr-python interop."""
import numpy as np
import pytest

from molrec_raw.errors import SpecViolationError
from molrec_raw.record.doors import write_mrec_system
from molrec_raw.record.model import Block, Frame
from molrec_raw.record.trajectory import MrecReader, MrecWriter
from molrec_raw.record.trajectory.schema import SequenceSchema
from molrec_raw.zarr import open_group

from traj_helpers import rule, frame


def atoms(n, shift=0.0):
    return Block({"x": np.arange(n, dtype=float) + shift})


def refs(values, target=None):
    b = Block({"site": np.asarray(values, np.uint64)})
    if target:
        b.targets["site"] = target
    return b


def ref_schema(target="atoms"):
    s = SequenceSchema().declare_column("atoms", "x", "f64").declare_column("refs", "site", "u64")
    return s.declare_target("refs", "site", target)


def test_trajectory_W27_broken_reference_refused_and_state_unchanged(path):
    w = MrecWriter(path, ref_schema(), flush_every=1)
    w.append(frame(atoms=atoms(3), refs=refs([0, 2])))
    with pytest.raises(SpecViolationError, match="trajectory frame 1") as e:
        w.append(frame(atoms=atoms(3), refs=refs([0, 3])))
    assert e.value.rule == rule("W27") and "site" in e.value.message
    with pytest.raises(SpecViolationError) as e:  # a carried-forward block broken by its target shrinking
        w.append(frame(atoms=atoms(2)))
    assert e.value.rule == rule("W27")
    w.append(frame(atoms=atoms(4), refs=refs([3])))
    w.close()
    r = MrecReader(path)
    assert len(r) == 2 and r[1]["refs"]["site"].tolist() == [3] and r[0]["refs"].targets == {"site": "atoms"}
    pin = dict(open_group(path)["trajectory"].attrs)["sequence_schema"]["blocks"]["refs"]
    assert pin["targets"] == {"site": "atoms"}


def test_trajectory_W26_stated_target_differs_from_pin(path):
    w = MrecWriter(path, ref_schema())
    with pytest.raises(SpecViolationError) as e:
        w.append(frame(atoms=atoms(3), refs=refs([0], target="/system/atoms")))
    assert e.value.rule == rule("W26")


def test_trajectory_R17_tampered_reference_refused_on_read(path):
    with MrecWriter(path, ref_schema()) as w:
        w.append(frame(atoms=atoms(3), refs=refs([0, 2])))
    open_group(path, mode="r+")["trajectory/refs/site"][...] = np.array([0, 7], np.uint64)
    r = MrecReader(path)
    with pytest.raises(SpecViolationError) as e:
        r[0]
    assert e.value.rule == rule("R17")
    assert r.read_columns(0, [("atoms", "x")])["atoms"].nrows == 3  # refs not decoded: not checked


def test_trajectory_W27_absolute_target_into_the_system_section(path):
    write_mrec_system(path, Frame(blocks={"atoms": Block({"x": np.zeros(3)})}), meta={"producer": "p"})
    s = SequenceSchema().declare_column("refs", "site", "u64").declare_target("refs", "site", "/system/atoms")
    with MrecWriter(path, s) as w:
        w.append(frame(refs=refs([2])))
        with pytest.raises(SpecViolationError, match="/system/atoms") as e:
            w.append(frame(refs=refs([3])))
        assert e.value.rule == rule("W27")
    r = MrecReader(path)
    assert len(r) == 1 and r[0]["refs"]["site"].tolist() == [2]
    assert dict(open_group(path)["meta"].attrs) == {"producer": "p", "molrec_version": 2}


def aligned_schema():
    s = SequenceSchema().declare_column("atoms", "x", "f64").declare_column("atom_types", "type", "string")
    return s.declare_aligned("atom_types", "atoms")


def types(n):
    return Block({"type": np.array([f"t{i}" for i in range(n)], dtype=object)})


def test_trajectory_W28_aligned_blocks(path):
    w = MrecWriter(path, aligned_schema(), flush_every=1)
    with pytest.raises(SpecViolationError) as e:  # types-only frame: the target is absent
        w.append(frame(atom_types=types(2)))
    assert e.value.rule == rule("W28")
    w.append(frame(atoms=atoms(2)))  # aligned block may be absent while the target is present
    w.append(frame(atoms=atoms(2), atom_types=types(2)))
    w.append(frame(atoms=atoms(2, 1.0)))  # carried forward while the target moves
    with pytest.raises(SpecViolationError, match="atom_types") as e:
        w.append(frame(atoms=atoms(3)))  # growth without restatement
    assert e.value.rule == rule("W28") and "trajectory frame 3" in e.value.message
    with pytest.raises(SpecViolationError):
        w.append(frame(atoms=atoms(3), atom_types=types(2)))  # wrong row count
    w.append(frame(atoms=atoms(3), atom_types=types(3)))  # restated on growth
    w.append(frame(atoms=atoms(0), atom_types=types(0)))  # empty target, empty aligned block
    w.close()
    r = MrecReader(path)
    assert len(r) == 5 and "atom_types" not in r[0].blocks
    assert r[2]["atom_types"]["type"].tolist() == ["t0", "t1"] and r[3]["atom_types"].nrows == 3
    assert r[4]["atom_types"].nrows == 0 and list(r[4].blocks) == ["atoms", "atom_types"]


def test_trajectory_R16_tampered_alignment_refused(path):
    with MrecWriter(path, aligned_schema()) as w:
        w.append(frame(atoms=atoms(2), atom_types=types(2)))
        w.append(frame(atoms=atoms(3), atom_types=types(3)))
    g = open_group(path, mode="r+")["trajectory/atoms/offset"]
    g[...] = np.array([0, 2, 4], np.uint64)
    with pytest.raises(SpecViolationError, match="atom_types") as e:
        MrecReader(path)[1]
    assert e.value.rule == rule("R16")


def test_trajectory_W13_aligned_block_named_like_a_system_block(path):
    write_mrec_system(path, Frame(blocks={"atom_types": Block({"type": np.array(["a"], dtype=object)})}))
    with pytest.raises(SpecViolationError, match="system") as e:
        MrecWriter(path, aligned_schema())
    assert e.value.rule == rule("W13")


def test_trajectory_R13_canonical_identifier_stored_narrow(path):
    s = SequenceSchema().declare_column("bonds", "atomi", "u64")
    with MrecWriter(path, s) as w:
        w.append(frame(bonds=Block({"atomi": np.array([0, 1], np.uint64)})))
    g = open_group(path, mode="r+")["trajectory/bonds"]
    g.create_array("atomi", shape=(2,), dtype="uint32", overwrite=True)
    with pytest.raises(SpecViolationError, match="atomi") as e:
        MrecReader(path)
    assert e.value.rule == rule("R13")


def test_trajectory_N8_interop_zarr_python_reads_every_array(path):
    zarr = pytest.importorskip("zarr")
    if not getattr(zarr, "__version__", "0").startswith("3"):
        pytest.skip("zarr-python 3 needed")
    frames = [frame(atoms=atoms(n, i), bonds=Block({"atomi": np.arange(i % 3, dtype=np.uint64)}))
              for i, n in enumerate([3, 5, 4, 4])]
    s = SequenceSchema.from_frames(frames)
    with MrecWriter(path, s) as w:
        for i, f in enumerate(frames):
            w.append(f, step=[0, 1, 5, 9][i], time=0.1 * i)
    ours = open_group(path)
    for p in path.rglob("zarr.json"):
        node = p.parent.relative_to(path).as_posix()
        ours_node = ours[node] if node != "." else ours
        if hasattr(ours_node, "shape"):
            theirs = zarr.open_array(str(p.parent), mode="r")[...]
            np.testing.assert_array_equal(theirs, ours_node[...])


# ---------------------------------------------------------------- §8.8 system vs trajectory
def system_atoms(path, ids):
    write_mrec_system(path, Frame(blocks={"atoms": Block({"id": np.asarray(ids, np.int64),
                                                          "x": np.zeros(len(ids))})}))


def traj_atoms(n, ids=None, shift=0.0):
    cols = {"x": np.arange(n, dtype=float) + shift}
    if ids is not None:
        cols["id"] = np.asarray(ids, np.int64)
    return frame(atoms=Block(cols))


def test_trajectory_8_8_update_must_hold_the_system_block_rows(path):
    system_atoms(path, [7, 8, 9])
    w = MrecWriter(path, SequenceSchema.from_frame(traj_atoms(3)))
    w.append(traj_atoms(3))
    w.flush()
    with pytest.raises(SpecViolationError, match="/system/atoms has 3") as e:
        w.append(traj_atoms(4))  # ragged: refused, nothing changes
    assert e.value.rule == rule("8.8")
    w.append(traj_atoms(3, shift=1.0))
    w.close()
    with MrecReader(path) as r:
        assert len(r) == 2 and r[1].blocks["atoms"].columns["x"].tolist() == [1.0, 2.0, 3.0]


def test_trajectory_8_8_ids_equal_row_for_row(path):
    system_atoms(path, [7, 8, 9])
    with MrecWriter(path, SequenceSchema.from_frame(traj_atoms(3, [7, 8, 9]))) as w:
        w.append(traj_atoms(3, [7, 8, 9]))
        with pytest.raises(SpecViolationError, match="id differs from /system/atoms/id at row 1") as e:
            w.append(traj_atoms(3, [7, 0, 9], shift=1.0))
        assert e.value.rule == rule("8.8")
    with MrecReader(path) as r:
        assert len(r) == 1


def test_trajectory_8_8_validate_reports_a_store_written_elsewhere(path):
    import molrec_raw as mr
    system_atoms(path, [7, 8, 9])
    with MrecWriter(path, SequenceSchema.from_frame(traj_atoms(3))) as w:
        w.append(traj_atoms(3))
        w.append(traj_atoms(3, shift=1.0))
    from traj_helpers import patch_attrs
    patch_attrs(path, "system/atoms", count=2)  # as if another writer had let them drift apart
    with MrecReader(path) as r:  # readers stay lenient (the reference does not enforce §8.8)
        assert len(r) == 2
    found = [v for v in mr.validate(path) if v.rule == rule("8.8")]
    assert len(found) == 1 and "and 1 more" in found[0].message and found[0].node == "/trajectory/atoms"


def test_trajectory_validate_resolves_every_frame_and_reports_progress(path):
    """validate walks the whole trajectory: a reference broken from frame 4 on (R17) is
    reported once with its frame count, a corrupt chunk is found; progress reaches nstep."""
    import molrec_raw as mr
    s = SequenceSchema().declare_column("atoms", "x", "f64").declare_column("bonds", "atomi", "u64")
    s.declare_target("bonds", "atomi", "atoms")
    with MrecWriter(path, s, flush_every=1) as w:
        for i in range(6):
            w.append(frame(atoms=atoms(3, i), bonds=Block({"atomi": np.array([0, i % 3], np.uint64)})))
    seen = []
    assert mr.validate(path, progress=lambda done, total: seen.append((done, total))) == []
    assert seen[-1] == (6, 6) and len(seen) == 6
    open_group(path, mode="r+")["trajectory/bonds/atomi"][9] = 5  # frame 4's second bond -> row 5 of 3
    found = mr.validate(path)
    assert [(v.rule, v.node) for v in found] == [(rule("R17"), "/trajectory/bonds/atomi")]
    assert "frame 4" in found[0].message and "and 1 more" not in found[0].message
    open_group(path, mode="r+")["trajectory/bonds/atomi"][9] = 1
    chunk = path / "trajectory" / "atoms" / "x" / "c" / "0"
    data = bytearray(chunk.read_bytes())
    codec = open_group(path, mode="r")["trajectory/atoms/x"].pipeline.sharding
    index = codec.decode_index(bytes(data[:codec.index_size]), len(data))
    end = int(max(o + n for o, n in index.tolist() if o != 2 ** 64 - 1))  # the last inner chunk's end
    data[end - 5] ^= 0xFF  # inside the last inner chunk (the shard index sits at the start; zeros after it)
    chunk.write_bytes(bytes(data))
    found = mr.validate(path)
    assert len(found) == 1 and "crc32c" in found[0].message.lower(), found
