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


# Every `pip install` the README and the docs show (issue 36, item 5): molrec-raw is not on the
# public index, so each line is written to run from the root of a checkout — the package is `.`
# (`'.[EXTRA,...]'`, `-e '.[test]'`) — and every extra it names is one pyproject.toml declares.
_PIP = re.compile(r"pip install ([^`\n]*?)\s*(?=`|&&|#|$)", re.M)
_TAKES_VALUE = {"--index-url", "-i", "--extra-index-url", "-r", "--requirement", "-c", "--constraint"}


def _install_lines() -> list:
    # the pages as written: not the build's output (docs/generated/ holds the command-line
    # reference made from the parser's help, whose `molrec-raw[X]` hints speak to an installed
    # package, where pip takes the extras from its own metadata; docs/_build/ is the site)
    built = {ROOT / "docs" / "generated", ROOT / "docs" / "_build"}
    pages = [ROOT / "README.md", *sorted(page for page in (ROOT / "docs").rglob("*.md")
                                         if not built.intersection(page.parents))]
    return [(page.relative_to(ROOT).as_posix(), m.group(1)) for page in pages
            for m in _PIP.finditer(page.read_text(encoding="utf-8"))]


def _requirements(arguments: str) -> list:
    import shlex

    words, out = shlex.split(arguments), []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in _TAKES_VALUE:
            skip = True
        elif not word.startswith("-"):
            out.append(word)
    return out


def test_every_install_line_runs_from_a_checkout_and_names_declared_extras() -> None:
    lines = _install_lines()
    assert len(lines) >= 15, lines  # README, getting started and the guides all show some
    extras, checked = _extras(), 0
    for page, arguments in lines:
        for requirement in _requirements(arguments):
            name, _, rest = requirement.partition("[")
            assert not name.lower().replace("_", "-").startswith("molrec-raw"), (
                f"{page}: `pip install {arguments}`: molrec-raw is not on the public index; from a checkout it is "
                "'.[EXTRA]'")
            if name in (".", "./"):
                named = set(filter(None, rest.rstrip("]").split(","))) if rest else set()
                assert named <= extras, f"{page}: `pip install {arguments}`: no extra {sorted(named - extras)}"
                checked += 1
    assert checked >= 15, checked


def test_the_xarray_page_names_what_chunks_needs() -> None:
    """``chunks=`` needs Dask: either ``[xarray]`` pulls it, or the page that uses it installs
    ``[dask]`` beside it (the decision: the page names it; [xarray] stays light)."""
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    xarray_extra = re.search(r"^xarray = \[(.*?)\]$", section, re.M)
    assert xarray_extra is not None and "dask" not in xarray_extra.group(1)  # the decision
    page = (ROOT / "docs" / "guide" / "xarray.md").read_text()
    assert "chunks={}" in page
    named = [set(r.partition("[")[2].rstrip("]").split(",")) for p, a in _install_lines() if p == "docs/guide/xarray.md"
             for r in _requirements(a)]
    assert any({"xarray", "dask"} <= extras for extras in named), named


def test_chunks_needs_dask_as_the_xarray_page_says(tmp_path: Path) -> None:
    """What the page says is so: without Dask, ``engine="mrec"`` opens a block lazily and
    ``chunks={}`` is refused by xarray, naming dask."""
    import subprocess
    import sys

    import pytest

    pytest.importorskip("xarray")
    script = (
        "import sys; sys.modules['dask'] = None\n"
        "import numpy as np, xarray as xr, molrec_raw as mr\n"
        "schema = mr.SequenceSchema().declare_block('atoms', rows=2)\n"
        "schema.declare_column('atoms', 'x', 'f64')\n"
        "with mr.MrecWriter('run.mrec', schema) as w:\n"
        "    for i in range(3):\n"
        "        w.append(mr.Frame({}, {'atoms': mr.Block({'x': np.arange(2.0) + i})}), step=i)\n"
        "print(float(xr.open_dataset('run.mrec', engine='mrec', group='trajectory/atoms').x.sum()))\n"
        "xr.open_dataset('run.mrec', engine='mrec', group='trajectory/atoms', chunks={})\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == "9.0", done.stdout + done.stderr
    assert done.returncode != 0 and "ImportError" in done.stderr and "dask" in done.stderr.splitlines()[-1], done.stderr
