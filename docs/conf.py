"""Sphinx configuration of the molrec_raw documentation site.

Build (README "Contributing"): ``pip install -e '.[docs]'`` then
``sphinx-build -W --keep-going -b html docs docs/_build/html``.  The CLI reference, the rule
catalogue and the API reference are generated at build time by ``_ext/molrec_docs.py`` from
the parser, ``molrec_raw.rules`` and the public names, into ``docs/generated/`` (not tracked).
"""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))  # the sources, when the package is not installed

import molrec_raw  # noqa: E402

project = "molrec_raw"
author = "the molrec_raw authors"
copyright = "2026, the molrec_raw authors"
release = version = molrec_raw.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "myst_parser",
    "molrec_docs",
    "molrec_perf",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "Thumbs.db", ".DS_Store"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# Integrations whose tool is not installed are documented from their source with the tool
# mocked: the build never needs MDAnalysis, mdtraj, OpenMM, ASE, xarray, dask, fsspec or torch.
from molrec_docs import missing_tools  # noqa: E402

autodoc_mock_imports = missing_tools()


def _mock_arithmetic() -> None:
    """Integrations compute with their tool's objects at import (OpenMM's ``nanometer /
    picosecond``): let autodoc's mock objects take part in arithmetic and comparisons."""
    from sphinx.ext.autodoc.mock import _MockObject

    def result(self: object, *args: object) -> object:
        return type(self)()

    for name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor"):
        for form in (f"__{name}__", f"__r{name}__"):
            setattr(_MockObject, form, result)
    for form in ("__neg__", "__pos__", "__abs__", "__invert__"):
        setattr(_MockObject, form, result)


if autodoc_mock_imports:
    _mock_arithmetic()
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"show-inheritance": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = True

html_theme = "furo"
html_title = f"molrec_raw {release}"
html_static_path: list = []
