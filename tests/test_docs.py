"""The documentation site (issue 24): every example of every page under docs/ prints what the
page shows (the convention: tests/doc_examples.py), the generated pages cover every public
name, every subcommand and every rule, and the site builds with warnings as errors.

The site build itself (``sphinx-build -W``): tests/test_docs_site.py (a file of its own, so that
the suite's two workers share its time with these examples).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

import doc_examples
from doc_examples import ROOT, Example

DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts and "generated" not in p.parts)
EXAMPLES: List[Example] = [e for page in PAGES for e in doc_examples.examples(page)]
IDS = [f"{e.page.relative_to(DOCS).with_suffix('')}:{i}" for e, i in
       zip(EXAMPLES, doc_examples.example_ids(EXAMPLES))]


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> doc_examples.Folders:
    return doc_examples.Folders(tmp_path_factory.mktemp("docs-examples"))


@pytest.mark.parametrize("example", EXAMPLES, ids=IDS)
def test_issue24_docs_example_prints_what_the_page_shows(example: Example, folders: doc_examples.Folders,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    doc_examples.check_page(example, folders.folder_for(example, EXAMPLES), monkeypatch)


def test_issue24_every_guide_page_has_a_checked_example():
    """A count that could fail: the guide pages hold examples, and outputs are compared."""
    guide = [e for e in EXAMPLES if e.page.parent.name == "guide"]
    assert len({e.page for e in guide}) >= 12
    assert sum(1 for e in EXAMPLES if e.kind == "python" and e.expected.strip()) >= 15
    assert sum(1 for e in EXAMPLES if e.kind == "console") >= 5


def test_issue24_ellipsis_convention():
    assert doc_examples.matches("wrote demo.mrec in ... s\n", "wrote demo.mrec in 4.3 s\n")
    assert doc_examples.matches("a\n...\nz\n", "a\nb\nc\nz\n")
    assert not doc_examples.matches("4\n", "5\n")
    assert not doc_examples.matches("", "something printed\n")  # a block without output prints nothing


def _extension() -> Any:
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        import molrec_docs
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    return molrec_docs


def _public_names() -> List[str]:
    import test_docstrings

    names = [q for q, _ in test_docstrings._public_faces()]
    faces, _skipped = test_docstrings._integration_faces()
    return names + [q for q, _ in faces]


def test_issue24_the_api_reference_documents_every_public_name():
    ext = _extension()
    missing = ext.missing_tools()
    if missing:  # the build documents their integrations with the tools mocked, as Sphinx mocks them
        autodoc_mock = pytest.importorskip("sphinx.ext.autodoc.mock", reason=f"{', '.join(missing)} not "
                                           "installed: the API pages of their integrations need Sphinx's "
                                           "mock (the [docs] extra)")
        with autodoc_mock.mock(missing):
            pages: Dict[str, str] = ext.api_pages()
    else:
        pages = ext.api_pages()
    documented = ext.documented_names(pages)
    assert len(documented) == len(set(documented)), "a name is documented twice (Sphinx warns)"
    missing = sorted(set(_public_names()) - set(documented))
    assert not missing, f"public names missing from the API reference: {missing}"
    assert "molrec_raw.MrecWriter" in documented and "molrec_raw.zarr.Array" in documented


def test_issue24_the_cli_reference_has_every_subcommand():
    from molrec_raw.cli.parser import build_parser

    page = _extension().cli_page()
    ext = _extension()
    names = [name for name, _ in ext._subparsers(build_parser())]
    assert len(names) >= 13
    for name in names:
        assert f"## molrec-raw {name}\n" in page, f"no section for molrec-raw {name}"
    assert "usage: molrec-raw explain" in page and "--rule" in page


def test_issue24_the_rule_catalogue_page_has_every_rule():
    from molrec_raw import rules

    page = _extension().rules_page()
    for chapter in rules.chapters():
        assert f"(rule-chapter-{chapter.name})=" in page
    for rule in rules.catalogue():
        assert f"({_extension().rule_anchor(rule.id)})=\n### `{rule.id}`" in page, rule.id
    assert len(rules.catalogue()) > 100
