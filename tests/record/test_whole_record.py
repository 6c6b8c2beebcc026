"""The whole record: read_mrec / write_mrec / validate, unknown content, zip records,
and zarr-python opening what we write (issue 3 "Proof")."""
import json
import math
import zipfile

import numpy as np
import pytest

from molrec_raw.errors import SpecViolationError
from molrec_raw.record.doors import read_mrec_meta, section_names, write_mrec_frame
from molrec_raw.record.forcefield import ForceFieldSection, block_name
from molrec_raw.record.model import Block, Box, Frame, MetaValue
from molrec_raw.record.molrec import MolRec, read_mrec, validate, write_mrec
from molrec_raw.record.observables import Observable
from molrec_raw.zarr import open_group


def rich_record() -> MolRec:
    atoms = Block(
        {"x": np.array([0.0, 1.5, -0.0]), "element": np.array(["O", "H", "Ω"], dtype=object),
         "mol_id": np.array([1, 1, 2], dtype=np.uint64), "charge": np.array([-0.8, 0.4, 0.4])},
        masks={"mol_id": np.array([True, True, False])}, precision={"x": 0.001},
        attrs={"producer_note": None, "tags": ["a", "b"]},
    )
    bonds = Block({"atomi": np.array([0, 0], dtype=np.uint64), "atomj": np.array([1, 2], dtype=np.uint64)})
    grid = Block({"rho": np.arange(8.0)}, structural_shape=(2, 2, 2))
    frame = Frame({"title": "water", "n": MetaValue("i32", 3), "e": math.nan, "com": MetaValue("f64x3", (0.0, 0.5, 1.0))},
                  {"atoms": atoms, "bonds": bonds, "grid": grid, "empty": Block(count=0)},
                  Box(np.diag([10.0, 11.0, 12.0]), np.array([1.0, 0.0, 0.0]), (True, True, False)))
    system = Frame({"smiles": "O"}, {"atoms": Block({"type": np.array(["OW", "HW", "HW"], dtype=object)})})
    ff = ForceFieldSection(
        {"name": "water", "units": {"preset": "real"},
         "styles": [{"category": "atom", "style": "full"}, {"category": "bond", "style": "harmonic"}],
         "aromaticity_model": None},
        {block_name("atom", "full"): Block({"name": np.array(["OW", "HW"], dtype=object),
                                             "mass": np.array([15.999, 1.008]), "charge": np.array([-0.8, 0.4])}),
         block_name("bond", "harmonic"): Block({"name": np.array(["OW-HW"], dtype=object),
                                                 "itom": np.array(["OW"], dtype=object), "jtom": np.array(["HW"], dtype=object),
                                                 "k": np.array([1059.162]), "r0": np.array([1.0])})},
    )
    observables = {"energy": Observable(np.array([1.0, 2.0]), {"kind": "scalar", "description": "E", "time_dependent": True,
                                                                "unit": "eV"}),
                   "spectrum": Observable(np.array(3.0), {"kind": "spectrum_density", "description": "s",
                                                           "time_dependent": False, "extra": None})}
    return MolRec(meta={"creator": {"name": "test"}, "note": None}, status={"state": "succeeded", "custom": 1},
                  method={"type": "classical", "description": "md", "engine": {"name": "lammps"}},
                  frame=frame, system=system, forcefield=ff, observables=observables)


def assert_same_frame(a: Frame, b: Frame) -> None:
    assert a.meta == b.meta or all(
        (isinstance(v, float) and math.isnan(v) and math.isnan(b.meta[k])) or v == b.meta[k] for k, v in a.meta.items())
    assert list(a.blocks) == list(b.blocks) or sorted(a.blocks) == sorted(b.blocks)
    for name, block in a.blocks.items():
        other = b.blocks[name]
        assert block.count == other.count and block.attrs == other.attrs
        assert block.structural_shape == other.structural_shape and block.precision == other.precision
        for column, values in block.columns.items():
            got = other.columns[column]
            assert got.dtype == np.asarray(values).dtype or got.dtype == object
            if got.dtype.kind == "f":
                assert np.array_equal(np.asarray(values).view(np.uint8), got.view(np.uint8))
            else:
                assert got.tolist() == np.asarray(values).tolist()
        assert sorted(block.masks) == sorted(other.masks)
    assert a.box == b.box


