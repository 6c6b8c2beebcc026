"""``molrs.io.mrec`` over molrec_raw: a record opened for its sections (:class:`MrecFile`),
a trajectory read frame by frame (:class:`MrecReader`) or written under a pinned schema
(:class:`SequenceSchema`, :class:`MrecWriter`), the force-field section as data
(:class:`ForceFieldSection`) and :func:`pack_mrec_zip`.

Each class is a thin handle on its molrec_raw counterpart (``molrec_raw.MrecReader``,
``MrecWriter``, ``SequenceSchema``, ``ForceFieldSection`` and the section doors), with
molrs's names, argument rules and exception types; differences: spec-notes/dropin.md.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Dict, List, Literal, Optional, Tuple, Type, Union

import numpy as np

from molrec_raw.molrs._errors import as_molrs, refuse_str_path
from molrec_raw.molrs.core import Block, Box, Frame, Trajectory, _json_value
from molrec_raw.molrs.io.mrec import validation
from molrec_raw.record import doors
from molrec_raw.record import forcefield as raw_ff
from molrec_raw.record import trajectory as raw_traj
from molrec_raw.record.pack import pack_mrec_zip as raw_pack

__all__ = ["ForceFieldSection", "MrecFile", "MrecReader", "MrecWriter", "SequenceSchema", "pack_mrec_zip",
           "validation"]

Source = Union["os.PathLike[str]", bytes]


def _opened(source: Any) -> Tuple[Any, str]:
    """(what a molrec_raw reading door opens, how messages name it) for a reader's source: an
    ``os.PathLike``, or the ``bytes`` of a packed record (read in memory by the doors); a
    ``str``, a ``bytearray`` or a ``memoryview`` is refused as molrs refuses it (``TypeError``)."""
    if isinstance(source, (bytearray, memoryview)):
        raise TypeError(f"argument 'source': a reader takes bytes, not a {type(source).__name__}: pass bytes(buffer)")
    if isinstance(source, bytes):
        return source, "the packed record in memory"
    path = Path(refuse_str_path(source, "source", reader=True))
    return path, str(path)


class MrecFile:
    """A record opened for its sections; each read decodes only the section it names."""

    def __init__(self, source: Source) -> None:
        self._path, self._name = _opened(source)
        with as_molrs():
            self._sections = doors.section_names(self._path)

    def sections(self) -> List[str]:
        """The record's root sections, sorted (``meta`` included)."""
        return list(self._sections)

    def meta(self) -> Dict[str, Any]:
        """The ``meta`` document as stored (with molrec_raw's ``molrec_version`` stamp, root-layout#3)."""
        with as_molrs():
            return doors.read_mrec_meta(self._path)

    def frame(self) -> Optional[Frame]:
        if "frame" not in self._sections:
            return None
        with as_molrs():
            return Frame._wrap(doors.read_mrec_frame(self._path))

    def system(self) -> Optional[Frame]:
        if "system" not in self._sections:
            return None
        with as_molrs():
            return Frame._wrap(doors.read_mrec_system(self._path))

    def forcefield(self) -> Optional["ForceFieldSection"]:
        if "forcefield" not in self._sections:
            return None
        with as_molrs():
            return ForceFieldSection._wrap(doors.read_mrec_forcefield(self._path))


def _checked_index(index: int, n: int) -> int:
    if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
        raise TypeError(f"a frame index is an int, not {type(index).__name__}")
    if not -n <= index < n:
        raise IndexError("trajectory index out of range")
    return int(index) % n


