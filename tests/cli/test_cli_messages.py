"""Messages that say what to do (issue 36, item 4; safety#messages): every message starts
with the path it is about; a cut-short ``*.mrec.zip`` says it may be truncated or an
incomplete copy; a missing ``*.mrec.lmdb`` is "no such file"; ``repair`` of a collection
names it; ``convert --precision`` states its unit; an unknown input format is answered with
the formats by name; ``pack`` and ``unpack`` print paths as given.

Each test failed before issue 36 (the message it asserts was not said)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Tuple

import pytest

from molrec_raw.cli import main
from molrec_raw.demo import write_demo
from molrec_raw.errors import CorruptDataError
from molrec_raw.record.pack import pack_mrec_zip
from molrec_raw.zarr import ZipStore

CUT_SHORT = "the file may be truncated or an incomplete copy"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> Tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo(tmp_path_factory.mktemp("messages") / "demo.mrec", frames=4, molecules=2)


@pytest.fixture
def cut_zip(demo: Path, tmp_path: Path) -> Path:
    """A packed record cut in its middle: an interrupted download or copy."""
    packed = pack_mrec_zip(_copy(demo, tmp_path))
    data = packed.read_bytes()
    cut = tmp_path / "cut.mrec.zip"
    cut.write_bytes(data[: len(data) // 2])
    return cut


def _copy(demo: Path, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(demo, tmp_path / "demo.mrec"))


def test_safety_messages_a_cut_short_zip_names_itself_first_and_says_it_may_be_an_incomplete_copy(
        cut_zip: Path, tmp_path: Path) -> None:
    with pytest.raises(CorruptDataError) as caught:
        ZipStore(cut_zip)
    assert caught.value.message.startswith(f"{cut_zip}: ") and CUT_SHORT in caught.value.message
    assert caught.value.rule == "zarr-v3-subset#9.2"


@pytest.mark.parametrize("command", ["cat", "inspect", "validate", "dump", "unpack"])
def test_safety_messages_every_command_says_a_cut_short_zip_may_be_truncated(
        capsys: pytest.CaptureFixture[str], cut_zip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        command: str) -> None:
    monkeypatch.chdir(cut_zip.parent)
    argv = [command, cut_zip.name] + (["out.mrec"] if command == "unpack" else [])
    code, _, err = run(capsys, *argv)
    assert code == 2 and err.startswith(f"molrec-raw {command}: error: {cut_zip.name}: "), err
    assert CUT_SHORT in err and err.count("\n") == 1, err


@pytest.mark.parametrize("command", ["cat", "metrics", "plot", "pack", "repair"])
def test_safety_messages_a_missing_collection_is_no_such_file(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str) -> None:
    missing = tmp_path / "nothere.mrec.lmdb"
    code, _, err = run(capsys, command, str(missing))
    assert code == 2 and err.startswith(f"molrec-raw {command}: error: {missing}: no such file or directory"), err
    assert "is a collection" not in err


def test_safety_messages_repair_of_a_collection_names_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    train = tmp_path / "train.mrec.lmdb"
    train.write_bytes(b"\0" * 4096)  # decided by the name (lmdb#L1): what it holds does not matter here
    code, _, err = run(capsys, "repair", str(train))
    assert code == 2 and err.startswith(f"molrec-raw repair: error: {train}: repair restores a record"), err
    assert "molrec-raw validate" in err


def test_safety_messages_pack_and_unpack_print_paths_as_given(
        capsys: pytest.CaptureFixture[str], demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _copy(demo, tmp_path)
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "pack", "demo.mrec")
    assert code == 0 and out == "demo.mrec.zip\n", out
    code, out, _ = run(capsys, "unpack", "demo.mrec.zip", "back.mrec")
    assert code == 0 and out == "back.mrec\n", out  # not /tmp/.../back.mrec
    assert (tmp_path / "back.mrec" / "zarr.json").is_file()


# Messages from the sweep of the command line's raise sites: each names the path first.
SWEEP = [
    (["cat", "{demo}", "--block", "nope"], "{demo}: "),
    (["cat", "{demo}", "--frame", "0", "--block", "nope"], "{demo}: the frame has no block 'nope'"),
    (["cat", "{demo}", "--frame", "99"], "{demo} has 4 committed frame(s), no frame 99"),
    (["metrics", "{tmp}/none.mlp.jsonl"], "{tmp}/none.mlp.jsonl: "),
    (["plot", "{demo}", "--series", "nope", "--vega", "{tmp}/p.vl.json"], "{demo}: unknown series 'nope'"),
    (["pack", "{demo}"], "{demo}.zip exists; refusing to overwrite it"),
    (["convert", "{demo}", "{demo}"], "{demo}: refusing to convert"),
    (["convert", "{demo}", "{tmp}/x.mrec", "--stride", "0"], "{demo}: --stride"),
    (["convert", "{demo}", "{tmp}/x.mrec.lmdb"], "{demo}: a record into a collection"),
    (["inspect", "{tmp}/no.mrec.lmdb", "--follow"], "{tmp}/no.mrec.lmdb: --follow follows a record"),
    (["cat", "{tmp}/run.zarr"], "{tmp}/run.zarr: a MolRec record is a '*.mrec' directory"),  # not twice
]


@pytest.mark.parametrize("argv, start", SWEEP, ids=[" ".join(a[:2] + a[3:4]) for a, _ in SWEEP])
def test_safety_messages_the_swept_messages_start_with_the_path(
        capsys: pytest.CaptureFixture[str], demo: Path, tmp_path: Path, argv: list, start: str) -> None:
    if argv[0] == "pack":
        pack_mrec_zip(demo, overwrite=True)
    if argv[0] == "convert" and not argv[2].endswith(".mrec.lmdb"):
        pytest.importorskip("MDAnalysis")
    fill = {"demo": str(demo), "tmp": str(tmp_path)}
    code, _, err = run(capsys, *(a.format(**fill) for a in argv))
    assert code == 2 and err.startswith(f"molrec-raw {argv[0]}: error: {start.format(**fill)}"), err


@pytest.fixture(scope="module")
def xyz(demo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("MDAnalysis")
    out = tmp_path_factory.mktemp("xyz") / "last.xyz"
    assert main(["convert", str(demo), str(out), "--frames", "-1"]) == 0
    return out


def test_safety_messages_convert_precision_states_its_unit(
        capsys: pytest.CaptureFixture[str], xyz: Path, tmp_path: Path) -> None:
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["convert", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--precision LENGTH record output: round positions to a grid of this step, in the record's length " \
           "unit (angstrom" in out, out
    code, _, err = run(capsys, "convert", str(xyz), str(tmp_path / "bad.mrec"), "--precision", "-1")
    assert code == 2 and err.startswith(f"molrec-raw convert: error: {tmp_path / 'bad.mrec'}: --precision -1.0 is "
                                        "not a positive length"), err
    assert "in the record's length unit (angstrom)" in err
    code, out, _ = run(capsys, "convert", str(xyz), str(tmp_path / "good.mrec"), "--precision", "0.001")
    assert code == 0 and "positions rounded to 0.001 angstrom" in out, out
    system = (tmp_path / "good.mrec" / "system" / "zarr.json").read_text()
    assert '"length": "angstrom"' in system  # the unit the message states is the record's


@pytest.mark.parametrize("where", ["extension", "--format"])
def test_safety_messages_an_unknown_input_format_lists_formats_by_name(
        capsys: pytest.CaptureFixture[str], xyz: Path, tmp_path: Path, where: str) -> None:
    if where == "extension":
        source = tmp_path / "run.foo"
        source.write_bytes(xyz.read_bytes())
        argv = ["convert", str(source), str(tmp_path / "o.mrec")]
    else:
        source = xyz
        argv = ["convert", str(xyz), str(tmp_path / "o.mrec"), "--format", "FOO", "--topology", str(xyz)]
    code, _, err = run(capsys, *argv)
    assert code == 2 and err.startswith(f"molrec-raw convert: error: {source}: MDAnalysis reads no "), err
    assert "dict_keys" not in err and "'FOO'" in err, err
    assert ", XYZ" in err and ("given by --format" if where == "--format" else "guessed from its extension") in err
    assert err.count("\n") == 1
