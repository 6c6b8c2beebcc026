"""The complete command line (issue 24): --version, the overview, a description for every
subcommand and help for every argument, and the cases the issue lists (cat's hint, --rows
A:B, unknown blocks, explain's exit status and --rule, inspect's decoded names,
--frames -1:)."""
from __future__ import annotations

import argparse
import importlib.metadata
import json

import numpy as np
import pytest

import molrec_raw as mr
from molrec_raw.cli import main
from molrec_raw.cli.parser import build_parser, parse_args
from molrec_raw.demo import write_demo


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The sample record: a trajectory (no frame section), a force field with the style
    lj/cut/coul/long and metrics series named energy/kinetic, thermo/pressure, ..."""
    return str(write_demo(tmp_path_factory.mktemp("demo") / "demo.mrec", frames=12))


@pytest.fixture
def frame_record(tmp_path):
    frame = mr.Frame({}, {"atoms": mr.Block({"x": np.arange(6.0), "id": np.arange(6, dtype=np.uint64)}),
                          "bonds": mr.Block({"atomi": np.array([0, 1], dtype=np.uint64),
                                             "atomj": np.array([1, 2], dtype=np.uint64)})})
    return str(mr.write_mrec_frame(tmp_path / "f.mrec", frame))


def _subcommands(parser: argparse.ArgumentParser):
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices, {c.dest: c.help for c in action._choices_actions}


# -- version and overview ------------------------------------------------------------------
def test_issue24_version_is_the_installed_distributions(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"molrec-raw {mr.__version__}"
    assert mr.__version__ == importlib.metadata.version("molrec-raw")


def test_issue24_bare_command_prints_the_overview_and_exits_2(capsys):
    assert main([]) == 2
    out = capsys.readouterr().out
    commands, summaries = _subcommands(build_parser())
    assert len(commands) >= 13
    for name, summary in summaries.items():
        line = next((l for l in out.splitlines() if l.strip().startswith(name + " ")), None)
        assert line is not None and summary.split()[0] in line, name  # one line each, with its summary
    assert "molrec-raw COMMAND --help" in out


def test_issue24_every_subcommand_has_a_description_and_every_argument_help():
    """Walks the parser: a subcommand without a description, an argument (positional or
    option) without help, or an overview line without a summary fails."""
    parser = build_parser()
    commands, summaries = _subcommands(parser)
    missing = []
    for action in parser._actions:
        if not (action.help or "").strip() or action.help == argparse.SUPPRESS:
            missing.append(f"molrec-raw {'/'.join(action.option_strings) or action.dest}")
    for name, sub in commands.items():
        if not (sub.description or "").strip():
            missing.append(f"{name}: no description")
        if not (summaries.get(name) or "").strip():
            missing.append(f"{name}: no summary in the overview")
        for action in sub._actions:
            if not (action.help or "").strip() or action.help == argparse.SUPPRESS:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, missing
    assert {"demo", "inspect", "validate", "repair", "pack", "unpack", "convert", "metrics", "plot", "cat",
            "explain", "dump", "conform"} <= set(commands)


def test_issue24_help_pages_state_the_exit_statuses(capsys):
    for name in _subcommands(build_parser())[0]:
        with pytest.raises(SystemExit):
            main([name, "--help"])
        assert "Exit status:" in capsys.readouterr().out, name


# -- cat ---------------------------------------------------------------------------------------
def test_issue24_cat_without_a_frame_section_points_at_frame(demo, capsys):
    assert main(["cat", demo]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "no 'frame' section" in err and "--frame I" in err
    assert "12 committed frame(s)" in err


def test_issue24_cat_rows_takes_a_span_and_a_count(frame_record, capsys):
    assert main(["cat", frame_record, "--block", "atoms", "--rows", "2:4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:4] == ["[atoms] 6 rows", "id\tx", "2\t2.0", "3\t3.0"] and lines[4] == "… rows 2:4 of 6 shown"
    assert main(["cat", frame_record, "--block", "atoms", "--rows", "-2:"]) == 0
    assert capsys.readouterr().out.splitlines()[2:4] == ["4\t4.0", "5\t5.0"]
    assert main(["cat", frame_record, "--block", "atoms", "--rows", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2:] == ["0\t0.0", "1\t1.0", "2\t2.0", "… 3 more rows"]
    assert main(["cat", frame_record, "--block", "atoms"]) == 0  # default: 20 rows, all 6 here
    assert len(capsys.readouterr().out.splitlines()) == 2 + 6
    for bad in ("x", "1:2:3", "-3"):
        with pytest.raises(SystemExit) as done:
            main(["cat", frame_record, "--rows", bad])
        assert done.value.code == 2, bad


def test_issue24_cat_unknown_block_is_an_error_listing_the_blocks(frame_record, capsys):
    assert main(["cat", frame_record, "--block", "nope"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "no block 'nope'" in captured.err and "its blocks: atoms, bonds" in captured.err


# -- explain -------------------------------------------------------------------------------------
def test_issue24_explain_exits_1_on_a_fault(demo, tmp_path, capsys):
    assert main(["explain", demo, "trajectory/atoms/x", "--chunk", "0"]) == 0
    out = capsys.readouterr().out
    assert "FAULT" not in out and "rules cited" in out and "zarr-v3-subset#5.5" in out.split("rules cited")[1]
    import shutil
    copy = tmp_path / "torn.mrec"
    shutil.copytree(demo, copy)
    shard = next(p for p in (copy / "trajectory/atoms/x/c").rglob("*") if p.is_file())
    data = bytearray(shard.read_bytes())
    data[5] ^= 0xFF  # inside the shard index at the start: its crc32c no longer matches
    shard.write_bytes(bytes(data))
    assert main(["explain", str(copy), "trajectory/atoms/x", "--chunk", "0"]) == 1
    out = capsys.readouterr().out
    assert "FAULT" in out and "zarr-v3-subset#5.5" in out


def test_issue24_explain_rule_prints_one_entry(capsys):
    assert main(["explain", "--rule", "trajectory#W18"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("trajectory#W18 - ") and "requires:" in out and "binds:    writers" in out
    assert "from:" in out and "ragged.md" in out
    assert main(["explain", "--rule", "trajectory#W18", "--json"]) == 0
    entry = json.loads(capsys.readouterr().out)
    assert entry["id"] == "trajectory#W18" and entry["binds"] == "writer" and entry["requires"]
    assert main(["explain", "--rule", "README"]) == 0
    assert capsys.readouterr().out.count("README#decision-") >= 20


def test_issue24_explain_unknown_rule_is_one_line_exit_2(demo, capsys):
    assert main(["explain", "--rule", "trajectory#W81"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "not in the rule catalogue" in err and "trajectory#W8" in err
    assert main(["explain", "--rule", "nochapter"]) == 2
    assert "no chapter 'nochapter'" in capsys.readouterr().err
    assert main(["explain", demo, "--rule", "trajectory#W18"]) == 2
    assert "either --rule ID or PATH" in capsys.readouterr().err
    assert main(["explain"]) == 2
    assert "give a record PATH" in capsys.readouterr().err


# -- inspect ---------------------------------------------------------------------------------------
def test_issue24_inspect_shows_decoded_names_beside_the_stored_ones(demo, capsys):
    assert main(["inspect", demo]) == 0
    out = capsys.readouterr().out
    assert "pair.lj/cut/coul/long (stored pair.lj%2Fcut%2Fcoul%2Flong)/" in out
    assert "energy/kinetic (stored energy%2Fkinetic): float64[" in out
    assert "atom.full/" in out and "(stored atom.full)" not in out  # nothing to decode: shown once
    assert main(["inspect", demo, "--json"]) == 0
    tree = json.loads(capsys.readouterr().out)["tree"]["members"]
    assert tree["forcefield"]["members"]["pair.lj%2Fcut%2Fcoul%2Flong"]["decoded_name"] == "pair.lj/cut/coul/long"
    assert tree["metrics"]["members"]["series"]["members"]["energy%2Fkinetic"]["decoded_name"] == "energy/kinetic"
    assert "decoded_name" not in tree["forcefield"]["members"]["atom.full"]


# -- spans that start with a minus ----------------------------------------------------------------
@pytest.mark.parametrize("argv, frames", [
    (["--frames", "-1:"], "-1:"), (["--frames=-1:"], "-1:"), (["--frames", "-10:-5"], "-10:-5"),
    (["--frames", "-1"], "-1"), (["--frames", ":-2"], ":-2"), (["--frames", "3:"], "3:"), ([], None)])
def test_issue24_convert_frames_takes_negative_spans(argv, frames):
    args = parse_args(["convert", "in.xtc", "out.mrec", *argv])
    assert args.frames == frames and args.source == "in.xtc" and args.target == "out.mrec"
    if frames is not None:
        from molrec_raw.integrations.convert import parse_frames
        assert isinstance(parse_frames(args.frames), slice)


def test_issue24_a_bad_span_is_a_usage_error(capsys):
    for bad in ("a:b", "1:2:3", ""):
        with pytest.raises(SystemExit) as done:
            parse_args(["convert", "in.xtc", "out.mrec", "--frames", bad])
        assert done.value.code == 2
        assert "--frames is A:B" in capsys.readouterr().err


def test_issue24_span_after_a_positional_is_not_swallowed():
    """The joining only touches a span option's own value: '-1:' elsewhere is left to argparse."""
    args = parse_args(["cat", "x.mrec", "--rows", "-3:", "--frame", "-1"])
    assert args.rows == slice(-3, None) and args.frame == -1 and args.path == "x.mrec"
