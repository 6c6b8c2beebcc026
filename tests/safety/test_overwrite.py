"""No silent overwrite (issue 23 item 6; spec-notes/safety.md "No silent overwrite").

One policy for every door that writes a path — ``write_mrec*``, ``write_mrec_trajectory``,
``unpack``, ``demo``, ``convert``: an existing record is refused unless the caller says
``overwrite=True`` / ``--force``; a conversion's source is never its target.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, List

import numpy as np
import pytest

import molrec_raw as mr
from molrec_raw.cli import main
from molrec_raw.errors import RecordExistsError, StoreError

from safety_helpers import frame, frames_of, make_record, system, tree

README = Path(__file__).resolve().parents[2] / "README.md"

DOORS = {
    "write_mrec_frame": lambda p, **kw: mr.write_mrec_frame(p, frame(9), **kw),
    "write_mrec_system": lambda p, **kw: mr.write_mrec_system(p, system(), **kw),
    "write_mrec_forcefield": lambda p, **kw: mr.write_mrec_forcefield(p, _forcefield(), **kw),
    "write_mrec": lambda p, **kw: mr.write_mrec(p, mr.MolRec(system=system()), **kw),
    "write_mrec_trajectory": lambda p, **kw: mr.write_mrec_trajectory(p, [frame(i) for i in range(2)], **kw),
    "unpack": lambda p, **kw: mr.unpack_mrec_zip(kw.pop("archive"), p, **kw),
}


def _forcefield() -> mr.ForceFieldSection:
    from molrec_raw.record.forcefield import block_name

    return mr.ForceFieldSection({"name": "ff", "units": {"preset": "real"}, "styles": [{"category": "atom", "style": "full"}]},
                                {block_name("atom", "full"): mr.Block({"name": np.array(["A"], dtype=object),
                                                                        "mass": np.array([1.0])})})


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    return mr.pack_mrec_zip(make_record(tmp_path / "packed.mrec"))


@pytest.mark.parametrize("door", sorted(DOORS))
def test_safety_overwrite_every_door_refuses_an_existing_record(tmp_path: Path, door: str, archive: Path) -> None:
    """Refused (RecordExistsError naming the record and the way to ask), the record untouched,
    nothing left beside it; with overwrite=True it is replaced; a missing path or an empty
    directory is written without asking; anything else is never replaced."""
    write: Callable[..., Any] = DOORS[door]
    extra = {"archive": archive} if door == "unpack" else {}
    record = make_record(tmp_path / "r.mrec")
    before, listing = tree(record), sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(RecordExistsError, match="overwrite=True") as info:
        write(record, **dict(extra))
    assert str(record) in str(info.value)
    assert tree(record) == before and sorted(p.name for p in tmp_path.iterdir()) == listing
    write(record, overwrite=True, **dict(extra))
    assert tree(record) != before
    write(tmp_path / "new.mrec", **dict(extra))  # a fresh path needs no permission
    (tmp_path / "empty.mrec").mkdir()
    write(tmp_path / "empty.mrec", **dict(extra))  # nor an empty directory
    (tmp_path / "other.mrec").mkdir()
    (tmp_path / "other.mrec" / "notes.txt").write_text("mine")
    with pytest.raises(StoreError, match="neither a record"):  # not a record: never replaced, even when asked
        write(tmp_path / "other.mrec", overwrite=True, **dict(extra))
    assert (tmp_path / "other.mrec" / "notes.txt").read_text() == "mine"


def test_safety_overwrite_write_mrec_may_replace_the_record_it_read(tmp_path: Path) -> None:
    """``write_mrec(path, read_mrec(path), overwrite=True)``: the carried sections are read
    before the swap, so a record rewritten from itself keeps every section (the demo does it)."""
    record = make_record(tmp_path / "r.mrec")
    rec = mr.read_mrec(record)
    assert rec.trajectory is not None
    rec.trajectory.close()
    rec.status = {"state": "succeeded"}
    mr.write_mrec(record, rec, overwrite=True)
    assert frames_of(record) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert mr.read_metrics(record)["loss"].values.tolist() == [0.5]
    assert mr.validate(record) == []


def test_safety_overwrite_demo_refuses_an_existing_record_unless_forced(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "d.mrec"
    assert main(["demo", str(path), "--frames", "3"]) == 0
    before = tree(path)
    capsys.readouterr()
    assert main(["demo", str(path), "--frames", "3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exists" in err and "--force" in err and "Traceback" not in err
    assert tree(path) == before
    assert main(["demo", str(path), "--frames", "4", "--force"]) == 0
    assert len(frames_of_demo(path)) == 4


def frames_of_demo(path: Path) -> List[int]:
    with mr.MrecReader(path) as r:
        return list(r.step)


def _setup_commands() -> List[str]:
    """What README's set-up commands run after their ``pip install ... &&``, in order."""
    text = README.read_text()
    section = text[text.index("## Set up"):]
    section = section[:section.index("\n## ", 1)]
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        for line in block.splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                commands.append(line.split("&&", 1)[1].strip() if "&&" in line else line)
    return commands


