"""Records in memory: every whole-record door writes the packed record into a ``bytearray``
(the same bytes as the ``*.mrec.zip`` it writes on disk), and every reading door reads one
from ``bytes``, ``bytearray`` or ``memoryview`` through the same checks as a file
(zarr-v3-subset#9.2: the zip store over a buffer); bad bytes get a MolrecError."""
from __future__ import annotations

import os
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import molrec_raw as mr
from molrec_raw.errors import InvalidValueError, MolrecError, NotARecordError, SpecViolationError
from molrec_raw.record.forcefield import ForceFieldSection, block_name
from molrec_raw.record.trajectory import MrecReader, MrecWriter, SequenceSchema

BUFFERS = {"bytes": bytes, "bytearray": bytearray, "memoryview": memoryview}


def frame(i: int) -> mr.Frame:
    x = np.linspace(0.0, 1.0, 4) + i
    return mr.Frame({"title": f"f{i}"}, {"atoms": mr.Block({"x": x, "y": x * 2, "z": -x})}, mr.Box(np.eye(3) * 9.0))


def system() -> mr.Frame:
    return mr.Frame({}, {"atoms": mr.Block({"element": np.array(["C", "O", "O", "H"], dtype=object)})})


def forcefield() -> ForceFieldSection:
    return ForceFieldSection({"name": "ff", "units": {"preset": "real"}, "styles": [{"category": "atom", "style": "full"}]},
                             {block_name("atom", "full"): mr.Block({"name": np.array(["C"], dtype=object),
                                                                    "mass": np.array([12.011])})})


WRITERS = {
    "write_mrec_frame": lambda sink: mr.write_mrec_frame(sink, frame(0), system=system(), meta={"k": 1}),
    "write_mrec_system": lambda sink: mr.write_mrec_system(sink, system(), forcefield=forcefield()),
    "write_mrec_forcefield": lambda sink: mr.write_mrec_forcefield(sink, forcefield()),
    "write_mrec_trajectory": lambda sink: mr.write_mrec_trajectory(sink, [frame(i) for i in range(3)], steps=[0, 4, 8]),
    "write_mrec": lambda sink: mr.write_mrec(sink, mr.MolRec(system=system(), frame=frame(7), forcefield=forcefield(),
                                                             trajectory=[frame(i) for i in range(2)])),
}


@pytest.mark.parametrize("door", sorted(WRITERS))
def test_trajectory_15_a_bytearray_receives_the_packed_record_the_zip_target_gets(tmp_path, door):
    sink = bytearray(b"old content, replaced")
    assert WRITERS[door](sink) is sink
    on_disk = WRITERS[door](tmp_path / "r.mrec.zip")
    assert bytes(sink) == on_disk.read_bytes()  # one packer, deterministic: byte for byte
    assert sink[:4] == b"PK\x03\x04"
    assert os.listdir(tmp_path) == ["r.mrec.zip"]


def test_trajectory_15_a_refused_write_leaves_the_bytearray_as_it_was():
    sink = bytearray(b"keep")
    with pytest.raises(SpecViolationError):
        mr.write_mrec(sink, mr.MolRec())  # no substantive section (documents#9.1)
    with pytest.raises(MolrecError):
        mr.write_mrec_trajectory(sink, [frame(0)], steps=[1, 2])
    assert sink == bytearray(b"keep")


@pytest.mark.parametrize("target", [b"", memoryview(bytearray(4))])
def test_a_buffer_that_cannot_receive_a_record_is_refused(target):
    with pytest.raises(InvalidValueError, match="bytearray"):
        mr.write_mrec_frame(target, frame(0))
    with pytest.raises(InvalidValueError, match="this door takes a path"):
        MrecWriter(bytearray(), SequenceSchema.from_frames([frame(0)]))


@pytest.mark.parametrize("kind", sorted(BUFFERS))
def test_zarr_v3_subset_9_2_every_reading_door_reads_a_record_in_memory(kind):
    packed = WRITERS["write_mrec"](bytearray())
    source = BUFFERS[kind](bytes(packed))
    assert mr.validate(source) == []
    assert mr.section_names(source) == ["forcefield", "frame", "meta", "system", "trajectory"]
    assert mr.read_mrec_meta(source)["molrec_version"] == 2
    assert np.array_equal(mr.read_mrec_frame(source).blocks["atoms"].columns["x"], frame(7).blocks["atoms"].columns["x"])
    assert list(mr.read_mrec_system(source).blocks["atoms"].columns["element"]) == ["C", "O", "O", "H"]
    assert mr.read_mrec_forcefield(source).document == forcefield().document
    with MrecReader(source) as reader:
        assert len(reader) == 2
        assert np.array_equal(reader[1].blocks["atoms"].columns["z"], frame(1).blocks["atoms"].columns["z"])
    trajectory = mr.read_mrec_trajectory(source)
    assert len(trajectory) == 2 and list(trajectory.step) == [0, 1]
    rec = mr.read_mrec(source)
    assert rec.section_names() == ["forcefield", "frame", "meta", "system", "trajectory"]
    assert isinstance(rec.trajectory, MrecReader)
    rec.trajectory.close()


