"""Truthful tools (issue 23 item 8; spec-notes/safety.md "Truthful tools").

``repair`` reports damage it cannot restore (exit 1, naming the chunks), its dry run never says
"sound" over chunks that fail their checksums; ``validate`` reports every damaged node; ``pack``
refuses a record that fails validation unless forced; a path that is not a record gets the same
one-line answer from every subcommand; every subcommand turns every failure into one line with
exit 2 (a driver of bad arguments and bad files asserts no traceback).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

import molrec_raw as mr
from molrec_raw.cli import main
from molrec_raw.errors import SpecViolationError

from safety_helpers import make_record

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from shard_bytes import end_of_chunks  # noqa: E402

SYSTEM_CHUNK = "system/atoms/mass/c/0"
SHARD = "trajectory/atoms/x/c/0"


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def damaged(tmp: Path) -> Path:
    """A closed record whose system column and trajectory shard both fail their checksums."""
    record = make_record(tmp / "d.mrec")
    _flip(record / SYSTEM_CHUNK, 3)
    _flip(record / SHARD, end_of_chunks((record / SHARD).read_bytes()) - 12)  # inside the last inner chunk
    return record


def test_safety_truthful_repair_reports_chunks_it_cannot_restore(tmp_path: Path, capsys: Any) -> None:
    record = damaged(tmp_path)
    report = mr.repair_mrec(record, dry_run=True)
    assert not report.sound and report.changes == []
    assert sorted(d.key for d in report.damaged) == sorted([SHARD, SYSTEM_CHUNK])
    assert all("crc32c" in d.message for d in report.damaged)
    for argv in (["repair", "--dry-run", str(record)], ["repair", str(record)]):
        capsys.readouterr()
        assert main(argv) == 1
        out = capsys.readouterr().out
        assert f"damaged: {SYSTEM_CHUNK}" in out and f"damaged: {SHARD}" in out, out
        assert "NOT sound: 2 damaged node(s) or chunk(s)" in out and ": sound" not in out


def test_safety_truthful_repair_says_sound_when_it_is(tmp_path: Path, capsys: Any) -> None:
    record = make_record(tmp_path / "r.mrec")
    assert main(["repair", "--dry-run", str(record)]) == 0
    assert capsys.readouterr().out.rstrip().endswith(": sound")
    assert mr.repair_mrec(record).damaged == []


def test_safety_truthful_validate_reports_every_damaged_node(tmp_path: Path, capsys: Any) -> None:
    """A damaged system column no longer hides a damaged trajectory shard (nor a second damaged
    column of the same section)."""
    record = damaged(tmp_path)
    mr.write_mrec_system(tmp_path / "two.mrec", mr.Frame({}, {"atoms": mr.Block({"a": np.ones(4), "b": np.ones(4)})}))
    for column in ("a", "b"):
        _flip(tmp_path / "two.mrec" / "system" / "atoms" / column / "c" / "0", 3)
    nodes = sorted(v.node for v in mr.validate(record))
    assert nodes == ["system/atoms/mass", "trajectory/atoms/x"], nodes
    assert sorted(v.node for v in mr.validate(tmp_path / "two.mrec")) == ["system/atoms/a", "system/atoms/b"]
    assert main(["validate", str(record)]) == 1
    out = capsys.readouterr().out
    assert SYSTEM_CHUNK in out and "trajectory/atoms/x" in out


def test_safety_truthful_pack_refuses_a_record_that_fails_validation_unless_forced(tmp_path: Path, capsys: Any) -> None:
    record = damaged(tmp_path)
    with pytest.raises(SpecViolationError, match=r"fails validation \(2 violation"):
        mr.pack_mrec_zip(record)
    assert not (tmp_path / "d.mrec.zip").exists()
    assert main(["pack", str(record)]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["pack", str(record), "--force"]) == 0
    assert (tmp_path / "d.mrec.zip").is_file()
    assert main(["pack", str(record)]) == 2  # an existing zip too: only with --force
    assert main(["pack", str(record), "--force"]) == 0


# -- every subcommand, bad arguments and bad files ------------------------------------------
def _bad_files(tmp: Path) -> Dict[str, Path]:
    (tmp / "x.json").write_text("{}")
    (tmp / "empty.txt").write_bytes(b"")
    (tmp / "plain").mkdir()
    (tmp / "bad.mrec.zip").write_bytes(b"PK\x03\x04 not really")
    broken = tmp / "broken.mrec"
    broken.mkdir()
    (broken / "zarr.json").write_text("{not json")
    return {"missing": tmp / "missing.mrec", "json": tmp / "x.json", "empty": tmp / "empty.txt",
            "plain-directory": tmp / "plain", "bad-zip": tmp / "bad.mrec.zip", "broken": broken}


_NOT_A_RECORD = {"missing": "no such file or directory", "json": "not a MolRec record (a file that is not a zip archive)",
                 "empty": "not a MolRec record (an empty file)",
                 "plain-directory": "not a MolRec record (a directory without a root zarr.json)"}
_READERS = ["inspect", "validate", "repair", "pack", "metrics", "plot", "cat", "dump"]


def _run(argv: List[str], cwd: Path) -> Tuple[int, str, str]:
    proc = subprocess.run([sys.executable, "-m", "molrec_raw", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=600)
    return proc.returncode, proc.stdout, proc.stderr


def test_safety_truthful_a_path_that_is_not_a_record_gets_one_answer_everywhere(tmp_path: Path, capsys: Any) -> None:
    """Every subcommand that reads a record (and unpack, for its archive) answers a path that is
    not one with the same line: ``<path>: no such file or directory`` or ``<path>: not a MolRec
    record (<why>); a record is ...`` — exit 2."""
    files = _bad_files(tmp_path)
    for what, answer in _NOT_A_RECORD.items():
        path = files[what]
        for command in _READERS + ["unpack"]:
            argv = [command, str(path)] + ([str(tmp_path / "out.mrec")] if command == "unpack" else [])
            capsys.readouterr()
            assert main(argv) == 2, argv
            assert capsys.readouterr().err.startswith(f"molrec-raw {command}: error: {path}: {answer}"), argv
        code, _, err = _run(["validate", str(path)], tmp_path)  # and through a real process
        assert code == 2 and err.startswith(f"molrec-raw validate: error: {path}: {answer}"), err


def _driver(tmp: Path) -> List[List[str]]:
    files = _bad_files(tmp)
    record = make_record(tmp / "r.mrec")
    mr.pack_mrec_zip(record)
    cases: List[List[str]] = []
    for path in files.values():
        for command in _READERS + ["explain"]:
            cases.append([command, str(path)])
        cases += [["unpack", str(path), str(tmp / "u.mrec")], ["convert", str(path), str(tmp / "o.xyz")]]
    r = str(record)
    cases += [
        ["demo", str(tmp / "plain")], ["demo", str(tmp / "x.json")], ["demo", str(tmp / "d.mrec"), "--frames", "0"],
        ["demo", r],
        ["inspect", r, "--follow", "--interval", "-1", "--timeout", "0.1"],
        ["validate"], ["repair"], ["pack"], ["unpack", str(tmp / "r.mrec.zip")],
        ["cat", r, "--frame", "99999"], ["cat", r, "--frame", "-99999"], ["cat", r, "--frame", "x"],
        ["cat", r, "--follow", "--interval", "-1", "--timeout", "0.1"],
        ["explain", r, "no/such/node"], ["explain", r, "trajectory/atoms/x", "--chunk", "abc"],
        ["metrics", r, "--follow", "--interval", "-1", "--timeout", "0.1"],
        ["plot", r, "--series", "nope"], ["plot", r, "--out", str(tmp / "x.txt")], ["plot", r, "--size", "0x0"],
        ["plot", r, "--size", "big"],
        ["pack", r], ["unpack", str(tmp / "r.mrec.zip"), r],
        ["convert", r, r], ["convert", r, str(tmp / "o.xyz"), "--stride", "0"],
        ["convert", r, str(tmp / "o.xyz"), "--frames", "a:b"], ["convert", r, str(tmp / "o.xyz"), "--format", "FOO"],
        ["convert", r, str(tmp / "o.unknownext")], ["convert", r, str(tmp / "o.mrec"), "--precision", "-1"],
        ["dump", r, "extra"], ["conform", "--reader", ""], ["conform", "--reader", "x {path}", "--corpus", str(tmp)],
        ["nosuchcommand"],
    ]
    return cases


def _in_process(argv: List[str], capsys: Any) -> Tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's usage errors
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _judge(argv: List[str], code: int, out: str, err: str) -> bool:
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("molrec-raw convert: warning")]
    expected = code == 2 or (argv[0] in ("validate", "repair") and code == 1) or (argv[0] == "explain" and code in (0, 1))
    one_line = code != 2 or len(lines) == 1 or "usage:" in err
    return expected and one_line and "Traceback" not in err + out and "internal error" not in err


def test_safety_truthful_every_subcommand_fails_in_one_line(tmp_path: Path, capsys: Any) -> None:
    """Each of demo inspect validate repair pack unpack convert metrics plot cat explain dump
    conform, driven with bad arguments and bad files: no traceback, no "internal error" (a bug
    caught by the last safety net), the failure on one line of stderr, exit 2 (validate/repair:
    1 for violations; explain explains a faulty file, exit 1 at the fault it shows).  Driven
    through ``main``, the console script's entry point; the issue's two tracebacks also in a
    real process."""
    failures = []
    commands = set()
    for argv in _driver(tmp_path):
        code, out, err = _in_process(argv, capsys)
        commands.add(argv[0])
        if not _judge(argv, code, out, err):
            failures.append((argv, code, err[-600:]))
    record = str(tmp_path / "r.mrec")
    for argv in (["cat", record, "--frame", "99999"], ["convert", record, str(tmp_path / "o.xyz"), "--format", "FOO"]):
        code, out, err = _run(argv, tmp_path)
        if not _judge(argv, code, out, err) or code != 2:
            failures.append((argv, code, err[-600:]))
    assert commands >= {"demo", "inspect", "validate", "repair", "pack", "unpack", "convert", "metrics", "plot",
                        "cat", "explain", "dump", "conform"}
    assert failures == [], failures
