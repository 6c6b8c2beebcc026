"""The rule catalogue (issue 24): every rule id the package cites is defined in
``molrec_raw.rules``, each entry says what it requires, of whom and from which public chapter,
and the code consults it (``explain --rule``, the explain legend, the conformance runner and
builder).

A new id cited anywhere under ``molrec_raw/`` (``collection#C3``, ``lmdb#7``, ...) fails
``test_issue24_every_cited_rule_id_is_in_the_catalogue`` until its chapter module defines it.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

import molrec_raw
from molrec_raw import rules
from molrec_raw.conformance.runner import run_corpus

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rule_citations import scan  # noqa: E402

PACKAGE = Path(molrec_raw.__file__).resolve().parent


@pytest.fixture(scope="module")
def cited():
    return scan(PACKAGE)


def test_issue24_every_cited_rule_id_is_in_the_catalogue(cited):
    defined = {rule.id for rule in rules.catalogue()}
    missing = {i: sorted(cited.ids[i])[:3] for i in sorted(set(cited.ids) - defined)}
    assert not missing, ("rule ids cited in molrec_raw/ but not defined in the catalogue (add a Rule to "
                         f"molrec_raw/rules/<chapter>.py, or a chapter module for a new prefix): {missing}")
    assert not cited.unresolved, ("helper calls whose rule id the scan cannot tell: cite the id with a string "
                                  f"literal or a name assigned one: {cited.unresolved}")


def test_issue24_the_scan_sees_ids_composed_by_helpers(cited):
    """The ids the issue counted were written out (146); as many again are composed by the
    prefixing helpers (``spec_error("W18", ...)`` is trajectory#W18).  Each way is found."""
    assert {("molrec_raw.record.trajectory.common", "spec_error"), ("molrec_raw.record.observables", "_rule"),
            ("molrec_raw.record.forcefield", "_rule"), ("molrec_raw.record.frame_io", "_v"),
            ("molrec_raw.record.sections", "_fail")} <= set(cited.helpers)
    composed = {
        "trajectory#W18": "blocks.py",  # spec_error("W18", ...)
        "documents#9.35": "forcefield.py",  # _rule("9.35")
        "frame-and-types#14.1": "frame_io.py",  # rule = "14.1" if ... else "14.2"; _v(rule, ...)
        "trajectory#W27": "references.py",  # rt, ra = ("W27", "W28") if writing else ("R17", "R16")
        "trajectory#W13": "references.py",  # spec_error(rule_id, ...), rule_id a parameter its callers pass
        "trajectory#W5": "schema.py",  # W1, ..., W11 = (f"trajectory#W{n}" for n in range(1, 12))
    }
    for rule_id, where in composed.items():
        assert any(where in place for place in cited.ids.get(rule_id, ())), (rule_id, cited.ids.get(rule_id))
    assert len(cited.ids) >= 190


def test_issue24_the_scan_catches_a_new_chapter(tmp_path):
    """What another branch's merge looks like: a new prefix, cited three ways."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "store.py").write_text(
        '"""Frames are MRF1 bytes (collection#C2); keys are big-endian (lmdb#4.1)."""\n'
        "def _fail(rule, message):\n    return ValueError(message, f'collection#{rule}')\n"
        "def put(x):\n    if x:\n        raise _fail('C7', 'no')\n    which = 'C8' if x else 'C9'\n"
        "    raise _fail(which, 'no')\n"
        "def odd(x):\n    raise _fail(x.rule, 'unknowable')\n"
        "# see zarr-developers/zarr-python#3558 (an issue, not a rule)\n")
    found = scan(package)
    assert set(found.ids) == {"collection#C2", "lmdb#4.1", "collection#C7", "collection#C8", "collection#C9"}
    assert len(found.unresolved) == 1 and "_fail(x.rule" in found.unresolved[0]
    with pytest.raises(rules.UnknownRuleError):
        rules.lookup("collection#C2")


def test_issue24_entries_say_what_of_whom_and_from_where():
    entries = rules.catalogue()
    assert len(entries) >= 240 and len({e.id for e in entries}) == len(entries)
    for entry in entries:
        assert entry.who in (rules.READER, rules.WRITER, rules.BOTH), entry.id
        assert entry.title.strip() and len(entry.requires) >= 30, entry.id
        source = entry.source or next(c.source for c in rules.chapters() if c.name == entry.chapter)
        assert re.search(r"MolCrafts/molrec|zarr-specs|zarr-extensions|zarr-developers|OME-Zarr", source), entry.id
        text = entry.text()
        assert text.startswith(f"{entry.id} - {entry.title}") and "requires:" in text and "from:" in text
        assert set(entry.to_json()) == {"id", "chapter", "title", "requires", "binds", "source", "digest"}


def test_issue24_catalogue_order_is_chapter_then_natural_key():
    """The order a documentation page renders: chapters by position, W2 before W10."""
    entries = rules.catalogue()
    positions = [c.position for c in rules.chapters()]
    assert positions == sorted(positions) and [c.name for c in rules.chapters()][0] == "zarr-v3-subset"
    trajectory = [e.key for e in rules.rules_of("trajectory")]
    assert trajectory.index("W2") < trajectory.index("W10") < trajectory.index("W18")
    assert [e.chapter for e in entries] == sorted((e.chapter for e in entries),
                                                   key=[c.name for c in rules.chapters()].index)


def test_issue24_lookup_of_an_unknown_id_names_the_closest():
    with pytest.raises(rules.UnknownRuleError, match="did you mean trajectory#W18"):
        rules.lookup("trajectory#W181")
    with pytest.raises(molrec_raw.errors.MolrecError):
        rules.lookup("nonsense")
    assert rules.lookup("zarr-v3-subset#5.5").who == rules.BOTH


def test_issue24_corpus_rules_are_in_the_catalogue_and_the_runner_names_them(tmp_path):
    from molrec_raw.conformance import default_corpus
    corpus = default_corpus()
    index = json.loads((corpus / "index.json").read_text(encoding="utf-8"))
    cited_by_cases = {c["rule"] for c in index["cases"] if not c["valid"]}
    for rule_id in cited_by_cases:
        rules.lookup(rule_id)
    accept_all = lambda path: (0, b"{}", b"")  # noqa: E731
    outcome = run_corpus(corpus, accept_all, only=["invalid/version-null"])[0]
    assert not outcome.passed
    assert f"frame-and-types#14.23 ({rules.lookup('frame-and-types#14.23').title})" in outcome.detail
