"""The rule catalogue: every rule id molrec_raw cites, defined in this project's words.

A rule id is ``<chapter>#<rule>`` (``trajectory#W18``, ``documents#9.15``,
``zarr-v3-subset#5.5``, ``README#decision-1``): errors carry one (``MolrecError.rule``),
violations too (``Violation.rule``), docstrings and test names cite them.  Each entry says
what the rule requires, of whom (a reader, a writer, or both) and which public chapter it
comes from (MolCrafts/molrec ``docs/spec/``, zarr-developers ``zarr-specs`` and
``zarr-extensions``); the chapter prefixes are the file names of the project's spec digest.

Storage: one data module per chapter in this package (``trajectory.py``,
``frame_and_types.py``, ...), each defining ``CHAPTER`` (a :class:`Chapter`) and ``RULES``
(a tuple of :class:`Rule`).  Chapters are found by listing the package, so a new chapter is
a new module and nothing else changes; a new rule is one more ``Rule(...)`` in its
chapter.  ``tests/test_rule_catalogue.py`` scans the package's source for every cited id
and fails on one this catalogue does not define.

    lookup("trajectory#W18").text()     # what ``molrec-raw explain --rule`` prints
    [r.id for r in catalogue()]         # every entry, chapter by chapter, in order
"""
from __future__ import annotations

import functools
import importlib
import pkgutil
import re
import textwrap
from dataclasses import dataclass, replace
from typing import Dict, List, Tuple

from molrec_raw.errors import InvalidValueError

__all__ = ["Chapter", "Rule", "READER", "WRITER", "BOTH", "catalogue", "chapters", "lookup", "rules_of",
           "UnknownRuleError"]

READER = "reader"
WRITER = "writer"
BOTH = "reader and writer"
_PARTIES = {READER: "readers", WRITER: "writers", BOTH: "readers and writers"}
_KEY = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.\-]*[A-Za-z0-9])?")


class UnknownRuleError(InvalidValueError, KeyError):
    """A rule id (or chapter) the catalogue does not define."""

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return InvalidValueError.__str__(self)


@dataclass(frozen=True)
class Chapter:
    """A chapter of the catalogue: ``name`` is the id prefix (``trajectory``), ``position``
    its place in the catalogue, ``source`` the public chapter(s) its rules come from unless
    a rule names its own, ``digest`` the file of this project's spec digest it follows."""

    name: str
    position: int
    title: str
    source: str
    digest: str
    about: str = ""


@dataclass(frozen=True)
class Rule:
    """One entry: ``key`` is the id inside its chapter (``W18``), ``who`` the party the rule
    binds (:data:`READER`, :data:`WRITER` or :data:`BOTH`), ``title`` a few words, ``requires``
    the rule in full, ``source`` where in the public chapter(s) it comes from."""

    key: str
    who: str
    title: str
    requires: str
    source: str = ""
    chapter: str = ""  # filled in when the chapter is loaded

    @property
    def id(self) -> str:
        """The citable id, ``<chapter>#<key>``."""
        return f"{self.chapter}#{self.key}"

    def to_json(self) -> Dict[str, str]:
        """The entry as ``molrec-raw explain --rule ID --json`` prints it."""
        chapter = _chapters()[self.chapter][0]
        return {"id": self.id, "chapter": self.chapter, "title": self.title, "requires": self.requires,
                "binds": self.who, "source": self.source or chapter.source, "digest": chapter.digest}

    def text(self, width: int = 88) -> str:
        """The entry as ``molrec-raw explain --rule`` prints it."""
        chapter = _chapters()[self.chapter][0]
        lines = [f"{self.id} - {self.title}"]
        for label, body in (("requires", self.requires), ("binds", _PARTIES[self.who]),
                            ("from", self.source or chapter.source)):
            lines.append(textwrap.fill(body, width, initial_indent=f"  {label + ':':10}",
                                       subsequent_indent=" " * 12, break_on_hyphens=False))
        return "\n".join(lines)


def _natural(key: str) -> Tuple[object, ...]:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", key))


@functools.lru_cache(maxsize=None)
def _chapters() -> Dict[str, Tuple[Chapter, Tuple[Rule, ...]]]:
    """Every chapter module of this package, loaded once (the data never changes) and
    checked: unique names and keys, known parties, non-empty text."""
    found: List[Tuple[Chapter, Tuple[Rule, ...]]] = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        chapter: Chapter = module.CHAPTER
        rules = tuple(replace(rule, chapter=chapter.name) for rule in module.RULES)
        keys = [r.key for r in rules]
        problems = [k for k in keys if not _KEY.fullmatch(k)] + sorted({k for k in keys if keys.count(k) > 1})
        problems += [r.key for r in rules if r.who not in _PARTIES or not r.title.strip() or not r.requires.strip()]
        if problems:
            raise ValueError(f"rule catalogue chapter {chapter.name!r}: malformed or repeated entries {problems}")
        found.append((chapter, tuple(sorted(rules, key=lambda r: _natural(r.key)))))
    names = [c.name for c, _ in found]
    if len(set(names)) != len(names):
        raise ValueError(f"rule catalogue: chapter names repeat: {sorted(names)}")
    return {chapter.name: (chapter, rules) for chapter, rules in sorted(found, key=lambda c: (c[0].position, c[0].name))}


def chapters() -> List[Chapter]:
    """Every chapter, in catalogue order."""
    return [chapter for chapter, _ in _chapters().values()]


def rules_of(chapter: str) -> Tuple[Rule, ...]:
    """The rules of one chapter, in order (``W2`` before ``W10``)."""
    try:
        return _chapters()[chapter][1]
    except KeyError:
        raise UnknownRuleError(f"no chapter {chapter!r} in the rule catalogue; its chapters: "
                               f"{', '.join(_chapters())}") from None


def catalogue() -> List[Rule]:
    """Every entry, chapter by chapter, each chapter's rules in order: what a documentation
    generator renders as the catalogue page."""
    return [rule for _, rules in _chapters().values() for rule in rules]


def lookup(rule_id: str) -> Rule:
    """The entry of ``rule_id`` (``trajectory#W18``); UnknownRuleError (naming the closest ids)
    for one the catalogue does not define."""
    chapter, sep, key = rule_id.partition("#")
    for rule in _chapters().get(chapter, (None, ()))[1] if sep else ():
        if rule.key == key:
            return rule
    import difflib

    close = difflib.get_close_matches(rule_id, [r.id for r in catalogue()], n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; chapters: {', '.join(_chapters())}"
    raise UnknownRuleError(f"{rule_id!r} is not in the rule catalogue{hint}")
