"""One read transaction of a collection reader and the refusal naming the key it read
(lmdb.md): :class:`_Reading` copies each value out of LMDB's map (the caller owns the arrays made
from it) or hands views into the map (valid while the transaction is open, ``CollectionView``);
:func:`_fail` builds a ``MolrecError`` naming the file, the key, the node and the rule.  A missing
value a record's index promises is refused under ``lmdb#L8``.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional

from molrec_raw.errors import MolrecError
from molrec_raw.collection.binding import key_name

__all__: List[str] = []

L8 = "lmdb#L8"
Getter = Callable[[bytes], Any]


class _Reading:
    """One read transaction.  ``copy``: each value is copied out of the map (the arrays made
    from it outlive the transaction); else values are views into the map."""

    __slots__ = ("txn", "copy", "__weakref__")

    def __init__(self, env: Any, copy: bool) -> None:
        self.txn: Any = env.begin(buffers=True)
        self.copy = copy

    def forget(self) -> None:
        """Drop the transaction without ending it (in a ``fork`` child: it is the parent's)."""
        self.txn = None

    def get(self, k: bytes) -> Any:
        value = self.txn.get(k)
        if value is None or not self.copy:
            return value
        return bytearray(value)

    def close(self) -> None:
        if self.txn is not None:
            self.txn.abort()

    def __enter__(self) -> "_Reading":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.txn.abort()


def _fail(error: type, message: str, store: str, k: Optional[bytes], node: str, rule: str) -> MolrecError:
    made: MolrecError = error(message, store=store, key=None if k is None else key_name(k), node=node, rule=rule)
    return made
