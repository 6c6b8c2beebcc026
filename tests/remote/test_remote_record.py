"""Every reading door takes a URL (a zip over HTTP, a directory or zip on an fsspec file
system), gives what the local path gives, and every writer refuses one; a directory
record over plain HTTP is refused with a way out (trajectory#15)."""
from __future__ import annotations

import shutil
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

import molrec_raw as mr
from molrec_raw import MrecReader, MrecWriter, SequenceSchema
from molrec_raw.cli import main
from molrec_raw.demo import write_demo
from molrec_raw.errors import ReadOnlyError, SpecViolationError, UnsupportedFeatureError
from remote_helpers import faulty_server

fsspec = pytest.importorskip("fsspec", reason="FsspecStore needs the [remote] extra (fsspec)")


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """A demo record (every section kind) as a directory and a zip, plus a frame record."""
    root = tmp_path_factory.mktemp("records")
    directory = write_demo(root / "demo.mrec", frames=24, molecules=4)
    packed = mr.pack_mrec_zip(directory)
    frame = mr.Frame({"title": "w"}, {"atoms": mr.Block({"x": np.arange(3.0), "element": np.array(["O", "H", "H"], dtype=object)})})
    mr.write_mrec_frame(root / "frame.mrec", frame, system=frame, meta={"creator": {"name": "t"}})
    mr.pack_mrec_zip(root / "frame.mrec")
    with faulty_server(root) as server:
        yield root, server


def _frames_equal(a: mr.Frame, b: mr.Frame) -> bool:
    if a.meta != b.meta or list(a.blocks) != list(b.blocks):
        return False
    for name, block in a.blocks.items():
        other = b.blocks[name]
        if list(block.columns) != list(other.columns) or block.precision != other.precision:
            return False
        for c, values in block.columns.items():
            x, y = np.asarray(values), np.asarray(other.columns[c])
            same = x.tolist() == y.tolist() if x.dtype == object else x.tobytes() == y.tobytes()
            if x.dtype != y.dtype or x.shape != y.shape or not same:
                return False
        if {c: m.tolist() for c, m in block.masks.items()} != {c: m.tolist() for c, m in other.masks.items()}:
            return False
    return (a.box is None) == (b.box is None)


def _same_record(local, remote):
    a, b = mr.read_mrec(local), mr.read_mrec(remote)
    assert a.meta == b.meta and a.status == b.status and a.method == b.method
    assert _frames_equal(a.system, b.system)
    assert a.forcefield.document == b.forcefield.document
    assert a.observables == b.observables
    assert {k: s.values.tolist() for k, s in a.metrics.items()} == {k: s.values.tolist() for k, s in b.metrics.items()}
    assert len(a.trajectory) == len(b.trajectory) == 24
    assert all(_frames_equal(x, y) for x, y in zip(a.trajectory, b.trajectory))
    assert a.section_names() == b.section_names()


def test_trajectory_15_every_reading_door_takes_an_http_url_of_a_zip(records):
    root, server = records
    url = server.url_of("demo.mrec.zip")
    local = root / "demo.mrec.zip"
    _same_record(local, url)
    assert mr.read_mrec_meta(url) == mr.read_mrec_meta(local)
    assert _frames_equal(mr.read_mrec_system(url), mr.read_mrec_system(local))
    assert mr.read_mrec_forcefield(url).document == mr.read_mrec_forcefield(local).document
    assert mr.section_names(url) == mr.section_names(local)
    frame_url = server.url_of("frame.mrec.zip")
    assert _frames_equal(mr.read_mrec_frame(frame_url), mr.read_mrec_frame(root / "frame.mrec"))
    assert sorted(mr.read_metrics(url)) == sorted(mr.read_metrics(local))
    assert mr.validate(url) == [] and mr.validate(frame_url) == []
    with MrecReader(url) as r, MrecReader(local) as l:
        assert r.step == l.step and r.time == l.time
        assert _frames_equal(r[-1], l[-1]) and _frames_equal(r.read_columns(3, [("atoms", "x")]),
                                                             l.read_columns(3, [("atoms", "x")]))
    assert len(mr.read_mrec_trajectory(url)) == 24


def test_trajectory_15_validate_reports_corruption_found_over_http(records, tmp_path):
    root, server = records
    bad = bytearray((root / "demo.mrec.zip").read_bytes())
    with zipfile.ZipFile(root / "demo.mrec.zip") as archive:  # entries are stored, not deflated
        header = archive.getinfo("trajectory/atoms/x/c/0").header_offset
    name, extra = struct.unpack("<HH", bad[header + 26:header + 30])
    shard = header + 30 + name + extra
    bad[shard + 4096 + 20] ^= 0xFF  # a byte of the shard's first inner chunk (chunk data starts at 4096)
    (root / "bad.mrec.zip").write_bytes(bytes(bad))
    found = mr.validate(server.url_of("bad.mrec.zip"))
    assert found and any("crc" in v.message.lower() or "checksum" in v.message.lower() for v in found)