def test_zarr_v3_subset_9_2_a_buffer_changed_after_opening_changes_nothing_read():
    packed = WRITERS["write_mrec_trajectory"](bytearray())
    reader = MrecReader(packed)
    packed[:] = b"\x00" * len(packed)
    with reader:
        assert list(reader.step) == [0, 4, 8]
        assert np.array_equal(reader[2].blocks["atoms"].columns["x"], frame(2).blocks["atoms"].columns["x"])


def test_zarr_v3_subset_9_2_a_record_in_memory_round_trips_through_read_and_write():
    first = WRITERS["write_mrec"](bytearray())
    rec = mr.read_mrec(bytes(first))
    second = mr.write_mrec(bytearray(), rec)
    assert isinstance(rec.trajectory, MrecReader)
    rec.trajectory.close()
    assert second == first


@pytest.mark.parametrize("data, words", [
    (b"", "empty bytes"),
    (b"molrec", "not a zip archive"),
    (b"PK\x03\x04 and nothing else", "zip"),
])
def test_zarr_v3_subset_9_2_bytes_that_are_no_record_are_refused(data, words):
    for door in (mr.validate, mr.read_mrec, mr.read_mrec_meta, mr.read_mrec_frame, MrecReader):
        with pytest.raises(MolrecError, match=words) as caught:
            door(data)
        assert "in memory" in str(caught.value)


def test_zarr_v3_subset_9_2_a_zip_without_a_record_is_refused_as_such(tmp_path):
    with zipfile.ZipFile(tmp_path / "z.zip", "w") as archive:
        archive.writestr("notes.txt", "hello")
    with pytest.raises(MolrecError, match="root zarr.json|group"):
        mr.read_mrec((tmp_path / "z.zip").read_bytes())


def _form(value: object) -> object:
    """A door's answer as plain values (frames, records, metadata, violations)."""
    if isinstance(value, mr.Frame):
        return (repr(value.meta), None if value.box is None else np.asarray(value.box.vectors).tolist(),
                {n: {c: v.tolist() for c, v in b.columns.items()} for n, b in value.blocks.items()})
    if isinstance(value, list):
        return [_form(v) for v in value]
    return repr(value)


def _read_everything(data: bytes) -> dict:
    """Every reading door over ``data``: its answer, or its refusal — a MolrecError naming its
    rule (or that the bytes are no record at all) and where the record is (nothing else may
    escape)."""
    out = {}
    doors = {"meta": mr.read_mrec_meta, "frame": mr.read_mrec_frame, "system": mr.read_mrec_system,
             "validate": mr.validate}

    def trajectory(data: bytes) -> list:
        with MrecReader(data) as reader:
            return [reader[i] for i in range(len(reader))]
    doors["trajectory"] = trajectory
    for name, door in doors.items():
        try:
            out[name] = ("read", _form(door(data)))
        except MolrecError as exc:
            assert exc.rule is not None or isinstance(exc, NotARecordError), (name, exc)
            assert "<packed record in memory" in str(exc), (name, exc)
            out[name] = ("refused", exc.rule)
    return out


_PACKED = bytes(WRITERS["write_mrec"](bytearray()))
_CLEAN = _read_everything(_PACKED)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_zarr_v3_subset_9_2_hostile_bytes_get_a_molrec_error(data):
    """Flipped, truncated, zeroed and spliced bytes of a packed record: every door answers
    with its value or a MolrecError naming its rule, never another exception; when validate
    finds nothing wrong every door reads what was written, and changed bytes never pass
    unnoticed by every door (the entries' CRC-32 and the chunks' checksums)."""
    buf = bytearray(_PACKED)
    how = data.draw(st.sampled_from(["flip", "truncate", "zero", "splice"]))
    at = data.draw(st.integers(0, len(buf) - 1))
    if how == "flip":
        for offset in data.draw(st.lists(st.integers(0, len(buf) - 1), min_size=1, max_size=8)):
            buf[offset] ^= data.draw(st.integers(1, 255))
    elif how == "truncate":
        del buf[at:]
    elif how == "zero":
        length = data.draw(st.integers(1, 64))
        buf[at:at + length] = bytes(len(buf[at:at + length]))
    else:
        buf[at:at] = data.draw(st.binary(min_size=1, max_size=32))
    got = _read_everything(bytes(buf))
    if got["validate"] == ("read", []):  # valid: every door reads, and reads what was written
        assert got == _CLEAN, got
    elif bytes(buf) != _PACKED:
        assert got != _CLEAN