def test_round_trip_every_section(tmp_path):
    rec = rich_record()
    write_mrec(tmp_path / "r.mrec", rec)
    back = read_mrec(tmp_path / "r.mrec")
    assert back.meta == {"creator": {"name": "test"}, "note": None, "molrec_version": 2}
    assert back.status == rec.status and back.method == rec.method
    assert back.forcefield == rec.forcefield
    assert list(back.forcefield.document) == list(rec.forcefield.document)  # key order kept
    assert back.observables == rec.observables
    assert_same_frame(back.system, rec.system)
    back_x = back.frame.blocks["atoms"].columns["x"]
    assert back_x.tolist() == [0.0, 1.5, -0.0] and math.copysign(1, back_x[2]) < 0
    assert validate(tmp_path / "r.mrec") == []
    assert section_names(tmp_path / "r.mrec") == ["forcefield", "frame", "meta", "method", "observables", "status", "system"]


def test_root_layout_5_unknown_sections_round_trip_byte_for_byte(tmp_path):
    write_mrec_frame(tmp_path / "a.mrec", Frame(blocks={"atoms": Block({"x": np.zeros(2)})}))
    g = open_group(tmp_path / "a.mrec", mode="r+")
    future = g.create_group("future", attributes={"k": [1, None]})
    future.create_array("data", shape=(3,), dtype="int16", chunks=(2,))[...] = [1, 2, 3]
    rec = read_mrec(tmp_path / "a.mrec")
    assert sorted(rec.raw_sections) == ["future"]
    write_mrec(tmp_path / "b.mrec", rec)
    for rel in ("future/zarr.json", "future/data/zarr.json", "future/data/c/0", "future/data/c/1"):
        assert (tmp_path / "a.mrec" / rel).read_bytes() == (tmp_path / "b.mrec" / rel).read_bytes()


def test_documents_9_1_record_without_substantive_section_refused_at_write(tmp_path):
    with pytest.raises(SpecViolationError) as info:
        write_mrec(tmp_path / "x.mrec", MolRec(meta={"a": 1}, method={"type": "ml", "description": "d",
                                                                       "engine": {"name": "e"}}))
    assert info.value.rule == "documents#9.1"
    assert not (tmp_path / "x.mrec").exists()


def test_documents_9_1_reader_reports_but_opens(tmp_path):
    write_mrec_frame(tmp_path / "a.mrec", Frame(blocks={"atoms": Block({"x": np.zeros(1)})}))
    g = open_group(tmp_path / "a.mrec", mode="r+")
    for key in list(g.store.list("frame/")):
        g.store.delete(key)
    assert [v.rule for v in validate(tmp_path / "a.mrec")] == ["documents#9.1"]


def test_validate_lists_every_violation(tmp_path):
    write_mrec(tmp_path / "r.mrec", rich_record())
    g = open_group(tmp_path / "r.mrec", mode="r+")
    g["status"].attrs.put({"custom": 1})  # no state
    g["frame/atoms"].attrs["count"] = 4  # columns disagree
    g["meta"].attrs["molrec_version"] = 3
    rules = sorted(v.rule for v in validate(tmp_path / "r.mrec"))
    assert "frame-and-types#14.23" in rules and "documents#9.5" in rules and "frame-and-types#14.6" in rules
    with pytest.raises(SpecViolationError):
        read_mrec(tmp_path / "r.mrec")


@pytest.mark.parametrize("version", [None, 0, "1", 1.0, True, 3])
def test_frame_and_types_14_23_bad_version_refused_by_every_door(tmp_path, version):
    write_mrec_frame(tmp_path / "a.mrec", Frame(blocks={"atoms": Block({"x": np.zeros(1)})}))
    open_group(tmp_path / "a.mrec", mode="r+")["meta"].attrs["molrec_version"] = version
    for door in (read_mrec, read_mrec_meta, section_names):
        with pytest.raises(SpecViolationError) as info:
            door(tmp_path / "a.mrec")
        assert info.value.rule == "frame-and-types#14.23"


def test_zip_record_reads_like_the_directory(tmp_path):
    write_mrec(tmp_path / "r.mrec", rich_record())
    zpath = tmp_path / "r.mrec.zip"
    with zipfile.ZipFile(zpath, "w", zipfile.ZIP_STORED) as zf:
        for f in sorted(p for p in (tmp_path / "r.mrec").rglob("*") if p.is_file()):
            zf.write(f, f.relative_to(tmp_path / "r.mrec").as_posix())
    a, b = read_mrec(tmp_path / "r.mrec"), read_mrec(zpath)
    assert a.forcefield == b.forcefield and a.observables == b.observables and a.meta == b.meta
    assert_same_frame(a.frame, b.frame)
    assert validate(zpath) == []


