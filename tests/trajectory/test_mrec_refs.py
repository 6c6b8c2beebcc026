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