def test_trajectory_15_directory_record_over_plain_http_is_refused(records):
    _, server = records
    for door in (mr.read_mrec, mr.read_mrec_meta, MrecReader, mr.validate, mr.read_metrics):
        with pytest.raises(UnsupportedFeatureError, match="pack it.*object store"):
            door(server.url_of("demo.mrec"))


def test_root_layout_1_url_names_are_checked_like_paths(records):
    _, server = records
    with pytest.raises(SpecViolationError, match="root-layout#1"):
        mr.read_mrec(server.url_of("x.zarr.zip"))


def test_trajectory_15_writers_refuse_urls(records):
    _, server = records
    url = server.url_of("new.mrec")
    frame = mr.Frame({}, {"atoms": mr.Block({"x": np.zeros(2)})})
    schema = SequenceSchema().declare_block("atoms").declare_column("atoms", "x", "f64")
    for write in (lambda: mr.write_mrec_frame(url, frame), lambda: mr.write_mrec_system(url, frame),
                  lambda: mr.write_mrec(url, mr.MolRec(frame=frame)), lambda: MrecWriter(url, schema),
                  lambda: MrecWriter.open(url), lambda: mr.MetricsWriter(url),
                  lambda: mr.write_mrec_trajectory(url, [frame])):
        with pytest.raises(ReadOnlyError, match="read-only; writers take a local path"):
            write()
    assert server.requests == 0 or all(method in ("GET", "HEAD") for method, _, _ in server.log)


def test_cli_inspect_validate_cat_metrics_take_a_url(records, capsys):
    root, server = records
    url = server.url_of("demo.mrec.zip")
    assert main(["inspect", url]) == 0
    assert "trajectory: 24 committed frames" in capsys.readouterr().out
    assert main(["validate", url]) == 0
    assert capsys.readouterr().out.strip().endswith(": valid")
    assert main(["cat", url, "--frame", "-1", "--block", "atoms", "--rows", "2"]) == 0
    assert "[atoms] 12 rows" in capsys.readouterr().out
    assert main(["metrics", url]) == 0
    assert "thermo/temperature" in capsys.readouterr().out
    assert main(["metrics", url, "--follow"]) == 2
    assert "--follow tails the WAL of a local record" in capsys.readouterr().err
    assert main(["inspect", server.url_of("demo.mrec")]) == 2
    assert "no listing" in capsys.readouterr().err


# -- object stores: fsspec's memory and local file systems ------------------------------------
@pytest.fixture
def memory_records(records):
    root, _ = records
    fs = fsspec.filesystem("memory")
    base = f"/molrec-test-{id(fs)}"
    fs.put(str(root / "demo.mrec"), f"{base}/demo.mrec", recursive=True)
    fs.pipe(f"{base}/demo.mrec.zip", (root / "demo.mrec.zip").read_bytes())
    yield f"memory://{base}"
    fs.rm(base, recursive=True)


def test_trajectory_15_directory_and_zip_records_on_fsspec_memory(records, memory_records):
    root, _ = records
    _same_record(root / "demo.mrec", f"{memory_records}/demo.mrec")
    _same_record(root / "demo.mrec", f"{memory_records}/demo.mrec.zip")
    assert mr.validate(f"{memory_records}/demo.mrec") == []


def test_trajectory_15_records_on_fsspec_local_file_urls(records):
    root, _ = records
    _same_record(root / "demo.mrec", (root / "demo.mrec").as_uri())
    _same_record(root / "demo.mrec", (root / "demo.mrec.zip").as_uri())


def test_fsspec_store_matches_the_directory_store(records, memory_records):
    from molrec_raw.zarr import DirectoryStore
    from molrec_raw.zarr.fsspecstore import FsspecStore

    root, _ = records
    local = DirectoryStore(root / "demo.mrec", read_only=True)
    for store in (FsspecStore(f"{memory_records}/demo.mrec"),
                  FsspecStore(fsspec.filesystem("file"), str(root / "demo.mrec"))):
        keys = list(local.list())
        assert list(store.list()) == keys
        assert store.list_dir("trajectory/") == local.list_dir("trajectory/")
        for key in keys[::7]:
            assert store.get(key) == local.get(key) and store.size(key) == local.size(key)
            assert store.get_range(key, -3) == local.get_range(key, -3)
            assert store.get_ranges(key, [(0, 4), (4, 4), (100, 9)]) == local.get_ranges(key, [(0, 4), (4, 4), (100, 9)])
        assert store.get("nope/zarr.json") is None and store.size("nope") is None
        with pytest.raises(ReadOnlyError):
            store.set("zarr.json", b"{}")


def test_trajectory_15_doors_take_an_open_store_with_options_and_leave_it_open(records):
    from molrec_raw.zarr.remote import open_url

    root, server = records
    store = open_url(server.url_of("frame.mrec.zip"), token="t0ken", headers={"X-Test": "door"}, retries=1)
    assert _frames_equal(mr.read_mrec_frame(store), mr.read_mrec_frame(root / "frame.mrec"))
    assert mr.read_mrec_meta(store)["creator"] == {"name": "t"} and mr.validate(store) == []
    assert store.get("zarr.json") is not None  # still open: the caller owns it
    assert server.state.authorization[-1] == "Bearer t0ken" and server.state.extra[-1] == "door"
    store.close()
