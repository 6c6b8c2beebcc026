"""The reference kit for implementers: a language-neutral conformance corpus and its tools.

- :func:`dump_record` (``molrec-raw dump``): a record's decoded content in the canonical
  JSON form (``canonical``);
- :func:`build_corpus` (``python -m molrec_raw.conformance build DIR``): the corpus of
  valid and invalid records with their expected answers, checked in under
  ``molrec_raw/conformance/corpus`` and installed with the package (:func:`default_corpus`);
- :func:`run_corpus` (``molrec-raw conform``): another implementation's dumper run over
  the corpus, case by case.

``molrec_raw/conformance/README.md`` (installed beside the corpus) tells an implementer how
to use them.
"""
from pathlib import Path

from molrec_raw.conformance.canonical import canonical_bytes, first_difference
from molrec_raw.conformance.dump import dump_record

__all__ = ["canonical_bytes", "first_difference", "dump_record", "build_corpus", "run_corpus", "default_corpus"]


def default_corpus() -> Path:
    """The corpus shipped with the package (package data; the repository's one copy):
    ``molrec-raw conform`` runs it when no ``--corpus`` is given, the builder takes its frozen
    cases from it, and ``python -m molrec_raw.conformance build`` regenerates it in place."""
    return Path(__file__).resolve().parent / "corpus"


def __getattr__(name: str) -> object:  # the builder and runner import the cases: load them on use
    if name == "build_corpus":
        from molrec_raw.conformance.build import build_corpus
        return build_corpus
    if name == "run_corpus":
        from molrec_raw.conformance.runner import run_corpus
        return run_corpus
    raise AttributeError(name)
