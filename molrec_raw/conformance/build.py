"""The corpus builder: ``python -m molrec_raw.conformance build DIR``.

Writes every case (``cases/``) into DIR deterministically — the same package, numpy and
compressor libraries give the same bytes — with its ``expected.json`` and the corpus
``index.json``, checking each case on the way: a valid case's directory and zip must dump
to the same document, an invalid case must be refused under its rule.  A rebuild of an
existing corpus is built beside it and swapped in; frozen cases (laid out by another
tool) are copied from ``frozen_from`` and verified against their pinned digests.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import zstandard

from molrec_raw.conformance import cases as _cases  # noqa: F401  (registers every case)
from molrec_raw.conformance.canonical import canonical_bytes, first_difference
from molrec_raw.conformance.cases.base import CASES, RECORD, ZIP, Case
from molrec_raw.conformance.cases.zarr_python import DIGESTS
from molrec_raw.conformance.dump import dump_record
from molrec_raw.conformance.runner import EXPECTED, INDEX
from molrec_raw.errors import MolrecError
from molrec_raw.record.pack import pack_mrec_zip

__all__ = ["BuildError", "BuildReport", "build_corpus", "case_digest", "compressors", "default_frozen_source",
           "INDEX", "EXPECTED"]

FORMAT = 1  # "molrec_conformance" in index.json


class BuildError(Exception):
    """A case does not do what it says (a builder bug, or a reader change to review)."""


@dataclass
class BuildReport:
    valid: int
    invalid: int
    path: Path


def compressors() -> Dict[str, str]:
    """The versions of the compression libraries whose output is in the corpus bytes."""
    return {"zstd": ".".join(map(str, zstandard.ZSTD_VERSION)), "zlib": zlib.ZLIB_RUNTIME_VERSION}


def case_digest(case_dir: Path) -> str:
    """sha256 over the sorted ``<relative path>\\t<sha256 of the file>`` lines of a case's
    record files (``expected.json`` excluded)."""
    lines = []
    for path in sorted(p for p in case_dir.rglob("*") if p.is_file() and p.name != EXPECTED):
        lines.append(f"{path.relative_to(case_dir).as_posix()}\t{hashlib.sha256(path.read_bytes()).hexdigest()}\n")
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def default_frozen_source() -> Optional[Path]:
    """Where the frozen cases are copied from by default: the corpus shipped with the
    package (``default_corpus``), if it is there."""
    from molrec_raw.conformance import default_corpus

    here = default_corpus()
    return here if (here / INDEX).is_file() else None


def _refusal(case: Case) -> Dict[str, object]:
    return {"molrec_refusal": 1, "rule": case.rule, "about": case.about}


def _check_refused(case: Case, target: Path) -> None:
    from molrec_raw.rules import UnknownRuleError, lookup

    try:
        lookup(str(case.rule))  # the id an implementer looks up must be defined
    except UnknownRuleError as exc:
        raise BuildError(f"{case.name}: {exc}") from None
    try:
        dump_record(target)
    except MolrecError as exc:
        if exc.rule != case.rule:
            raise BuildError(f"{case.name}: refused under {exc.rule}, not {case.rule}: {exc}") from None
        return
    raise BuildError(f"{case.name}: a reader accepts it; it must be refused under {case.rule}")


def _expected_of_valid(case: Case, case_dir: Path) -> bytes:
    try:
        doc = dump_record(case_dir / RECORD)
        zipped = dump_record(case_dir / ZIP)
    except MolrecError as exc:
        raise BuildError(f"{case.name}: a valid case is refused: {exc}") from None
    difference = first_difference(doc, zipped)
    if difference is not None:
        raise BuildError(f"{case.name}: the directory and the zip read differently: {difference}")
    return canonical_bytes(doc)


def _build_case(case: Case, case_dir: Path, frozen_from: Optional[Path]) -> List[str]:
    """Build one case into ``case_dir``; the forms it comes in."""
    case_dir.mkdir(parents=True)
    if case.frozen:
        source = None if frozen_from is None else frozen_from / case.name
        if source is None or not source.is_dir():
            raise BuildError(f"{case.name} is frozen (laid out by zarr-python once, checked in): give the "
                             "checked-in corpus with --frozen")
        for form in (RECORD, ZIP):
            (shutil.copytree if (source / form).is_dir() else shutil.copy2)(source / form, case_dir / form)
        digest, pinned = case_digest(case_dir), DIGESTS.get(case.name)
        if digest != pinned:
            raise BuildError(f"{case.name}: frozen bytes have digest {digest}, the generator pins {pinned}")
    else:
        case.build(case_dir / RECORD)
        if case.valid or case.form == "zip":
            pack_mrec_zip(case_dir / RECORD)
    if case.valid:
        (case_dir / EXPECTED).write_bytes(_expected_of_valid(case, case_dir))
        return [RECORD, ZIP]
    if case.form == "zip":
        shutil.rmtree(case_dir / RECORD)
        assert case.zip_edit is not None
        case.zip_edit(case_dir / ZIP)
    form = ZIP if case.form == "zip" else RECORD
    _check_refused(case, case_dir / form)
    (case_dir / EXPECTED).write_bytes(canonical_bytes(_refusal(case)))
    return [form]


def build_corpus(target: Path, *, frozen_from: Optional[Path] = None,
                 only: Optional[Sequence[str]] = None) -> BuildReport:
    """Build the corpus into ``target`` (created, or an existing corpus rebuilt in place;
    anything else there is refused).  ``only``: case names to build (tests)."""
    target = Path(target).absolute()
    if target.exists() and any(target.iterdir()) and not (target / INDEX).is_file():
        raise BuildError(f"{target} exists and is not a corpus (no {INDEX}); refusing to replace it")
    frozen_from = frozen_from if frozen_from is not None else default_frozen_source()
    staging = target.with_name(f".{target.name}.building-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        entries = []
        for case in sorted(CASES, key=lambda c: c.name):
            if only is not None and case.name not in only:
                continue
            forms = _build_case(case, staging / case.name, frozen_from)
            entries.append({"name": case.name, "valid": case.valid, "forms": forms, "about": case.about,
                            "rule": case.rule, "frozen": case.frozen})
        index = {"molrec_conformance": FORMAT, "compressors": compressors(), "cases": entries}
        (staging / INDEX).write_bytes(canonical_bytes(index))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)
    return BuildReport(sum(e["valid"] is True for e in entries), sum(e["valid"] is False for e in entries), target)