class MrecReader:
    """A lazy one-frame cursor over a record's ``trajectory`` section (trajectory §9)."""

    def __init__(self, source: Source) -> None:
        self._path, self._name = _opened(source)
        with as_molrs():
            sections = doors.section_names(self._path)
            if "trajectory" not in sections:
                raise ValueError(f"{self._name}: the record has no 'trajectory' section (its sections: "
                                 f"{', '.join(s for s in sections)}); read the others with MrecFile")
            self._raw = raw_traj.MrecReader(self._path)
        self._cursor = 0

    def frame_columns(self, index: int, columns: List[Tuple[str, str]]) -> Frame:
        """Frame ``index`` with only the named ``(block, column)`` pairs decoded (its cell and meta too)."""
        i = _checked_index(index, len(self))
        with as_molrs():
            return Frame._wrap(self._raw.read_columns(i, list(columns)))

    def block_update_at(self, name: str, index: int) -> Optional[int]:
        """The update of block ``name`` in effect at frame ``index`` (None: none yet, or no such block)."""
        i = _checked_index(index, len(self))
        if name not in self._raw.block_names():
            return None
        return self._raw.block_update_at(name, i)

    def box_at(self, index: int) -> Optional[Box]:
        found = self._raw.box_at(_checked_index(index, len(self)))
        return None if found is None else Box._wrap(found)

    def __len__(self) -> int:
        return len(self._raw)

    def __getitem__(self, index: int) -> Frame:
        i = _checked_index(index, len(self))
        with as_molrs():
            return Frame._wrap(self._raw.read_frame(i))

    def __iter__(self) -> "MrecReader":
        self._cursor = 0
        return self

    def __next__(self) -> Frame:
        if self._cursor >= len(self):
            raise StopIteration
        self._cursor += 1
        return self[self._cursor - 1]

    def to_trajectory(self) -> Trajectory:
        """Every frame in memory, with its step and time labels."""
        times = self.time
        return Trajectory([self[i] for i in range(len(self))], np.asarray(self.step, dtype=np.int64),
                          None if times is None else np.asarray(times, dtype=np.float64))

    @property
    def step(self) -> List[int]:
        return self._raw.step

    @property
    def time(self) -> Optional[List[float]]:
        return self._raw.time

    def has_block(self, name: str) -> bool:
        return self._raw.has_block(name)

    def block_names(self) -> List[str]:
        """The blocks the trajectory holds (declared and updated at least once), in pin order."""
        return [name for name in self._raw.block_names() if self._raw.has_block(name)]

    def close(self) -> None:
        self._raw.close()

    def __enter__(self) -> "MrecReader":
        return self

    def __exit__(self, _exc_type: Optional[Type[BaseException]] = None, _exc_value: Optional[BaseException] = None,
                 _traceback: Optional[TracebackType] = None) -> Literal[False]:
        self.close()
        return False


class SequenceSchema:
    """The blocks, columns and per-step meta keys a trajectory is pinned to before its frames
    (trajectory §4); every ``declare_*`` returns the schema."""

    def __init__(self) -> None:
        self._raw = raw_traj.SequenceSchema()

    @staticmethod
    def from_frames(frames: Sequence[Frame]) -> "SequenceSchema":
        """The schema the frames need (``from_frames([])`` is empty)."""
        out = SequenceSchema()
        with as_molrs():
            out._raw = raw_traj.SequenceSchema.from_frames([f._raw for f in frames])
        return out

    def declare_block(self, name: str, rows: Optional[int] = None) -> "SequenceSchema":
        with as_molrs():
            self._raw.declare_block(name, rows)
        return self

    def declare_column(self, block: str, column: str, dtype: str, trailing: Optional[List[int]] = None
                       ) -> "SequenceSchema":
        with as_molrs():
            self._raw.declare_column(block, column, dtype, trailing)
        return self

    def declare_structural_shape(self, block: str, shape: List[int]) -> "SequenceSchema":
        with as_molrs():
            self._raw.declare_structural_shape(block, shape)
        return self

    def declare_precision(self, block: str, column: str, precision: float) -> "SequenceSchema":
        """Pin the precision of an f64 column: every frame's values land on its binary grid."""
        with as_molrs():
            self._raw.declare_precision(block, column, precision)
        return self

    def _declares(self, block: str, column: str) -> bool:
        return column in (self.column_names(block) or [])

    def precision(self, block: str, column: str) -> Optional[float]:
        """The pinned precision (None: none, or no such column)."""
        return self._raw.precision(block, column) if self._declares(block, column) else None

    def declare_target(self, block: str, column: str, target: str) -> "SequenceSchema":
        """Pin a u64 column as a row reference into ``target``."""
        with as_molrs():
            self._raw.declare_target(block, column, target)
        return self

    def target(self, block: str, column: str) -> Optional[str]:
        """The pinned target (None: none, or no such column)."""
        return self._raw.target(block, column) if self._declares(block, column) else None

    def declare_aligned(self, block: str, target: str) -> "SequenceSchema":
        """Pin ``block``'s rows to ``target``'s rows at every resolved frame."""
        with as_molrs():
            self._raw.declare_aligned(block, target)
        return self

    def aligned_with(self, block: str) -> Optional[str]:
        return self._raw.aligned_with(block) if self._raw.has_block(block) else None

    def declare_meta(self, key: str, dtype: str, fill: Any = None) -> "SequenceSchema":
        """A per-step meta key of ``dtype``; ``fill`` is written for the steps that omit it."""
        with as_molrs():
            if fill is None:
                self._raw.declare_meta(key, dtype)
            else:
                self._raw.declare_meta_with_fill(key, fill, dtype)
        return self

    def block_names(self) -> List[str]:
        return self._raw.block_names()

    def column_names(self, block: str) -> Optional[List[str]]:
        return self._raw.column_names(block) if self._raw.has_block(block) else None

    def meta_keys(self) -> List[Tuple[str, str]]:
        return [(k, t) for k, t in self._raw.meta_keys()]


