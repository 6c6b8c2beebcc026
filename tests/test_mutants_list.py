"""bench/mutants.py's list cannot rot: every mutant's old text is found exactly once in its
file, its guard files exist, names are unique (issue 36).  Running the mutants is CI's
(after the campaigns): ``python bench/mutants.py``."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _mutants():
    spec = importlib.util.spec_from_file_location("bench_mutants", ROOT / "bench" / "mutants.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_mutant_applies_exactly_once_and_names_existing_guards():
    mutants = _mutants()
    assert mutants.check_applies() == []
    assert len(mutants.MUTANTS) >= 20


def test_a_mutant_whose_text_is_gone_or_doubled_is_named(tmp_path):
    """The check fails loudly: an old text missing, doubled, or a guard file gone."""
    mutants = _mutants()
    (tmp_path / "molrec_raw").mkdir()
    (tmp_path / "molrec_raw" / "a.py").write_text("x = 1\nx = 1\ny = 2\n", encoding="utf-8")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("", encoding="utf-8")
    listed = [mutants.M("doubled", "molrec_raw/a.py", "x = 1", "x = 0", "tests/test_a.py::t"),
              mutants.M("gone", "molrec_raw/a.py", "z = 3", "z = 0", "tests/test_a.py::t"),
              mutants.M("once", "molrec_raw/a.py", "y = 2", "y = 0", "tests/test_b.py::t")]
    problems = mutants.check_applies(listed, tmp_path)
    assert len(problems) == 3, problems
    assert "doubled" in problems[0] and "2 times" in problems[0]
    assert "gone" in problems[1] and "0 times" in problems[1]
    assert "once" in problems[2] and "tests/test_b.py" in problems[2]
