"""End-to-end tests of frame-shaped sections through real records on disk.

frame-and-types §2–§10 and checklist §14 (items 1–14, 17–19, 22, 24–29, 31, 32, 37–40,
42, 43, 46–48), reference-behaviour §2.2 (doors), §2.3 (group encoding, codecs,
chunking), §2.4 (box), §2.13 (precision), §2.14 (masks), §2.15 (targets); README
decisions 1 and 2.

Reader refusals: a valid record is written with ``write_mrec_frame`` and then damaged
with the Zarr layer (``molrec_raw.zarr.open_group(path, mode="r+")``); the reader must
raise ``SpecViolationError`` whose ``.rule`` is the checklist item and whose ``.node``
names the block/column.  Writer refusals: the error, and nothing written (a previous
record at the path is byte-for-byte intact, no staging directory is left behind).

Unit-level coverage of typed meta, precision and documents lives in test_typed_json.py,
test_precision.py and test_documents.py; here everything goes through the doors.
Every bug these tests found was fixed in the package; none is expected to fail.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any, Dict, Optional

import numpy as np
import pytest

import molrec_raw.zarr as mz
from molrec_raw.errors import MolrecError, NodeNotFoundError, SpecViolationError, StoreError
from molrec_raw.record.doors import (
    read_mrec_frame,
    read_mrec_meta,
    read_mrec_system,
    section_names,
    write_mrec_frame,
    write_mrec_system,
)
from molrec_raw.record.model import Block, Box, Frame, MetaValue
from molrec_raw.record.molrec import MolRec, read_mrec, validate, write_mrec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from file_trees import files_under  # noqa: E402

DEL = object()  # sentinel: delete this attribute
Q = 2.0**-10  # the quantum of p = 0.001


def R(item: Any) -> str:
    return f"frame-and-types#14.{item}"


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------
def u64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.uint64)


def base_frame() -> Frame:
    """A small valid frame: atoms (x, id, element), members → atoms, a cubic box."""
    return Frame(
        meta={"title": "water"},
        blocks={
            "atoms": Block(columns={
                "x": np.array([0.0, 1.5, -2.25]),
                "id": u64(10, 11, 12),
                "element": np.array(["O", "H", "H"], dtype=object),
            }),
            "members": Block(columns={"atom": u64(1, 2)}, targets={"atom": "atoms"}),
        },
        box=Box(np.eye(3) * 10.0),
    )


def snapshot(path: Path) -> Optional[Dict[str, bytes]]:
    """Every file under ``path`` (relative name → bytes); None when nothing is there."""
    return files_under(path) if path.exists() else None


def nodes(path: Path) -> list:
    """Every node (directory holding a zarr.json) of a record, relative, '' for the root."""
    found = []
    for directory, _, files in os.walk(path):
        if "zarr.json" in files:
            rel = Path(directory).relative_to(path).as_posix()
            found.append("" if rel == "." else rel)
    return sorted(found)


def zjson(path: Path, node: str) -> Dict[str, Any]:
    return json.loads((path / node / "zarr.json").read_text(encoding="utf-8"))


def open_rw(path: Path) -> mz.Group:
    return mz.open_group(path, mode="r+")


def put_attrs(path: Path, node: str, **changes: Any) -> None:
    """Rewrite the attributes of ``node`` (``DEL`` deletes a key)."""
    group = open_rw(path)[node]
    attrs = dict(group.attrs)
    for key, value in changes.items():
        if value is DEL:
            attrs.pop(key, None)
        else:
            attrs[key] = value
    group.attrs.put(attrs)


def put_array(path: Path, node: str, values: Any, dtype: Any = None,
              attributes: Optional[Dict[str, Any]] = None) -> None:
    """Create (or replace) the array ``node`` with ``values`` through the Zarr layer."""
    root = open_rw(path)
    parent, _, name = node.rpartition("/")
    group = root.require_group(parent) if parent else root
    # the old array's chunk directory is removed first: replacing a 1-D array by one of
    # another rank in a DirectoryStore otherwise collides with the left-over c/ directory
    shutil.rmtree(path / node, ignore_errors=True)
    values = np.asarray(values)
    array = group.create_array(name, shape=values.shape, dtype=dtype or values.dtype,
                               attributes=attributes, overwrite=True)
    if values.size:
        array[...] = values


def write_raw_zarr_json(path: Path, node: str, document: Dict[str, Any]) -> None:
    (path / node / "zarr.json").write_text(json.dumps(document), encoding="utf-8")


def refused_read(path: Path, rule: str, node: Optional[str] = None, reader=read_mrec_frame) -> SpecViolationError:
    with pytest.raises(SpecViolationError) as info:
        reader(path)
    assert info.value.rule == rule, str(info.value)
    if node is not None:
        assert info.value.node == node, str(info.value)
    return info.value


def damaged(tmp_path: Path, frame: Optional[Frame] = None, **kw: Any) -> Path:
    path = tmp_path / "rec.mrec"
    write_mrec_frame(path, frame if frame is not None else base_frame(), **kw)
    read_mrec_frame(path)  # valid before the damage
    return path


def assert_write_refused(tmp_path: Path, rule: Any, door=write_mrec_frame, *args: Any, **kw: Any):
    """The door refuses (rule in ``rule``) and writes nothing, neither at a fresh path nor
    over an existing record (which stays byte-for-byte intact); no staging is left."""
    rules = (rule,) if isinstance(rule, str) else tuple(rule)
    fresh = tmp_path / "fresh.mrec"
    listing = sorted(os.listdir(tmp_path))
    with pytest.raises(SpecViolationError) as info:
        door(fresh, *args, **kw)
    assert info.value.rule in rules, str(info.value)
    assert not fresh.exists()
    assert sorted(os.listdir(tmp_path)) == listing

    old = tmp_path / "old.mrec"
    write_mrec_frame(old, base_frame(), overwrite=True)
    before, listing = snapshot(old), sorted(os.listdir(tmp_path))
    with pytest.raises(SpecViolationError) as again:
        door(old, *args, overwrite=True, **kw)
    assert again.value.rule in rules
    assert snapshot(old) == before
    assert sorted(os.listdir(tmp_path)) == listing
    assert read_mrec_frame(old)["atoms"]["id"].tolist() == [10, 11, 12]
    return info.value


def bits(a: Any) -> np.ndarray:
    return np.asarray(a, dtype=np.float64).view(np.uint64)


# ---------------------------------------------------------------------------------------
# Reader refusals (items 1–14, 17–19)
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("column", ["x", "q"])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_frame_and_types_14_1_float16_float32_column_refused(tmp_path, column, dtype):
    path = damaged(tmp_path)
    put_array(path, f"frame/atoms/{column}", np.arange(3, dtype=dtype))
    refused_read(path, R(1), f"/frame/atoms/{column}")


@pytest.mark.parametrize("data_type", ["fixed_length_utf32", "bytes", "r16", "bfloat16", "datetime64"])
def test_frame_and_types_14_2_other_zarr_data_type_refused(tmp_path, data_type):
    path = damaged(tmp_path)
    doc = zjson(path, "frame/atoms/x")
    doc["data_type"] = data_type
    write_raw_zarr_json(path, "frame/atoms/x", doc)
    with pytest.raises(MolrecError):
        read_mrec_frame(path)


def test_frame_and_types_14_2_other_zarr_data_type_refused_with_rule(tmp_path):
    path = damaged(tmp_path)
    doc = zjson(path, "frame/atoms/x")
    doc["data_type"] = "fixed_length_utf32"
    write_raw_zarr_json(path, "frame/atoms/x", doc)
    refused_read(path, R(2), "/frame/atoms/x")


@pytest.mark.parametrize("column, values", [
    ("id", np.arange(3, dtype=np.uint32)),  # exactly-u64 key at another width (MUST)
    ("id", np.arange(3, dtype=np.int64)),  # ... or signedness
    ("atomi", np.arange(3, dtype=np.uint8)),
    ("type_id", np.arange(3, dtype=np.uint16)),
    ("bond_type", np.arange(3, dtype=np.uint32)),
    ("mol_id", np.arange(3, dtype=np.int64)),
    ("ix", np.arange(3, dtype=np.int64)),  # other canonical keys (SHOULD; reference refuses)
    ("x", np.zeros((3, 3))),  # canonical key with trailing axes
    ("charge", np.arange(3, dtype=np.int64)),
    ("element", np.arange(3, dtype=np.int32)),
    ("free", np.ones(3, dtype=np.uint8)),
], ids=lambda v: v if isinstance(v, str) else f"{v.dtype}{list(v.shape)}")
def test_frame_and_types_14_3_canonical_key_at_wrong_dtype_refused(tmp_path, column, values):
    path = damaged(tmp_path)
    put_array(path, f"frame/atoms/{column}", values)
    error = refused_read(path, R(3), f"/frame/atoms/{column}")
    assert "not converted" in error.message or "u64" in error.message


def test_frame_and_types_14_3_non_canonical_names_keep_their_width(tmp_path):
    path = damaged(tmp_path)
    put_array(path, "frame/atoms/tag8", np.array([1, 2, 3], dtype=np.uint8))
    assert read_mrec_frame(path)["atoms"]["tag8"].dtype == np.uint8


@pytest.mark.parametrize("block", ["atoms", "members"])
def test_frame_and_types_14_4_block_without_count_refused(tmp_path, block):
    path = damaged(tmp_path)
    put_attrs(path, f"frame/{block}", count=DEL)
    error = refused_read(path, R(4), f"/frame/{block}")
    assert "count" in error.message


def test_frame_and_types_14_4_columnless_block_without_count_refused(tmp_path):
    frame = base_frame()
    frame.blocks["empty"] = Block(count=4)
    path = damaged(tmp_path, frame)
    put_attrs(path, "frame/empty", count=DEL)
    refused_read(path, R(4), "/frame/empty")


@pytest.mark.parametrize("count", [-1, 3.0, True, False, "3", [3], {"n": 3}, 1.5],
                         ids=repr)
def test_frame_and_types_14_5_count_not_a_non_negative_integer_refused(tmp_path, count):
    path = damaged(tmp_path)
    put_attrs(path, "frame/atoms", count=count)
    refused_read(path, R(5), "/frame/atoms")


def test_frame_and_types_14_5_count_null_refused(tmp_path):
    path = damaged(tmp_path)
    put_attrs(path, "frame/atoms", count=None)
    refused_read(path, R(5), "/frame/atoms")


def test_frame_and_types_14_6_column_length_disagrees_with_count_refused(tmp_path):
    path = damaged(tmp_path)
    put_array(path, "frame/atoms/x", np.zeros(2))
    error = refused_read(path, R(6), "/frame/atoms/x")
    assert "row_count_mismatch" in error.message


def test_frame_and_types_14_6_count_tampered_refused(tmp_path):
    frame = Frame(blocks={"atoms": Block(columns={"x": np.zeros(3)})})
    path = damaged(tmp_path, frame)
    put_attrs(path, "frame/atoms", count=4)
    refused_read(path, R(6), "/frame/atoms/x")


def test_frame_and_types_14_6_zero_dimensional_column_refused(tmp_path):
    path = damaged(tmp_path)
    put_array(path, "frame/atoms/w", np.float64(1.0))
    refused_read(path, R(6), "/frame/atoms/w")


@pytest.mark.parametrize("shape", [[2, 2], [4], [3, 0], [3.0], ["3"], [-1, -3], {}], ids=repr)
def test_frame_and_types_14_7_structural_shape_product_not_count_refused(tmp_path, shape):
    path = damaged(tmp_path)
    put_attrs(path, "frame/atoms", structural_shape=shape)
    refused_read(path, R(7), "/frame/atoms")


def test_frame_and_types_14_7_structural_shape_scalar_refused(tmp_path):
    path = damaged(tmp_path)
    put_attrs(path, "frame/atoms", structural_shape=3)
    refused_read(path, R(7), "/frame/atoms")


def test_frame_and_types_14_7_structural_shape_with_booleans_refused(tmp_path):
    path = damaged(tmp_path)
    put_attrs(path, "frame/atoms", structural_shape=[True, 3])
    refused_read(path, R(7), "/frame/atoms")


@pytest.mark.parametrize("dtype", [np.uint8, np.int64, np.float64])
def test_frame_and_types_14_8_mask_not_bool_refused(tmp_path, dtype):
    path = damaged(tmp_path)
    put_array(path, "frame/atoms/_validity/x", np.array([1, 0, 1], dtype=dtype))
    refused_read(path, R(8), "/frame/atoms/_validity/x")


@pytest.mark.parametrize("mask", [np.array([True, False]), np.ones(4, bool), np.ones((3, 1), bool),
                                  np.ones((3, 2), bool)], ids=lambda m: str(list(m.shape)))
def test_frame_and_types_14_9_mask_wrong_length_or_not_1d_refused(tmp_path, mask):
    path = damaged(tmp_path)
    put_array(path, "frame/atoms/_validity/x", mask)
    refused_read(path, R(9), "/frame/atoms/_validity/x")


def test_frame_and_types_14_9_zero_dimensional_mask_refused(tmp_path):
    path = damaged(tmp_path, Frame(blocks={"a": Block(columns={"q": np.zeros(1)})}))
    put_array(path, "frame/a/_validity/q", np.bool_(False))
    refused_read(path, R(9), "/frame/a/_validity/q")


def test_frame_and_types_14_10_mask_for_missing_column_refused(tmp_path):
    path = damaged(tmp_path)
    put_array(path, "frame/atoms/_validity/ghost", np.array([True, False, True]))
    refused_read(path, R(10), "/frame/atoms/_validity/ghost")


def test_frame_and_types_14_11_same_container_target_block_missing_refused(tmp_path):
    path = damaged(tmp_path)
    put_attrs(path, "frame/members", targets={"atom": "nope"})
    error = refused_read(path, R(11), "/frame/members/atom")
    assert "nope" in error.message


def test_frame_and_types_14_11_target_block_deleted_refused(tmp_path):
    path = damaged(tmp_path)
    shutil.rmtree(path / "frame" / "atoms")
    refused_read(path, R(11), "/frame/members/atom")


def test_frame_and_types_14_11_missing_target_allowed_without_rows(tmp_path):
    frame = base_frame()
    frame.blocks["members"] = Block(columns={"atom": u64()}, targets={"atom": "atoms"})
    path = damaged(tmp_path, frame)
    put_attrs(path, "frame/members", targets={"atom": "nope"})
    assert read_mrec_frame(path)["members"].targets == {"atom": "nope"}


def test_frame_and_types_14_11_absolute_target_missing_block_with_live_rows_refused(tmp_path):
    path = damaged(tmp_path)
    put_attrs(path, "frame/members", targets={"atom": "/frame/nope"})
    error = refused_read(path, R(11), "/frame/members/atom")
    assert "missing" in error.message


def test_frame_and_types_14_11_absolute_target_missing_block_all_null_rows_refused(tmp_path):
    frame = base_frame()
    frame.blocks["members"] = Block(columns={"atom": u64(7)}, masks={"atom": np.array([False])},
                                    targets={"atom": "/frame/atoms"})
    path = damaged(tmp_path, frame)
    put_attrs(path, "frame/members", targets={"atom": "/frame/nope"})
    with pytest.raises(SpecViolationError) as info:
        read_mrec_frame(path)
    assert info.value.rule in (R(11), R(12))


def test_frame_and_types_14_12_same_container_reference_out_of_range_refused(tmp_path):
    path = damaged(tmp_path)
    put_array(path, "frame/members/atom", u64(1, 3))
    error = refused_read(path, R(12), "/frame/members/atom")
    assert "3" in error.message


def test_frame_and_types_14_12_null_row_references_nothing(tmp_path):
    frame = base_frame()
    frame.blocks["members"] = Block(columns={"atom": u64(1, 99)}, masks={"atom": np.array([True, False])},
                                    targets={"atom": "atoms"})
    path = damaged(tmp_path, frame)
    got = read_mrec_frame(path)["members"]
    assert got["atom"].tolist() == [1, 99]  # the value under a null row is carried as written
    assert got.masks["atom"].tolist() == [True, False]


def test_frame_and_types_14_12_absolute_reference_into_system_out_of_range_refused(tmp_path):
    system = Frame(blocks={"atoms": Block(columns={"x": np.zeros(3)})})
    frame = Frame(blocks={"members": Block(columns={"atom": u64(0, 2)}, targets={"atom": "/system/atoms"})})
    path = damaged(tmp_path, frame, system=system)
    # the frame reader checks against the system block's count attribute, without decoding it
    put_attrs(path, "system/atoms", count=2)
    error = refused_read(path, R(12), "/frame/members/atom")
    assert "2" in error.message


def test_frame_and_types_14_12_absolute_reference_into_own_section_out_of_range_refused(tmp_path):
    frame = base_frame()
    frame.blocks["members"].targets = {"atom": "/frame/atoms"}
    path = damaged(tmp_path, frame)
    put_array(path, "frame/members/atom", u64(0, 3))
    refused_read(path, R(12), "/frame/members/atom")


def test_frame_and_types_14_12_absolute_reference_into_absent_section_not_checked(tmp_path):
    frame = base_frame()
    frame.blocks["members"] = Block(columns={"atom": u64(99)}, targets={"atom": "/system/atoms"})
    path = damaged(tmp_path, frame)
    assert read_mrec_frame(path)["members"].targets == {"atom": "/system/atoms"}


@pytest.mark.parametrize("target", ["/trajectory/atoms", "/frame/atoms/x", "a/b", "", "/frame/",
                                    "//atoms", "atoms/", 5, None, ["atoms"]], ids=repr)
def test_frame_and_types_14_13_malformed_or_trajectory_target_refused(tmp_path, target):
    path = damaged(tmp_path)
    put_attrs(path, "frame/members", targets={"atom": target})
    refused_read(path, R(13), "/frame/members/atom")


@pytest.mark.parametrize("targets", [["atoms"], "atoms", 3], ids=repr)
def test_frame_and_types_14_13_targets_not_an_object_refused(tmp_path, targets):
    path = damaged(tmp_path)
    put_attrs(path, "frame/members", targets=targets)
    refused_read(path, R(13), "/frame/members")


@pytest.mark.parametrize("column, values", [
    ("ghost", None),  # not a column
    ("weight", np.zeros(2)),  # f64
    ("signed", np.zeros(2, np.int64)),  # i64
    ("narrow", np.zeros(2, np.uint32)),  # u32
    ("pairs", np.zeros((2, 2), np.uint64)),  # u64 with a trailing axis
], ids=lambda v: v if isinstance(v, str) else None)
def test_frame_and_types_14_14_target_key_not_a_u64_column_refused(tmp_path, column, values):
    path = damaged(tmp_path)
    if values is not None:
        put_array(path, f"frame/members/{column}", values)
    put_attrs(path, "frame/members", targets={"atom": "atoms", column: "atoms"})
    refused_read(path, R(14), f"/frame/members/{column}")


@pytest.mark.parametrize("flag", ["no", "false", 0, 1, None, [False], {}], ids=repr)
def test_frame_and_types_14_17_cell_defined_not_a_boolean_refused(tmp_path, flag):
    path = damaged(tmp_path)
    put_attrs(path, "frame/box", cell_defined=flag)
    refused_read(path, R(17), "/frame/box")


def test_frame_and_types_14_18_undefined_cell_with_periodic_flag_refused(tmp_path):
    path = damaged(tmp_path, Frame(box=Box.undefined((1.0, 2.0, 3.0))))
    put_array(path, "frame/box/boundary", np.array([False, True, False]))
    refused_read(path, R(18), "/frame/box")


def test_frame_and_types_14_18_cell_defined_false_over_a_periodic_box_refused(tmp_path):
    path = damaged(tmp_path, Frame(box=Box(np.eye(3) * 10, np.zeros(3), (True, True, False))))
    put_attrs(path, "frame/box", cell_defined=False)
    refused_read(path, R(18), "/frame/box")


@pytest.mark.parametrize("node, values", [
    ("vectors", np.eye(2)),
    ("vectors", np.ones(9)),
    ("vectors", np.ones((3, 4))),
    ("vectors", np.eye(3, dtype=np.float32)),
    ("vectors", np.eye(3, dtype=np.int64)),
    ("origin", np.zeros(4)),
    ("origin", np.zeros(2)),
    ("origin", np.zeros(3, dtype=np.float32)),
    ("boundary", np.ones(2, dtype=bool)),
    ("boundary", np.ones(4, dtype=bool)),
    ("boundary", np.ones(3, dtype=np.uint8)),
], ids=lambda v: v if isinstance(v, str) else f"{v.dtype}{list(v.shape)}")
def test_frame_and_types_14_19_box_array_wrong_shape_or_dtype_refused(tmp_path, node, values):
    path = damaged(tmp_path)
    put_array(path, f"frame/box/{node}", values)
    error = refused_read(path, R(19))
    assert error.node in ("/frame/box", f"/frame/box/{node}")


def test_frame_and_types_14_19_box_boundary_not_1d_refused(tmp_path):
    path = damaged(tmp_path)
    put_array(path, "frame/box/boundary", np.ones((3, 1), dtype=bool))
    refused_read(path, R(19))


# ---------------------------------------------------------------------------------------
# Item 22 (required sections; README decision 2)
# ---------------------------------------------------------------------------------------
def test_frame_and_types_14_22_meta_only_record_is_reported_but_opened(tmp_path):
    path = damaged(tmp_path, meta={"creator": {"name": "t"}})
    shutil.rmtree(path / "frame")
    assert section_names(path) == ["meta"]
    assert read_mrec_meta(path) == {"creator": {"name": "t"}, "molrec_version": 2}
    with pytest.raises(NodeNotFoundError):
        read_mrec_frame(path)
    found = validate(path)
    assert len(found) == 1 and "frame" in found[0].message


def test_frame_and_types_14_22_whole_record_reader_opens_a_meta_only_record(tmp_path):
    path = damaged(tmp_path, meta={"creator": {"name": "t"}})
    shutil.rmtree(path / "frame")
    rec = read_mrec(path)
    assert rec.frame is None and rec.meta == {"creator": {"name": "t"}, "molrec_version": 2}


def test_frame_and_types_14_22_writer_refuses_a_record_without_state_section(tmp_path):
    path = tmp_path / "none.mrec"
    with pytest.raises(SpecViolationError):
        write_mrec(path, MolRec(meta={"creator": {"name": "t"}}))
    assert not path.exists() and os.listdir(tmp_path) == []


@pytest.mark.parametrize("door", [write_mrec_frame, write_mrec_system], ids=lambda d: d.__name__)
def test_frame_and_types_14_22_doors_refuse_a_record_without_state_section(tmp_path, door):
    path = tmp_path / "none.mrec"
    with pytest.raises((MolrecError, TypeError, ValueError)):
        door(path, None)
    assert not path.exists()


# ---------------------------------------------------------------------------------------
# Reader must not refuse (items 24–29)
# ---------------------------------------------------------------------------------------
def test_frame_and_types_14_24_missing_meta_group_reads_as_empty_document(tmp_path):
    path = damaged(tmp_path)
    shutil.rmtree(path / "meta")
    assert read_mrec_meta(path) == {}
    assert section_names(path) == ["frame"]
    assert read_mrec_frame(path)["atoms"]["id"].tolist() == [10, 11, 12]


def test_frame_and_types_14_25_unknown_things_preserved_verbatim(tmp_path):
    frame = base_frame()
    frame.blocks["atoms"].attrs = {"x_vendor": {"nested": [1, None, "z"]}, "note": None}
    frame.blocks["atoms"].column_attrs = {"x": {"units": "nm", "blank": None}}
    frame.blocks["widgets"] = Block(columns={"knob": np.array([1, -2], np.int16)})
    meta = {"creator": {"name": "t"}, "producer_key": None, "flags": [1, None]}
    path = damaged(tmp_path, frame, meta=meta)
    # things another tool added on disk
    put_attrs(path, "frame/atoms", vendor_flag=True, vendor_null=None)
    put_array(path, "frame/atoms/weird", np.array([1, 2, 3], np.int16), attributes={"k": [None]})
    root = open_rw(path)
    future = root.create_group("future", attributes={"what": None})
    future.create_group("atoms", attributes={"count": 99})
    arr = future.create_array("blob", shape=(2,), dtype="uint8")
    arr[...] = np.array([7, 8], np.uint8)

    assert read_mrec_meta(path) == {**meta, "molrec_version": 2}
    assert section_names(path) == ["frame", "future", "meta"]
    got = read_mrec_frame(path)
    atoms = got["atoms"]
    assert atoms.attrs == {"x_vendor": {"nested": [1, None, "z"]}, "note": None,
                           "vendor_flag": True, "vendor_null": None}
    assert atoms.column_attrs == {"x": {"units": "nm", "blank": None}, "weird": {"k": [None]}}
    assert atoms["weird"].dtype == np.int16 and atoms["weird"].tolist() == [1, 2, 3]
    assert got["widgets"]["knob"].dtype == np.int16

    # written back unchanged: the block and column attribute maps are identical
    again = tmp_path / "again.mrec"
    write_mrec_frame(again, got, meta=read_mrec_meta(path))
    for node in ("frame/atoms", "frame/atoms/x", "frame/atoms/weird", "frame/widgets", "meta"):
        assert zjson(again, node)["attributes"] == zjson(path, node)["attributes"], node
    # the whole-record door keeps the unknown root section byte for byte
    whole = tmp_path / "whole.mrec"
    write_mrec(whole, read_mrec(path))
    assert snapshot(whole / "future") == snapshot(path / "future")
    assert read_mrec_meta(whole) == read_mrec_meta(path)


def test_frame_and_types_14_26_untagged_meta_inferred_and_stale_tags_ignored(tmp_path):
    path = damaged(tmp_path)
    attrs = {"n": 4, "big": 2**64 - 1, "neg": -(2**63), "r": 2.5, "one": 1.0, "e3": 1e3, "s": "NaN",
             "o": {"a": [1, 2]}, "b": True, "nul": None, "huge": 2**70,
             "_meta_types": {"gone": "f32", "also_gone": 7, "t": "i32"}, "t": 5}
    # written by hand: 2**70 is beyond what the Zarr layer's JSON writer emits
    write_raw_zarr_json(path, "frame", {"zarr_format": 3, "node_type": "group", "attributes": attrs})
    meta = read_mrec_frame(path).meta
    assert "_meta_types" not in meta
    assert meta == {"n": 4, "big": 2**64 - 1, "neg": -(2**63), "r": 2.5, "one": 1.0, "e3": 1000.0,
                    "s": "NaN", "o": {"a": [1, 2]}, "b": True, "nul": None, "huge": float(2**70),
                    "t": MetaValue("i32", 5)}
    assert type(meta["one"]) is float and type(meta["n"]) is int and type(meta["huge"]) is float
    again = tmp_path / "again.mrec"
    write_mrec_frame(again, Frame(meta=meta))
    assert zjson(again, "frame")["attributes"]["_meta_types"] == {
        "n": "i64", "big": "u64", "neg": "i64", "r": "f64", "one": "f64", "e3": "f64", "s": "string",
        "o": "json", "b": "bool", "nul": "json", "huge": "f64", "t": "i32"}


def test_frame_and_types_14_27_off_grid_precision_values_returned_as_stored(tmp_path):
    frame = Frame(blocks={"atoms": Block(columns={"x": np.array([0.5, 0.25, 1.0])}, precision={"x": 0.001})})
    path = damaged(tmp_path, frame)
    off_grid = np.array([0.7572, 0.1, -1e-9])  # none is a multiple of 2^-10
    codecs = zjson(path, "frame/atoms/x")["codecs"]
    root = open_rw(path)
    shutil.rmtree(path / "frame/atoms/x")
    arr = root["frame/atoms"].create_array("x", shape=(3,), dtype="float64", codecs=codecs,
                                           attributes={"precision": 0.001})
    arr[...] = off_grid
    got = read_mrec_frame(path)["atoms"]
    assert bits(got["x"]).tolist() == bits(off_grid).tolist()  # not re-rounded, not refused
    assert got.precision == {"x": 0.001}


def test_frame_and_types_14_28_all_true_mask_and_absent_mask_mean_no_mask(tmp_path):
    path = damaged(tmp_path)
    assert not (path / "frame/atoms/_validity").exists()
    assert read_mrec_frame(path)["atoms"].masks == {}
    # an all-true mask written by another tool reads as "no mask"
    put_array(path, "frame/atoms/_validity/x", np.ones(3, dtype=bool))
    put_array(path, "frame/atoms/_validity/id", np.array([True, False, True]))
    masks = read_mrec_frame(path)["atoms"].masks
    assert list(masks) == ["id"] and masks["id"].tolist() == [True, False, True]
    # an empty _validity subgroup: every row valid
    shutil.rmtree(path / "frame/atoms/_validity")
    open_rw(path)["frame/atoms"].create_group("_validity")
    assert read_mrec_frame(path)["atoms"].masks == {}


def test_frame_and_types_14_29_absent_box_parts_take_normative_defaults(tmp_path):
    # defined cell: only vectors stored -> origin 0, boundary all periodic
    path = damaged(tmp_path, Frame(box=Box(np.diag([3.0, 4.0, 5.0]), np.array([1.0, 2.0, 3.0]), (True, False, True))))
    shutil.rmtree(path / "frame/box/origin")
    shutil.rmtree(path / "frame/box/boundary")
    box = read_mrec_frame(path).box
    assert box.defined and box.boundary == (True, True, True)
    assert box.origin.tolist() == [0.0, 0.0, 0.0] and box.vectors.tolist() == np.diag([3.0, 4.0, 5.0]).tolist()

    # undefined cell: boundary omitted -> all false; stored vectors ignored -> identity
    path2 = tmp_path / "undef.mrec"
    write_mrec_frame(path2, Frame(box=Box.undefined((1.0, 2.0, 3.0))))
    shutil.rmtree(path2 / "frame/box/boundary")
    put_array(path2, "frame/box/vectors", np.zeros((3, 3)))
    box = read_mrec_frame(path2).box
    assert not box.defined and box.boundary == (False, False, False)
    assert box.vectors.tolist() == np.eye(3).tolist() and box.origin.tolist() == [1.0, 2.0, 3.0]
    # ... and with no arrays at all
    for name in ("vectors", "origin"):
        shutil.rmtree(path2 / "frame/box" / name)
    box = read_mrec_frame(path2).box
    assert box == Box.undefined()


# ---------------------------------------------------------------------------------------
# Writer refusals (items 31, 32, 37–40)
# ---------------------------------------------------------------------------------------
def test_frame_and_types_14_31_block_named_box_refused(tmp_path):
    frame = base_frame()
    frame.blocks["box"] = Block(columns={"q": np.zeros(2)})
    error = assert_write_refused(tmp_path, R(31), write_mrec_frame, frame)
    assert error.node == "/frame/box"
    frame.box = None  # refused even when the frame has no cell
    assert_write_refused(tmp_path, R(31), write_mrec_system, frame)


def test_frame_and_types_14_32_column_named_validity_refused(tmp_path):
    frame = base_frame()
    frame.blocks["atoms"].columns["_validity"] = np.ones(3, dtype=bool)
    error = assert_write_refused(tmp_path, R(32), write_mrec_frame, frame)
    assert error.node == "/frame/atoms/_validity"


def test_frame_and_types_14_32_validity_array_is_not_read_as_a_column(tmp_path):
    path = damaged(tmp_path)
    put_array(path, "frame/atoms/_validity", np.ones(3, dtype=bool))
    try:
        frame = read_mrec_frame(path)
    except SpecViolationError:
        return
    assert "_validity" not in frame["atoms"].columns


@pytest.mark.parametrize("values", [
    np.zeros(3, np.float16),
    np.zeros(3, np.float32),
    np.array([b"a", b"b", b"c"]),
    np.array([1, "a", 2.0], dtype=object),
    np.array(["a", None, "c"], dtype=object),
    np.array(["2020-01-01"] * 3, dtype="datetime64[D]"),
    np.zeros(3, dtype="timedelta64[s]"),
    np.zeros(3, dtype=[("a", "f8")]),
] + ([np.zeros(3, np.longdouble)] if np.dtype(np.longdouble).itemsize > 8 else []),
    ids=lambda v: str(v.dtype))
def test_frame_and_types_14_37_column_dtype_outside_the_13_refused(tmp_path, values):
    frame = base_frame()
    frame.blocks["atoms"].columns["q"] = values
    error = assert_write_refused(tmp_path, R(37), write_mrec_frame, frame)
    assert error.node == "/frame/atoms/q"


@pytest.mark.parametrize("column, values", [
    ("x", np.zeros((3, 3))),  # trailing axes on a canonical key
    ("atomi", np.array([-1, 0, 1])),  # negative: no exact u64
    ("atomi", np.array([0.0, 1.0, 2.0])),  # real for u64
    ("ix", np.array([2**31, 0, 0])),  # overflow of i32
    ("ix", np.array([0, -(2**31) - 1, 0])),
    ("type", np.array([1, 2, 3])),  # int for string
    ("free", np.array([0, 1, 1], np.uint8)),  # u8 for bool
    ("charge", np.array([2**53 + 1, 0, 0])),  # not exact in f64
], ids=lambda v: v if isinstance(v, str) else f"{v.dtype}{list(v.shape)}")
def test_frame_and_types_14_38_canonical_key_at_non_canonical_dtype_refused(tmp_path, column, values):
    frame = base_frame()
    frame.blocks["atoms"].columns[column] = values
    error = assert_write_refused(tmp_path, R(38), write_mrec_frame, frame)
    assert error.node == f"/frame/atoms/{column}"


def _members(column: Any, target: Any, **block: Any) -> Frame:
    frame = base_frame()
    frame.blocks["members"] = Block(columns={"atom": column}, targets={"atom": target}, **block)
    return frame


@pytest.mark.parametrize("frame, rule", [
    (_members(u64(0), "/trajectory/atoms"), R(13)),
    (_members(u64(0), "/frame/atoms/x"), R(13)),
    (_members(u64(0), "a/b"), R(13)),
    (_members(u64(0), ""), R(13)),
    (_members(u64(0), 5), R(13)),
    (_members(np.zeros(1), "atoms"), R(14)),
    (_members(np.zeros(1, np.int64), "atoms"), R(14)),
    (_members(np.zeros((1, 2), np.uint64), "atoms"), R(14)),
    (Frame(blocks={**base_frame().blocks,
                   "members": Block(columns={"atom": u64(0)}, targets={"ghost": "atoms"})}), R(14)),
    (_members(u64(0), "nope"), R(11)),
    (_members(u64(0), "nope", masks={"atom": np.array([False])}), R(11)),
    (_members(u64(1, 3), "atoms"), R(12)),
    (_members(u64(3), "/frame/atoms"), R(12)),
], ids=["trajectory", "three-segments", "a/b", "empty", "int", "f64", "i64", "u64[N,2]", "no-column",
        "dangling", "dangling-null-rows", "out-of-range", "absolute-out-of-range"])
def test_frame_and_types_14_39_bad_targets_refused_at_write(tmp_path, frame, rule):
    error = assert_write_refused(tmp_path, rule, write_mrec_frame, frame)
    assert error.node.startswith("/frame/members/")


def test_frame_and_types_14_39_absolute_target_into_system_checked_at_write(tmp_path):
    system = Frame(blocks={"atoms": Block(columns={"x": np.zeros(3)})})
    frame = Frame(blocks={"members": Block(columns={"atom": u64(3)}, targets={"atom": "/system/atoms"})})
    error = assert_write_refused(tmp_path, R(12), write_mrec_frame, frame, system=system)
    assert "3" in error.message


def test_frame_and_types_14_39_absolute_target_missing_block_refused_at_write(tmp_path):
    frame = _members(u64(7), "/frame/nope", masks={"atom": np.array([False])})
    assert_write_refused(tmp_path, (R(11), R(12)), write_mrec_frame, frame)


@pytest.mark.parametrize("block, rule", [
    (Block(columns={"q": np.zeros(3)}, count=2), R(6)),
    (Block(columns={"q": np.zeros(3), "r": np.zeros(2)}), R(5)),  # columns disagree: count unknown
    (Block(count=-1), R(5)),
    (Block(count=True), R(5)),
    (Block(count=3.0), R(5)),
    (Block(columns={"q": np.zeros(6)}, structural_shape=(2, 2)), R(7)),
    (Block(columns={"q": np.zeros(6)}, structural_shape=(2, -3)), R(7)),
    (Block(columns={"q": np.zeros(3)}, masks={"q": np.ones(3, np.uint8)}), R(8)),
    (Block(columns={"q": np.zeros(3)}, masks={"q": np.array([True, False])}), R(9)),
    (Block(columns={"q": np.zeros(3)}, masks={"q": np.ones((3, 1), bool)}), R(9)),
    (Block(columns={"q": np.zeros(3)}, masks={"r": np.array([True, False, True])}), R(10)),
], ids=["length", "disagree", "count-1", "count-bool", "count-float", "shape-product", "shape-negative",
        "mask-u8", "mask-length", "mask-2d", "mask-ghost"])
def test_frame_and_types_14_40_block_shape_inconsistencies_refused_at_write(tmp_path, block, rule):
    frame = base_frame()
    frame.blocks["a"] = block
    error = assert_write_refused(tmp_path, rule, write_mrec_frame, frame)
    assert error.node.startswith("/frame/a")


def test_frame_and_types_14_18_19_bad_box_refused_at_write(tmp_path):
    undefined_periodic = Frame(box=Box(np.eye(3), np.zeros(3), (True, False, False), False))
    assert_write_refused(tmp_path, R(18), write_mrec_frame, undefined_periodic)
    for box in (Box(np.eye(2)), Box(np.eye(3), np.zeros(2)), Box(np.eye(3), np.zeros(3), (True, True)),
                Box(np.eye(3, dtype=np.float32))):
        assert_write_refused(tmp_path, R(19), write_mrec_frame, Frame(box=box))


# ---------------------------------------------------------------------------------------
# Writer obligations (items 42, 43, 46, 47, 48)
# ---------------------------------------------------------------------------------------
def test_frame_and_types_14_42_root_then_meta_then_sections(tmp_path, monkeypatch):
    written = []
    for name in ("set", "replace_atomic", "write_at"):
        original = getattr(mz.DirectoryStore, name)

        def spy(self, key, *args, _original=original, **kw):
            written.append(key)
            return _original(self, key, *args, **kw)

        monkeypatch.setattr(mz.DirectoryStore, name, spy)
    path = tmp_path / "order.mrec"
    system = Frame(blocks={"atoms": Block(columns={"x": np.zeros(2)})})
    write_mrec_frame(path, base_frame(), system=system)
    assert written[0] == "zarr.json" and written[1] == "meta/zarr.json"
    assert all(k.startswith(("frame/", "system/")) for k in written[2:])
    assert zjson(path, "")["attributes"] == {}
    assert zjson(path, "meta")["attributes"] == {"molrec_version": 2}
    assert section_names(path) == ["frame", "meta", "system"]


def test_frame_and_types_14_42_meta_always_exists_and_version_stamped(tmp_path):
    path = tmp_path / "m.mrec"
    write_mrec_frame(path, Frame(), meta={"molrec_version": 1, "creator": {"name": "me"}})
    assert read_mrec_meta(path) == {"molrec_version": 2, "creator": {"name": "me"}}
    write_mrec_system(path, Frame(), overwrite=True)
    assert read_mrec_meta(path) == {"molrec_version": 2}
    assert section_names(path) == ["meta", "system"]


def test_frame_and_types_14_43_count_on_every_block_and_structural_shape(tmp_path):
    frame = Frame(blocks={
        "empty": Block(count=5),
        "none": Block(),
        "grid": Block(columns={"rho": np.arange(24.0)}, structural_shape=(2, 3, 4)),
        "flat": Block(columns={"q": np.zeros(7)}),
    })
    path = tmp_path / "c.mrec"
    write_mrec_frame(path, frame)
    assert zjson(path, "frame/empty")["attributes"] == {"count": 5}
    assert zjson(path, "frame/none")["attributes"] == {"count": 0}
    assert zjson(path, "frame/grid")["attributes"] == {"count": 24, "structural_shape": [2, 3, 4]}
    assert zjson(path, "frame/flat")["attributes"] == {"count": 7}
    assert nodes(path / "frame/empty") == [""]
    got = read_mrec_frame(path)
    assert got["empty"].count == 5 and got["empty"].columns == {}
    assert got["none"].count == 0
    assert got["grid"].structural_shape == (2, 3, 4) and got["grid"]["rho"].shape == (24,)
    assert got["flat"].structural_shape is None


def test_frame_and_types_14_46_no_validity_subgroup_without_a_masked_column(tmp_path):
    frame = Frame(blocks={
        "plain": Block(columns={"q": np.zeros(3)}),
        "alltrue": Block(columns={"q": np.zeros(3), "r": u64(1, 2, 3)},
                         masks={"q": np.ones(3, bool), "r": [True, True, True]}),
        "some": Block(columns={"q": np.zeros(3), "r": u64(1, 2, 3)},
                      masks={"q": np.ones(3, bool), "r": np.array([True, False, True])}),
    })
    path = tmp_path / "v.mrec"
    write_mrec_frame(path, frame)
    assert not (path / "frame/plain/_validity").exists()
    assert not (path / "frame/alltrue/_validity").exists()
    assert nodes(path / "frame/some/_validity") == ["", "r"]
    got = read_mrec_frame(path)
    assert got["alltrue"].masks == {} and list(got["some"].masks) == ["r"]


def test_frame_and_types_14_47_box_layout_on_disk(tmp_path):
    def layout(name: str, box: Box):
        path = tmp_path / f"{name}.mrec"
        write_mrec_frame(path, Frame(box=box))
        found = nodes(path / "frame/box")
        doc = zjson(path, "frame/box/vectors")
        assert doc["data_type"] == "float64" and doc["shape"] == [3, 3]
        return path, found, zjson(path, "frame/box")["attributes"], read_mrec_frame(path).box

    _, found, attrs, box = layout("cubic", Box(np.eye(3) * 10))
    assert found == ["", "vectors"] and attrs == {} and box == Box(np.eye(3) * 10)

    _, found, attrs, box = layout("slab", Box(np.eye(3) * 10, np.zeros(3), (True, True, False)))
    assert found == ["", "boundary", "vectors"] and attrs == {} and box.boundary == (True, True, False)

    path, found, attrs, box = layout("origin", Box(np.eye(3) * 10, np.array([1.0, 0.0, 0.0])))
    assert found == ["", "origin", "vectors"] and zjson(path, "frame/box/origin")["shape"] == [3]

    path, found, attrs, box = layout("undefined", Box(np.eye(3) * 7.0, np.array([1.0, 2.0, 3.0]),
                                                      (False, False, False), False))
    assert found == ["", "boundary", "origin", "vectors"]
    assert attrs == {"cell_defined": False}
    assert zjson(path, "frame/box/boundary")["data_type"] == "bool"
    stored = mz.open_group(path, mode="r")
    assert stored["frame/box/vectors"][...].tolist() == np.eye(3).tolist()  # identity, not 7·I
    assert stored["frame/box/boundary"][...].tolist() == [False, False, False]
    assert box == Box.undefined((1.0, 2.0, 3.0))


@pytest.mark.parametrize("box", [
    Box(np.eye(3) * 10.0),
    Box(np.array([[123.456789012345, 1.5, -2.25], [0.0, 9.0, 0.75], [0.0, 0.0, 8.5]]),
        np.array([0.1, -0.0, 3.0])),
    Box(np.eye(3) * 10.0, np.zeros(3), (True, True, False)),
    Box(np.eye(3) * 10.0, np.array([1.0, 2.0, 3.0])),
    Box.undefined((1.0, 2.0, 3.0)),
    Box.undefined(),
    Box([[1.0, 0, 0], [0, 2.0, 0], [0, 0, 3.0]], [0.0, 0.0, 0.0], [True, False, True]),
], ids=["cubic", "triclinic", "slab", "origin", "undefined-origin", "undefined", "lists"])
def test_box_round_trip_bit_exact(tmp_path, box):
    path = tmp_path / "b.mrec"
    write_mrec_frame(path, Frame(box=box))
    got = read_mrec_frame(path).box
    assert got == box
    assert bits(got.vectors).tolist() == bits(np.asarray(box.vectors, float)).tolist()
    assert bits(got.origin).tolist() == bits(np.asarray(box.origin, float)).tolist()  # -0.0 kept


MUST_DECODE = {"bytes", "gzip", "zstd", "numcodecs.shuffle", "crc32c", "vlen-utf8", "sharding_indexed",
               "transpose"}


def _codec_names(codecs):
    for codec in codecs:
        yield codec["name"], codec.get("configuration", {})
        if codec["name"] == "sharding_indexed":
            yield from _codec_names(codec["configuration"]["codecs"])
            yield from _codec_names(codec["configuration"]["index_codecs"])


def test_frame_and_types_14_48_little_endian_and_only_must_decode_codecs(tmp_path):
    path = tmp_path / "rich.mrec"
    frame, system = rich_frame(), Frame(blocks={"atoms": Block(columns={"x": np.zeros(3)})})
    frame.blocks["be"] = Block(columns={"f": np.array([1.5, -2.0], dtype=">f8"),
                                        "u": np.array([1, 2**40], dtype=">u8")})
    write_mrec_frame(path, frame, system=system)
    arrays = 0
    for node in nodes(path):
        doc = zjson(path, node)
        if doc["node_type"] != "array":
            continue
        arrays += 1
        for name, config in _codec_names(doc["codecs"]):
            assert name in MUST_DECODE, (node, name)
            if name == "bytes":
                assert config.get("endian", "little") == "little", node
    assert arrays >= 20
    got = read_mrec_frame(path)["be"]
    assert got["f"].tolist() == [1.5, -2.0] and got["u"].tolist() == [1, 2**40]
    raw = (path / "frame/be/f/c/0").read_bytes()
    assert np.frombuffer(raw[:16], "<f8").tolist() == [1.5, -2.0]  # [bytes, crc32c]: payload first


# ---------------------------------------------------------------------------------------
# Round trips (frame-and-types §2, §6–§9; reference-behaviour §2.3)
# ---------------------------------------------------------------------------------------
ALL_DTYPES = {
    "f64": np.array([np.finfo(np.float64).max, 1e-300, np.nan, -0.0, -np.inf, 5e-324]),
    "i8": np.array([-128, 127, 0, 1, -1, 5], np.int8),
    "i16": np.array([-(2**15), 2**15 - 1, 0, 1, -1, 5], np.int16),
    "i32": np.array([-(2**31), 2**31 - 1, 0, 1, -1, 5], np.int32),
    "i64": np.array([-(2**63), 2**63 - 1, 0, 1, -1, 5], np.int64),
    "u8": np.array([0, 255, 1, 2, 3, 4], np.uint8),
    "u16": np.array([0, 65535, 1, 2, 3, 4], np.uint16),
    "u32": np.array([0, 3_000_000_000, 2**32 - 1, 2, 3, 4], np.uint32),
    "u64": np.array([0, 2**53 + 1, 2**64 - 1, 2, 3, 4], np.uint64),
    "bool": np.array([True, False, True, True, False, False]),
    "string": np.array(["", "Ω", "日本", "a", "x" * 300, "tab\tnew\nline"], dtype=object),
    "c64": np.array([1 + 2j, complex(-0.0, -0.0), complex(np.nan, 1), np.inf, 1e30, -1], np.complex64),
    "c128": np.array([1 + 2j, complex(-0.0, 0.0), complex(np.nan, -np.inf), 1e300, 5e-324j, -1], np.complex128),
}
ZARR_NAMES = {"f64": "float64", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
              "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "bool": "bool",
              "string": "string", "c64": "complex64", "c128": "complex128"}


def test_all_13_dtypes_round_trip_at_arrival_width(tmp_path):
    path = tmp_path / "t.mrec"
    write_mrec_frame(path, Frame(blocks={"t": Block(columns=dict(ALL_DTYPES))}))
    got = read_mrec_frame(path)["t"]
    assert sorted(got.columns) == sorted(ALL_DTYPES)
    for name, values in ALL_DTYPES.items():
        back = got[name]
        assert zjson(path, f"frame/t/{name}")["data_type"] == ZARR_NAMES[name]
        assert zjson(path, f"frame/t/{name}")["attributes"] == {}  # no dtype side attribute
        assert back.dtype == values.dtype, name
        if values.dtype.kind in "fc":
            assert back.view(np.uint8).tobytes() == values.view(np.uint8).tobytes(), name  # bit-exact
        else:
            assert back.tolist() == values.tolist(), name


def test_string_columns_from_unicode_arrays_and_lists(tmp_path):
    path = tmp_path / "s.mrec"
    write_mrec_frame(path, Frame(blocks={"t": Block(columns={
        "u": np.array(["a", "Ω", "日本"]), "l": ["", "b", "c"]})}))
    got = read_mrec_frame(path)["t"]
    assert got["u"].tolist() == ["a", "Ω", "日本"] and got["l"].tolist() == ["", "b", "c"]


def test_trailing_axes_round_trip(tmp_path):
    xyz = np.arange(12.0).reshape(4, 3) - 5.5
    tensor = np.arange(36, dtype=np.int32).reshape(4, 3, 3)
    path = tmp_path / "t.mrec"
    write_mrec_frame(path, Frame(blocks={"sites": Block(columns={"pos": xyz, "t": tensor, "c": xyz.astype(np.complex128)})}))
    got = read_mrec_frame(path)["sites"]
    assert got.count == 4
    assert got["pos"].shape == (4, 3) and got["pos"].tolist() == xyz.tolist()
    assert got["t"].dtype == np.int32 and got["t"].shape == (4, 3, 3) and got["t"].tolist() == tensor.tolist()
    assert zjson(path, "frame/sites/pos")["shape"] == [4, 3]


def test_masks_on_u64_and_f64_columns_round_trip(tmp_path):
    frame = Frame(blocks={"atoms": Block(
        columns={"mol_id": u64(1, 0, 2**64 - 1), "x": np.array([0.5, 12345.0, np.nan]),
                 "v": np.arange(9.0).reshape(3, 3), "name": np.array(["a", "", "c"], dtype=object)},
        masks={"mol_id": np.array([True, False, True]), "x": np.array([False, True, False]),
               "v": np.array([True, True, False]), "name": np.ones(3, bool)})})
    path = tmp_path / "m.mrec"
    write_mrec_frame(path, frame)
    assert nodes(path / "frame/atoms/_validity") == ["", "mol_id", "v", "x"]
    assert zjson(path, "frame/atoms/_validity/v")["shape"] == [3]  # one flag per row
    got = read_mrec_frame(path)["atoms"]
    assert {k: m.tolist() for k, m in got.masks.items()} == {
        "mol_id": [True, False, True], "x": [False, True, False], "v": [True, True, False]}
    assert got["mol_id"].tolist() == [1, 0, 2**64 - 1]  # values under null rows carried as written
    assert bits(got["x"]).tolist() == bits(frame["atoms"]["x"]).tolist()


def test_precision_round_trip_stores_values_on_the_grid(tmp_path):
    nan_payload = np.array([0x7FF8000000000123], np.uint64).view(np.float64)[0]
    big = 2.0**52 * Q
    values = np.array([0.7572, 2.5 * Q, 3.5 * Q, -2.5 * Q, 0.5 * Q, -0.0, -0.1 * Q, np.nan, np.inf,
                       -np.inf, big + 1.0, -big - 2.0, nan_payload, 1e300, big - 0.7 * Q, 5 * Q + Q / 3])
    expect = np.array([0.7568359375, 2 * Q, 4 * Q, -2 * Q, 0.0, -0.0, -0.0, np.nan, np.inf,
                       -np.inf, big + 1.0, -big - 2.0, nan_payload, 1e300, big, 5 * Q])
    original = values.copy()
    frame = Frame(blocks={"atoms": Block(columns={"x": values, "v": np.stack([values] * 3, axis=1),
                                                  "raw": values.copy()},
                                         precision={"x": 0.001, "v": 0.001})})
    path = tmp_path / "p.mrec"
    write_mrec_frame(path, frame)
    assert bits(values).tolist() == bits(original).tolist()  # the caller's array is not modified
    got = read_mrec_frame(path)["atoms"]
    assert bits(got["x"]).tolist() == bits(expect).tolist()  # sign of zero and NaN bits included
    assert bits(got["v"][:, 2]).tolist() == bits(expect).tolist()
    assert bits(got["raw"]).tolist() == bits(original).tolist()  # no precision: lossless
    finite = np.isfinite(got["x"]) & (np.abs(values) < big)
    assert np.all(np.abs(got["x"][finite] - values[finite]) <= Q / 2)
    assert got.precision == {"x": 0.001, "v": 0.001}
    doc = zjson(path, "frame/atoms/x")
    assert doc["attributes"] == {"precision": 0.001}
    assert "precision" not in zjson(path, "frame/atoms/raw")["attributes"]
    # read -> write -> read: the declaration survives and rounding twice changes nothing
    again = tmp_path / "again.mrec"
    write_mrec_frame(again, read_mrec_frame(path))
    assert bits(read_mrec_frame(again)["atoms"]["x"]).tolist() == bits(expect).tolist()
    assert zjson(again, "frame/atoms/x")["attributes"] == {"precision": 0.001}


def test_precision_with_mask_and_canonical_conversion(tmp_path):
    frame = Frame(blocks={"atoms": Block(columns={"x": np.array([1, 2, 3])},  # int -> f64 exactly
                                         precision={"x": 0.5}, masks={"x": np.array([True, False, True])})})
    path = tmp_path / "p.mrec"
    write_mrec_frame(path, frame)
    got = read_mrec_frame(path)["atoms"]
    assert got["x"].dtype == np.float64 and got["x"].tolist() == [1.0, 2.0, 3.0]
    assert got.precision == {"x": 0.5} and got.masks["x"].tolist() == [True, False, True]


def test_targets_round_trip_same_container_and_absolute(tmp_path):
    system = Frame(meta={"smiles": "O"}, blocks={"atoms": Block(columns={"element": np.array(["O", "H", "H"], dtype=object)})})
    frame = base_frame()
    frame.blocks["members"] = Block(columns={"ibead": u64(0, 2), "atom": u64(2, 0), "site": u64(1, 1)},
                                    targets={"ibead": "atoms", "atom": "/system/atoms", "site": "/frame/atoms"})
    path = tmp_path / "t.mrec"
    write_mrec_frame(path, frame, system=system)
    assert zjson(path, "frame/members")["attributes"]["targets"] == {
        "ibead": "atoms", "atom": "/system/atoms", "site": "/frame/atoms"}
    assert read_mrec_frame(path)["members"].targets == {"ibead": "atoms", "atom": "/system/atoms",
                                                        "site": "/frame/atoms"}
    assert read_mrec_system(path).meta == {"smiles": "O"}
    assert read_mrec_frame(path)["atoms"].targets == {}
    assert "targets" not in zjson(path, "frame/atoms")["attributes"]


def test_absolute_target_kept_when_the_section_is_absent(tmp_path):
    system = Frame(blocks={"members": Block(columns={"atom": u64(5)}, targets={"atom": "/frame/atoms"})})
    path = tmp_path / "s.mrec"
    write_mrec_system(path, system)
    assert read_mrec_system(path)["members"].targets == {"atom": "/frame/atoms"}


def test_canonical_conversions_on_write(tmp_path):
    frame = Frame(blocks={
        "atoms": Block(columns={"ix": np.array([2**31 - 1, -(2**31), 0], np.int64),
                                "mol_id": np.array([0, 1, 2], np.int64),
                                "charge": np.array([1, -1, 0], np.int16),
                                "atomic_number": np.array([8, 1, 1], np.uint8)}),
        "bonds": Block(columns={"atomi": np.array([0, 0], np.uint32), "atomj": np.array([1, 2], np.uint16)}),
    })
    path = tmp_path / "c.mrec"
    write_mrec_frame(path, frame)
    stored = {"atoms/ix": "int32", "atoms/mol_id": "uint64", "atoms/charge": "float64",
              "atoms/atomic_number": "uint64", "bonds/atomi": "uint64", "bonds/atomj": "uint64"}
    for node, data_type in stored.items():
        assert zjson(path, f"frame/{node}")["data_type"] == data_type, node
    got = read_mrec_frame(path)
    assert got["atoms"]["ix"].dtype == np.int32 and got["atoms"]["ix"].tolist() == [2**31 - 1, -(2**31), 0]
    assert got["bonds"]["atomi"].dtype == np.uint64 and got["bonds"]["atomj"].tolist() == [1, 2]
    assert got["atoms"]["charge"].tolist() == [1.0, -1.0, 0.0]
    # the caller's arrays keep their dtype
    assert frame["bonds"]["atomi"].dtype == np.uint32 and frame["atoms"]["ix"].dtype == np.int64


def test_meta_typed_values_round_trip(tmp_path):
    meta = {
        "z": MetaValue("i32", 7),
        "a": MetaValue("f64x3", (1, math.inf, 2)),
        "m": {"u": None, "l": [1, None, "x"]},
        "big": 2**64 - 1,
        "nan": math.nan,
        "minus_inf": -math.inf,
        "one": 1.0,
        "e": MetaValue("f64", 1),
        "flag": True,
        "s": "NaN",
        "vec": MetaValue("u64x3", (0, 2**64 - 1, 2**53 + 1)),
        "cell": MetaValue("f64x9", np.eye(3)),
        "nul": None,
        "units": {"length": "angstrom", "mass": "dalton"},
        "total_charge": 0,
    }
    path = tmp_path / "m.mrec"
    write_mrec_frame(path, Frame(meta=meta))
    raw = json.loads((path / "frame/zarr.json").read_text(encoding="utf-8"))["attributes"]
    assert list(raw) == list(meta) + ["_meta_types"]  # key order preserved, _meta_types last
    assert raw["big"] == "18446744073709551615" and raw["nan"] == "NaN" and raw["minus_inf"] == "-Infinity"
    assert raw["a"] == [1.0, "Infinity", 2.0] and raw["vec"] == [0, "18446744073709551615", "9007199254740993"]
    assert raw["_meta_types"] == {"z": "i32", "a": "f64x3", "m": "json", "big": "u64", "nan": "f64",
                                  "minus_inf": "f64", "one": "f64", "e": "f64", "flag": "bool",
                                  "s": "string", "vec": "u64x3", "cell": "f64x9", "nul": "json",
                                  "units": "json", "total_charge": "i64"}
    got = read_mrec_frame(path).meta
    assert list(got) == list(meta)
    assert got["z"] == MetaValue("i32", 7)  # i32 stays i32
    assert got["a"] == MetaValue("f64x3", (1.0, math.inf, 2.0))
    assert got["m"] == {"u": None, "l": [1, None, "x"]} and got["nul"] is None
    assert got["big"] == 2**64 - 1 and math.isnan(got["nan"]) and got["minus_inf"] == -math.inf
    assert type(got["one"]) is float and got["e"] == 1.0 and type(got["e"]) is float
    assert got["flag"] is True and got["s"] == "NaN"
    assert got["vec"] == MetaValue("u64x3", (0, 2**64 - 1, 2**53 + 1))
    assert got["cell"] == MetaValue("f64x9", (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0))
    # write -> read -> write is lossless
    again = tmp_path / "again.mrec"
    write_mrec_frame(again, Frame(meta=got))
    assert zjson(again, "frame") == zjson(path, "frame")


def test_empty_meta_means_no_attributes_at_all(tmp_path):
    path = tmp_path / "e.mrec"
    write_mrec_frame(path, Frame(blocks={"atoms": Block(columns={"x": np.zeros(1)})}), system=Frame())
    for section in ("frame", "system"):
        doc = zjson(path, section)
        assert doc.get("attributes", {}) == {}, section
        assert set(doc) <= {"zarr_format", "node_type", "attributes"}
    assert read_mrec_frame(path).meta == {} and read_mrec_system(path).meta == {}


def test_meta_key_named_meta_types_refused_at_write(tmp_path):
    assert_write_refused(tmp_path, R(33), write_mrec_frame, Frame(meta={"_meta_types": {}}))


# ---------------------------------------------------------------------------------------
# Reference codecs and chunking (reference-behaviour §2.3)
# ---------------------------------------------------------------------------------------
BYTES = {"name": "bytes", "configuration": {"endian": "little"}}
CRC = {"name": "crc32c"}
GZIP1 = {"name": "gzip", "configuration": {"level": 1}}
SHUFFLE8 = {"name": "numcodecs.shuffle", "configuration": {"elementsize": 8}}


def _inner(doc):
    codecs = doc["codecs"]
    if codecs[0]["name"] == "sharding_indexed":
        return codecs[0]["configuration"]["codecs"]
    return codecs


def test_reference_codecs_per_dtype(tmp_path):
    columns = dict(ALL_DTYPES)
    columns["prec"] = np.linspace(0, 1, 6)
    path = tmp_path / "c.mrec"
    write_mrec_frame(path, Frame(blocks={"t": Block(columns=columns, precision={"prec": 0.001},
                                                    masks={"u64": np.array([True, False] * 3)})}))
    for name in columns:
        codecs = _inner(zjson(path, f"frame/t/{name}"))
        if name in ("f64", "c64", "c128"):
            assert codecs == [BYTES, CRC], name
        elif name == "prec":
            assert [c["name"] for c in codecs] == ["bytes", "numcodecs.shuffle", "zstd", "crc32c"]
            assert codecs[1] == SHUFFLE8 and codecs[2]["configuration"]["level"] == 3
        elif name == "string":
            assert [c["name"] for c in codecs] == ["vlen-utf8", "gzip", "crc32c"] and codecs[1] == GZIP1
        else:
            assert codecs == [BYTES, GZIP1, CRC], name
    assert _inner(zjson(path, "frame/t/_validity/u64")) == [BYTES, GZIP1, CRC]  # masks: gzip 1


def test_reference_chunking(tmp_path):
    frame = Frame(blocks={
        "mid": Block(columns={"y": np.arange(100_000.0), "u": np.arange(100_000, dtype=np.uint64)}),
        "sites": Block(columns={"xyz": np.zeros((30_000, 3))}),
        "big": Block(columns={"y": np.arange(400_000.0)}),
        "names": Block(columns={"s": np.array(["ab"] * 100_000, dtype=object)}),
        "none": Block(columns={"y": np.zeros(0), "v": np.zeros((0, 3))}),
    })
    path = tmp_path / "k.mrec"
    write_mrec_frame(path, frame)

    def grid(node):
        return zjson(path, node)["chunk_grid"]["configuration"]["chunk_shape"]

    # 8-byte rows -> 65536 rows per chunk; 2 chunks stay plain
    for node in ("frame/mid/y", "frame/mid/u"):
        assert grid(node) == [65536] and zjson(path, node)["codecs"][0]["name"] != "sharding_indexed"
    assert sorted(os.listdir(path / "frame/mid/y/c")) == ["0", "1"]
    assert grid("frame/sites/xyz") == [524288 // 24, 3]  # trailing axes never split
    # 400 000 rows -> 7 chunks -> one shard of 458 752 rows, one data file
    doc = zjson(path, "frame/big/y")
    assert grid("frame/big/y") == [458752]
    sharding = doc["codecs"][0]
    assert sharding["name"] == "sharding_indexed"
    assert sharding["configuration"]["chunk_shape"] == [65536]
    assert sharding["configuration"]["codecs"] == [BYTES, CRC]
    assert sharding["configuration"]["index_location"] == "end"
    data_files = [f for d, _, fs in os.walk(path / "frame/big/y") for f in fs if f != "zarr.json"]
    assert data_files == ["0"]
    # strings and empty leading axes: one unplanned chunk
    assert grid("frame/names/s") == [100_000]
    assert grid("frame/none/y") == [1] and grid("frame/none/v") == [1, 3]
    got = read_mrec_frame(path)
    assert got["big"]["y"].tolist() == frame["big"]["y"].tolist()
    assert got["names"]["s"].shape == (100_000,) and got["names"]["s"][-1] == "ab"
    assert got["none"]["v"].shape == (0, 3) and got["none"].count == 0


# ---------------------------------------------------------------------------------------
# Doors (reference-behaviour §2.2)
# ---------------------------------------------------------------------------------------
def test_section_names_frame_only_and_with_system(tmp_path):
    path = tmp_path / "f.mrec"
    write_mrec_frame(path, base_frame())
    assert set(section_names(path)) == {"meta", "frame"}
    with pytest.raises(NodeNotFoundError) as info:
        read_mrec_system(path)
    assert "system" in str(info.value)
    write_mrec_frame(path, base_frame(), system=Frame(blocks={"atoms": Block(columns={"x": np.zeros(3)})}),
                     overwrite=True)
    assert set(section_names(path)) == {"meta", "frame", "system"}
    assert not (path / "trajectory").exists()


def test_system_door_writes_no_frame(tmp_path):
    path = tmp_path / "s.mrec"
    write_mrec_system(path, base_frame())
    assert set(section_names(path)) == {"meta", "system"}
    with pytest.raises(NodeNotFoundError) as info:
        read_mrec_frame(path)
    assert "frame" in str(info.value)
    assert read_mrec_system(path)["atoms"]["id"].tolist() == [10, 11, 12]


@pytest.mark.parametrize("name", ["water.zarr", "water.zarr.zip", "WATER.ZARR"])
def test_zarr_suffix_refused_mentioning_mrec(tmp_path, name):
    path = tmp_path / name
    with pytest.raises(SpecViolationError) as info:
        write_mrec_frame(path, base_frame())
    assert ".mrec" in str(info.value)
    assert not path.exists()
    good = tmp_path / "good.mrec"
    write_mrec_frame(good, base_frame())
    if not name.lower().endswith(".zip"):
        os.rename(good, path)
    for reader in (read_mrec_frame, read_mrec_meta, section_names):
        with pytest.raises(SpecViolationError) as info:
            reader(path)
        assert ".mrec" in str(info.value)


def test_rewrite_erases_the_whole_root(tmp_path):
    path = tmp_path / "r.mrec"
    wide = base_frame()
    wide.blocks["atoms"].masks = {"x": np.array([True, False, True])}
    wide.blocks["grid"] = Block(columns={"rho": np.arange(8.0)}, structural_shape=(2, 2, 2))
    write_mrec_frame(path, wide, system=base_frame(), meta={"creator": {"name": "wide"}})
    write_mrec_frame(path, Frame(blocks={"atoms": Block(columns={"x": np.arange(3.0)})}), overwrite=True)
    assert nodes(path) == ["", "frame", "frame/atoms", "frame/atoms/x", "meta"]
    assert sorted(snapshot(path)) == ["frame/atoms/x/c/0", "frame/atoms/x/zarr.json", "frame/atoms/zarr.json",
                                      "frame/zarr.json", "meta/zarr.json", "zarr.json"]
    assert read_mrec_meta(path) == {"molrec_version": 2}
    assert os.listdir(tmp_path) == ["r.mrec"]  # no staging or retired copy left behind


def test_writing_over_a_non_record_directory_is_refused(tmp_path):
    path = tmp_path / "notes.mrec"
    path.mkdir()
    (path / "notes.txt").write_text("keep me")
    (path / "sub").mkdir()
    (path / "sub" / "zarr.json").write_text("{}")
    before = snapshot(path)
    with pytest.raises(StoreError):
        write_mrec_frame(path, base_frame())
    assert snapshot(path) == before
    assert sorted(os.listdir(tmp_path)) == ["notes.mrec"]
    # a plain file is not replaced either
    plain = tmp_path / "file.mrec"
    plain.write_bytes(b"x")
    with pytest.raises(StoreError):
        write_mrec_system(plain, base_frame())
    assert plain.read_bytes() == b"x"


def test_writing_over_an_empty_directory_works(tmp_path):
    path = tmp_path / "empty.mrec"
    path.mkdir()
    write_mrec_frame(path, base_frame())
    assert read_mrec_frame(path)["atoms"]["id"].tolist() == [10, 11, 12]
    assert os.listdir(tmp_path) == ["empty.mrec"]


def _pack(directory: Path) -> Path:
    """Pack as the spec says: STORED entries, names relative to the record root, sorted,
    no directory entries."""
    target = directory.with_name(directory.name + ".zip")
    names = sorted(str(p.relative_to(directory).as_posix()) for p in directory.rglob("*") if p.is_file())
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_STORED) as archive:
        for name in names:
            archive.write(directory / name, arcname=name)
    return target


def test_readers_accept_a_packed_mrec_zip(tmp_path):
    path = tmp_path / "z.mrec"
    frame, system = rich_frame(), Frame(meta={"smiles": "O"}, blocks={"atoms": Block(columns={"x": np.zeros(3)})})
    write_mrec_frame(path, frame, system=system, meta={"creator": {"name": "zip"}})
    packed = _pack(path)
    assert packed.name == "z.mrec.zip"
    with zipfile.ZipFile(packed) as archive:
        assert all(info.compress_type == zipfile.ZIP_STORED for info in archive.infolist())
    assert section_names(packed) == section_names(path)
    assert read_mrec_meta(packed) == read_mrec_meta(path)
    assert_frames_equal(read_mrec_frame(packed), read_mrec_frame(path))
    assert_frames_equal(read_mrec_system(packed), read_mrec_system(path))
    shutil.rmtree(path)  # the zip alone suffices
    assert_frames_equal(read_mrec_frame(packed), frame, written=True)
    with pytest.raises(MolrecError):  # read-only: no writer goes through a zip
        write_mrec_frame(packed, base_frame())
    assert zipfile.is_zipfile(packed)


# ---------------------------------------------------------------------------------------
# A rich record, compared in memory and through zarr-python 3
# ---------------------------------------------------------------------------------------
def rich_frame() -> Frame:
    columns = dict(ALL_DTYPES)
    columns["pos"] = np.arange(18.0).reshape(6, 3)
    return Frame(
        meta={"title": "rich", "n": MetaValue("i32", 3), "com": MetaValue("f64x3", (0.0, 0.5, math.nan)),
              "big": 2**64 - 1, "doc": {"a": [1, None]}},
        blocks={
            "t": Block(columns=columns, precision={"f64": 0.001},
                       masks={"u64": np.array([True, False] * 3), "pos": np.array([False] + [True] * 5)},
                       attrs={"vendor": {"k": None}}),
            "atoms": Block(columns={"x": np.array([0.0, 1.0, 2.0]), "id": u64(1, 2, 3),
                                    "element": np.array(["O", "H", "H"], dtype=object)}),
            "bonds": Block(columns={"atomi": u64(0, 0), "atomj": u64(1, 2)}),
            "members": Block(columns={"ibead": u64(0, 2), "atom": u64(1, 1)},
                             targets={"ibead": "atoms", "atom": "/frame/atoms"}),
            "grid": Block(columns={"rho": np.linspace(0, 1, 8)}, structural_shape=(2, 2, 2)),
            "big": Block(columns={"y": np.arange(300_000.0)}),
            "empty": Block(count=3),
        },
        box=Box(np.array([[10.0, 1.0, 0.0], [0.0, 11.0, 0.5], [0.0, 0.0, 12.0]]), np.array([0.5, 0.0, -1.0]),
                (True, True, False)),
    )


def assert_frames_equal(a: Frame, b: Frame, written: bool = False) -> None:
    """Equal blocks, columns (bit-exact for floats), masks, targets, meta and box; with
    ``written`` the in-memory ``b`` is compared after the writer's rounding."""
    assert list(a.meta) == list(b.meta)
    assert json.dumps(a.meta, default=repr) == json.dumps(b.meta, default=repr)
    assert sorted(a.blocks) == sorted(b.blocks)
    for name, block in b.blocks.items():
        got = a.blocks[name]
        assert got.count == block.count and sorted(got.columns) == sorted(block.columns), name
        assert got.targets == block.targets and got.structural_shape == block.structural_shape
        assert got.precision == block.precision and got.attrs == block.attrs
        assert {k: m.tolist() for k, m in got.masks.items()} == {
            k: np.asarray(m).tolist() for k, m in block.masks.items() if not np.asarray(m).all()}
        for column, values in block.columns.items():
            values = np.asarray(values)
            if written and column in block.precision:
                from molrec_raw.record.precision import round_to_precision
                values = round_to_precision(values, block.precision[column])
            back = got[column]
            if values.dtype.kind in "fc":
                assert back.dtype == values.dtype and back.tobytes() == values.tobytes(), (name, column)
            else:
                assert back.tolist() == values.tolist(), (name, column)
    assert a.box == b.box


