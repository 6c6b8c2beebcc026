"""README.md, the front page (issue 24): its examples print what it shows, and it is a front
page — what this is, the two set-up commands, a short tour, a table of contents.

Every ```python block runs in a fresh folder and its output is compared with the ```text block
after it; every ``$ `` command of a ```console block runs in the folder of the python example
before it (the convention, with the ``...`` ellipsis: tests/doc_examples.py, docs/contributing.md).
The set-up commands themselves run in CI (``.ci/run``: the main job and the test suite).
"""
from __future__ import annotations

import re

import pytest

import doc_examples
from doc_examples import ROOT, Example

README = ROOT / "README.md"
EXAMPLES = doc_examples.examples(README)


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> doc_examples.Folders:
    return doc_examples.Folders(tmp_path_factory.mktemp("readme-examples"))


@pytest.mark.parametrize("example", EXAMPLES, ids=doc_examples.example_ids(EXAMPLES))
def test_issue24_readme_example_prints_what_the_readme_shows(example: Example, folders: doc_examples.Folders,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    doc_examples.check_page(example, folders.folder_for(example, EXAMPLES), monkeypatch)


def test_issue24_readme_is_a_front_page():
    text = README.read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert headings[:2] == ["Contents", "Set up"], headings
    contents = text.split("## Contents", 1)[1].split("\n## ", 1)[0]
    for heading in headings[1:]:  # the table of contents lists every section
        assert f"[{heading}](#" in contents, f"the table of contents misses {heading!r}"
    setup = text.split("## Set up", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.*?)\n```", setup, re.DOTALL)
    assert commands == ["pip install . && molrec-raw demo demo.mrec",
                        "pip install -e '.[test]' && python -m pytest -q"], commands
    assert sum(1 for e in EXAMPLES if e.kind == "python" and e.expected.strip()) >= 2
    assert "sphinx-build -W --keep-going -b html docs docs/_build/html" in text.split("## Contributing", 1)[1]


def test_issue24_readme_links_point_at_files_that_exist():
    text = README.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
        assert (ROOT / target).exists(), f"README links to {target}, which does not exist in the repository"
