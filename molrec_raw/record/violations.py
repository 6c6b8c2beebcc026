"""One mechanism for every record rule: checks yield Violations; readers and writers
refuse on the first, ``validate`` collects them all.

A rule id cites the spec digest: ``<file>#<item>``, e.g. ``frame-and-types#14.6``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, List

from molrec_raw.errors import SpecViolationError

__all__ = ["Violation", "refuse", "Checks"]


@dataclass(frozen=True)
class Violation:
    """A broken rule: its id, the node it concerns (``/frame/atoms/x``) and what is wrong."""

    rule: str
    node: str
    message: str

    def __str__(self) -> str:
        return f"{self.rule} at {self.node or '/'}: {self.message}"


Checks = Iterator[Violation]


def refuse(violations: Iterable[Violation]) -> None:
    """Raise SpecViolationError for the first violation, if any."""
    for violation in violations:
        raise SpecViolationError(violation.message, node=violation.node, rule=violation.rule)


def collect(violations: Iterable[Violation]) -> List[Violation]:
    return list(violations)