def test_rich_record_round_trip(tmp_path):
    path = tmp_path / "rich.mrec"
    frame = rich_frame()
    write_mrec_frame(path, frame)
    got = read_mrec_frame(path)
    assert_frames_equal(got, frame, written=True)
    again = tmp_path / "again.mrec"
    write_mrec_frame(again, got)
    assert_frames_equal(read_mrec_frame(again), got)
    for node in nodes(path):  # identical metadata documents after a read -> write cycle
        assert zjson(again, node) == zjson(path, node), node


@pytest.fixture(scope="module")
def zarr_python():
    zarr = pytest.importorskip("zarr")
    if not str(getattr(zarr, "__version__", "")).startswith("3"):
        pytest.skip(f"zarr-python 3 is needed, found {getattr(zarr, '__version__', None)!r}")
    return zarr


@pytest.mark.interop
def test_zarr_python_opens_a_rich_record(tmp_path, zarr_python):
    path = tmp_path / "rich.mrec"
    write_mrec_frame(path, rich_frame(), system=Frame(meta={"smiles": "O"}, blocks={
        "atoms": Block(columns={"x": np.zeros(3)})}), meta={"creator": {"name": "interop"}, "k": None})
    theirs = zarr_python.open_group(str(path), mode="r")
    ours = mz.open_group(path, mode="r")
    seen = {"groups": 0, "arrays": 0}

    def walk(z, m, where):
        assert dict(z.attrs) == dict(m.attrs), where
        z_members = dict(z.members())
        m_members = dict(m.members())
        assert sorted(z_members) == sorted(m_members), where
        for name, node in z_members.items():
            other = m_members[name]
            here = f"{where}/{name}"
            if isinstance(node, zarr_python.Group):
                assert isinstance(other, mz.Group), here
                seen["groups"] += 1
                walk(node, other, here)
                continue
            seen["arrays"] += 1
            assert dict(node.attrs) == dict(other.attrs), here
            assert tuple(node.shape) == tuple(other.shape), here
            a, b = np.asarray(node[...]), np.asarray(other[...])
            if b.dtype == object:
                assert [str(v) for v in a.ravel()] == list(b.ravel()), here
            else:
                assert a.dtype == b.dtype, here
                assert a.tobytes() == b.tobytes(), here  # bit-exact (NaN payloads, -0.0)

    walk(theirs, ours, "")
    assert seen["arrays"] >= 25 and seen["groups"] >= 10
