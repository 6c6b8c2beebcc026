"""`molrec-raw explain`: every byte of a zarr.json, a shard, a chunk, a zip and a frame.

Issue 16 part 1.  Inputs are the checked-in conformance corpus (real records written by
this package, by zarr-python, and broken on purpose) plus records written here; hostile
ones are explained up to their first fault, named with its byte offset; nothing is ever
written, and a read-only copy explains the same.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import pytest

import molrec_raw as mr
from molrec_raw.conformance import default_corpus
from molrec_raw.cli import main
from molrec_raw.record.explain import explain
from molrec_raw.zarr.explain import Explanation, Section
from molrec_raw.zarr.zipstore import write_zip

CORPUS = default_corpus()


def case(name: str, form: str = "record.mrec") -> str:
    return str(CORPUS / name / form)


def sections(report: Explanation) -> List[Section]:
    out: List[Section] = []

    def walk(items: List[Section]) -> None:
        for s in items:
            out.append(s)
            walk(s.sections)
    walk(report.sections)
    return out


def part(report: Explanation, name: str, title: str = "", exact: bool = False) -> object:
    for s in sections(report):
        if (title == s.title) if exact else (title in s.title):
            for p in s.parts:
                if p.name == name:
                    return p
    raise AssertionError(f"no part {name!r} under {title!r}:\n{report.text()}")


# -- zarr.json -----------------------------------------------------------------------------------
def test_issue16_explain_zarr_json_fields_meanings_and_rules():
    report = explain(case("valid/traj-meta-fills"), "trajectory")
    assert report.kind == "group metadata" and report.target == "trajectory/zarr.json" and report.fault is None
    assert part(report, "nstep").rule == "trajectory#R3" and part(report, "nstep").value == 3
    assert part(report, "sequence_schema").rule == "trajectory#4"
    manifest = part(report, "molrec_raw_commit")
    assert "molrec_raw extra, ignored by other readers" in manifest.meaning and manifest.rule == "trajectory#10"
    array = explain(case("valid/precision-column"), "frame/atoms/x/zarr.json")
    assert array.kind == "array metadata"
    assert part(array, "data_type").value == "float64" and part(array, "data_type").rule == "zarr-v3-subset#8"
    assert part(array, "fill_value").rule == "zarr-v3-subset#3"
    assert part(array, "codecs[1]").value == {"name": "numcodecs.shuffle", "configuration": {"elementsize": 8}}
    assert part(array, "precision").rule == "frame-and-types#14.20"
    meta = explain(case("valid/meta-scalar-tags"), "frame")
    assert "tag u64" in part(meta, "id").meaning and part(meta, "_meta_types").rule == "frame-and-types#14.15"
    root = explain(case("valid/unknown-root-section"))
    assert part(root, "members", "node").value == ["frame", "future", "meta"]
    assert part(explain(case("valid/unknown-root-section"), "future"), "files", "node").value == ["notes.bin"]
    block = explain(case("valid/structural-shape"), "frame/grid")
    assert part(block, "count").rule == "frame-and-types#14.4"
    assert part(block, "structural_shape").value == [2, 2, 2]


def test_issue16_explain_zarr_json_of_another_writer():
    report = explain(case("valid/zarr-python-sharded"), "system/grid/field")
    assert part(report, "storage_transformers").value == []
    assert part(report, "codecs[0]").value == "sharding_indexed"
    assert part(report, "codecs[0].index_codecs[1]").value == {"name": "crc32c"}
    ext = explain(case("valid/zarr-extension-fields"), "frame/atoms/x")
    assert "must_understand: false" in part(ext, "x_vendor").meaning


# -- shards and chunks -----------------------------------------------------------------------------
def test_issue16_explain_a_trajectory_shard():
    """Index (where it lies, entries, the empty sentinel, checksum stored vs computed), unused
    gaps, each inner chunk through its codecs, decoded values."""
    report = explain(case("valid/traj-flushes"), "trajectory/atoms/x", chunk="0")
    assert report.kind == "shard" and report.target == "trajectory/atoms/x/c/0" and report.fault is None
    index = next(s for s in report.sections if s.title == "index")
    assert (index.offset, index.length) == (0, 255 * 16 + 4)
    entry = part(report, "entry [0]", "index")
    assert entry.offset == 0 and entry.length == 16 and set(entry.value) == {"offset", "nbytes"}
    empty = part(report, "entries [1]..[254]", "index")
    assert empty.value == "empty" and "2^64-1" in empty.meaning and empty.length == 254 * 16
    stored, computed = part(report, "crc32c stored", "crc32c"), part(report, "crc32c computed", "crc32c")
    assert stored.offset == 4080 and stored.value == computed.value
    assert not any(s.title == "written-rows stamp" for s in report.sections)
    gaps = [s for s in report.sections if s.title == "unused bytes"]
    assert gaps and gaps[0].offset == 4096  # superseded inner chunks of the earlier flushes
    inner = next(s for s in report.sections if s.title == "inner chunk [0]")
    assert [s.title.split()[0] for s in inner.sections] == ["crc32c", "zstd", "bytes", "decoded"]
    assert part(report, "content size", "zstd").value == 16384
    assert part(report, "window size", "zstd").value == 16384
    assert part(report, "content checksum", "zstd").value is False
    assert part(report, "first values", "decoded").value == [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0]
    by_key = explain(case("valid/traj-flushes"), "trajectory/atoms/x/c/0")
    assert by_key.to_json() == report.to_json()


def test_issue16_explain_chunk_codec_stages():
    gz = explain(case("valid/zarr-gzip-9"), "frame/atoms/x", chunk="c/0")
    assert part(gz, "magic", "gzip").value == "1f 8b" and part(gz, "mtime", "gzip").value == 0
    assert part(gz, "extra flags", "gzip").value == 2 and part(gz, "isize", "gzip").value == 40
    big = explain(case("valid/zarr-big-endian"), "frame/atoms/x", chunk="0")
    assert part(big, "endian", "bytes").value == "big"
    shuffled = explain(case("valid/precision-column"), "frame/atoms/x", chunk="0")
    assert part(shuffled, "element size", "numcodecs.shuffle").value == 8
    nosize = explain(case("valid/zarr-zstd-no-content-size"), "frame/atoms/x", chunk="0")
    assert part(nosize, "content size", "zstd").value == "absent"
    checksum = explain(case("valid/zarr-zstd-checksum"), "frame/atoms/x", chunk="0")
    assert part(checksum, "content checksum", "zstd").value is True
    text = explain(case("valid/dtype-string"), "frame/atoms/v", chunk="0")
    assert part(text, "count", "vlen-utf8").value == 6
    missing = explain(case("valid/zarr-missing-chunks"), "frame/atoms/zero", chunk="0")
    assert missing.size is None and missing.sections[1].title == "not stored"
    morton = explain(case("valid/zarr-python-sharded"), "system/grid/field", chunk="1.0")
    assert morton.kind == "shard" and morton.fault is None
    assert next(s for s in morton.sections if s.title == "index").offset == morton.size - 4 * 16 - 4  # at the end


def test_issue16_explain_shard_of_a_2d_array_with_index_at_start():
    report = explain(case("valid/zarr-shards-index-start"), "frame/atoms/m", chunk="1.0")
    assert report.fault is None and part(report, "entry [0, 0]", "index").offset == 0
    assert not any(s.title == "index page padding" for s in report.sections)  # another writer's layout


# -- zip archives ----------------------------------------------------------------------------------
def test_issue16_explain_a_zip():
    path = case("valid/box-cubic", "record.mrec.zip")
    report = explain(path)
    assert report.kind == "zip archive" and report.size == os.path.getsize(path) and report.fault is None
    titles = [s.title for s in report.sections]
    assert titles[0] == "entries" and titles[-1] == "end of central directory" and "central directory" in titles
    eocd = report.sections[-1]
    assert eocd.offset + eocd.length == report.size
    central = next(s for s in report.sections if s.title == "central directory")
    names = [s.title.split(": ", 1)[1] for s in central.sections]
    assert names == sorted(names) and "frame/box/vectors/c/0/0" in names
    local = next(s for s in report.sections if s.title == "entries").sections[0]
    assert local.offset == 0 and part(report, "method", local.title).value == 0
    crc = part(report, "crc32 computed", local.title)
    assert crc.value == part(report, "crc32", local.title).value and "matches" in crc.meaning


def test_issue16_explain_a_zip64_archive(tmp_path):
    rec = Path(case("valid/dtype-i8"))
    files = sorted((p.relative_to(rec).as_posix(), p) for p in rec.rglob("*") if p.is_file())
    target = tmp_path / "z64.mrec.zip"
    write_zip(target, files, force_zip64=True)
    report = explain(str(target))
    titles = [s.title for s in report.sections]
    assert titles[-3:] == ["ZIP64 end of central directory", "ZIP64 end of central directory locator",
                           "end of central directory"], titles
    assert report.fault is None and part(report, "entries", "end of central directory", exact=True).value == 0xFFFF
    assert part(report, "entries", "ZIP64 end of central directory", exact=True).value == len(files)
    assert any(p.name == "ZIP64 values" for s in sections(report) for p in s.parts)


# -- a trajectory frame ----------------------------------------------------------------------------
def test_issue16_explain_frame_of_a_regular_trajectory():
    report = explain(case("valid/traj-regular"), frame=2)
    assert report.kind == "frame resolution" and report.fault is None
    assert part(report, "nstep", "commit marker").value == 4
    assert part(report, "step", "step and time").meaning == "step_progression: 0 + 2 * 10"
    assert part(report, "time", "step and time").value == 1.0
    elision = part(report, "elision", "block atoms")
    assert elision.value == {"uniform_rows": 3, "dense_updates": True, "updates": 4} and elision.rule == "trajectory#R9"
    assert part(report, "rows", "block atoms").value == [6, 9]
    where = part(report, "rows 6:9", "column x").value
    assert where["key"] == "trajectory/atoms/x/c/0" and where["inner chunk"] == [0] and where["bytes"][0] == 4096
    assert part(report, "form", "cell").value == "attributes"
    assert part(report, "block atoms", "resolved frame").value["first values"]["x"] == [1.0, 3.0, 0.0]


def test_issue16_explain_frame_of_a_ragged_trajectory_with_cell_and_meta():
    ragged = explain(case("valid/traj-ragged"), frame=-1)
    assert part(ragged, "frame", "commit marker").value == 3
    assert part(ragged, "step_index", "block atoms").value == [0, 1, 2, 3]
    assert part(ragged, "offset", "block atoms").value == [0, 3, 8, 12, 16]
    assert part(ragged, "rows", "block atoms").value == [12, 16]
    topology = explain(case("valid/traj-topology-change"), frame=1)
    carried = part(topology, "rows", "block bonds")
    assert carried.value == [0, 3] and "carried forward from frame 0" in carried.meaning
    cell = explain(case("valid/traj-cell-change"), frame=2)
    assert "the last at or before frame 2: update 1" in part(cell, "form", "cell").meaning
    assert part(cell, "rows 1:2", "box/vectors").value["key"] == "trajectory/box/vectors/c/0/0/0"
    fills = explain(case("valid/traj-meta-fills"), frame=1)
    assert part(fills, "rows 1:2", "temp (f64)").value["key"] == "trajectory/meta/temp/c/0"
    arrays = explain(case("valid/traj-step-time-arrays"), frame=2)
    assert part(arrays, "step", "step and time").value == 7 and "row 2 of trajectory/step" in \
        part(arrays, "step", "step and time").meaning
    late = explain(case("valid/traj-block-late"), frame=1)
    assert "absent at frame 1" in next(s for s in late.sections if s.title == "block ions").note


def test_issue16_explain_frame_over_a_torn_shard_index_stops_there():
    """Opening the trajectory checks each tail shard's index, so the reader stops at the torn
    index: the frame explanation shows that shard up to its fault."""
    report = explain(case("invalid/shard-index-torn"), frame=1)
    assert report.fault is not None and report.fault.rule == "zarr-v3-subset#5.5" and report.fault.offset == 4080
    assert report.sections[0].title == "shard trajectory/atoms/x/c/0"
    assert part(report, "crc32c stored", "crc32c").offset == 4080


def test_issue16_explain_frame_past_the_marker_is_a_fault():
    report = explain(case("valid/traj-uncommitted-tail"), frame=3)
    assert report.fault is not None and "3 committed frame(s)" in report.fault.message


# -- molrec_raw's extras: checkpoint, manifest, WAL ---------------------------------------------------
def test_issue16_explain_checkpoint_and_wal(tmp_path):
    schema = mr.SequenceSchema().declare_block("atoms").declare_column("atoms", "x", "f64")
    writer = mr.MrecWriter(tmp_path / "live.mrec", schema)
    try:
        writer.append(mr.Frame({}, {"atoms": mr.Block({"x": np.arange(3.0)})}))
        writer.flush()
        report = explain(str(tmp_path / "live.mrec"), "trajectory/__molrec_checkpoint")
    finally:
        writer.close()
    assert report.kind == "checkpoint" and report.fault is None
    assert "ignored by other readers" in report.sections[0].note
    assert part(report, "magic line", "header").value == "MOLREC-RAW SNAPSHOT 1\n"
    assert part(report, "crc32c stored", "header").value == part(report, "crc32c computed", "header").value
    assert part(report, "magic", "zstd frame").offset == 26
    assert any(p.name == "trajectory/zarr.json" for s in report.sections for p in s.parts)
    wal = explain(case("valid/metrics-wal-tail-torn"), "metrics/metrics.jsonl")
    lines = wal.sections[0].parts
    assert [p.meaning.split(" ")[0] for p in lines[:3]] == ["densified", "densified", "tail"]
    assert lines[-1].rule == "README#decision-9" and "torn" in lines[-1].meaning


# -- hostile inputs: the first fault, with its byte offset ---------------------------------------------
@pytest.mark.parametrize("name, node, chunk, offset, rule", [
    ("invalid/shard-index-torn", "trajectory/atoms/x", "0", 4080, "zarr-v3-subset#5.5"),
    ("invalid/shard-index-past-end", "trajectory/atoms/x", "0", 0, "zarr-v3-subset#7"),
    ("invalid/chunk-crc-mismatch", "frame/atoms/x", "0", 24, "zarr-v3-subset#5.5"),
    ("invalid/zstd-lying-size", "frame/atoms/x", "0", 0, "zarr-v3-subset#5.4"),
    ("invalid/gzip-truncated", "frame/bonds/atomi", "0", 0, "zarr-v3-subset#5.3"),
    ("invalid/zarr-json-syntax", "frame/atoms/x", None, 54, "zarr-v3-subset#2"),
    ("invalid/unknown-codec", "frame/atoms/x", None, None, "zarr-v3-subset#5"),
])
def test_issue16_explain_stops_at_the_first_fault(name, node, chunk, offset, rule):
    report = explain(case(name), node, chunk=chunk)
    assert report.fault is not None and report.fault.rule == rule and report.fault.offset == offset, report.text()
    assert "FAULT" in report.text() and f"[{rule}]" in report.text()


@pytest.mark.parametrize("name, where", [
    ("invalid/zip-lying-size", "central"), ("invalid/zip-dotdot-name", "name"), ("invalid/zip-absolute-name", "name"),
    ("invalid/zip-crc-mismatch", "data"), ("invalid/zip-no-end-record", "end"),
    ("invalid/zip-central-directory-outside", "eocd"), ("invalid/zip-compressed-entry", "central"),
])
def test_issue16_explain_hostile_zips(name, where):
    path = case(name, "record.mrec.zip")
    data = Path(path).read_bytes()
    report = explain(path)
    fault = report.fault
    assert fault is not None and fault.rule == "zarr-v3-subset#9.2" and fault.offset is not None, report.text()
    if where == "name":
        assert data[fault.offset:fault.offset + 14] in (b"../a/zarr.json", b"/eta/zarr.json")
    elif where == "central":
        assert data[fault.offset - 24:fault.offset - 20] == b"PK\x01\x02" or \
            data[fault.offset - 10:fault.offset - 6] == b"PK\x01\x02"
    elif where == "data":
        assert data[fault.offset - 44:fault.offset - 40] == b"PK\x03\x04"  # just after meta/zarr.json's header
    elif where == "end":
        assert fault.offset == len(data)
    else:
        assert data[fault.offset - 16:fault.offset - 12] == b"PK\x05\x06"
    if where != "end":  # what was parsed before the fault is shown
        assert report.sections
    if where in ("name", "end", "eocd"):  # the archive does not open: asking for a node explains the archive
        also = explain(path, "frame/atoms/x")
        assert also.kind == "zip archive" and also.fault == fault
    else:  # it opens: the faulty entry is unreadable where it is asked for
        node, chunk = ("frame/atoms/x", "0") if where == "central" and "lying" in name else ("meta", None)
        also = explain(path, node, chunk=chunk)
        assert also.fault is not None and also.fault.rule == "zarr-v3-subset#9.2", also.text()


# -- read-only, never writes ---------------------------------------------------------------------------
def _snapshot(root: Path) -> Dict[str, Tuple[int, int, bytes]]:
    return {p.relative_to(root).as_posix(): (p.stat().st_mode, p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else b"")
            for p in sorted(root.rglob("*"))}


def test_issue16_explain_writes_nothing_and_works_on_a_read_only_copy(tmp_path):
    copy = tmp_path / "ro"
    for name in ("valid/traj-flushes", "valid/metrics-wal-tail-torn", "invalid/zip-dotdot-name"):
        shutil.copytree(CORPUS / name, copy / name)
    schema = mr.SequenceSchema().declare_block("atoms").declare_column("atoms", "x", "f64")
    with mr.MrecWriter(copy / "live.mrec", schema) as writer:  # then a checkpoint left behind by a crash
        writer.append(mr.Frame({}, {"atoms": mr.Block({"x": np.arange(3.0)})}))
        writer.flush()
        shutil.copytree(copy / "live.mrec", copy / "crashed.mrec")
    for p in sorted(copy.rglob("*"), reverse=True):
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    copy.chmod(0o555)
    before = _snapshot(copy)
    try:
        runs = [(copy / "valid/traj-flushes/record.mrec", dict()),
                (copy / "valid/traj-flushes/record.mrec", dict(node="trajectory")),
                (copy / "valid/traj-flushes/record.mrec", dict(node="trajectory/atoms/x", chunk="0")),
                (copy / "valid/traj-flushes/record.mrec", dict(frame=4)),
                (copy / "valid/traj-flushes/record.mrec.zip", dict()),
                (copy / "valid/traj-flushes/record.mrec.zip", dict(frame=1)),
                (copy / "valid/traj-flushes/record.mrec.zip", dict(node="trajectory/atoms/x/c/0")),
                (copy / "valid/metrics-wal-tail-torn/record.mrec", dict(node="metrics/metrics.jsonl")),
                (copy / "invalid/zip-dotdot-name/record.mrec.zip", dict()),
                (copy / "crashed.mrec", dict(node="trajectory/__molrec_checkpoint")),
                (copy / "crashed.mrec", dict(frame=0))]
        for path, options in runs:
            report = explain(str(path), **options)
            assert report.sections
            assert main(["explain", str(path), *([options["node"]] if "node" in options else []),
                         *(["--chunk", options["chunk"]] if "chunk" in options else []),
                         *(["--frame", str(options["frame"])] if "frame" in options else []),
                         "--json"]) == (1 if report.fault else 0)  # issue 24: a fault exits 1
        assert _snapshot(copy) == before
    finally:
        for p in [copy, *copy.rglob("*")]:
            p.chmod(p.stat().st_mode | stat.S_IWUSR)


# -- the command line ------------------------------------------------------------------------------------
def test_issue16_explain_json_is_the_documented_document(capsys):
    assert main(["explain", case("valid/traj-regular"), "trajectory/atoms/x", "--chunk", "0", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"molrec_raw_explain", "path", "target", "kind", "size", "sections", "fault"}
    assert doc["molrec_raw_explain"] == 1 and doc["kind"] == "shard" and doc["fault"] is None

    def check(section):
        assert set(section) == {"title", "offset", "length", "note", "parts", "sections"}
        for p in section["parts"]:
            assert set(p) == {"name", "value", "meaning", "offset", "length", "rule"}
        for s in section["sections"]:
            check(s)
    for s in doc["sections"]:
        check(s)
    assert main(["explain", case("invalid/shard-index-torn"), "trajectory/atoms/x", "--chunk", "0", "--json"]) == 1
    fault = json.loads(capsys.readouterr().out)["fault"]
    assert fault == {"message": fault["message"], "offset": 4080, "rule": "zarr-v3-subset#5.5",
                     "error": "ChecksumMismatchError"}


def test_issue16_explain_text_and_usage_errors(capsys):
    assert main(["explain", case("valid/traj-regular"), "--frame", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("frame resolution trajectory frame 1 in ") and "elision" in out
    assert main(["explain", case("valid/traj-regular"), "nothing/here"]) == 2
    assert "nothing at 'nothing/here'" in capsys.readouterr().err
    assert main(["explain", case("valid/traj-regular"), "trajectory/atoms/x", "--chunk", "0.0"]) == 2
    assert "give 1 grid coordinate(s)" in capsys.readouterr().err


def test_issue16_inspect_of_a_missing_path_says_no_such_file(tmp_path, capsys):
    for command in ("inspect", "validate", "cat", "dump", "explain"):
        assert main([command, str(tmp_path / "nothing.mrec")]) == 2
        err = capsys.readouterr().err
        assert "no such file or directory" in err and "no group or array" not in err, (command, err)


def test_issue16_dump_prints_the_canonical_json(capsys):
    assert main(["dump", case("valid/dtype-c64", "record.mrec.zip")]) == 0
    assert capsys.readouterr().out.encode() == (CORPUS / "valid/dtype-c64/expected.json").read_bytes()
    assert main(["dump", case("invalid/offset-decreasing")]) == 2
    assert "rule=trajectory#R8" in capsys.readouterr().err
