"""The command line on a collection (``*.mrec.lmdb``, issue 22): ``inspect``, ``validate``,
``explain`` (keys, frame-bytes headers, buffer offsets) and ``dump``; bad files give one line
on stderr and exit 2, never a traceback."""
from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import lmdb
import numpy as np
import pytest

import molrec_raw as mr
from collection_helpers import (ATOMS_SCHEMA, UNITS, atoms_frame, element_system, hand_index, hand_meta, molecule,
                                u64be, write_lmdb, xyzf_schema)
from molrec_raw.cli import main


@pytest.fixture
def written(path: Path) -> Path:
    with mr.CollectionWriter(path, units=UNITS, schema=xyzf_schema(), meta={"source": "test"}) as w:
        for r in range(5):
            w.add_record(**molecule(r, n=2 + r, frames=1 + r % 3))
    return path


def _hand_collection(path: Path, frame1: bytes = b"", extra: dict = None) -> Path:
    """Two records of two frames each, written by hand; ``frame1`` replaces global frame 1."""
    items = {b"meta": hand_meta(2, 4, ATOMS_SCHEMA), b"index": hand_index([2, 2], [2, 2], [True, True])}
    for r in range(2):
        items[u64be(b"r", r)] = b"{}"
        items[u64be(b"s", r)] = element_system(["C", "H"])
        for k in range(2):
            items[u64be(b"f", 2 * r + k)] = atoms_frame([0.0 + k, 1.0], [0.0, 0.0], [0.0, 0.0], -1.0 * k, k)
    if frame1:
        items[u64be(b"f", 1)] = frame1
    items.update(extra or {})
    return write_lmdb(path, items)


