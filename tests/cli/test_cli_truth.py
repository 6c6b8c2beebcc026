"""Tools that tell the truth on a core install (issue 28): each row of the issue's table.

A core install is simulated by running the command line in a subprocess whose optional
modules are made unimportable (``sys.modules[name] = None``, what Python does for a module
it cannot find) — the tool is not mocked, its extra is absent."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import List, Sequence, Tuple

import pytest

from molrec_raw.cli import main
from molrec_raw.demo import write_demo


def _prelude(blocked: Sequence[str]) -> str:
    blocks = "; ".join(f"sys.modules[{name!r}] = None" for name in blocked)
    return f"import sys; {blocks}; from molrec_raw.cli import main; raise SystemExit(main(sys.argv[1:]))"


def core(*argv: str, blocked: Sequence[str] = ("lmdb", "matplotlib"), cwd: Path) -> Tuple[int, str, str]:
    """``molrec-raw ARGV`` in a fresh interpreter without the ``blocked`` modules."""
    done = subprocess.run([sys.executable, "-c", _prelude(blocked), *argv], capture_output=True, text=True,
                          cwd=cwd, timeout=300)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo(tmp_path_factory.mktemp("truth") / "demo.mrec", frames=4, molecules=2)


def test_conform_skips_cases_needing_an_extra_and_exits_0(tmp_path: Path) -> None:
    """conformance: a collection case the dumper cannot read without py-lmdb is skipped,
    naming the extra; everything that ran passed, so the exit is 0."""
    dumper = " ".join(shlex.quote(w) for w in (sys.executable, "-c", _prelude(["lmdb", "matplotlib"]))) + \
        " dump {path}"
    status, out, err = core("conform", "--reader", dumper, "--case", "valid/collection-basic",
                            "--case", "invalid/collection-no-meta", "--case", "valid/dtype-i8", "--verbose",
                            cwd=tmp_path)
    assert status == 0, out + err
    assert re.search(r"SKIP  valid/collection-basic  collection\.mrec\.lmdb  .*\[lmdb\]", out)
    assert re.search(r"SKIP  invalid/collection-no-meta", out)
    assert "2/2 passed" in out and "2 skipped" in out and "pip install 'molrec-raw[lmdb]'" in out
    assert "FAIL" not in out


def test_cat_of_a_collection_names_collections(tmp_path: Path) -> None:
    train = tmp_path / "train.mrec.lmdb"
    train.write_bytes(b"\0" * 8192)  # what it holds does not matter: its name says what it is
    for blocked in (("lmdb", "matplotlib"), ("matplotlib",)):
        status, _, err = core("cat", str(train), cwd=tmp_path, blocked=blocked)
        assert status == 2 and "is a collection (.mrec.lmdb, lmdb#L1), not a record" in err, err
        assert "not a zip archive" not in err and "molrec-raw inspect" in err
    for command in ("metrics", "plot", "pack"):
        assert main([command, str(train)]) == 2
    status, _, err = core("inspect", str(train), cwd=tmp_path)  # a core install: names collections and the extra
    assert status == 2 and "collections (*.mrec.lmdb) need py-lmdb: pip install 'molrec-raw[lmdb]'" in err, err


def test_plot_names_a_missing_path_before_matplotlib(tmp_path: Path) -> None:
    status, _, err = core("plot", str(tmp_path / "nosuch.mrec"), cwd=tmp_path)
    assert status == 2 and "nosuch.mrec: no such file or directory" in err, err
    assert "matplotlib" not in err


def test_plot_without_matplotlib_names_the_extra(demo: Path, tmp_path: Path) -> None:
    status, _, err = core("plot", str(demo), "--out", str(tmp_path / "p.png"), cwd=tmp_path)
    assert status == 2 and "pip install 'molrec-raw[plot]'" in err, err


def _zip_with(tmp_path: Path, demo: Path, name: str, replace: bytes) -> Path:
    archive = tmp_path / "bad.mrec.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as z:
        for f in sorted(p for p in demo.rglob("*") if p.is_file()):
            key = f.relative_to(demo).as_posix()
            z.writestr(key, replace if key == name else f.read_bytes())
    return archive


@pytest.mark.parametrize("entry", ["zarr.json", "system/zarr.json", "trajectory/atoms/x/zarr.json"])
def test_unpack_refuses_a_zarr_json_that_is_not_json(demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     entry: str) -> None:
    """trajectory#15: unpack checks the metadata of what it unpacks, naming the entry;
    nothing is written."""
    archive = _zip_with(tmp_path, demo, entry, b"{not json")
    dest = tmp_path / "out.mrec"
    assert main(["unpack", str(archive), str(dest)]) == 2
    err = capsys.readouterr().err
    assert f"key={entry}" in err and "JSON" in err, err
    assert not dest.exists()


def test_unpack_refuses_a_root_that_is_an_array(demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    archive = _zip_with(tmp_path, demo, "zarr.json", (demo / "system/atoms/mass/zarr.json").read_bytes())
    assert main(["unpack", str(archive), str(tmp_path / "out.mrec")]) == 2
    assert "root zarr.json is not a group" in capsys.readouterr().err


@pytest.mark.parametrize("span", ["5:2", "3:3", "-2:-5"])
def test_cat_empty_rows_range_is_an_error(demo: Path, capsys: pytest.CaptureFixture[str], span: str) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["cat", str(demo), "--frame", "0", "--rows", span])
    assert caught.value.code == 2 and "selects no rows" in capsys.readouterr().err


def test_cat_rows_past_the_block_says_so(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cat", str(demo), "--frame", "0", "--block", "bonds", "--rows", "500:"]) == 0
    assert "(--rows 500: selects none of its 4 rows)" in capsys.readouterr().out


def _refusals(demo: Path, tmp_path: Path) -> List[Tuple[List[str], str]]:
    zipped = tmp_path / "z.mrec"
    write_demo(zipped, frames=2, molecules=1)
    assert main(["pack", str(zipped)]) == 0
    broken = tmp_path / "broken.mrec"
    write_demo(broken, frames=2, molecules=1)
    (broken / "system/atoms/zarr.json").write_text('{"zarr_format": 3, "node_type": "group", "attributes": '
                                                    '{"count": 9}}')
    (tmp_path / "broken.mrec.zip").write_bytes(b"")
    return [
        (["unpack", f"{zipped}.zip", str(demo)], "--force"),
        (["pack", str(zipped)], "--force"),
        (["demo", str(demo)], "--force"),
        (["pack", str(broken)], "--force"),
    ]


def test_command_line_refusals_name_flags_not_python_arguments(demo: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    for argv, flag in _refusals(demo, tmp_path):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert flag in err, (argv, err)
        assert not re.search(r"\b\w+=(True|False)\b", err), (argv, err)


def test_for_command_line_rewords_python_arguments() -> None:
    from molrec_raw.cli import for_command_line

    assert for_command_line("x exists (pass overwrite=True, or --force on the command line)") == \
        "x exists (--force replaces it)"
    assert for_command_line("x (pass overwrite=True, or --force)") == "x (--force replaces it)"
    assert for_command_line("fails (--force / check=False packs it as it is)") == "fails (--force packs it as it is)"
    assert for_command_line("held; pass lock=False (or set MOLREC_RAW_LOCKING=off)") == \
        "held; set MOLREC_RAW_LOCKING=off"
    assert for_command_line("a message without advice") == "a message without advice"