def test_safety_overwrite_readme_setup_commands_work_one_after_the_other(tmp_path: Path) -> None:
    """README's two set-up commands in order: the demo writes demo.mrec, then the suite runs
    (.ci/run runs both verbatim, one after the other, in one checkout); no set-up command
    writes demo.mrec a second time, which would be refused (safety#overwrite) — shown here."""
    commands = _setup_commands()
    assert commands == ["molrec-raw demo demo.mrec", "python -m pytest -q"], commands
    words = commands[0].split()
    first = subprocess.run([sys.executable, "-m", "molrec_raw", *words[1:]], cwd=tmp_path,
                           capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "demo.mrec" / "zarr.json").is_file()
    again = subprocess.run([sys.executable, "-m", "molrec_raw", *words[1:]], cwd=tmp_path,
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 2 and "demo.mrec exists" in again.stderr, again.stderr


@pytest.fixture
def mdanalysis() -> Any:
    return pytest.importorskip("MDAnalysis", reason="convert needs MDAnalysis (the [mdanalysis] extra)")


def test_safety_overwrite_convert_never_writes_over_its_source(tmp_path: Path, mdanalysis: Any, capsys: Any) -> None:
    """``convert x.mrec x.mrec`` is refused even with --force, naming both; an existing target
    is refused without --force (record or any other format) and replaced with it; a conversion
    that fails leaves the old target as it was."""
    from MDAnalysisTests.datafiles import GRO, XTC

    source = tmp_path / "s.mrec"
    assert main(["convert", XTC, str(source), "--topology", GRO, "--frames", "0:3"]) == 0
    before = tree(source)
    for force in ([], ["--force"]):
        capsys.readouterr()
        assert main(["convert", str(source), str(source), *force]) == 2
        err = capsys.readouterr().err
        assert "into itself" in err and err.count(str(source)) >= 2 and err.count("\n") == 1, err
        assert tree(source) == before
    target = tmp_path / "t.mrec"
    assert main(["convert", XTC, str(target), "--topology", GRO, "--frames", "0:2"]) == 0
    capsys.readouterr()
    assert main(["convert", XTC, str(target), "--topology", GRO]) == 2
    assert "exists" in capsys.readouterr().err
    kept = tree(target)
    assert main(["convert", XTC, str(target), "--topology", GRO, "--force", "--precision", "-1"]) == 2
    assert tree(target) == kept  # the failed conversion left it as it was
    assert main(["convert", XTC, str(target), "--topology", GRO, "--force", "--frames", "0:4"]) == 0
    with mr.MrecReader(target) as r:
        assert len(r) == 4
    out = tmp_path / "t.xyz"
    assert main(["convert", str(target), str(out), "--frames", "0:1"]) == 0
    text = out.read_text()
    assert main(["convert", str(target), str(out)]) == 2
    assert out.read_text() == text
    assert main(["convert", str(target), str(out), "--force"]) == 0 and out.read_text() != text
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # nothing left beside
