"""Watching a record while it is written: the run's lifecycle and the polling loop.

**Lifecycle** (documents §2, the ``status`` document's ``state``).  A streaming writer
records where its run is: ``running`` when it creates or reopens the record, ``succeeded``
when it closes, ``failed`` (with ``error.message`` and ``error.type``) when a ``with``
block around it exits by an exception, ``cancelled`` when that exception is a
``KeyboardInterrupt``.  It owns ``state`` and ``error`` only: every other key of an existing
status document is kept as found (documents §1.2).  No timestamps are written (a writer's
bytes depend on its input only).  A run is *over* when its state is one of
:data:`FINISHED_STATES`; a writer that is killed cannot say so, so a reader that follows a
run also stops after ``timeout`` seconds without news.

**The loop** (:func:`follow_loop`) is shared by every follower (``MrecReader.watch`` /
``follow``, ``follow_metrics``, the command line): read whether the run is over, *then*
poll for news, hand it out, stop if the run was over or nothing can change, or when
``timeout`` seconds passed without news or ``stop_after`` seconds in all, else sleep
``poll`` seconds.  Reading the state before polling makes the last poll see everything
the writer committed before it recorded the end (it writes the final state after its last
commit).  No lock is taken: a follower only reads.
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, TypeVar

from molrec_raw.errors import InvalidValueError, MolrecError
from molrec_raw.zarr import Group
from molrec_raw.zarr.metadata import GroupMetadata

__all__ = ["FINISHED_STATES", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "read_status", "run_finished",
           "record_state", "follow_loop", "check_follow_args"]

RUNNING, SUCCEEDED, FAILED, CANCELLED = "running", "succeeded", "failed", "cancelled"
FINISHED_STATES = frozenset({SUCCEEDED, FAILED, CANCELLED, "skipped"})  # documents §2 standard values
STATUS = "status"

T = TypeVar("T")


def read_status(root: Group) -> Optional[Dict[str, Any]]:
    """The record's status document as stored now (None: the record has none)."""
    group = root.get(STATUS)
    return dict(group.attrs) if isinstance(group, Group) else None


def run_finished(root: Group) -> bool:
    """The record's status says its run is over (``state`` in :data:`FINISHED_STATES`)."""
    doc = read_status(root)
    return doc is not None and doc.get("state") in FINISHED_STATES


def record_state(root: Group, state: str, *, error: Optional[BaseException] = None, durable: bool = False) -> None:
    """Write ``state`` into the record's status document (created when missing), with
    ``error`` ``{message, type}`` from an exception, or without ``error`` otherwise; other
    keys stay.  ``durable``: the new document is fsynced before its rename (a power cut
    leaves the old document or the new one, never an empty file), and the rename after it.
    A document a power cut left unreadable is replaced whole."""
    key = f"{STATUS}/zarr.json"
    try:
        group = root.get(STATUS)
    except MolrecError:  # an empty or torn zarr.json (a writer with durable=False and a power cut)
        group = None
    doc = dict(group.attrs) if isinstance(group, Group) else {}
    doc.pop("error", None)
    doc["state"] = state
    if error is not None:
        doc["error"] = {"message": str(error) or type(error).__name__, "type": type(error).__name__}
    if isinstance(group, Group):
        group.attrs.put(doc, durable=durable)
    elif group is None and root.store.size(key) is not None:
        raw = GroupMetadata(doc).to_json()
        if durable:
            root.store.replace_durable(key, raw)
        else:
            root.store.replace_atomic(key, raw)
    else:  # absent (an array there is refused: NodeExistsError)
        root.create_group(STATUS, attributes=doc, durable=durable)
    if durable:
        root.store.sync([key])


def check_follow_args(poll: float, timeout: Optional[float], stop_after: Optional[float] = None) -> None:
    """``poll`` a positive finite number of seconds; ``timeout``/``stop_after`` None or ≥ 0."""
    def number(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not number(poll) or poll <= 0:
        raise InvalidValueError(f"poll must be a positive number of seconds, got {poll!r}")
    for name, value in (("timeout", timeout), ("stop_after", stop_after)):
        if value is not None and (not number(value) or value < 0):
            raise InvalidValueError(f"{name} must be None or a non-negative number of seconds, got {value!r}")


def follow_loop(news: Callable[[], List[T]], finished: Callable[[], bool], *, poll: float,
                timeout: Optional[float], stop_after: Optional[float] = None,
                can_change: bool = True) -> Iterator[T]:
    """Every item ``news()`` returns, poll after poll (see the module docstring).
    ``can_change`` False (an archive, a URL): one poll, then stop."""
    check_follow_args(poll, timeout, stop_after)
    started = quiet_since = time.monotonic()
    while True:
        over = finished()
        items = news()
        for item in items:
            yield item
        now = time.monotonic()
        if items:
            quiet_since = now  # after the consumer's work: its time is not silence
        if over or not can_change:
            return
        if timeout is not None and now - quiet_since >= timeout:
            return
        if stop_after is not None and now - started >= stop_after:
            return
        wait = poll
        if timeout is not None:
            wait = min(wait, max(0.0, timeout - (now - quiet_since)))
        if stop_after is not None:
            wait = min(wait, max(0.0, stop_after - (now - started)))
        time.sleep(wait)


def finished_or_unreadable(root: Group) -> Callable[[], bool]:
    """``run_finished`` for a loop: a status document caught unreadable counts as not over
    (the next poll reads it again)."""
    def check() -> bool:
        try:
            return run_finished(root)
        except MolrecError:
            return False
    return check
