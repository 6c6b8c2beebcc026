"""A column subset reads what it names (issue 28): a row reference among the named columns is
checked against its target block's row count at that frame (trajectory#R17), whether or not
the target's columns are named, and the target block is not handed back."""
import numpy as np
import pytest

from molrec_raw.errors import SpecViolationError
from molrec_raw.record.trajectory import MrecReader, MrecWriter
from molrec_raw.zarr import open_group

from test_mrec_refs import atoms, ref_schema, refs
from traj_helpers import frame, rule


@pytest.fixture
def two_frames(path):
    with MrecWriter(path, ref_schema()) as w:
        w.append(frame(atoms=atoms(3), refs=refs([0, 2])))
        w.append(frame(atoms=atoms(4), refs=refs([3, 1])))
    return path


def test_trajectory_R17_reference_subset_checked_against_target_row_count(two_frames):
    with MrecReader(two_frames) as r:
        f = r.read_columns(1, [("refs", "site")])
        assert list(f.blocks) == ["refs"] and f["refs"]["site"].tolist() == [3, 1]
        assert [fr["refs"]["site"].tolist() for fr in r.read_frames(slice(0, 2), [("refs", "site")])] == [[0, 2], [3, 1]]
        assert [list(fr.blocks) for fr in r.iter_frames(columns=[("refs", "site")])] == [["refs"], ["refs"]]


def test_trajectory_R17_reference_subset_still_refuses_a_row_past_the_target(two_frames):
    open_group(two_frames, mode="r+")["trajectory/refs/site"][...] = np.array([0, 2, 4, 1], np.uint64)
    with MrecReader(two_frames) as r:
        assert r.read_columns(0, [("refs", "site")])["refs"]["site"].tolist() == [0, 2]
        with pytest.raises(SpecViolationError) as e:
            r.read_columns(1, [("refs", "site")])  # row 4 of a 4-row atoms block
    assert e.value.rule == rule("R17") and "not below the 4 rows of 'atoms'" in e.value.message


def test_trajectory_R17_demo_bonds_subset_reads(tmp_path):
    from molrec_raw.demo import write_demo

    path = write_demo(tmp_path / "demo.mrec", frames=3, molecules=2)
    with MrecReader(path) as r:
        f = r.read_columns(0, [("bonds", "atomi")])
    assert list(f.blocks) == ["bonds"] and list(f["bonds"].columns) == ["atomi"] and f["bonds"].nrows == 4
