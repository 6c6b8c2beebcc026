"""The documentation site (issue 24) builds with warnings as errors (``sphinx-build -W``).

It runs in CI (``.ci/run``) and here when Sphinx is installed (the ``docs`` extra); without it
the test skips with the reason.  Apart from tests/test_docs.py (the pages' examples and the
generated pages' coverage) so that pytest-xdist's ``--dist loadfile`` can give the build and
the examples to different workers (issue 36).
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from doc_examples import ROOT

DOCS = ROOT / "docs"


@pytest.mark.skipif(importlib.util.find_spec("sphinx") is None or importlib.util.find_spec("furo") is None
                    or importlib.util.find_spec("myst_parser") is None,
                    reason="the site build needs the docs extra: pip install -e '.[docs]'")
def test_issue24_the_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                           "-d", str(tmp_path / "doctrees"), str(DOCS), str(tmp_path / "html")],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:]
    assert (tmp_path / "html" / "generated" / "rules.html").exists()
