"""Getting started lists every extra pyproject.toml declares (a newcomer finds each one there),
and the suite's front door says which tests the default run leaves to ``-m campaign``."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _extras() -> set:
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^([A-Za-z0-9_-]+) = \[", section, re.M))


def _listed() -> set:
    table = (ROOT / "docs" / "getting-started.md").read_text().split("## Optional extras", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([^`]+)`", row)}


def test_getting_started_lists_every_extra() -> None:
    extras = _extras()
    assert {"lmdb", "torch", "plot", "test"} <= extras
    assert extras == _listed()


def test_the_campaign_marker_is_declared_and_left_out_of_the_default_run() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    options = text.split("[tool.pytest.ini_options]", 1)[1].split("\n[", 1)[0]
    assert re.search(r"^addopts = .*-m 'not campaign'", options, re.M)
    assert '"campaign: ' in options and '"forks: ' in options
    assert "python -m pytest -q -m campaign" in (ROOT / ".ci" / "run").read_text()
