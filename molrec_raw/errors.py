"""The one exception hierarchy of molrec_raw.

Every layer raises these and nothing else for bad input.  Each error can carry
where it happened — the store, the node (array or group path), the store key
(chunk key), the byte offset of the fault inside that value (when a parser knows it) and
the spec rule — and prints them after its message, so a
failure on a large record points at the exact place on disk.
"""
from __future__ import annotations

import reprlib
from typing import Any, Optional

__all__ = [
    "MolrecError",
    "StoreError",
    "InvalidKeyError",
    "NodeNotFoundError",
    "ReadOnlyError",
    "RemoteError",
    "InvalidMetadataError",
    "UnsupportedFeatureError",
    "CorruptDataError",
    "ChecksumMismatchError",
    "ResourceLimitError",
    "InvalidValueError",
    "NodeExistsError",
    "SpecViolationError",
    "NotARecordError",
    "RecordExistsError",
    "WriterLockedError",
    "LockUnavailableError",
    "IOFailureError",
    "PoisonedWriterError",
    "brief",
]


class MolrecError(Exception):
    """Base of every error molrec_raw raises on purpose."""

    def __init__(
        self,
        message: str,
        *,
        store: Optional[str] = None,
        node: Optional[str] = None,
        key: Optional[str] = None,
        rule: Optional[str] = None,
        offset: Optional[int] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.store = store
        self.node = node
        self.key = key
        self.rule = rule
        self.offset = offset  # byte offset of the fault inside the value named by ``key``

    def add_context(self, **context: Any) -> "MolrecError":
        """Fill in location fields that are still unknown; return self for ``raise``."""
        for name in ("store", "node", "key", "rule", "offset"):
            value = context.get(name)
            if value is not None and getattr(self, name) is None:
                setattr(self, name, value)
        return self

    def detached(self) -> "MolrecError":
        """Self without its traceback (nor those of the errors it was raised from): an error
        kept in a list after its read — a survey of damage — would otherwise keep every
        frame of that read alive, with the chunks it had decoded."""
        seen = set()
        exc: Optional[BaseException] = self
        while exc is not None and id(exc) not in seen:
            seen.add(id(exc))
            exc.__traceback__ = None
            exc = exc.__cause__ or exc.__context__
        return self

    def __str__(self) -> str:
        where = []
        if self.store is not None:
            where.append(f"store={self.store}")
        if self.node is not None:
            where.append(f"node={self.node or '/'}")
        if self.key is not None:
            where.append(f"key={self.key}")
        if self.offset is not None:
            where.append(f"offset={self.offset}")
        if self.rule is not None:
            where.append(f"rule={self.rule}")
        return f"{self.message} [{', '.join(where)}]" if where else self.message


class StoreError(MolrecError):
    """A store could not perform an operation (I/O failure, bad key, closed store)."""


class InvalidKeyError(StoreError):
    """A store key that could escape the store root or is not a valid Zarr key."""


class NodeNotFoundError(StoreError, KeyError):
    """No group or array at the requested path."""

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return MolrecError.__str__(self)


class ReadOnlyError(StoreError):
    """A write was attempted on a read-only store or node."""


class RemoteError(StoreError):
    """A remote store failed: the server refused, ignored or lied about a byte range, or did
    not answer in time after the retries.  The message names the URL and the range."""


class InvalidMetadataError(MolrecError):
    """A zarr.json (or document) that is not valid per the spec."""


class UnsupportedFeatureError(MolrecError):
    """Valid per some spec, but outside the subset molrec_raw implements."""


class CorruptDataError(MolrecError):
    """Stored bytes that cannot be what a correct writer produced."""


class ChecksumMismatchError(CorruptDataError):
    """A stored checksum (crc32c, zip CRC-32) does not match the data."""


class ResourceLimitError(MolrecError):
    """A declared size would exceed a configured limit; refused before allocating."""


class InvalidValueError(MolrecError, ValueError):
    """A value the caller passed cannot be stored (wrong shape, type or range)."""


class NodeExistsError(StoreError):
    """A node already exists where a new one was to be created."""


class SpecViolationError(MolrecError):
    """Input that breaks a MolRec record rule."""


class NotARecordError(NodeNotFoundError):
    """A path that is not a MolRec record (missing, a directory without a root ``zarr.json``,
    a file that is not a ``*.mrec.zip``): the one answer every door and subcommand gives."""


class RecordExistsError(StoreError):
    """A writer was asked to create a record where one exists, without ``overwrite=True``
    (``--force``); or a conversion was asked to write over its own source."""


class WriterLockedError(StoreError):
    """Another writer holds the record (or file): one writer at a time (spec-notes/safety.md).
    ``holders`` lists what is known of it (pid, host, since, which writer)."""

    def __init__(self, message: str, *, holders: Optional[list] = None, **where: Any) -> None:  # type: ignore[type-arg]
        super().__init__(message, **where)
        self.holders = list(holders or [])


class LockUnavailableError(StoreError):
    """Advisory locks do not work where the record lies (an NFS mount without working locks,
    ``local_lock``, a file system without ``flock``): writing on would be unprotected, so the
    writer refuses unless the caller opts out (``lock=False``, ``MOLREC_RAW_LOCKING=off``)."""


class IOFailureError(StoreError):
    """The operating system failed a file operation a writer made (EIO, ENOSPC, EDQUOT, ...).
    ``operation`` is the call (write, pwrite, fsync, rename, ...), ``path`` the file and
    ``errno`` the error number; the writer that made it is poisoned from then on."""

    def __init__(self, message: str, *, operation: str, path: str, errno: Optional[int] = None,
                 **where: Any) -> None:
        super().__init__(message, **where)
        self.operation, self.path, self.errno = operation, path, errno


class PoisonedWriterError(StoreError):
    """A writer refused a call because an earlier failure poisoned it (spec-notes/safety.md):
    its memory no longer says what reached the disk.  ``first`` is that failure.  Close the
    writer and reopen the record (``MrecWriter.open``), which verifies the disk."""

    def __init__(self, message: str, *, first: BaseException, **where: Any) -> None:
        super().__init__(message, **where)
        self.first = first


_BRIEF = reprlib.Repr()
_BRIEF.maxlevel, _BRIEF.maxlist, _BRIEF.maxdict, _BRIEF.maxstring, _BRIEF.maxother = 3, 6, 6, 40, 40
_BRIEF_CHARS = 120


def brief(value: Any) -> str:
    """``repr(value)`` cut to at most 120 characters: what an error message shows of a value
    read from a document.  Safe on hostile values (nested hundreds deep, megabytes long),
    where ``repr`` itself would raise RecursionError or flood the message."""
    text = _BRIEF.repr(value)
    return text if len(text) <= _BRIEF_CHARS else text[:_BRIEF_CHARS - 3] + "..."