class MrecWriter:
    """Append-first writer of a ``*.mrec`` trajectory (trajectory §10): ``append`` buffers,
    every ``flush_every`` frames a commit, ``flush``/``close`` commit durably."""

    def __init__(self, path: Union[str, "os.PathLike[str]"], schema: SequenceSchema, *,
                 flush_every: Optional[int] = None, compression: Optional[str] = None, durable: bool = True,
                 meta: Optional[Mapping[str, Any]] = None) -> None:
        if not isinstance(schema, SequenceSchema):
            raise TypeError(f"argument 'schema': expected a SequenceSchema, got {type(schema).__name__}")
        if meta is not None and not _json_value(dict(meta)):
            raise TypeError(f"metadata value is not JSON-serializable: {meta!r}")
        with as_molrs():
            self._raw = raw_traj.MrecWriter(os.fspath(path), schema._raw, flush_every=flush_every,
                                            compression=compression, durable=durable,
                                            meta=None if meta is None else dict(meta), status=False)
        self._closed = False

    @staticmethod
    def open(path: Union[str, "os.PathLike[str]"], *, flush_every: Optional[int] = None,
             durable: bool = True) -> "MrecWriter":
        """Reopen a trajectory for append (trajectory §11)."""
        self = MrecWriter.__new__(MrecWriter)
        with as_molrs():
            self._raw = raw_traj.MrecWriter.open(os.fspath(path), flush_every=flush_every, durable=durable,
                                                 status=False)
        self._closed = False
        return self

    def _open(self) -> raw_traj.MrecWriter:
        if self._closed:
            raise ValueError("writer is closed")
        return self._raw

    def append(self, frame: Frame, step: Optional[int] = None, time: Optional[float] = None) -> None:
        if not isinstance(frame, Frame):
            raise TypeError(f"argument 'frame': expected a Frame, got {type(frame).__name__}")
        with as_molrs():
            self._open().append(frame._raw, step, time)

    def flush(self) -> None:
        with as_molrs():
            self._open().flush()

    def close(self) -> None:
        """Commit what is buffered and close; closing twice does nothing."""
        if self._closed:
            return
        self._closed = True
        with as_molrs():
            self._raw.close()

    @property
    def flush_every(self) -> int:
        return self._open().flush_every

    @property
    def committed(self) -> int:
        return self._open().committed

    def __enter__(self) -> "MrecWriter":
        return self

    def __exit__(self, _exc_type: Optional[Type[BaseException]] = None, _exc_value: Optional[BaseException] = None,
                 _traceback: Optional[TracebackType] = None) -> Literal[False]:
        if _exc_type is None:
            self.close()
        else:
            self._closed = True
            self._raw.__exit__(_exc_type, _exc_value, _traceback)
        return False


class ForceFieldSection:
    """The ``forcefield`` section as data: its document and one :class:`Block` per style
    table, values as stored (documents §7)."""

    def __init__(self, document: Mapping[str, Any], tables: Optional[Mapping[str, Block]] = None) -> None:
        for name, table in (tables or {}).items():
            if not isinstance(table, Block):
                raise TypeError(f"force-field table {name!r} must be a Block, not {type(table).__name__}")
        with as_molrs():
            self._raw = raw_ff.ForceFieldSection(document, {k: v._raw for k, v in (tables or {}).items()})

    @classmethod
    def _wrap(cls, section: raw_ff.ForceFieldSection) -> "ForceFieldSection":
        self = cls.__new__(cls)
        self._raw = section
        return self

    @property
    def document(self) -> Dict[str, Any]:
        return dict(self._raw.document)

    @property
    def tables(self) -> Dict[str, Block]:
        return {name: Block._wrap(block) for name, block in self._raw.tables.items()}

    @property
    def name(self) -> Optional[str]:
        found = self._raw.name
        return found if isinstance(found, str) else None

    def table(self, category: str, style: str) -> Optional[Block]:
        with as_molrs():
            key = raw_ff.block_name(category, style)
        found = self._raw.tables.get(key)
        return None if found is None else Block._wrap(found)

    @staticmethod
    def block_name(category: str, style: str) -> str:
        """``<category>.<percent-encoded style>`` (documents#9.35)."""
        with as_molrs():
            return raw_ff.block_name(category, style)

    def validate(self) -> None:
        """Refuse (``ValueError``) a section a reader would refuse, naming every violation."""
        found = self._raw.validate()
        if found:
            raise ValueError("; ".join(str(v) for v in found))


def pack_mrec_zip(path: Union[str, "os.PathLike[str]"]) -> str:
    """Pack the record directory into ``<stem>.mrec.zip`` beside it, replacing a zip there,
    and remove the directory (as molrs does); returns the zip's path."""
    with as_molrs():
        return str(raw_pack(os.fspath(path), remove_source=True, overwrite=True))
