"""The exceptions molrs raises, from molrec_raw's (spec-notes/dropin.md "Errors").

molrs answers a bad record, a refused write or a broken rule with a plain ``ValueError``;
molrec_raw raises its own hierarchy (``molrec_raw.errors``, rule ids attached).  Every door
of the drop-in runs its molrec_raw call under :func:`as_molrs`, which re-raises a
``MolrecError`` as ``ValueError`` with the same message, the original chained as
``__cause__`` (so the path and the rule id stay reachable).
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

from molrec_raw.errors import MolrecError

__all__ = ["as_molrs", "refuse_str_path"]


@contextmanager
def as_molrs() -> Iterator[None]:
    """Re-raise a molrec_raw error as the ``ValueError`` molrs raises for it."""
    try:
        yield
    except MolrecError as exc:
        raise ValueError(str(exc)) from exc


def refuse_str_path(value: object, argument: str, reader: bool) -> "os.PathLike[str]":
    """molrs's path rule for ``molrs.io`` doors: an ``os.PathLike``; a plain ``str`` is a
    ``TypeError`` (ambiguous between a path and a file's text)."""
    if isinstance(value, str):
        if reader:
            raise TypeError(f"argument {argument!r}: a str is ambiguous between a path and the text of a "
                            "file: pass pathlib.Path(s) for a file or molrs.io.Text(s) for text")
        raise TypeError(f"argument {argument!r}: a writer takes a path as an os.PathLike, not a str: pass "
                        "pathlib.Path(s) (or a bytearray to write into memory)")
    if not isinstance(value, os.PathLike):
        raise TypeError(f"argument {argument!r}: a source is an os.PathLike, bytes or molrs.io.Text, "
                        f"not {type(value).__name__}" if reader else
                        f"argument {argument!r}: a sink is an os.PathLike or a bytearray, not {type(value).__name__}")
    return value