def test_zarr_python_opens_every_array_and_attribute_map(tmp_path):
    zarr = pytest.importorskip("zarr")
    if not getattr(zarr, "__version__", "0").startswith("3"):
        pytest.skip("zarr-python 3 needed")
    write_mrec(tmp_path / "r.mrec", rich_record())
    ours = open_group(tmp_path / "r.mrec")
    theirs = zarr.open_group(str(tmp_path / "r.mrec"), mode="r")
    seen = 0

    def walk(a, b, path):
        nonlocal seen
        assert dict(a.attrs) == json.loads(json.dumps(dict(b.attrs))), path
        for name, node in a.members():
            other = b[name]
            if hasattr(node, "shape"):
                mine, got = node[...], other[...]
                if node.metadata.dtype.is_string:
                    assert np.asarray(got).tolist() == np.asarray(mine).tolist(), name
                else:
                    assert np.array_equal(np.asarray(got), mine, equal_nan=mine.dtype.kind in "fc"), name
                assert dict(node.attrs) == dict(other.attrs)
                seen += 1
            else:
                walk(node, other, f"{path}/{name}")

    walk(ours, theirs, "")
    assert seen >= 15


def test_documents_9_33_version_1_forcefield_read_as_stored_and_noted_decision_15(tmp_path):
    rec = rich_record()
    from molrec_raw import read_mrec_forcefield, write_mrec_forcefield
    write_mrec_forcefield(tmp_path / "ff.mrec", rec.forcefield, meta={"source": "x"})
    assert section_names(tmp_path / "ff.mrec") == ["forcefield", "meta"]
    assert read_mrec_forcefield(tmp_path / "ff.mrec") == rec.forcefield
    assert validate(tmp_path / "ff.mrec") == []
    write_mrec_frame(tmp_path / "f.mrec", Frame(blocks={"atoms": Block({"x": np.zeros(1)})}))
    assert read_mrec_forcefield(tmp_path / "f.mrec") is None
    open_group(tmp_path / "ff.mrec", mode="r+")["meta"].attrs["molrec_version"] = 1
    assert [v.rule for v in validate(tmp_path / "ff.mrec")] == ["README#decision-15"]
    assert read_mrec_meta(tmp_path / "ff.mrec")["molrec_version"] == 1


def test_molrec_metrics_view_and_validate_reports_a_truncated_wal(tmp_path):
    from molrec_raw import MetricsWriter
    write_mrec(tmp_path / "r.mrec", rich_record())
    with MetricsWriter(tmp_path / "r.mrec") as writer:
        for step in range(5):
            writer.log("train/loss", 1.0 / (step + 1), step=step)
    with MetricsWriter(tmp_path / "r.mrec") as writer:  # a reopening writer continues
        writer.log("train/loss", 0.1, step=5)
    rec = read_mrec(tmp_path / "r.mrec")
    assert rec.metrics["train/loss"].steps.tolist() == [0, 1, 2, 3, 4, 5]
    write_mrec(tmp_path / "copy.mrec", rec)  # the metrics section travels byte for byte
    wal = "metrics/metrics.jsonl"
    assert (tmp_path / "copy.mrec" / wal).read_bytes() == (tmp_path / "r.mrec" / wal).read_bytes()
    assert read_mrec(tmp_path / "copy.mrec").metrics["train/loss"].values.tolist() == rec.metrics["train/loss"].values.tolist()
    assert validate(tmp_path / "copy.mrec") == []
    (tmp_path / "copy.mrec" / wal).write_bytes(b"")  # truncated outside the writer (decision 16)
    assert validate(tmp_path / "copy.mrec")


def test_molrec_trajectory_is_a_lazy_handle_and_travels_byte_for_byte(tmp_path):
    from molrec_raw.record.trajectory import MrecReader, write_mrec_trajectory
    frames = [Frame({"pe": float(i)}, {"atoms": Block({"x": np.arange(3.0) + i})}) for i in range(4)]
    write_mrec_trajectory(tmp_path / "t.mrec", frames, steps=[0, 10, 20, 30])
    rec = read_mrec(tmp_path / "t.mrec")
    assert isinstance(rec.trajectory, MrecReader) and len(rec.trajectory) == 4
    assert rec.trajectory[2].blocks["atoms"].columns["x"].tolist() == [2.0, 3.0, 4.0]
    write_mrec(tmp_path / "copy.mrec", rec)
    for f in (tmp_path / "t.mrec" / "trajectory").rglob("*"):
        if f.is_file():
            rel = f.relative_to(tmp_path / "t.mrec")
            assert (tmp_path / "copy.mrec" / rel).read_bytes() == f.read_bytes()
    assert len(read_mrec(tmp_path / "copy.mrec").trajectory) == 4
    assert validate(tmp_path / "copy.mrec") == []
    group = open_group(tmp_path / "copy.mrec", mode="r+")["trajectory"]
    group.attrs["nstep"] = 9  # claims frames it lacks
    assert validate(tmp_path / "copy.mrec")
    with pytest.raises(SpecViolationError):
        read_mrec(tmp_path / "copy.mrec")
