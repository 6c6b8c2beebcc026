"""``molrec-raw conform``: run an implementation's dumper over the corpus, case by case.

A *reader* is anything that, given a record path, answers (exit status, stdout, stderr):
another implementation's dumper run as a command (:func:`command_reader`: the command
line with ``{path}`` replaced), or this package's dumper in-process
(:func:`in_process_reader`; ``dump_path``: a record or a collection).  A valid case passes when the dumper exits 0 and prints a
document with no difference from ``expected.json`` (``canonical.first_difference``), for
each form (directory and zip); an invalid case passes when it exits non-zero.  A case the
dumper refuses because it lacks an optional extra (its stderr names ``molrec-raw[EXTRA]``,
e.g. a collection case on an install without py-lmdb) is skipped, naming the extra.  With
``strict_rules`` an invalid case also needs the rule id of its ``expected.json`` in the
dumper's stderr.
"""
from __future__ import annotations

import fnmatch
import json
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from molrec_raw.conformance.canonical import canonical_bytes, first_difference
from molrec_raw.conformance.dump import dump_path
from molrec_raw.errors import InvalidValueError, MolrecError

__all__ = ["Outcome", "Reader", "command_reader", "in_process_reader", "run_corpus", "INDEX", "EXPECTED"]

INDEX = "index.json"
EXPECTED = "expected.json"
Reader = Callable[[Path], Tuple[int, bytes, bytes]]


@dataclass(frozen=True)
class Outcome:
    """One case in one form: passed or not, and what was found (the first difference).
    ``skipped``: the extra the dumper said it lacks (``pip install 'molrec-raw[lmdb]'``) —
    the case did not run, neither passed nor failed."""

    case: str
    form: str
    passed: bool
    detail: str
    skipped: Optional[str] = None

    @property
    def failed(self) -> bool:
        return not self.passed and self.skipped is None

    def line(self) -> str:
        verdict = "SKIP" if self.skipped is not None else ("PASS" if self.passed else "FAIL")
        return f"{verdict}  {self.case}  {self.form}" + (f"  {self.detail}" if self.detail else "")


# How a molrec-raw dumper says it lacks an optional extra (cli: the ImportError's message).
_MISSING_EXTRA = re.compile(r"pip install '?molrec-raw\[([A-Za-z0-9_,-]+)\]")


def command_reader(template: str, timeout: float = 120.0) -> Reader:
    """A reader running ``template`` (``"mydumper {path}"``; without ``{path}`` the path is
    appended) as a command, without a shell.  A command that cannot be started at all
    raises (it refuses nothing); one that runs past ``timeout`` counts as exit 124."""
    try:
        words = shlex.split(template)
    except ValueError as exc:  # unbalanced quotes
        raise InvalidValueError(f"the reader command {template!r} cannot be split into words: {exc}") from None
    if not words:
        raise InvalidValueError("the reader command is empty")

    def read(path: Path) -> Tuple[int, bytes, bytes]:
        args = [w.replace("{path}", str(path)) for w in words]
        if not any("{path}" in w for w in words):
            args.append(str(path))
        try:
            done = subprocess.run(args, capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return 124, b"", f"timed out after {timeout:g} s".encode()
        except OSError as exc:  # not a refusal: the reader is not there at all
            raise MolrecError(f"cannot run the reader {args[0]!r}: {exc.strerror or exc}") from None
        return done.returncode, done.stdout, done.stderr
    return read


def in_process_reader() -> Reader:
    """This package's dumper, called in-process (what ``molrec-raw dump`` prints and how
    it exits, without starting a process per case)."""
    def read(path: Path) -> Tuple[int, bytes, bytes]:
        try:
            return 0, canonical_bytes(dump_path(path)), b""
        except MolrecError as exc:
            return 2, b"", f"molrec-raw dump: error: {exc}\n".encode()
    return read


def _first_line(data: bytes) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text.splitlines()[-1][:200] if text else "(no message)"


def _about(rule: str) -> str:
    """``rule`` and its title from the rule catalogue, for a failure line."""
    from molrec_raw.rules import UnknownRuleError, lookup

    try:
        return f"{rule} ({lookup(rule).title})"
    except UnknownRuleError:
        return f"{rule} (not in molrec-raw's rule catalogue)"


def _judge(entry: Dict[str, object], expected: Dict[str, object], form: str, answer: Tuple[int, bytes, bytes],
           strict_rules: bool) -> Outcome:
    name = str(entry["name"])
    status, out, err = answer
    extra = _MISSING_EXTRA.search(err.decode("utf-8", "replace")) if status != 0 else None
    if extra is not None:
        return Outcome(name, form, False, f"skipped: the dumper needs the [{extra[1]}] extra "
                                          f"(pip install 'molrec-raw[{extra[1]}]')", skipped=extra[1])
    if entry["valid"]:
        if status != 0:
            return Outcome(name, form, False, f"refused a valid record (exit {status}): {_first_line(err)}")
        try:
            actual = json.loads(out.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            return Outcome(name, form, False, f"the output is not JSON: {exc}")
        difference = first_difference(expected, actual)
        return Outcome(name, form, difference is None, difference or "")
    rule = str(entry["rule"])
    if status == 0:
        return Outcome(name, form, False, f"accepted a record that must be refused under {_about(rule)}")
    named = rule in err.decode("utf-8", "replace")
    if strict_rules and not named:
        return Outcome(name, form, False, f"refused (exit {status}) but stderr does not name {_about(rule)}: "
                                          f"{_first_line(err)}")
    return Outcome(name, form, True, f"refused (exit {status}{', names ' + rule if named else ''})")


def _read_case(reader: Reader, path: Path) -> Tuple[int, bytes, bytes]:
    """``reader`` on one form of a case.  A collection (``*.mrec.lmdb``) is handed over as a
    copy in a temporary directory: an LMDB reader takes its lock file beside the file
    (lmdb.md: a collection on read-only media is copied first), and the corpus — perhaps
    installed read-only — stays as built."""
    if not path.name.endswith(".mrec.lmdb"):
        return reader(path)
    with tempfile.TemporaryDirectory(prefix="molrec-conform-") as scratch:
        copy = Path(scratch) / path.name
        shutil.copyfile(path, copy)
        return reader(copy)


def run_corpus(corpus: Path, reader: Reader, *, only: Optional[Sequence[str]] = None,
               strict_rules: bool = False, progress: Optional[Callable[[Outcome], None]] = None) -> List[Outcome]:
    """Run ``reader`` over every case (``only``: shell patterns of case names) and judge it."""
    corpus = Path(corpus)
    index = json.loads((corpus / INDEX).read_text(encoding="utf-8"))
    outcomes: List[Outcome] = []
    for entry in index["cases"]:
        name = entry["name"]
        if only and not any(fnmatch.fnmatchcase(name, pattern) for pattern in only):
            continue
        expected = json.loads((corpus / name / EXPECTED).read_text(encoding="utf-8"))
        for form in entry["forms"]:
            outcome = _judge(entry, expected, form, _read_case(reader, corpus / name / form), strict_rules)
            outcomes.append(outcome)
            if progress is not None:
                progress(outcome)
    return outcomes
