"""Packing a record into *.mrec.zip and back (trajectory §15, decision 12)."""
import zipfile

import numpy as np
import pytest

import molrec_raw as mr
from molrec_raw.errors import CorruptDataError, MolrecError, StoreError
from molrec_raw.record.pack import pack_mrec_zip, unpack_mrec_zip
from molrec_raw.zarr import ZipStore
from molrec_raw.zarr.zipstore import write_zip


def record(tmp_path, name="r.mrec"):
    frame = mr.Frame({"title": "w"}, {"atoms": mr.Block({"x": np.arange(5.0), "element": np.array(list("CHONS"), dtype=object)})},
                     mr.Box(np.eye(3) * 4))
    return mr.write_mrec_frame(tmp_path / name, frame)


def files_of(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_trajectory_15_pack_layout_and_bit_identical_entries(tmp_path):
    path = record(tmp_path)
    packed = pack_mrec_zip(path)
    assert packed.name == "r.mrec.zip" and path.exists()
    with zipfile.ZipFile(packed) as zf:
        infos = zf.infolist()
        assert [i.filename for i in infos] == sorted(files_of(path))
        assert all(i.compress_type == zipfile.ZIP_STORED and not i.is_dir() for i in infos)
        assert zf.testzip() is None
        for info in infos:
            assert zf.read(info) == (path / info.filename).read_bytes()
    assert mr.read_mrec_frame(packed).blocks["atoms"].columns["x"].tolist() == list(np.arange(5.0))
    assert mr.validate(packed) == []


def test_trajectory_15_refuses_to_overwrite_and_removes_source_only_when_asked(tmp_path):
    path = record(tmp_path)
    packed = pack_mrec_zip(path)
    before = packed.read_bytes()
    with pytest.raises(StoreError):
        pack_mrec_zip(path)
    assert packed.read_bytes() == before
    packed.unlink()
    pack_mrec_zip(path, remove_source=True)
    assert not path.exists() and packed.exists()


def test_trajectory_15_packing_is_deterministic(tmp_path):
    a = pack_mrec_zip(record(tmp_path, "a.mrec"))
    b = pack_mrec_zip(record(tmp_path, "b.mrec"))
    assert a.read_bytes() == b.read_bytes()


def test_forced_zip64_archive_reads_here_and_in_python_zipfile(tmp_path):
    path = record(tmp_path)
    files = sorted((p.relative_to(path).as_posix(), p) for p in path.rglob("*") if p.is_file())
    write_zip(tmp_path / "z64.zip", files, force_zip64=True)
    with zipfile.ZipFile(tmp_path / "z64.zip") as zf:
        assert zf.testzip() is None and len(zf.infolist()) == len(files)
    with ZipStore(tmp_path / "z64.zip") as store:
        assert all(store.get(name) == p.read_bytes() for name, p in files)


def test_unpack_round_trip(tmp_path):
    path = record(tmp_path)
    packed = pack_mrec_zip(path)
    out = unpack_mrec_zip(packed, tmp_path / "back.mrec")
    assert files_of(out) == files_of(path)
    with pytest.raises(StoreError):
        unpack_mrec_zip(packed, tmp_path / "back.mrec")


@pytest.mark.parametrize("bad", ["../evil", "/abs", "a\\b"])
def test_unpack_refuses_hostile_names_before_writing(tmp_path, bad):
    archive = tmp_path / "evil.mrec.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("zarr.json", b'{"zarr_format":3,"node_type":"group"}')
        zf.writestr(bad, b"x")
    with pytest.raises(MolrecError):
        unpack_mrec_zip(archive, tmp_path / "dest")
    assert not (tmp_path / "dest").exists() and not (tmp_path / "evil").exists()


def test_unpack_refuses_duplicates(tmp_path):
    archive = tmp_path / "dup.mrec.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("zarr.json", b'{"zarr_format":3,"node_type":"group"}')
        with pytest.warns(UserWarning):
            zf.writestr("zarr.json", b'{"zarr_format":3,"node_type":"group"}')
    with pytest.raises(CorruptDataError):
        unpack_mrec_zip(archive, tmp_path / "dest")
    assert not (tmp_path / "dest").exists()


def test_zarr_python_zipstore_opens_a_packed_record(tmp_path):
    zarr = pytest.importorskip("zarr")
    if not getattr(zarr, "__version__", "0").startswith("3"):
        pytest.skip("zarr-python 3 needed")
    packed = pack_mrec_zip(record(tmp_path))
    group = zarr.open_group(zarr.storage.ZipStore(str(packed), mode="r"), mode="r")
    assert group["frame/atoms/x"][...].tolist() == list(np.arange(5.0))
    assert list(group["frame/atoms/element"][...]) == list("CHONS")
