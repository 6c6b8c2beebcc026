"""The record's data model: plain dataclasses over numpy arrays (numpy-native).

``Frame(meta, blocks, box)``; ``Block(columns, masks, precision, targets,
structural_shape, attrs)``; ``Box(vectors, origin, boundary, defined)``;
``MetaValue(tag, value)`` states a meta key's tag explicitly.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

import numpy as np

__all__ = ["MetaValue", "Block", "Box", "Frame"]


@dataclass(frozen=True)
class MetaValue:
    """A meta value with an explicit tag (one of the 16 of frame-and-types §4.1).

    Vector tags hold tuples (``f64x9`` row-major); ``json`` holds any finite JSON value.
    """

    tag: str
    value: Any


@dataclass
class Block:
    """Rows of named columns sharing the leading axis ``count``.

    ``masks[column]`` is one bool per row (True = valid); ``precision[column]`` a declared
    absolute precision of an f64 column; ``targets[column]`` a row-reference target
    (``"atoms"`` or ``"/system/atoms"``); ``attrs`` the producer's other block attributes.
    ``column_attrs[column]`` keeps a column array's other attributes (preserved, seed rule 5).
    ``count`` defaults to the columns' leading length (0 for a block without columns).
    """

    columns: Dict[str, np.ndarray] = field(default_factory=dict)
    masks: Dict[str, np.ndarray] = field(default_factory=dict)
    precision: Dict[str, float] = field(default_factory=dict)
    targets: Dict[str, str] = field(default_factory=dict)
    structural_shape: Optional[Tuple[int, ...]] = None
    attrs: Dict[str, Any] = field(default_factory=dict)
    count: Optional[int] = None
    column_attrs: Dict[str, Dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.count is None:  # left None when the columns disagree: the writer refuses it
            lengths = {(c.shape[0] if c.ndim else None) if type(c) is np.ndarray else
                       (np.shape(c)[0] if np.ndim(c) else None) for c in self.columns.values()}
            if not lengths:
                self.count = 0
            elif len(lengths) == 1 and (length := next(iter(lengths))) is not None:
                self.count = int(length)

    @property
    def nrows(self) -> int:
        """``count`` as an int (0 while unknown)."""
        return int(self.count or 0)

    def __getitem__(self, column: str) -> np.ndarray:
        return self.columns[column]


@dataclass
class Box:
    """The cell: ``vectors[:, k]`` is lattice vector k (frame-and-types §10)."""

    vectors: np.ndarray = field(default_factory=lambda: np.eye(3))
    origin: np.ndarray = field(default_factory=lambda: np.zeros(3))
    boundary: Tuple[bool, bool, bool] = (True, True, True)
    defined: bool = True

    @classmethod
    def undefined(cls, origin: Any = (0.0, 0.0, 0.0)) -> "Box":
        """An origin without a cell: identity vectors, no periodic direction."""
        return cls(np.eye(3), np.asarray(origin, dtype=np.float64), (False, False, False), False)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Box)
            and self.defined == other.defined
            and tuple(bool(b) for b in self.boundary) == tuple(bool(b) for b in other.boundary)
            and np.array_equal(np.asarray(self.vectors), np.asarray(other.vectors))
            and np.array_equal(np.asarray(self.origin), np.asarray(other.origin))
        )


@dataclass
class Frame:
    """One frame-shaped section's content: typed meta, blocks, optional cell."""

    meta: Dict[str, Any] = field(default_factory=dict)
    blocks: Dict[str, Block] = field(default_factory=dict)
    box: Optional[Box] = None

    def __getitem__(self, block: str) -> Block:
        return self.blocks[block]