def test_issue22_inspect_shows_counts_units_declaration_and_keys(written: Path, capsys) -> None:
    assert main(["inspect", str(written)]) == 0
    text = capsys.readouterr().out
    assert "records: 5 (5 with a system, 5 with a trajectory); frames: 9" in text
    assert "units: length=angstrom, energy=eV, force=eV/angstrom" in text and "document keys: source" in text
    assert main(["inspect", str(written), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["n_records"] == 5 and doc["n_frames"] == 9 and doc["layout_version"] == 1
    assert {k: v["count"] for k, v in doc["keys"].items()} == {"f‖u64": 9, "index": 1, "meta": 1, "r‖u64": 5,
                                                              "s‖u64": 5}
    assert doc["blocks"] == {"atoms": sorted(["x", "y", "z", "fx", "fy", "fz"])}
    assert set(doc["index_columns"]) == {"n", "tag"}
    assert main(["inspect", str(written), "--follow"]) == 2  # a collection is complete once it exists


def test_issue22_validate_clean_and_each_broken_record_by_rule(written: Path, tmp_path: Path, capsys) -> None:
    assert main(["validate", str(written)]) == 0
    assert capsys.readouterr().out.strip() == f"{written}: valid"
    bad = _hand_collection(tmp_path / "bad.mrec.lmdb", frame1=b"XRF1" + bytes(60),
                           extra={u64be(b"s", 7): element_system(["C"]), b"junk": b"x"})
    assert main(["validate", str(bad)]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    rules = [line.split("\t")[0] for line in lines]
    assert rules == ["lmdb#L9", "lmdb#L2", "lmdb#L2"], lines  # record 0's frame 1; then in key order: junk, s‖7
    assert "unknown magic" in lines[0] and "'junk'" in lines[1] and "s‖7" in lines[2]
    # a row count that breaks the system's (collection#C9) is found where the frames are joined
    mismatched = _hand_collection(tmp_path / "c9.mrec.lmdb",
                                  frame1=atoms_frame([0.0, 1.0, 2.0], [0.0] * 3, [0.0] * 3, -1.0, 1))
    assert main(["validate", str(mismatched)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "collection#C9\t/records/0/trajectory/atoms\ttrajectory block 'atoms' has 3 rows, the system block of that "
        "name 2: they are aligned 1:1 by row order"]


def test_issue22_validate_without_meta_names_lmdb_L3(tmp_path: Path, capsys) -> None:
    path = write_lmdb(tmp_path / "torn.mrec.lmdb", {u64be(b"r", 0): b"{}"})
    assert main(["validate", str(path)]) == 1
    assert capsys.readouterr().out.startswith("lmdb#L3\t")


def test_issue22_explain_lists_keys_and_every_buffer_offset(written: Path, capsys) -> None:
    assert main(["explain", str(written)]) == 0
    text = capsys.readouterr().out
    assert "f‖8 = " in text and "s‖4 = " in text and "meta = " in text
    assert main(["explain", str(written), "f/3", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "frame bytes (MRF1)" and doc["fault"] is None
    prefix, header, padding, payload = doc["sections"]
    assert [p["name"] for p in prefix["parts"]] == ["magic", "header_length"] and prefix["parts"][0]["value"] == "MRF1"
    length = prefix["parts"][1]["value"]
    assert header["offset"] == 8 and header["length"] == length
    assert payload["offset"] == (8 + length + 7) // 8 * 8 == padding["offset"] + padding["length"]
    # every buffer the header names, at its absolute offset, holding what the reader reads
    with lmdb.open(str(written), subdir=False, readonly=True, lock=False) as env, env.begin() as txn:
        value = txn.get(u64be(b"f", 3))
    (n_header,) = struct.unpack_from("<I", value, 4)
    entry = json.loads(value[8:8 + n_header])["blocks"]["atoms"]["columns"]
    buffers = {p["name"]: (p["offset"], p["length"]) for p in payload["parts"] if p["name"].startswith("atoms/")}
    assert set(buffers) == {f"atoms/{c}" for c in entry}
    c = mr.read_collection(written)
    record, k = 2, 0  # frames: record 0 has 1, record 1 has 2, record 2's first is global 3
    assert int(c.binding_index()["first_frame"][record]) == 3
    for column, (offset, size) in buffers.items():
        name = column.split("/")[1]
        assert offset == payload["offset"] + entry[name]["offset"] and offset % 8 == 0
        stored = np.frombuffer(value, "<f8", count=size // 8, offset=offset)
        np.testing.assert_array_equal(stored, c[record].trajectory[k].blocks["atoms"].columns[name])
    c.close()
    assert main(["explain", str(written), "s/1"]) == 0
    assert 'values = ["C", "H", "O"]' in capsys.readouterr().out
    assert main(["explain", str(written), "meta"]) == 0
    assert "layout_version = 1" in capsys.readouterr().out


def test_issue22_explain_stops_at_the_first_refusal_with_its_byte(tmp_path: Path, capsys) -> None:
    bad = _hand_collection(tmp_path / "bad.mrec.lmdb", frame1=b"XRF1" + bytes(60))
    assert main(["explain", str(bad), "f/1"]) == 1
    out = capsys.readouterr().out
    assert "FAULT at byte 0: unknown magic" in out and "[lmdb#L9]" in out
    text = atoms_frame([0.0, 1.0], [0.0, 0.0], [0.0, 0.0], 0.0, 1)
    (n,) = struct.unpack_from("<I", text, 4)
    unaligned = text[:8] + text[8:8 + n].replace(b'"offset": 16', b'"offset": 12') + text[8 + n:]
    bad2 = _hand_collection(tmp_path / "bad2.mrec.lmdb", frame1=unaligned)
    assert main(["explain", str(bad2), "f/1", "--json"]) == 1
    fault = json.loads(capsys.readouterr().out)["fault"]
    assert fault["rule"] == "lmdb#L10" and "8" in fault["message"]
    assert main(["explain", str(bad2), "f/9"]) == 2
    assert "no key f‖9" in capsys.readouterr().err
    assert main(["explain", str(bad2), "f/1", "--frame", "0"]) == 2


def test_issue22_dump_is_the_canonical_document_of_what_the_reader_reads(written: Path, capsys) -> None:
    assert main(["dump", str(written)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["molrec_dump"] == 1 and doc["collection"]["units"] == UNITS and len(doc["records"]) == 5
    c = mr.read_collection(written)
    for r, rec in enumerate(doc["records"]):
        assert rec["meta"] == {"source": f"mol-{r}"}
        assert rec["trajectory"]["nstep"] == len(c[r].trajectory)
        for k, frame in enumerate(rec["trajectory"]["frames"]):
            assert frame["blocks"]["atoms"]["columns"]["x"]["values"] == \
                c[r].trajectory[k].blocks["atoms"].columns["x"].tolist()
        assert rec["system"]["blocks"]["atoms"]["columns"]["element"]["values"] == \
            c[r].system.blocks["atoms"].columns["element"].tolist()
    assert doc["index"]["columns"]["n"]["values"] == [2, 3, 4, 5, 6]
    c.close()


@pytest.mark.parametrize("command", ["inspect", "validate", "explain", "dump"])
def test_issue22_bad_files_one_line_exit_2_no_traceback(tmp_path: Path, command: str) -> None:
    garbage = tmp_path / "garbage.mrec.lmdb"
    garbage.write_bytes(b"not an lmdb file" * 512)
    missing = tmp_path / "missing.mrec.lmdb"
    no_meta = write_lmdb(tmp_path / "torn.mrec.lmdb", {u64be(b"r", 0): b"{}"})
    cases = [garbage, missing] + ([] if command in ("validate", "explain") else [no_meta])
    for target in cases:
        run = subprocess.run([sys.executable, "-m", "molrec_raw", command, str(target)], capture_output=True,
                             text=True, timeout=120)
        assert run.returncode == 2, (target, run.stdout, run.stderr)
        assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr, run.stderr
        assert run.stderr.startswith(f"molrec-raw {command}: error: ") and "lmdb#L" in run.stderr


def test_issue22_a_missing_lmdb_extra_is_one_line_naming_it(written: Path, tmp_path: Path) -> None:
    """Without py-lmdb (hidden from a subprocess) a collection command names the extra."""
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "lmdb.py").write_text("raise ImportError('no lmdb here')\n")
    import os
    env = dict(os.environ, PYTHONPATH=f"{hide}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    run = subprocess.run([sys.executable, "-m", "molrec_raw", "inspect", str(written)], capture_output=True,
                         text=True, timeout=120, env=env)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert "pip install 'molrec-raw[lmdb]'" in run.stderr and len(run.stderr.strip().splitlines()) == 1
